"""CUDA release <-> NVIDIA Linux driver facts, from ``data/cuda-driver.csv``.

The one CUDA -> driver table of builder. Source: NVIDIA CUDA Toolkit Release Notes, "CUDA Toolkit and
Corresponding Driver Versions" (https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/); minor-version
compatibility: https://docs.nvidia.com/deploy/cuda-compatibility/. Rules:

- the minimum driver for CUDA X.Y, as the container hook sees it, is the lowest Linux minimum among
  that line's rows (a driver of that branch reports CUDA X.Y): 11.0 -> 450.36.06, 12.6 -> 560.28.03,
  12.8 -> 570.26;
- minor-version compatibility: an application built with CUDA 11.x / 12.x / 13.x runs on a driver at
  or above the major line's floor (450.80.02 / 525.60.13 / 580), without newer features;
- driver versions compare numerically (``550.135`` < ``550.144.03``), never as strings.
"""

from __future__ import annotations

import dataclasses
import functools

from packaging.version import InvalidVersion, Version

from builder.compat._data import CudaDriverRow, cuda_driver_rows, major_minor
from builder.errors import ConfigError, NotFoundError


def parse_driver(driver: str, *, what: str = "driver version") -> Version:
    """``"550.144.03"`` / ``"550.135"`` / ``"580"`` -> Version (numeric compare). ConfigError when not a version."""
    try:
        return Version(driver.strip())
    except InvalidVersion:
        raise ConfigError(
            f"{what} {driver!r} is not a driver version",
            hint="pass the driver as nvidia-smi prints it, e.g. 550.144.03",
        ) from None


def parse_cuda(cuda: str, *, what: str = "CUDA version") -> Version:
    """``"12.8"`` / ``"12.8.1"`` / ``"cu128"`` / ``"12080"`` (cudaDriverGetVersion encoding) -> Version."""
    text = cuda.strip()
    if text.lower().startswith("cu") and text[2:].isdigit() and len(text) >= 5:
        digits = text[2:]
        text = f"{digits[:-1]}.{digits[-1]}"
    elif text.isdigit() and len(text) >= 4:  # 12080 = 1000*major + 10*minor
        n = int(text)
        text = f"{n // 1000}.{(n % 1000) // 10}"
    try:
        return Version(text)
    except InvalidVersion:
        raise ConfigError(f"{what} {cuda!r} is not a CUDA version", hint="use X.Y, e.g. 12.8") from None


def cuda_line(cuda: str) -> str:
    """``"12.8.1"`` -> ``"12.8"``."""
    return major_minor(parse_cuda(cuda))


def line_rows(cuda: str) -> tuple[CudaDriverRow, ...]:
    """Every row of the CUDA line X.Y (all its updates)."""
    line = cuda_line(cuda)
    return tuple(r for r in cuda_driver_rows() if r.cuda == line)


@functools.lru_cache(maxsize=256)
def min_driver_row(cuda_version: str) -> CudaDriverRow:
    """The row that sets the minimum driver of a CUDA line: the lowest Linux minimum among its rows.

    Raises NotFoundError when the line is not in ``cuda-driver.csv`` (add a row: docs/compat.md)."""
    rows = line_rows(cuda_version)
    if not rows:
        known = sorted({r.cuda for r in cuda_driver_rows()}, key=Version)
        raise NotFoundError(
            f"CUDA {cuda_version} is not in builder/compat/data/cuda-driver.csv (known lines: {', '.join(known)})",
            hint="add the release's row (NVIDIA CUDA Toolkit Release Notes, Table 3) to cuda-driver.csv",
        )
    return min(rows, key=lambda r: Version(r.min_driver))


def min_driver(cuda_version: str) -> str:
    """Minimum Linux driver for CUDA X.Y as the container hook sees it: ``"12.8"`` -> ``"570.26"``."""
    return min_driver_row(cuda_version).min_driver


@functools.lru_cache(maxsize=256)
def minor_floor(cuda_version: str) -> str | None:
    """Minor-version-compatibility floor of the CUDA major line (``"12.4"`` -> ``"525.60.13"``,
    ``"13.0"`` -> ``"580"``), None before CUDA 11 or for an unknown major."""
    major = parse_cuda(cuda_version).major
    floors = {r.minor_floor for r in cuda_driver_rows() if parse_cuda(r.cuda).major == major and r.minor_floor}
    if not floors:
        return None
    return min(floors, key=Version)


@functools.lru_cache(maxsize=256)
def driver_cuda(driver: str) -> str | None:
    """The newest CUDA line a driver supports (what nvidia-smi's "CUDA Version" shows for it):
    the highest line whose minimum driver is <= ``driver``. None when older than every row."""
    d = parse_driver(driver)
    best: Version | None = None
    for row in cuda_driver_rows():
        if Version(row.min_driver) <= d:
            line = Version(row.cuda)
            if best is None or line > best:
                best = line
    return None if best is None else major_minor(best)


def branch(driver: str) -> int:
    """The driver branch as a number, for the tables (``"550.144.03"`` -> 550, branch R550): the
    :func:`builder.compat.branches.driver_branch` of a valid version. Raises ConfigError when ``driver``
    is not a driver version."""
    return parse_driver(driver).major


@dataclasses.dataclass(frozen=True)
class DriverFacts:
    """What the table says about a driver: its branch, the newest CUDA it supports, the row used."""

    driver: str
    branch: int
    cuda: str | None


def driver_facts(driver: str) -> DriverFacts:
    return DriverFacts(driver=driver, branch=branch(driver), cuda=driver_cuda(driver))
