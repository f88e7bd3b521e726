"""Framework wheels and compiled GPU architectures; the "can this matrix cell exist" check.

Tables: ``data/framework-wheels.csv`` (which framework releases publish wheels for which CUDA / ROCm
line, Python and platform; sources: pytorch/pytorch RELEASE.md, tensorflow docs source.md, jax
installation.md), ``data/framework-archs.csv`` (architectures compiled into those wheels),
``data/cuda-images.csv`` (Ubuntu releases with official ``nvidia/cuda`` images per CUDA line) and
``data/rocm.csv`` (operating systems and gfx targets per ROCm release).
"""

from __future__ import annotations

import dataclasses
import functools
import re

from packaging.version import InvalidVersion, Version

from builder.compat._data import (
    RocmRow,
    WheelRow,
    arch_rows,
    cuda_driver_rows,
    cuda_image_rows,
    major_minor,
    rocm_rows,
    wheel_rows,
)

#: Operating systems on which the CUDA/ROCm user space comes from PyPI wheels, not from the base image,
#: so any CUDA line is fine there: the demo's mirrored Debian base (``mirror/debian:bookworm``).
WHEEL_ONLY_OS: frozenset[str] = frozenset({"debian12"})

FRAMEWORKS: tuple[str, ...] = ("torch", "tensorflow", "jax")


