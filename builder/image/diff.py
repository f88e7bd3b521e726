"""What changed between two images, for an approver (``builder diff A B``): the GPU stack (CUDA runtime
and toolkit, cuDNN, NCCL, cuBLAS, ROCm/HIP/RCCL, frameworks and their CUDA/ROCm, Python, OS), the minimum
driver the installed CUDA runtime needs (and the one its PTX needs to JIT), the GPU targets gained and lost
over the libraries that load, libraries added, removed or changed, and Python / dpkg packages added,
removed and changed. Fleet clusters whose verdict changes are added by the caller (:func:`with_fleet`).

Minimum drivers: :attr:`builder.image.inspection.ImageInspection.min_driver` and ``min_driver_jit``. Pure.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from typing_extensions import TypedDict

if TYPE_CHECKING:
    from collections.abc import Mapping

    from builder.compat.kernels import KernelBinary
    from builder.image.inspection import ImageInspection

#: the stack facts compared, in the order people read them
STACK_FIELDS = ("os", "python", "cuda_runtime", "cuda_toolkit", "cudnn", "nccl", "cublas", "rocm", "hip", "rccl")


class ChangeDocument(TypedDict):
    """One value before (``a``) and after (``b``); None: absent."""

    a: str | None
    b: str | None


class TargetsDocument(TypedDict):
    """GPU targets (``sm_90``, ``compute_90``, ``gfx942``) of the loading libraries gained and lost."""

    gained: list[str]
    lost: list[str]


class BinaryChangeDocument(TypedDict):
    """A library in both images whose targets changed."""

    path: str
    gained: list[str]
    lost: list[str]


class BinariesDocument(TypedDict):
    """Libraries with GPU code added, removed, and changed (targets)."""

    added: list[str]
    removed: list[str]
    changed: list[BinaryChangeDocument]


class PackagesDocument(TypedDict):
    """Packages added / removed (name -> version) and changed (name -> versions)."""

    added: dict[str, str]
    removed: dict[str, str]
    changed: dict[str, ChangeDocument]


class FleetChangeDocument(TypedDict):
    """A fleet cluster whose verdict differs between the images."""

    cluster: str
    a: str
    b: str


class DiffDocument(TypedDict):
    """``builder diff A B --json``: ``stack`` (changed facts only), ``min_driver`` / ``min_driver_jit``,
    ``targets`` gained/lost, ``binaries``, ``packages`` (``python``, ``dpkg``), ``fleet`` (clusters whose
    verdict changes; None without ``--fleet``)."""

    a: str
    b: str
    stack: dict[str, ChangeDocument]
    min_driver: ChangeDocument
    min_driver_jit: ChangeDocument
    targets: TargetsDocument
    binaries: BinariesDocument
    packages: dict[str, PackagesDocument]
    fleet: list[FleetChangeDocument] | None


def _targets(binaries: tuple[KernelBinary, ...]) -> set[str]:
    out: set[str] = set()
    for b in binaries:
        out.update(b.sass + b.ptx + tuple(g.split(":")[0] for g in b.gfx))
    return out


def _packages(a: Mapping[str, str], b: Mapping[str, str]) -> PackagesDocument:
    return {
        "added": {k: b[k] for k in sorted(set(b) - set(a))},
        "removed": {k: a[k] for k in sorted(set(a) - set(b))},
        "changed": {k: {"a": a[k], "b": b[k]} for k in sorted(set(a) & set(b)) if a[k] != b[k]},
    }


def _stack_values(inspection: ImageInspection) -> dict[str, str | None]:
    s = inspection.stack
    values: dict[str, str | None] = {f: getattr(s, f) for f in STACK_FIELDS}
    values["python"] = ", ".join(s.python) or None
    for fw in s.frameworks:
        build = f" (CUDA {fw.cuda})" if fw.cuda else f" (ROCm {fw.rocm})" if fw.rocm else ""
        values[fw.name] = fw.version + build
    return values


@dataclasses.dataclass(frozen=True)
class ImageDiff:
    """The difference of image ``b`` against ``a`` (see the module docstring); ``fleet``: clusters whose
    verdict changes, None when no fleet was asked."""

    a: str
    b: str
    stack: Mapping[str, ChangeDocument]
    min_driver: ChangeDocument
    min_driver_jit: ChangeDocument
    gained: tuple[str, ...]
    lost: tuple[str, ...]
    binaries: BinariesDocument
    packages: Mapping[str, PackagesDocument]
    fleet: tuple[FleetChangeDocument, ...] | None = None

    def to_json(self) -> DiffDocument:
        return {
            "a": self.a,
            "b": self.b,
            "stack": dict(self.stack),
            "min_driver": self.min_driver,
            "min_driver_jit": self.min_driver_jit,
            "targets": {"gained": list(self.gained), "lost": list(self.lost)},
            "binaries": self.binaries,
            "packages": dict(self.packages),
            "fleet": list(self.fleet) if self.fleet is not None else None,
        }


def _order(t: str) -> tuple[int, str]:
    digits = "".join(ch for ch in t if ch.isdigit())
    return (int(digits or 0), t)


def diff_inspections(a: ImageInspection, b: ImageInspection) -> ImageDiff:
    """``b`` against ``a``. Pure."""
    va, vb = _stack_values(a), _stack_values(b)
    stack = {k: ChangeDocument(a=va.get(k), b=vb.get(k)) for k in dict.fromkeys([*va, *vb]) if va.get(k) != vb.get(k)}
    ka, kb = a.kernel_binaries(), b.kernel_binaries()
    ta, tb = _targets(ka), _targets(kb)
    by_a = {x.path: x for x in ka}
    by_b = {x.path: x for x in kb}
    changed: list[BinaryChangeDocument] = []
    for path in sorted(set(by_a) & set(by_b)):
        sa, sb = _targets((by_a[path],)), _targets((by_b[path],))
        if sa != sb:
            changed.append({"path": path, "gained": sorted(sb - sa, key=_order), "lost": sorted(sa - sb, key=_order)})
    return ImageDiff(
        a=a.reference,
        b=b.reference,
        stack=stack,
        min_driver={"a": a.min_driver, "b": b.min_driver},
        min_driver_jit={"a": a.min_driver_jit, "b": b.min_driver_jit},
        gained=tuple(sorted(tb - ta, key=_order)),
        lost=tuple(sorted(ta - tb, key=_order)),
        binaries={
            "added": sorted(set(by_b) - set(by_a)),
            "removed": sorted(set(by_a) - set(by_b)),
            "changed": changed,
        },
        packages={
            "python": _packages(a.stack.python_packages, b.stack.python_packages),
            "dpkg": _packages(a.stack.dpkg_packages, b.stack.dpkg_packages),
        },
    )


def with_fleet(diff: ImageDiff, a: Mapping[str, str], b: Mapping[str, str]) -> ImageDiff:
    """``diff`` with the clusters whose verdict differs (``a`` / ``b``: cluster -> verdict)."""
    rows = tuple(
        FleetChangeDocument(cluster=c, a=a.get(c, "-"), b=b.get(c, "-"))
        for c in dict.fromkeys([*a, *b])
        if a.get(c) != b.get(c)
    )
    return dataclasses.replace(diff, fleet=rows)


__all__ = ["DiffDocument", "ImageDiff", "diff_inspections", "with_fleet"]
