"""CUDA fat binaries (the ``.nv_fatbin`` section, and containers embedded elsewhere in an ELF file):
each entry's kind (SASS cubin / PTX), target, compression and PTX ISA version, read from the container
and entry headers only (payloads are skipped, never decompressed).

Layout (little-endian), as NVIDIA's ``fatbinary`` 13.x writes it and ``cuobjdump`` reads it; checked
against ``cuobjdump --list-elf --list-ptx`` on fatbins made with ``fatbinary`` and on PyPI wheels
(``tests/unit/test_image_fatbin.py``), matching the public descriptions in
https://github.com/n-eiling/cuda-fatbin-decompression (``fatbin-decompress.h``) and
https://github.com/GrigoryEvko/nvopen-tools/blob/main/fatbin/FORMAT_SPECIFICATION.md:

- container header, 16 bytes: magic ``0xBA55ED50`` (u32), version 1 (u16), header size 16 (u16),
  size of the entries that follow (u64);
- entry header (64 bytes, longer for sm_100+ cubins and sm_120+ PTX): kind (u16: 1 PTX, 2 cubin,
  0x10 cubin), version (u16), header size (u32), padded payload size (u64), compressed size (u32),
  u32, minor (u16), major (u16) of the code version (the PTX ISA ``major.minor`` for PTX), architecture
  (u32: 90 is sm_90, 120 is sm_120), name offset/length (u32 x2), flags (u64); the next entry starts at
  header size + padded payload size;
- flags: 0x1 64-bit, 0x10 Linux, 0x2000 compressed (LZ4, older nvcc), 0x8000 compressed (ZSTD),
  0x1000 or 0x100000 arch-specific (``sm_90a``, ``sm_100a``), 0x200000 family-specific (``sm_100f``).
"""

from __future__ import annotations

import dataclasses
import struct
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from builder.image.cursor import Cursor

MAGIC = struct.pack("<I", 0xBA55ED50)
HEADER = struct.Struct("<IHHQ")
ENTRY = struct.Struct("<HHIQIIHHIIIQ")  # the first 48 bytes of an entry header
ENTRY_MIN = 64
ENTRY_MAX = 4096  # larger header sizes are not a fat binary (a false match of the magic)

KIND_PTX = 0x1
KIND_CUBIN = (0x2, 0x10)
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = (0x1000, 0x100000)
FLAG_FAMILY = 0x200000

Compression = Literal["none", "lz4", "zstd"]


@dataclasses.dataclass(frozen=True)
class FatbinEntry:
    """One entry: ``kind`` sass | ptx; ``target`` ``sm_90a`` / ``compute_120``; ``arch`` the number (90,
    120); ``suffix`` "" | "a" | "f"; ``compression`` none | lz4 | zstd; ``version`` the code version
    ``major.minor`` (for PTX: its ISA, ``"8.7"``)."""

    kind: Literal["sass", "ptx"]
    target: str
    arch: int
    suffix: str
    compression: Compression
    version: str


def _suffix(flags: int) -> str:
    if any(flags & f for f in FLAG_ARCH_SPECIFIC):
        return "a"
    if flags & FLAG_FAMILY:
        return "f"
    return ""


def _compression(flags: int) -> Compression:
    if flags & FLAG_ZSTD:
        return "zstd"
    if flags & FLAG_LZ4:
        return "lz4"
    return "none"


def read_container(cur: Cursor, at: int) -> tuple[tuple[FatbinEntry, ...], int] | None:
    """The entries of the container whose magic is at absolute offset ``at`` and the offset just past
    it; None when the bytes there are not a fat binary (wrong version or header size, an entry header
    that does not parse, or nothing readable)."""
    head = cur.peek(at, HEADER.size)
    if len(head) < HEADER.size:
        return None
    _, version, header_size, size = HEADER.unpack(head)
    if version != 1 or header_size != HEADER.size or size < ENTRY_MIN:
        return None
    end = at + HEADER.size + size
    off = at + HEADER.size
    entries: list[FatbinEntry] = []
    while off + ENTRY_MIN <= end:
        raw = cur.peek(off, ENTRY.size, release=bool(entries))  # keep the start until one entry parsed
        if len(raw) < ENTRY.size:
            break  # truncated: keep what was read
        kind, _, hsize, padded, _, _, minor, major, arch, _, _, flags = ENTRY.unpack(raw)
        if hsize < ENTRY_MIN or hsize > ENTRY_MAX or off + hsize + padded > end:
            if not entries:
                return None
            break
        if kind == KIND_PTX or kind in KIND_CUBIN:
            suffix = _suffix(flags)
            is_ptx = kind == KIND_PTX
            entries.append(
                FatbinEntry(
                    kind="ptx" if is_ptx else "sass",
                    target=f"{'compute' if is_ptx else 'sm'}_{arch}{suffix}",
                    arch=arch,
                    suffix=suffix,
                    compression=_compression(flags),
                    version=f"{major}.{minor}",
                )
            )
        off += hsize + padded
    if not entries:
        return None
    return tuple(entries), end


__all__ = ["MAGIC", "FatbinEntry", "read_container"]
