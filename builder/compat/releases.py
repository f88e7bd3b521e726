"""What one release needs or ships, in one answer: a CUDA release (``builder compat cuda``) and a framework
release (``builder compat wheels``).

Facts come from the packaged tables (``cuda-driver.csv``: NVIDIA CUDA Toolkit Release Notes, Table 3,
https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/; ``cuda-images.csv``: the official images,
https://gitlab.com/nvidia/container-images/cuda; ``framework-wheels.csv`` / ``framework-archs.csv``: the
frameworks' release notes and install pages), each row naming its own source.
"""

from __future__ import annotations

import dataclasses

from typing_extensions import TypedDict

from builder.compat.drivers import min_driver_row, minor_floor
from builder.compat.frameworks import compiled_archs, cuda_image_os, wheel_rows_for
from builder.compat.requirement import RequireInfo, forward_compat_branches, require_cuda_info
from builder.errors import NotFoundError

# --------------------------------------------------------------------------------------- CUDA release


class CudaReleaseDocument(TypedDict):
    """``builder compat cuda --json``: the minimum driver of the release (and the table row used), its
    driver branch, the minor-version floor of its major line, the forward-compatibility branches
    (``R550``), the OS releases of its official images and their ``NVIDIA_REQUIRE_CUDA``
    (``require_cuda_constructed``: built by the official pattern, no recorded string)."""

    cuda: str
    min_driver: str
    min_driver_row: str
    branch: str
    minor_version_floor: str | None
    forward_compat_branches: list[str]
    official_image_os: list[str]
    require_cuda: str
    require_cuda_image_release: str | None
    require_cuda_constructed: bool
    require_cuda_note: str


@dataclasses.dataclass(frozen=True)
class CudaRelease:
    """What a CUDA release (``12.8`` or ``12.8.1``) needs on a platform; fields as in
    :class:`CudaReleaseDocument` (``forward_compat_branches`` as branch numbers)."""

    cuda: str
    min_driver: str
    min_driver_row: str
    branch: str
    minor_version_floor: str | None
    forward_compat_branches: tuple[int, ...]
    official_image_os: tuple[str, ...]
    requirement: RequireInfo

    def to_json(self) -> CudaReleaseDocument:
        return {
            "cuda": self.cuda,
            "min_driver": self.min_driver,
            "min_driver_row": self.min_driver_row,
            "branch": self.branch,
            "minor_version_floor": self.minor_version_floor,
            "forward_compat_branches": [f"R{b}" for b in self.forward_compat_branches],
            "official_image_os": list(self.official_image_os),
            "require_cuda": self.requirement.expr,
            "require_cuda_image_release": self.requirement.image_release,
            "require_cuda_constructed": self.requirement.constructed,
            "require_cuda_note": self.requirement.note,
        }


def cuda_release(cuda_version: str, *, platform: str = "linux/amd64") -> CudaRelease:
    """The facts of ``cuda_version`` for images of ``platform`` (``linux/arm64`` images carry other
    requirements). Raises ConfigError (not a version), NotFoundError (a CUDA line not in the tables)."""
    row = min_driver_row(cuda_version)
    return CudaRelease(
        cuda=cuda_version,
        min_driver=row.min_driver,
        min_driver_row=row.source,
        branch=row.branch,
        minor_version_floor=minor_floor(cuda_version),
        forward_compat_branches=forward_compat_branches(cuda_version),
        official_image_os=cuda_image_os(cuda_version),
        requirement=require_cuda_info(cuda_version, platform=platform),
    )


# ---------------------------------------------------------------------------------- framework wheels


class WheelLineDocument(TypedDict):
    """One wheel line of a framework release (``builder compat wheels --json`` lists them): the accelerator
    ``kind`` and line (``accel``: ``12.8`` / ``6.4``; None for CPU wheels), the accelerator versions the
    line covers, the wheel (index tag or pip extra: ``cu128``, ``jax[cuda12]``), ``status`` (``stable`` |
    ``experimental``), the Pythons and platforms, the compiled GPU architectures and the row's source."""

    kind: str
    accel: str | None
    accel_versions: str
    wheel: str
    status: str
    python: str
    platforms: list[str]
    archs: list[str]
    provenance: str


#: ``builder compat wheels --json``: the wheel lines of the release, in file order
WheelsDocument = list[WheelLineDocument]


@dataclasses.dataclass(frozen=True)
class WheelLine:
    """One row of ``framework-wheels.csv`` for a release, with its compiled architectures."""

    kind: str
    accel: str | None
    accel_versions: str
    wheel: str
    status: str
    python: str
    platforms: tuple[str, ...]
    archs: tuple[str, ...]
    provenance: str

    def to_json(self) -> WheelLineDocument:
        return {
            "kind": self.kind,
            "accel": self.accel,
            "accel_versions": self.accel_versions,
            "wheel": self.wheel,
            "status": self.status,
            "python": self.python,
            "platforms": list(self.platforms),
            "archs": list(self.archs),
            "provenance": self.provenance,
        }


def wheel_lines(framework: str, version: str) -> tuple[WheelLine, ...]:
    """Every wheel line (CUDA, ROCm, CPU) of ``framework`` ``version`` in file order. Raises NotFoundError
    when the tables hold no row for that release."""
    rows = wheel_rows_for(framework, version)
    if not rows:
        raise NotFoundError(
            f"no wheel data for {framework} {version} in builder/compat/data/framework-wheels.csv",
            hint="add the release's rows (docs/compat.md, 'Extending the data')",
        )
    return tuple(
        WheelLine(
            kind=r.kind,
            accel=r.accel or None,
            accel_versions=str(r.accel_versions),
            wheel=r.wheel,
            status=r.status,
            python=str(r.python),
            platforms=r.platforms,
            archs=compiled_archs(framework, version, r.kind, r.accel or None),
            provenance=r.provenance,
        )
        for r in rows
    )


__all__ = [
    "CudaRelease",
    "CudaReleaseDocument",
    "WheelLine",
    "WheelLineDocument",
    "WheelsDocument",
    "cuda_release",
    "wheel_lines",
]
