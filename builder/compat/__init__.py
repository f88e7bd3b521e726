"""GPU-stack compatibility knowledge: data tables + pure functions (no I/O beyond reading the packaged
tables in ``builder/compat/data/`` and, in :mod:`builder.compat.fleets`, fleet files).

Public API (used by matrix, render, checks, policy and resolve):

- :func:`variant_problems` - every reason a matrix cell cannot exist or run (``[]`` = fine)
- :func:`compiled_archs` - GPU architectures in a framework's official wheels
- :func:`find_wheel` - the wheel row (index tag / pip extra) of a framework release and accelerator line
- :func:`min_driver` / :func:`min_driver_row` - minimum Linux driver of a CUDA line, and the row used
- :func:`require_cuda` / :func:`require_cuda_info` - ``NVIDIA_REQUIRE_CUDA`` of an official image
- :func:`parse_requirement` / :func:`evaluate` - the ``NVIDIA_REQUIRE_CUDA`` grammar
- :func:`check_compat` -> :class:`Verdict` - can an image start and run on a host (:func:`check_image`:
  the same for an :class:`ImageSpec`, the image as a user states it)
- :func:`builder.compat.releases.cuda_release` / :func:`~builder.compat.releases.wheel_lines` - what a CUDA
  release needs, what a framework release ships
- :func:`check_generation` / :func:`arch_row` - driver branches and CUDA releases supporting a GPU architecture
- :func:`gpu_info` -> :class:`GpuInfo` - compute capability / gfx target, brand, class of a GPU name;
  :func:`brand_from_name`, :func:`normalize_brand`, :func:`product_brand` (one brand vocabulary);
  :func:`amd_device` (AMD PCI device id -> name, gfx target), :func:`amd_device_from_uuid` (the id in amd-smi's UUID)
- fleets: :func:`load_fleet`, :func:`check_fleet` (in :mod:`builder.compat.fleets`);
  :func:`~builder.compat.fleets.check_fleet_file` -> :class:`~builder.compat.fleet_verdicts.FleetCheck`

- OS facts: :mod:`builder.compat.distros` (system Python, glibc of each distro release)

Sources of every fact: the header lines of each data file and ``docs/compat.md``.

Names are imported on first use (``builder.lazy.lazy_exports``): ``from builder.compat.drivers import
min_driver`` or ``compat.gpu_info`` loads that module and the tables it reads, not every module
of the package (the fleets' pydantic schemas and YAML parser only for a fleet name).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.lazy import lazy_exports

if TYPE_CHECKING:  # the names below are imported on first use (``__getattr__``)
    from builder.compat.check import ImageSpec, check_compat, check_image
    from builder.compat.drivers import driver_cuda, min_driver, min_driver_row, minor_floor, parse_cuda, parse_driver
    from builder.compat.fleets import (
        Cluster,
        ClusterVerdict,
        Fleet,
        check_cluster,
        check_fleet,
        load_fleet,
        load_fleets,
        resolve_fleet_path,
    )
    from builder.compat.frameworks import (
        NO_GPU_KERNELS,
        WHEEL_ONLY_OS,
        ArchCoverage,
        arch_coverage,
        compiled_archs,
        cuda_image_os,
        find_wheel,
        rocm_row,
        variant_problems,
    )
    from builder.compat.generations import GenerationCheck, arch_row, check_generation
    from builder.compat.gpus import (
        PRODUCT_BRANDS,
        GpuInfo,
        amd_device,
        amd_device_from_uuid,
        brand_class,
        brand_from_name,
        gpu_info,
        normalize_brand,
        normalize_gfx,
        product_brand,
        sm_of,
    )
    from builder.compat.requirement import (
        Evaluation,
        Host,
        RequireInfo,
        Requirement,
        evaluate,
        forward_compat_branches,
        parse_requirement,
        require_cuda,
        require_cuda_info,
    )
    from builder.compat.verdict import SEVERITY, Verdict, VerdictDocument, worst

#: public name -> the module of this package that defines it
_EXPORTS = {
    "ArchCoverage": "frameworks",
    "Cluster": "fleets",
    "ClusterVerdict": "fleets",
    "Evaluation": "requirement",
    "Fleet": "fleets",
    "GenerationCheck": "generations",
    "GpuInfo": "gpus",
    "Host": "requirement",
    "ImageSpec": "check",
    "NO_GPU_KERNELS": "frameworks",
    "PRODUCT_BRANDS": "gpus",
    "RequireInfo": "requirement",
    "Requirement": "requirement",
    "SEVERITY": "verdict",
    "Verdict": "verdict",
    "VerdictDocument": "verdict",
    "WHEEL_ONLY_OS": "frameworks",
    "amd_device": "gpus",
    "amd_device_from_uuid": "gpus",
    "arch_coverage": "frameworks",
    "arch_row": "generations",
    "brand_class": "gpus",
    "brand_from_name": "gpus",
    "check_cluster": "fleets",
    "check_compat": "check",
    "check_fleet": "fleets",
    "check_generation": "generations",
    "check_image": "check",
    "compiled_archs": "frameworks",
    "cuda_image_os": "frameworks",
    "driver_cuda": "drivers",
    "evaluate": "requirement",
    "find_wheel": "frameworks",
    "forward_compat_branches": "requirement",
    "gpu_info": "gpus",
    "load_fleet": "fleets",
    "load_fleets": "fleets",
    "min_driver": "drivers",
    "min_driver_row": "drivers",
    "minor_floor": "drivers",
    "normalize_brand": "gpus",
    "normalize_gfx": "gpus",
    "parse_cuda": "drivers",
    "parse_driver": "drivers",
    "parse_requirement": "requirement",
    "product_brand": "gpus",
    "require_cuda": "requirement",
    "require_cuda_info": "requirement",
    "resolve_fleet_path": "fleets",
    "rocm_row": "frameworks",
    "sm_of": "gpus",
    "variant_problems": "frameworks",
    "worst": "verdict",
}

#: Import the module that defines a name on first use; AttributeError for other names.
__getattr__ = lazy_exports(__name__, _EXPORTS, globals())

__all__ = [
    "NO_GPU_KERNELS",
    "PRODUCT_BRANDS",
    "SEVERITY",
    "WHEEL_ONLY_OS",
    "ArchCoverage",
    "Cluster",
    "ClusterVerdict",
    "Evaluation",
    "Fleet",
    "GenerationCheck",
    "GpuInfo",
    "Host",
    "ImageSpec",
    "RequireInfo",
    "Requirement",
    "Verdict",
    "VerdictDocument",
    "amd_device",
    "amd_device_from_uuid",
    "arch_coverage",
    "arch_row",
    "brand_class",
    "brand_from_name",
    "check_cluster",
    "check_compat",
    "check_fleet",
    "check_generation",
    "check_image",
    "compiled_archs",
    "cuda_image_os",
    "driver_cuda",
    "evaluate",
    "find_wheel",
    "forward_compat_branches",
    "gpu_info",
    "load_fleet",
    "load_fleets",
    "min_driver",
    "min_driver_row",
    "minor_floor",
    "normalize_brand",
    "normalize_gfx",
    "parse_cuda",
    "parse_driver",
    "parse_requirement",
    "product_brand",
    "require_cuda",
    "require_cuda_info",
    "resolve_fleet_path",
    "rocm_row",
    "sm_of",
    "variant_problems",
    "worst",
]
