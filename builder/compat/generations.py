"""GPU generations: which CUDA releases and driver branches support an NVIDIA GPU architecture.

Data: ``data/gpu-archs.csv`` (source: NVIDIA "CUDA Toolkit, Driver, and Architecture Matrix"; CUDA 13.0
release notes, "Deprecated Architectures"; see the file's header). Rules:

- a driver branch older than the architecture's first branch does not know the GPU (a GeForce RTX 5090,
  compute capability 12.0, needs R570 or newer);
- a driver branch newer than the architecture's last branch dropped it (Kepler: R470 is the last);
- a CUDA release older than the architecture's first toolkit has no code for it (Blackwell consumer:
  CUDA 12.8), unless the image's compiled list covers it (PTX the driver can JIT);
- a CUDA major newer than the architecture's last major dropped it (CUDA 13 drops Maxwell, Pascal, Volta;
  CUDA 12 drops Kepler).

Pure: no I/O beyond the packaged table.
"""

from __future__ import annotations

import dataclasses

from packaging.version import Version

from builder.compat._data import GpuArchRow, cuda_driver_rows, gpu_arch_rows
from builder.compat.drivers import branch, min_driver, parse_cuda


@dataclasses.dataclass(frozen=True)
class GenerationCheck:
    """The answer of :func:`check_generation`.

    ``row``: the ``gpu-archs.csv`` row used (None when the compute capability is unknown or not listed);
    ``blocked``: reasons the GPU cannot run the image on this driver (empty = fine); ``notes``: the other
    reasons (which row was used); ``driver_blocked`` / ``cuda_blocked``: which layer blocks;
    ``min_driver``: the lowest driver that knows the architecture (minimum driver of the architecture's
    first CUDA line in ``cuda-driver.csv``; None when older than the table)."""

    row: GpuArchRow | None
    blocked: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    driver_blocked: bool = False
    cuda_blocked: bool = False
    min_driver: str | None = None


def capability(target: str | None) -> str | None:
    """``"8.6"`` / ``"sm_86"`` / ``"86"`` -> ``"8.6"``; None for gfx targets, None and unreadable values."""
    if not target:
        return None
    t = target.strip().lower()
    if t.startswith("gfx"):
        return None
    digits = t.removeprefix("sm_").rstrip("af").replace(".", "")
    if not digits.isdigit() or len(digits) < 2:
        return None
    return f"{int(digits[:-1])}.{digits[-1]}"


def arch_row(target: str | None) -> GpuArchRow | None:
    """The ``gpu-archs.csv`` row of a compute capability (``"3.7"`` -> Kepler 3.5 3.7), None when not listed."""
    cc = capability(target)
    if cc is None:
        return None
    for row in gpu_arch_rows():
        if cc in row.capabilities:
            return row
    return None


def _first_driver(row: GpuArchRow) -> str | None:
    known = {r.cuda for r in cuda_driver_rows()}
    line = f"{parse_cuda(row.first_cuda).major}.{parse_cuda(row.first_cuda).minor}"
    return min_driver(line) if line in known else None


def check_generation(
    target: str | None, *, driver: str | None, image_cuda: str | None, image_archs_cover: bool = False
) -> GenerationCheck:
    """Does the host driver branch support the GPU's architecture, and does the image's CUDA release?

    ``target``: compute capability (``"3.7"``, ``"sm_120"``); ``driver``: host driver (``"570.86.15"``);
    ``image_cuda``: the CUDA line of the image (``"12.8"``), None for none; ``image_archs_cover``: the image's
    own compiled list covers the GPU (then a CUDA release older than the architecture is not blocking: the
    list's PTX is JIT-compiled by the driver). Raises ConfigError for unparsable versions."""
    cc = capability(target)
    if cc is None:
        return GenerationCheck(None)
    row = arch_row(cc)
    sm = "sm_" + cc.replace(".", "")
    if row is None:
        return GenerationCheck(
            None,
            notes=(
                f"compute capability {cc} is not in builder/compat/data/gpu-archs.csv: driver and CUDA support of "
                "its architecture not checked",
            ),
        )
    what = f"{row.architecture} ({sm})"
    blocked: list[str] = []
    notes: list[str] = []
    supported: list[str] = []
    driver_blocked = cuda_blocked = False
    if driver is not None:
        b = branch(driver)
        if b < row.min_driver_branch:
            driver_blocked = True
            blocked.append(
                f"driver {driver} (branch R{b}) predates {what}: the first branch supporting it is "
                f"R{row.min_driver_branch} ({row.source}); the driver does not know this GPU"
            )
        elif row.last_driver_branch is not None and b > row.last_driver_branch:
            driver_blocked = True
            blocked.append(
                f"driver {driver} (branch R{b}) no longer supports {what}: the last branch supporting it is "
                f"R{row.last_driver_branch} ({row.source}); install an R{row.last_driver_branch} driver"
            )
        else:
            last = f"..R{row.last_driver_branch}" if row.last_driver_branch else " and newer"
            supported.append(f"driver branch R{b} (R{row.min_driver_branch}{last})")
    if image_cuda is not None:
        ic = parse_cuda(image_cuda)
        if ic < Version(row.first_cuda):
            if image_archs_cover:
                notes.append(
                    f"CUDA {image_cuda} predates {what} (first supported by CUDA {row.first_cuda}; {row.source}), "
                    "but the image's compiled list covers it"
                )
            else:
                cuda_blocked = True
                blocked.append(
                    f"CUDA {image_cuda} does not support {what}: first supported by CUDA {row.first_cuda} "
                    f"({row.source}); builds with CUDA {image_cuda} carry no {sm} code "
                    "('no kernel image is available for execution'): use an image with CUDA >= "
                    f"{row.first_cuda}"
                )
        elif row.last_cuda_major is not None and ic.major > row.last_cuda_major:
            cuda_blocked = True
            blocked.append(
                f"CUDA {image_cuda} dropped {what}: the last CUDA supporting it is {row.last_cuda_major}.x "
                f"({row.source}); use an image with CUDA {row.last_cuda_major}.x"
            )
        else:
            last_cuda = f"..{row.last_cuda_major}.x" if row.last_cuda_major else " and newer"
            supported.append(f"CUDA {image_cuda} (CUDA {row.first_cuda}{last_cuda})")
    if supported:
        notes.insert(0, f"{what} is supported by " + " and ".join(supported) + f" ({row.source})")
    return GenerationCheck(
        row,
        blocked=tuple(blocked),
        notes=tuple(notes),
        driver_blocked=driver_blocked,
        cuda_blocked=cuda_blocked,
        min_driver=_first_driver(row),
    )


__all__ = ["GenerationCheck", "arch_row", "capability", "check_generation"]