@functools.lru_cache(maxsize=1024)  # pure over the packaged tables; asked once per matrix cell
def _v(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


@functools.lru_cache(maxsize=1024)  # asked once per matrix cell, for a few distinct Pythons
def _python_version(python: str) -> Version | None:
    m = re.match(r"^(?:py|python)?(\d+\.\d+)", python.strip())
    return _v(m.group(1)) if m else None


def wheel_rows_for(framework: str, framework_version: str) -> tuple[WheelRow, ...]:
    """Every wheel row of a framework release (all accelerator lines)."""
    fv = _v(framework_version)
    if fv is None:
        return ()
    return tuple(r for r in wheel_rows() if r.framework == framework and r.versions.contains(fv, prereleases=True))


def find_wheel(framework: str, framework_version: str, kind: str, accel_version: str | None) -> WheelRow | None:
    """The wheel row for one (framework release, accelerator line), stable rows before experimental ones;
    None when the release publishes no wheels for that line. ``row.wheel`` is the index tag / pip extra."""
    av = _v(accel_version) if accel_version else None
    candidates = []
    for r in wheel_rows_for(framework, framework_version):
        if r.kind != kind:
            continue
        if kind != "cpu" and (av is None or not r.accel_versions.contains(av, prereleases=True)):
            continue
        candidates.append(r)
    candidates.sort(key=lambda r: (r.status != "stable", r.accel != (major_minor(av) if av else "")))
    return candidates[0] if candidates else None


def _lines(rows: tuple[WheelRow, ...]) -> str:
    parts = []
    for r in rows:
        label = r.wheel if r.kind != "cpu" else "cpu"
        parts.append(label + (" (experimental)" if r.status == "experimental" else ""))
    return ", ".join(dict.fromkeys(parts))


@functools.lru_cache(maxsize=1024)  # pure over the packaged tables; asked once per matrix cell
def cuda_image_os(cuda_version: str) -> tuple[str, ...]:
    """Ubuntu releases with official ``nvidia/cuda`` images of a CUDA line (``cuda-images.csv``)."""
    v = _v(cuda_version)
    if v is None:
        return ()
    line = major_minor(v)
    out: list[str] = []
    for row in cuda_image_rows():
        if row.cuda == line:
            out.extend(o for o in row.os if o not in out)
    return tuple(out)


@functools.lru_cache(maxsize=1024)  # pure over the packaged tables; asked once per matrix cell
def rocm_row(rocm_version: str) -> RocmRow | None:
    """The ``rocm.csv`` row of a ROCm release: exact (6.3.3) or the newest of a line (6.3)."""
    v = _v(rocm_version)
    if v is None:
        return None
    for row in rocm_rows():  # newest first
        rv = Version(row.rocm)
        if rv == v or (len(v.release) <= 2 and major_minor(rv) == major_minor(v)):
            return row
    return None


def variant_problems(
    *,
    framework: str,
    framework_version: str,
    kind: str,
    accel_version: str | None,
    python: str,
    os: str,
    platform: str,
) -> list[str]:
    """Every reason a matrix cell cannot exist or run; ``[]`` when it is fine.

    ``framework``: torch | tensorflow | jax | none; ``kind``: cuda | rocm | cpu; ``accel_version``: CUDA
    ``"12.8"`` / ROCm ``"6.4"`` (None for cpu); ``python``: ``"3.12"``; ``os``: ``"ubuntu24.04"``,
    ``"debian12"``, ...; ``platform``: ``"linux/amd64"`` | ``"linux/arm64"``.

    Checks: the framework release publishes wheels for that CUDA/ROCm line, Python and platform
    (``framework-wheels.csv``); a CUDA line has official images for that OS (``cuda-images.csv``; any
    line is fine on ``debian12``, the demo's mirrored base, where CUDA comes from PyPI wheels); a ROCm
    release supports that OS (``rocm.csv``); the CUDA line / ROCm release is known at all. Pure; no I/O
    beyond the packaged tables."""
    return list(_variant_problems(framework, framework_version, kind, accel_version, python, os, platform))


@functools.lru_cache(maxsize=4096)
def _variant_problems(
    framework: str,
    framework_version: str,
    kind: str,
    accel_version: str | None,
    python: str,
    os: str,
    platform: str,
) -> tuple[str, ...]:
    """Cached body of :func:`variant_problems` (the tables are immutable within a process)."""
    problems: list[str] = []
    kind = kind.lower()
    if kind not in ("cuda", "rocm", "cpu"):
        return (f"accelerator kind {kind!r} is not one of cuda, rocm, cpu",)
    if kind != "cpu" and not accel_version:
        problems.append(f"accelerator {kind} needs a version (e.g. 12.8 or 6.4)")
        accel_version = None
    av = _v(accel_version) if accel_version else None
    if accel_version and av is None:
        problems.append(f"{kind} version {accel_version!r} is not a version")
    py = _python_version(python)
    if py is None:
        problems.append(f"python {python!r} is not a version like 3.12")
    problems += _accelerator_problems(kind, accel_version, av, os)
    problems += _wheel_problems(framework, framework_version, kind, accel_version, av, python, py, platform)
    return tuple(problems)


def _accelerator_problems(kind: str, accel_version: str | None, av: Version | None, os: str) -> list[str]:
    """The CUDA line / ROCm release itself (known at all) and its OS support (``cuda-images.csv``,
    ``rocm.csv``); ``av``: ``accel_version`` read as a version (None: unreadable, nothing to check)."""
    problems: list[str] = []
    if kind == "cuda" and av is not None:
        line = major_minor(av)
        if not any(r.cuda == line for r in cuda_driver_rows()):
            problems.append(
                f"CUDA {accel_version} is not in builder/compat/data/cuda-driver.csv (unknown line; add its row)"
            )
        elif os not in WHEEL_ONLY_OS:
            oses = cuda_image_os(line)
            if not oses:
                problems.append(f"CUDA {line} has no official nvidia/cuda images recorded (cuda-images.csv)")
            elif os not in oses:
                problems.append(
                    f"CUDA {line} has no official nvidia/cuda images for {os} (images exist for: {', '.join(oses)})"
                )
    elif kind == "rocm" and av is not None:
        rrow = rocm_row(accel_version or "")
        if rrow is None:
            known = ", ".join(r.rocm for r in rocm_rows())
            problems.append(f"ROCm {accel_version} is not in builder/compat/data/rocm.csv (known: {known})")
        elif os not in rrow.os:
            problems.append(f"ROCm {rrow.rocm} does not support {os} (supported: {', '.join(rrow.os)})")
    return problems


def _wheel_problems(
    framework: str,
    framework_version: str,
    kind: str,
    accel_version: str | None,
    av: Version | None,
    python: str,
    py: Version | None,
    platform: str,
) -> list[str]:
    """The framework release publishes wheels for the accelerator line, Python (``py``: ``python`` read as a
    version) and platform (``framework-wheels.csv``); ``[]`` for framework ``none``."""
    if framework in ("none", "", None):
        return []
    if framework not in FRAMEWORKS:
        return [f"framework {framework!r} is not one of {', '.join((*FRAMEWORKS, 'none'))}"]
    rows = wheel_rows_for(framework, framework_version)
    if not rows:
        if _v(framework_version) is None:
            return [f"{framework} version {framework_version!r} is not a version"]
        return [
            f"no wheel data for {framework} {framework_version} in builder/compat/data/framework-wheels.csv "
            "(add the release's rows)"
        ]
    label = "CPU" if kind == "cpu" else f"{'CUDA' if kind == 'cuda' else 'ROCm'} {accel_version}"
    row = find_wheel(framework, framework_version, kind, accel_version) if (av is not None or kind == "cpu") else None
    if row is None:
        if kind == "cpu" or av is not None:
            return [f"{framework} {framework_version} publishes no wheels for {label} (wheels: {_lines(rows)})"]
        return []
    problems: list[str] = []
    if py is not None and not row.python.contains(py, prereleases=True):
        problems.append(
            f"{framework} {framework_version} ({row.wheel}) has no wheels for Python {python} (supported: {row.python})"
        )
    if platform not in row.platforms:
        problems.append(
            f"{framework} {framework_version} ({row.wheel}) has no wheels for {platform} "
            f"(platforms: {', '.join(row.platforms)})"
        )
    return problems


@functools.lru_cache(maxsize=4096)
def compiled_archs(
    framework: str,
    framework_version: str,
    kind: str,
    accel_version: str | None,
    platform: str = "linux/amd64",
) -> tuple[str, ...]:
    """GPU architectures compiled into the official wheels for ``platform``: ``("sm_80", "sm_90", "compute_90")``
    or ``("gfx90a", "gfx942")``; ``()`` for cpu, framework ``none`` or unknown combinations
    (``framework-archs.csv``; first matching row wins)."""
    if kind == "cpu" or not accel_version:
        return ()
    fv, av = _v(framework_version), _v(accel_version)
    if fv is None or av is None:
        return ()
    for row in arch_rows():
        if (
            row.framework == framework
            and row.kind == kind
            and row.versions.contains(fv, prereleases=True)
            and row.accel_versions.contains(av, prereleases=True)
            and (not row.platforms or platform in row.platforms)
        ):
            return row.archs
    return ()


@dataclasses.dataclass(frozen=True)
class ArchCoverage:
    """Whether a GPU target is in an image's compiled list. ``how``: ``"exact"`` (same sm / gfx), ``"binary"``
    (a lower minor of the same major: cubins run on X.Z for Z >= Y), ``"ptx"`` (JIT from compute_XY <= the
    GPU's capability: slow first start), ``"missing"``, ``"unknown"`` (no list or no target), ``"none"`` (no GPU
    kernels in the framework build)."""

    covered: bool | None
    how: str
    detail: str


#: The architecture list of a framework build without GPU kernels (a matrix's ``gpu_archs: {cuda: []}``;
#: the image label ``io.builder.gpu-archs=none``): e.g. CPU jaxlib next to NVIDIA's CUDA runtime wheels.
NO_GPU_KERNELS = "none"


def arch_coverage(target: str | None, archs: tuple[str, ...]) -> ArchCoverage:
    """Is ``target`` (compute capability ``"8.9"`` / ``"sm_89"`` or gfx ``"gfx942"``) covered by ``archs``?

    Rules (NVIDIA CUDA Programming Guide, binary/PTX compatibility; AMD: exact gfx target only,
    else ``hipErrorNoBinaryForGpu``). ``archs == ("none",)`` (:data:`NO_GPU_KERNELS`): the framework build
    has no GPU kernels at all: ``covered`` is None, ``how`` is ``"none"`` (coverage is not claimed; the
    image still starts, its framework computes on the CPU)."""
    if tuple(a.strip().lower() for a in archs) == (NO_GPU_KERNELS,):
        return ArchCoverage(
            None,
            "none",
            "the framework build in this image has no GPU kernels (gpu-archs: none): the framework runs on the "
            "CPU; only libraries the image installs itself (CUDA runtime, NVML) use the GPU",
        )
    if not archs:
        return ArchCoverage(None, "unknown", "the image's compiled architecture list is not known")
    if not target:
        return ArchCoverage(None, "unknown", "the GPU's compute capability / gfx target is not known")
    t = target.strip().lower()
    listed = ", ".join(archs)
    if t.startswith("gfx"):
        if t in (a.lower() for a in archs):
            return ArchCoverage(True, "exact", f"{t} is in the image's list ({listed})")
        return ArchCoverage(False, "missing", f"{t} is not in the image's gfx list ({listed}): hipErrorNoBinaryForGpu")
    return _sm_coverage(target, archs)


def _sm_coverage(target: str, archs: tuple[str, ...]) -> ArchCoverage:
    """:func:`arch_coverage` for an NVIDIA compute capability ``target`` (``"8.9"`` / ``"sm_89"``): an exact
    cubin, a lower-minor cubin of the same major, or PTX of a capability at most the GPU's."""
    listed = ", ".join(archs)
    digits = target.strip().lower().removeprefix("sm_").replace(".", "")
    if not digits.isdigit() or len(digits) < 2:
        return ArchCoverage(None, "unknown", f"cannot read compute capability {target!r}")
    major, minor = int(digits[:-1]), int(digits[-1])
    sm = f"sm_{major}{minor}"
    binaries: list[tuple[int, int]] = []
    ptx: list[tuple[int, int]] = []
    for listed_arch in archs:
        base = listed_arch.lower().rstrip("af")  # sm_90a / sm_100f are arch-specific: treat as their base
        mm = re.fullmatch(r"(sm|compute)_(\d{2,4})", base)  # a label's claim: sm_<5,000 digits> is no arch
        if not mm:
            continue
        d = mm.group(2)
        pair = (int(d[:-1]), int(d[-1]))
        (binaries if mm.group(1) == "sm" else ptx).append(pair)
    if (major, minor) in binaries:
        return ArchCoverage(True, "exact", f"{sm} is in the image's list ({listed})")
    same_major = [b for b in binaries if b[0] == major and b[1] <= minor]
    if same_major:
        b = max(same_major)
        return ArchCoverage(True, "binary", f"{sm} runs the sm_{b[0]}{b[1]} binaries (same major) in ({listed})")
    jit = [p for p in ptx if p <= (major, minor)]
    if jit:
        p = max(jit)
        return ArchCoverage(
            True, "ptx", f"{sm} is not compiled in ({listed}); kernels JIT from compute_{p[0]}{p[1]} PTX (slow start)"
        )
    return ArchCoverage(
        False,
        "missing",
        f"{sm} is not in the image's compiled list ({listed}): 'no kernel image is available for execution'",
    )
