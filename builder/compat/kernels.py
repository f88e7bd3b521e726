"""Per-GPU verdicts from the GPU code measured in an image: is each GPU library ``native`` (SASS / a code
object for the GPU), ``jit`` (only PTX the driver compiles at first start) or ``none`` (no kernel image for
the GPU: "no kernel image is available for execution on the device", ``hipErrorNoBinaryForGpu``)?

The measured side is :class:`KernelBinary` (one ELF file of the image: its SASS targets ``sm_XY[a|f]``, PTX
targets ``compute_XY[a|f]`` with their PTX ISA versions, and AMD code objects ``gfxNNN[:feature±...]``);
``builder.image`` produces them by reading the fat binaries, this module only judges them.

Rules and sources:

- SASS (a cubin) for ``sm_XY`` runs on a GPU of compute capability ``X.Z`` with ``Z >= Y`` (same major);
  an arch-specific cubin ``sm_XYa`` only on exactly ``X.Y``; a family-specific cubin ``sm_XYf`` on the
  family (same major, ``Z >= Y``). CUDA C++ Programming Guide, "Binary Compatibility" and
  "Feature Availability" (https://docs.nvidia.com/cuda/cuda-c-programming-guide/#binary-compatibility,
  https://docs.nvidia.com/cuda/cuda-c-programming-guide/#feature-availability).
- PTX for ``compute_XY`` is JIT-compiled by the driver for any GPU of capability ``>= X.Y`` ("PTX
  Compatibility", same guide), arch-/family-specific PTX with the SASS rules above, and only when the
  driver's CUDA version is at least the CUDA release of the PTX ISA (``data/ptx-isa.csv``).
- An AMD code object runs only on its exact processor (``gfx90a``); a ``xnack+``/``sramecc+`` (or ``-``)
  object only when the GPU runs in that mode, an object without the feature in either mode. LLVM AMDGPU
  usage, "Target ID" (https://llvm.org/docs/AMDGPUUsage.html#target-id).
- Libraries shipped once per CUDA (or ROCm) line next to each other (``libbitsandbytes_cuda126.so``,
  ``..._cuda128.so``; ``..._rocm64.so``) are chosen at run time by the runtime's version
  (bitsandbytes: https://huggingface.co/docs/bitsandbytes/main/en/installation); only the one that will load
  is judged (:func:`loading_binaries`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import PurePosixPath
from typing import Literal

from packaging.version import InvalidVersion, Version
from typing_extensions import TypedDict

from builder.compat._data import read_table

#: how a GPU library runs on one GPU
KernelVerdictName = Literal["native", "jit", "none"]

_SM = re.compile(r"(sm|compute)_(\d+)([af]?)")
_LINE = re.compile(r"^(?P<stem>.+?)[_-]?(?P<kind>cuda|rocm)(?P<digits>\d{2,4})(?P<rest>(?:\.so)?(?:\.\d+)*)$")


@dataclasses.dataclass(frozen=True)
class KernelBinary:
    """The GPU code of one ELF file of an image (or of a directory of code-object files, ``path`` ending
    in ``/``). ``path``: absolute inside the image; ``sass``: cubin
    targets (``sm_80``, ``sm_90a``, ``sm_100f``); ``ptx``: PTX targets (``compute_90``); ``ptx_isa``: the
    highest PTX ISA version among the PTX entries (``"8.7"``; None without PTX or when unreadable);
    ``gfx``: AMD code-object targets with their features (``gfx90a:xnack-``). Targets are sorted and
    unique."""

    path: str
    sass: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    ptx_isa: str | None = None
    gfx: tuple[str, ...] = ()

    @property
    def is_cuda(self) -> bool:
        return bool(self.sass or self.ptx)

    @property
    def is_hip(self) -> bool:
        return bool(self.gfx)

    @property
    def name(self) -> str:
        """The file name (``libx.so``), or for a directory of code objects its last two components
        (``rocblas/library/``)."""
        if self.path.endswith("/"):
            return "/".join(self.path.rstrip("/").split("/")[-2:]) + "/"
        return PurePosixPath(self.path).name


class KernelVerdictDocument(TypedDict):
    """One GPU library judged on one GPU: ``verdict`` native | jit | none and why."""

    path: str
    verdict: KernelVerdictName
    reason: str


@dataclasses.dataclass(frozen=True)
class KernelVerdict:
    """:func:`kernel_verdict` of one library on one GPU."""

    path: str
    verdict: KernelVerdictName
    reason: str

    def to_json(self) -> KernelVerdictDocument:
        return {"path": self.path, "verdict": self.verdict, "reason": self.reason}


def sm_key(target: str) -> tuple[int, int, str] | None:
    """``"sm_90a"`` / ``"compute_120"`` / ``"9.0"`` / ``"12.0"`` -> (major, minor, suffix); None otherwise.
    The last digit is the minor (``sm_100`` is 10.0, ``sm_86`` is 8.6)."""
    t = target.strip().lower()
    if re.fullmatch(r"\d+\.\d+", t):
        major, minor = t.split(".")
        return int(major), int(minor), ""
    m = _SM.fullmatch(t)
    if not m:
        return None
    digits = m.group(2)
    return int(digits[:-1] or "0"), int(digits[-1]), m.group(3)


def _runs_on(code: tuple[int, int, str], gpu: tuple[int, int, str]) -> bool:
    major, minor, suffix = code
    if suffix == "a":
        return (major, minor) == gpu[:2]
    return major == gpu[0] and minor <= gpu[1]


def _ptx_runs_on(code: tuple[int, int, str], gpu: tuple[int, int, str]) -> bool:
    if code[2]:  # arch- or family-specific PTX: the SASS rules
        return _runs_on(code, gpu)
    return code[:2] <= gpu[:2]


@functools.cache
def ptx_isa_cuda() -> dict[str, str]:
    """PTX ISA version -> the CUDA release that introduced it (``"8.7"`` -> ``"12.8"``; ``data/ptx-isa.csv``)."""
    _, rows = read_table("ptx-isa.csv")
    return {r["ptx_isa"]: r["cuda"] for r in rows}


def ptx_isa_needs_cuda(isa: str) -> str | None:
    """The CUDA version a driver must support to JIT PTX of ISA ``isa`` (None: not in the table)."""
    return ptx_isa_cuda().get(isa.strip())


def _version(text: str | None) -> Version | None:
    if not text:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def kernel_verdict(binary: KernelBinary, target: str, *, driver_cuda: str | None = None) -> KernelVerdict:
    """Does ``binary`` have code for the GPU ``target`` (compute capability ``"12.0"`` / ``"sm_120"``, or
    a gfx target ``"gfx90a"`` / ``"gfx90a:xnack-"``)? ``driver_cuda``: the newest CUDA the host driver
    supports (nvidia-smi "CUDA Version"), to tell whether its PTX can be JIT-compiled (None: unknown,
    assumed able). Pure."""
    t = target.strip().lower()
    if t.startswith("gfx"):
        return _gfx_verdict(binary, t)
    gpu = sm_key(t)
    if gpu is None:
        return KernelVerdict(binary.path, "none", f"{binary.name}: cannot read the GPU's compute capability {target!r}")
    sm = f"sm_{gpu[0]}{gpu[1]}"
    native = [s for s in binary.sass if (k := sm_key(s)) is not None and _runs_on(k, gpu)]
    if native:
        return KernelVerdict(binary.path, "native", f"{binary.name}: SASS {', '.join(native)} runs on {sm}")
    jit = [p for p in binary.ptx if (k := sm_key(p)) is not None and _ptx_runs_on(k, gpu)]
    have = ", ".join(binary.sass + binary.ptx) or "no CUDA code"
    if jit:
        isa = binary.ptx_isa
        need = ptx_isa_needs_cuda(isa) if isa else None
        have_driver = _version(driver_cuda)
        if isa and need and have_driver is not None and have_driver < Version(need):
            return KernelVerdict(
                binary.path,
                "none",
                f"{binary.name}: no SASS for {sm}; its PTX ({', '.join(jit)}, ISA {isa}) needs a driver for "
                f"CUDA >= {need} to JIT, the driver supports CUDA {driver_cuda} (have {have})",
            )
        isa_note = f", ISA {isa}" + (f", driver CUDA >= {need}" if need else ", an ISA newer than the table knows")
        return KernelVerdict(
            binary.path,
            "jit",
            f"{binary.name}: no SASS for {sm}; PTX {', '.join(jit)}{isa_note if isa else ''} is JIT-compiled "
            "at first start (slow start, cached in ~/.nv/ComputeCache)",
        )
    return KernelVerdict(
        binary.path,
        "none",
        f"{binary.name}: no SASS for {sm} and no PTX <= compute_{gpu[0]}{gpu[1]} (has {have}): "
        '"no kernel image is available for execution on the device"',
    )


def _gfx_verdict(binary: KernelBinary, target: str) -> KernelVerdict:
    processor, *features = target.split(":")
    mode = {f[:-1]: f[-1] for f in features if f[-1:] in "+-"}
    fits: list[str] = []
    for code in binary.gfx:
        proc, *feats = code.lower().split(":")
        if proc != processor:
            continue
        needs = {f[:-1]: f[-1] for f in feats if f[-1:] in "+-"}
        if all(mode.get(name, sign) == sign for name, sign in needs.items()):
            fits.append(code)
    have = ", ".join(binary.gfx) or "no AMD code objects"
    if fits:
        return KernelVerdict(binary.path, "native", f"{binary.name}: code object {', '.join(fits)} runs on {target}")
    return KernelVerdict(
        binary.path, "none", f"{binary.name}: no code object for {target} (has {have}): hipErrorNoBinaryForGpu"
    )


def line_of(path: str) -> tuple[str, str, int] | None:
    """A per-CUDA/ROCm-line library's group and line: ``/x/libbitsandbytes_cuda128.so`` ->
    (``"/x/libbitsandbytes.so"``, ``"cuda"``, 128); None for other names."""
    p = PurePosixPath(path)
    m = _LINE.match(p.name)
    if not m:
        return None
    return str(p.parent / (m.group("stem") + m.group("rest"))), m.group("kind"), int(m.group("digits"))


def _line_number(version: str | None) -> int | None:
    v = _version(version)
    if v is None:
        return None
    return int(f"{v.major}{v.minor}")


def loading_binaries(
    binaries: tuple[KernelBinary, ...], *, cuda: str | None, rocm: str | None
) -> tuple[KernelBinary, ...]:
    """The binaries that load: of each group of per-line libraries (same directory and stem, one per
    CUDA or ROCm line) the one of the image's line (``cuda`` ``"12.8"`` -> ``..._cuda128``; else the
    highest line below it); the others are dropped. Groups whose line cannot be chosen (runtime version
    unknown, no line at or below it) stay whole. Other binaries pass through."""
    groups: dict[tuple[str, str], list[tuple[int, KernelBinary]]] = {}
    out: list[KernelBinary] = []
    for b in binaries:
        line = line_of(b.path)
        if line is None:
            out.append(b)
            continue
        groups.setdefault((line[0], line[1]), []).append((line[2], b))
    for (_, kind), members in groups.items():
        if len(members) == 1:
            out.append(members[0][1])
            continue
        want = _line_number(cuda if kind == "cuda" else rocm)
        below = [(n, b) for n, b in members if want is not None and n <= want]
        if not below:
            out.extend(b for _, b in members)
            continue
        out.append(max(below, key=lambda nb: nb[0])[1])
    return tuple(sorted(out, key=lambda b: b.path))


def kernel_verdicts(
    binaries: tuple[KernelBinary, ...], target: str | None, *, vendor: str, driver_cuda: str | None = None
) -> tuple[KernelVerdict, ...]:
    """:func:`kernel_verdict` of every binary for the GPU's vendor (``nvidia``: the CUDA ones, ``amd``:
    the HIP ones) on ``target``; empty when the target is unknown."""
    if not target:
        return ()
    relevant = [b for b in binaries if (b.is_hip if vendor == "amd" else b.is_cuda)]
    return tuple(kernel_verdict(b, target, driver_cuda=driver_cuda) for b in relevant)


def uncovered_claims(declared: tuple[str, ...], binaries: tuple[KernelBinary, ...]) -> tuple[str, ...]:
    """The declared architectures (a ``gpu-archs`` label: ``sm_80``, ``compute_90``, ``gfx90a``) that no
    binary of ``binaries`` has code for: ``sm_XY`` needs SASS ``sm_XY`` (any ``a``/``f`` variant),
    ``compute_XY`` PTX ``compute_XY``, ``gfxNNN`` a code object for that processor. ``none`` (no GPU code
    declared) and unreadable entries are not claims. Pure."""
    sass = {k[:2] for b in binaries for t in b.sass if (k := sm_key(t))}
    ptx = {k[:2] for b in binaries for t in b.ptx if (k := sm_key(t))}
    gfx = {g.split(":")[0].lower() for b in binaries for g in b.gfx}
    out: list[str] = []
    for claim in declared:
        c = claim.strip().lower()
        if c.startswith("gfx"):
            if c.split(":")[0] not in gfx:
                out.append(claim)
            continue
        k = sm_key(c)
        if k is None:
            continue
        have = ptx if c.startswith("compute_") else sass
        if k[:2] not in have:
            out.append(claim)
    return tuple(out)


__all__ = [
    "KernelBinary",
    "KernelVerdict",
    "KernelVerdictDocument",
    "KernelVerdictName",
    "kernel_verdict",
    "kernel_verdicts",
    "line_of",
    "loading_binaries",
    "ptx_isa_cuda",
    "ptx_isa_needs_cuda",
    "sm_key",
    "uncovered_claims",
]
