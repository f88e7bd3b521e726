"""HIP offload bundles (the ``.hip_fatbin`` section): plain ``__CLANG_OFFLOAD_BUNDLE__`` bundles and the
compressed ``CCOB`` forms (versions 1-3, zlib or zstd), read as far as their entry list: the bundle
entry ids (``hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-``) give the gfx targets with their features.
Code objects are never decompressed beyond the bundle header.

Formats (LLVM ``clang/lib/Driver/OffloadBundler.cpp``, documented in
https://clang.llvm.org/docs/ClangOffloadBundler.html):

- plain bundle: magic ``__CLANG_OFFLOAD_BUNDLE__`` (24 bytes), entry count (u64), then per entry:
  offset of its code (u64, from the bundle start), size (u64), id length (u64), id;
- compressed bundle: magic ``CCOB``, version (u16), method (u16: 0 zlib, 1 zstd), then
  v1: uncompressed size (u32), hash (u64); v2: total size (u32), uncompressed size (u32), hash (u64);
  v3: total size (u64), uncompressed size (u64), hash (u64); then the compressed plain bundle.
  A section holds one bundle per translation unit, each aligned (4096 bytes in ROCm builds).
"""

from __future__ import annotations

import dataclasses
import re
import struct
import zlib
from typing import TYPE_CHECKING, Literal

import zstandard

if TYPE_CHECKING:
    from builder.image.cursor import Cursor

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
CCOB_MAGIC = b"CCOB"
MAX_ENTRIES = 4096
MAX_ID = 1024
#: compressed bytes read at most to reach a bundle's entry list (v1 has no total size)
MAX_COMPRESSED_PREFIX = 64 << 20
_STEP = 64 << 10
_GFX = re.compile(r"(gfx[0-9a-z]+(?::[a-z0-9_]+[+-])*)$")

Method = Literal["none", "zlib", "zstd"]


@dataclasses.dataclass(frozen=True)
class Bundle:
    """One offload bundle: its entry ``ids`` in file order, ``gfx`` the AMD targets among them
    (``gfx90a:xnack-``), ``compression`` none | zlib | zstd and ``format_version`` (0 plain, 1-3 CCOB)."""

    ids: tuple[str, ...]
    gfx: tuple[str, ...]
    compression: Method
    format_version: int


def gfx_of(bundle_id: str) -> str | None:
    """``hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`` -> ``gfx90a:xnack-``; None for host or non-AMD ids."""
    if "amdgcn" not in bundle_id:
        return None
    m = _GFX.search(bundle_id)
    return m.group(1) if m else None


def parse_entries(data: bytes) -> tuple[tuple[str, ...], int] | None:
    """(ids, bundle size) of a plain bundle at the start of ``data``; None when ``data`` is too short
    to hold the whole entry list or is not a bundle."""
    if not data.startswith(BUNDLE_MAGIC) or len(data) < 32:
        return None
    (count,) = struct.unpack_from("<Q", data, 24)
    if count == 0 or count > MAX_ENTRIES:
        raise ValueError(f"offload bundle with {count} entries")
    pos = 32
    ids: list[str] = []
    size = pos
    for _ in range(count):
        if len(data) < pos + 24:
            return None
        offset, length, id_len = struct.unpack_from("<QQQ", data, pos)
        if id_len > MAX_ID:
            raise ValueError(f"offload bundle entry id of {id_len} bytes")
        if len(data) < pos + 24 + id_len:
            return None
        ids.append(data[pos + 24 : pos + 24 + id_len].decode("utf-8", "replace"))
        pos += 24 + id_len
        size = max(size, offset + length)
    return tuple(ids), max(size, pos)


def _bundle(ids: tuple[str, ...], compression: Method, version: int) -> Bundle:
    gfx = tuple(g for g in (gfx_of(i) for i in ids) if g)
    return Bundle(ids, gfx, compression, version)


def read_plain(cur: Cursor, at: int) -> tuple[Bundle, int] | None:
    """The plain bundle at absolute offset ``at`` and the offset past it; None if it is not one."""
    want = 4096
    while True:
        data = cur.peek(at, want)
        try:
            parsed = parse_entries(data)
        except ValueError:
            return None
        if parsed is not None:
            ids, size = parsed
            return _bundle(ids, "none", 0), at + size
        if len(data) < want or want >= 1 << 20:
            return None
        want *= 4


_CCOB = {1: struct.Struct("<4sHHIQ"), 2: struct.Struct("<4sHHIIQ"), 3: struct.Struct("<4sHHQQQ")}


def read_compressed(cur: Cursor, at: int) -> tuple[Bundle, int] | None:
    """The compressed (CCOB) bundle at absolute offset ``at`` and the offset past it (for v1, which has
    no total size: past its header); None if it is not one or its start does not decompress."""
    head = cur.peek(at, 32)
    if len(head) < 20:
        return None
    version, method = struct.unpack_from("<HH", head, 4)
    layout = _CCOB.get(version)
    if layout is None or method not in (0, 1) or len(head) < layout.size:
        return None
    total = layout.unpack_from(head)[3] if version >= 2 else None
    start = at + layout.size
    limit = (total - layout.size) if total else MAX_COMPRESSED_PREFIX
    if limit <= 0:
        return None
    ids = _compressed_ids(cur, start, limit, method)
    if ids is None:
        return None
    end = at + total if total else start
    return _bundle(ids, "zstd" if method == 1 else "zlib", version), end


def _compressed_ids(cur: Cursor, start: int, limit: int, method: int) -> tuple[str, ...] | None:
    """Decompress from ``start`` (at most ``limit`` compressed bytes) until the bundle's entry list is
    whole; its ids, or None when the data does not decompress to a bundle."""
    zstd_dec = zstandard.ZstdDecompressor().decompressobj() if method == 1 else None
    zlib_dec = zlib.decompressobj() if method == 0 else None
    out = bytearray()
    fed = 0
    while fed < limit and len(out) < 1 << 20:
        chunk = cur.peek(start + fed, min(_STEP, limit - fed), release=len(out) >= len(BUNDLE_MAGIC))
        if not chunk:
            break
        fed += len(chunk)
        try:
            if zstd_dec is not None:
                out += zstd_dec.decompress(chunk)
            elif zlib_dec is not None:
                out += zlib_dec.decompress(zlib_dec.unconsumed_tail + chunk, 1 << 20)
            if not out.startswith(BUNDLE_MAGIC[: len(out)]):
                break
            parsed = parse_entries(bytes(out))
        except (zstandard.ZstdError, zlib.error, ValueError):
            break
        if parsed is not None:
            return parsed[0]
    return None


__all__ = ["BUNDLE_MAGIC", "CCOB_MAGIC", "Bundle", "gfx_of", "parse_entries", "read_compressed", "read_plain"]
