"""The GPU code of one ELF file, read while it streams past: every CUDA fat-binary container and every
HIP offload bundle in it (the ``.nv_fatbin`` / ``.hip_fatbin`` sections and containers embedded
elsewhere), found by their magic numbers and checked by their headers (:mod:`builder.image.fatbin`,
:mod:`builder.image.offload`). Only files that start with the ELF magic are read (ELF specification,
https://refspecs.linuxfoundation.org/elf/gabi4+/ch4.eheader.html).
"""

from __future__ import annotations

import dataclasses
import io
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from builder.compat.kernels import KernelBinary, sm_key
from builder.image import fatbin, offload
from builder.image.amdgpu import code_object_target
from builder.image.cursor import Cursor

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

ELF_MAGIC = b"\x7fELF"
NEEDLES = (fatbin.MAGIC, offload.BUNDLE_MAGIC, offload.CCOB_MAGIC)


class GpuCodeDocument(TypedDict):
    """One ELF file with GPU code (``builder inspect --json`` ``binaries[]``): ``path`` absolute in the
    image, ``sass`` / ``ptx`` / ``gfx`` targets, ``ptx_isa`` (highest), ``compression`` (methods seen),
    ``containers`` (fat binaries + bundles read), ``entries`` (code entries in them), ``code_object`` (an
    AMDGPU code object file of its own, :mod:`builder.image.amdgpu`)."""

    path: str
    sass: list[str]
    ptx: list[str]
    ptx_isa: str | None
    gfx: list[str]
    compression: list[str]
    containers: int
    entries: int
    code_object: bool


def _target_order(t: str) -> tuple[int, int, str, str]:
    k = sm_key(t)
    return (k[0], k[1], k[2], t) if k else (999, 0, "", t)


@dataclasses.dataclass(frozen=True)
class GpuCode:
    """The GPU code found in one ELF file: targets sorted by architecture, ``compression`` the methods
    seen (``none``, ``lz4``, ``zstd``, ``zlib``), counts of containers and code entries; ``code_object``:
    the file is one AMDGPU code object (a ``.co``/``.hsaco`` of a kernel library)."""

    path: str
    sass: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    ptx_isa: str | None = None
    gfx: tuple[str, ...] = ()
    compression: tuple[str, ...] = ()
    containers: int = 0
    entries: int = 0
    code_object: bool = False

    def kernel_binary(self) -> KernelBinary:
        """The measured side of a verdict (:class:`builder.compat.kernels.KernelBinary`)."""
        return KernelBinary(self.path, self.sass, self.ptx, self.ptx_isa, self.gfx)

    def at(self, path: str) -> GpuCode:
        return dataclasses.replace(self, path=path)

    def to_json(self) -> GpuCodeDocument:
        return {
            "path": self.path,
            "sass": list(self.sass),
            "ptx": list(self.ptx),
            "ptx_isa": self.ptx_isa,
            "gfx": list(self.gfx),
            "compression": list(self.compression),
            "containers": self.containers,
            "entries": self.entries,
            "code_object": self.code_object,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> GpuCode:
        return cls(
            path=str(d["path"]),
            sass=tuple(d.get("sass") or ()),
            ptx=tuple(d.get("ptx") or ()),
            ptx_isa=d.get("ptx_isa"),
            gfx=tuple(d.get("gfx") or ()),
            compression=tuple(d.get("compression") or ()),
            containers=int(d.get("containers") or 0),
            entries=int(d.get("entries") or 0),
            code_object=bool(d.get("code_object")),
        )


def isa_key(v: str) -> tuple[int, ...]:
    """A PTX ISA version (``"8.7"``) as numbers, for ordering."""
    return tuple(int(x) for x in v.split(".") if x.isdigit())


def scan_stream(path: str, read: Callable[[int], bytes]) -> GpuCode | None:
    """Read the file streamed by ``read(n)`` (``path``: where it is in the image) and return its GPU
    code, or None when it is not ELF or holds none. Memory: about one read chunk."""
    head = read(4)
    if head != ELF_MAGIC:
        return None
    head += read(60)
    target = code_object_target(head)
    if target is not None:  # an AMDGPU code object file: its header names the target, nothing to scan
        return GpuCode(path=path, gfx=(target,), compression=("none",), containers=1, entries=1, code_object=True)
    cur = Cursor(read, prefix=head)
    sass: set[str] = set()
    ptx: set[str] = set()
    gfx: set[str] = set()
    isas: set[str] = set()
    methods: set[str] = set()
    containers = entries = 0
    pos = 4
    while True:
        hit = cur.find(pos, NEEDLES)
        if hit is None:
            break
        at, magic = hit
        end: int | None = None
        if magic == fatbin.MAGIC:
            found = fatbin.read_container(cur, at)
            if found is not None:
                items, end = found
                containers += 1
                entries += len(items)
                for e in items:
                    (ptx if e.kind == "ptx" else sass).add(e.target)
                    methods.add(e.compression)
                    if e.kind == "ptx":
                        isas.add(e.version)
        else:
            reader = offload.read_plain if magic == offload.BUNDLE_MAGIC else offload.read_compressed
            bundle = reader(cur, at)
            if bundle is not None:
                b, end = bundle
                containers += 1
                entries += len(b.gfx)
                gfx.update(b.gfx)
                methods.add(b.compression)
        pos = end if end is not None and end > at else max(at + 1, cur.base)
    if not containers:
        return None
    return GpuCode(
        path=path,
        sass=tuple(sorted(sass, key=_target_order)),
        ptx=tuple(sorted(ptx, key=_target_order)),
        ptx_isa=max(isas, key=isa_key) if isas else None,
        gfx=tuple(sorted(gfx)),
        compression=tuple(sorted(methods)),
        containers=containers,
        entries=entries,
    )


def scan_bytes(path: str, data: bytes) -> GpuCode | None:
    """:func:`scan_stream` over bytes in memory (tests, small files)."""
    return scan_stream(path, io.BytesIO(data).read)


def scan_files(paths: Iterable[str]) -> list[GpuCode]:
    """:func:`scan_stream` over local files (each read in chunks); files without GPU code are left out."""
    out: list[GpuCode] = []
    for p in paths:
        with open(p, "rb") as f:
            code = scan_stream(p, f.read)
        if code is not None:
            out.append(code)
    return out


__all__ = ["ELF_MAGIC", "GpuCode", "GpuCodeDocument", "isa_key", "scan_bytes", "scan_files", "scan_stream"]
