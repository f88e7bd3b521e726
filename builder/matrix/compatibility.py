"""Compatibility rules of matrix cells: what the knowledge base in :mod:`builder.compat` says about
a cell (can it be built? which GPU architectures does its framework build carry?) and the build
arguments that follow from the architectures. Memoised per distinct question, so a 1,000-cell
matrix asks each question once.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from builder import compat
from builder.compat.distros import SYSTEM_PYTHON
from builder.compat.frameworks import NO_GPU_KERNELS
from builder.matrix.validate import ARCH_RE

if TYPE_CHECKING:
    from collections.abc import Sequence

    from builder.models import Accelerator


@functools.lru_cache(maxsize=4096)
def cell_problems(
    framework: str, framework_version: str, kind: str, accel_version: str | None, python: str, os: str, platform: str
) -> tuple[str, ...]:
    """Why the cell cannot be built (``builder.compat.variant_problems``: wheels, Python, platform, OS
    support), memoised per distinct question; ``()`` when it can."""
    return tuple(
        compat.variant_problems(
            framework=framework,
            framework_version=framework_version,
            kind=kind,
            accel_version=accel_version,
            python=python,
            os=os,
            platform=platform,
        )
    )


def os_python_problem(os: str, python: str) -> str | None:
    """Debian images support only the OS's own Python (:data:`builder.compat.distros.SYSTEM_PYTHON`): the reason
    a Debian cell with another Python cannot be built, else None."""
    system = SYSTEM_PYTHON.get(os)
    if os.startswith("debian") and system is not None and system != python:
        return f"{os} ships only Python {system} (use an ubuntu base for others)"
    return None


@functools.lru_cache(maxsize=1024)
def _compiled_archs(
    framework: str, framework_version: str, kind: str, accel_version: str | None, platform: str
) -> tuple[str, ...]:
    return tuple(compat.compiled_archs(framework, framework_version, kind, accel_version, platform))


def gpu_archs(
    framework: str, framework_version: str, accel: Accelerator, platform: str, declared: Sequence[str] | None
) -> tuple[str, ...]:
    """The GPU architectures the cell's framework build carries: the matrix's ``gpu_archs`` entry when
    it has one for a GPU kind (``[]`` means no GPU kernels: ``(NO_GPU_KERNELS,)``; entries that are not
    architectures are left out, validation reports them), else the framework wheels' list from
    ``builder.compat.compiled_archs`` (``()`` for the ``none`` framework)."""
    if declared is not None and accel.kind != "cpu":
        return tuple(a for a in declared if ARCH_RE.match(a)) or (NO_GPU_KERNELS,)
    if framework == "none":
        return ()
    return _compiled_archs(framework, framework_version, accel.kind, accel.version, platform)


def arch_build_args(framework: str, accel: Accelerator, archs: tuple[str, ...]) -> dict[str, str]:
    """Architecture lists as build arguments (a build never probes a GPU).

    CUDA: ``CUDA_ARCHITECTURES`` in CMake's syntax (``sm_80`` -> ``80-real``, ``compute_90`` ->
    ``90-virtual``), and for torch ``TORCH_CUDA_ARCH_LIST`` in torch.utils.cpp_extension's syntax
    (``8.0;9.0+PTX``: ``+PTX`` when the wheel carries PTX of that architecture). ROCm:
    ``PYTORCH_ROCM_ARCH`` and ``GPU_TARGETS`` (``gfx90a;gfx942``). Extensions compiled in derived
    images then target the same architectures as the framework build.
    """
    if not archs or accel.kind == "cpu" or archs == (NO_GPU_KERNELS,):
        return {}
    if accel.kind == "rocm":
        value = ";".join(archs)
        return {"PYTORCH_ROCM_ARCH": value, "GPU_TARGETS": value} if framework == "torch" else {"GPU_TARGETS": value}
    cmake: list[str] = []
    real: list[str] = []
    ptx: set[str] = set()
    for a in archs:
        kind, _, num = a.partition("_")
        if not num.isdigit() or len(num) < 2:
            continue
        if kind == "sm":
            cmake.append(f"{num}-real")
            real.append(num)
        elif kind == "compute":
            cmake.append(f"{num}-virtual")
            ptx.add(num)
    args = {"CUDA_ARCHITECTURES": ";".join(cmake)}
    if framework == "torch":
        nums = real + [n for n in sorted(ptx, key=int) if n not in real]
        args["TORCH_CUDA_ARCH_LIST"] = ";".join(f"{n[:-1]}.{n[-1]}" + ("+PTX" if n in ptx else "") for n in nums)
    return args
