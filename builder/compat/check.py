"""Can image X start and run on host Y? One pure function, :func:`check_compat` (and :func:`check_image`
for the image as a user states it, :class:`ImageSpec`).

It decides the host's vendor, the GPU's architecture coverage (the image's compiled list, or the GPU code
measured in its libraries) and hands the driver question to the vendor's rules
(:mod:`builder.compat.nvidia_verdict`, :mod:`builder.compat.amd_verdict`); the GPU generation rules
(``gpu-archs.csv``) and the measured libraries then refine that verdict. The verdict names and what they
mean (with their sources) are documented in :mod:`builder.compat.verdict`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from builder.compat.amd_verdict import check_amd
from builder.compat.drivers import driver_cuda, min_driver_row
from builder.compat.frameworks import ArchCoverage, arch_coverage
from builder.compat.generations import check_generation
from builder.compat.gpus import GpuInfo, gpu_info
from builder.compat.kernels import KernelBinary, KernelVerdict, kernel_verdicts
from builder.compat.nvidia_verdict import check_nvidia
from builder.compat.requirement import parse_requirement, require_cuda
from builder.compat.verdict import Verdict

if TYPE_CHECKING:
    from builder.models import GpuVendor


@dataclasses.dataclass(frozen=True)
class ImageSpec:
    """The image side of a compatibility question as a user states it: ``cuda`` (the CUDA line its
    application is built with, no hook requirement), ``require`` (its ``NVIDIA_REQUIRE_CUDA``, checked
    by the container hook), ``image_cuda`` (a release of the official ``nvidia/cuda`` images: their
    ``NVIDIA_REQUIRE_CUDA`` is used), ``rocm`` (the ROCm release of a ROCm image) and ``archs`` (the
    compiled architectures: ``sm_80``, ``compute_90``, ``gfx942``) and ``kernels`` (the GPU code measured
    in its libraries, :class:`builder.compat.kernels.KernelBinary`: when given, each library is judged per
    GPU and ``archs`` is not used). Nothing given: a CPU image."""

    cuda: str | None = None
    require: str | None = None
    image_cuda: str | None = None
    rocm: str | None = None
    archs: tuple[str, ...] = ()
    kernels: tuple[KernelBinary, ...] = ()

    @staticmethod
    def parse_archs(text: str | None) -> tuple[str, ...]:
        """``"sm_80,sm_90;compute_90"`` / ``"gfx90a gfx942"`` -> the architectures (commas, semicolons or
        spaces separate them; empty -> ``()``)."""
        if not text:
            return ()
        return tuple(a.strip() for a in text.replace(";", ",").replace(" ", ",").split(",") if a.strip())

    @property
    def requirement(self) -> str | None:
        """The ``NVIDIA_REQUIRE_CUDA`` the hook checks: ``require``, else that of the official image of
        ``image_cuda`` (:func:`builder.compat.require_cuda`; NotFoundError for an unknown release)."""
        return self.require or (require_cuda(self.image_cuda) if self.image_cuda else None)

    @property
    def vendor(self) -> GpuVendor:
        """The GPU vendor the image needs: ``amd`` for a ROCm image, else ``nvidia``."""
        return "amd" if self.rocm else "nvidia"


def check_image(
    image: ImageSpec,
    *,
    driver: str | None,
    gpu: str | None,
    brand: str | None,
    compute_capability: str | None = None,
    driver_cuda_version: str | None = None,
    vendor: str | None = None,
) -> Verdict:
    """:func:`check_compat` for an :class:`ImageSpec` (``builder compat check``): the host arguments are
    those of :func:`check_compat`. Raises ConfigError (unparsable versions or expression), NotFoundError
    (``image_cuda`` not a known release)."""
    if image.cuda is not None:
        min_driver_row(image.cuda)  # NotFoundError for a CUDA release no table knows: no verdict from guesses
    return check_compat(
        driver=driver,
        gpu=gpu,
        brand=brand,
        cuda=image.cuda,
        require=image.requirement,
        image_archs=image.archs,
        compute_capability=compute_capability,
        driver_cuda_version=driver_cuda_version,
        rocm=image.rocm,
        vendor=vendor,
        kernels=image.kernels,
    )


def check_compat(
    *,
    driver: str | None,
    gpu: str | None,
    brand: str | None,
    cuda: str | None = None,
    require: str | None = None,
    image_archs: tuple[str, ...] = (),
    compute_capability: str | None = None,
    driver_cuda_version: str | None = None,
    rocm: str | None = None,
    vendor: str | None = None,
    kernels: tuple[KernelBinary, ...] = (),
) -> Verdict:
    """Can an image start and run on a host?

    Host: ``driver`` (NVIDIA ``550.144.03``; AMD: the ROCm release of the host's amdgpu driver, ``6.3``, or
    None), ``gpu`` (name as the vendor tool prints it), ``brand`` (nvidia-smi "Product Brand"; derived from
    the GPU name only when None), ``compute_capability`` (``"9.0"`` or ``"gfx942"``; from the GPU table when
    None), ``driver_cuda_version`` (nvidia-smi "CUDA Version"; from the driver table when None), ``vendor``
    (``nvidia`` | ``amd``; from the GPU name when None).

    Image: ``cuda`` (the CUDA line its application is built with), ``require`` (its ``NVIDIA_REQUIRE_CUDA``;
    when given the hook check applies), ``rocm`` (ROCm release of a ROCm image), ``image_archs`` (compiled
    list: ``sm_80 ... compute_90`` / ``gfx90a ...``), ``kernels`` (the GPU code measured in the image's
    libraries: each is judged on the GPU, :func:`builder.compat.kernels.kernel_verdict`; a library with no
    code the GPU can run makes the verdict ``blocked`` naming it, one that only JITs adds a reason). No
    cuda, require or rocm: a CPU image (``ok``).

    Pure: raises ConfigError only for unparsable versions or expressions."""
    driver, gpu = _known(driver), _known(gpu)  # brand placeholders: normalize_brand
    driver_cuda_version, compute_capability = _known(driver_cuda_version), _known(compute_capability)
    info = gpu_info(gpu) if gpu else None
    named_amd = bool(gpu and re.match(r"(?:AMD|ATI|Radeon|Instinct)\b", gpu, re.I))
    given_vendor = (
        vendor
        or (info.vendor if info else None)
        or ("amd" if named_amd or (rocm and not (cuda or require)) else "nvidia")
    ).lower()
    host_vendor: GpuVendor = "amd" if given_vendor == "amd" else "nvidia"
    target = compute_capability or (info.target if info else None)
    jit_cuda = driver_cuda_version or (driver_cuda(driver) if driver and host_vendor == "nvidia" and kernels else None)
    measured = kernel_verdicts(kernels, target, vendor=host_vendor, driver_cuda=jit_cuda)
    if measured:
        arch: ArchCoverage | None = _measured_coverage(measured)
    else:
        arch = arch_coverage(target, tuple(image_archs)) if image_archs else None
    common: dict[str, Any] = {
        "gpu": gpu,
        "gpu_model": info.model if info else None,
        "target": target,
        "arch_covered": arch.covered if arch else None,
        "driver": driver,
    }
    if not (cuda or require or rocm):
        reasons = ["CPU image: no GPU driver requirement"]
        return Verdict(
            "ok", None, tuple(reasons), vendor=host_vendor, gpu_code=False, **{**common, "arch_covered": None}
        )
    verdict = _check_vendor(
        host_vendor,
        driver=driver,
        gpu=gpu,
        brand=brand,
        cuda=cuda,
        require=require,
        rocm=rocm,
        info=info,
        driver_cuda_version=driver_cuda_version,
        arch=arch,
        target=target,
        common=common,
    )
    verdict = _apply_kernels(verdict, measured)
    if gpu and info is None and compute_capability is None and not measured:
        # never "ok" on silence: a GPU the tables do not know has not had its architecture checked
        verdict = dataclasses.replace(
            verdict,
            reasons=(
                *verdict.reasons,
                f"GPU {gpu!r} is not in builder's GPU table (builder/compat/data/gpus.csv): whether the driver and "
                "the image support its architecture was not checked - pass its compute capability or gfx target "
                "(--cc)",
            ),
        )
    return verdict


def _measured_coverage(rows: tuple[KernelVerdict, ...]) -> ArchCoverage:
    """Architecture coverage from the measured libraries: covered when each runs natively or by JIT."""
    missing = [r.path for r in rows if r.verdict == "none"]
    if missing:
        return ArchCoverage(False, "missing", f"no code for the GPU in {', '.join(missing)}")
    how = "ptx" if any(r.verdict == "jit" for r in rows) else "exact"
    return ArchCoverage(True, how, f"every GPU library of the image has code for the GPU ({len(rows)} measured)")


def _apply_kernels(verdict: Verdict, rows: tuple[KernelVerdict, ...]) -> Verdict:
    """The measured libraries judged on the GPU (:func:`builder.compat.kernels.kernel_verdicts`): any
    ``none`` blocks the verdict naming the library; ``jit`` ones add a reason; ``arch_covered`` then
    says whether every library runs natively or by JIT."""
    if not rows or verdict.vendor not in ("nvidia", "amd"):
        return verdict
    missing = [r for r in rows if r.verdict == "none"]
    jit = [r for r in rows if r.verdict == "jit"]
    reasons = verdict.reasons + tuple(r.reason for r in missing) + tuple(r.reason for r in jit)
    if missing:
        return dataclasses.replace(
            verdict, verdict="blocked", reasons=reasons, arch_covered=False, needs_cuda_compat=False
        )
    return dataclasses.replace(verdict, reasons=reasons, arch_covered=True)


def _check_vendor(
    host_vendor: GpuVendor,
    *,
    driver: str | None,
    gpu: str | None,
    brand: str | None,
    cuda: str | None,
    require: str | None,
    rocm: str | None,
    info: GpuInfo | None,
    driver_cuda_version: str | None,
    arch: ArchCoverage | None,
    target: str | None,
    common: dict[str, Any],
) -> Verdict:
    """The verdict before the measured libraries: AMD, a ROCm image on NVIDIA, or NVIDIA."""
    if host_vendor == "amd":
        return check_amd(
            driver=driver,
            rocm=rocm,
            cuda=cuda or (parse_requirement(require).cuda if require else None),
            info_class=info.gpu_class if info else "unknown",
            arch=arch,
            common=common,
        )
    if rocm and not (cuda or require):
        return Verdict(
            "blocked",
            None,
            (f"ROCm {rocm} image on an NVIDIA host: it needs an AMD GPU (/dev/kfd)",),
            vendor=host_vendor,
            image_rocm=rocm,
            **common,
        )
    verdict = check_nvidia(
        driver=driver,
        gpu=gpu,
        brand=brand,
        cuda=cuda,
        require=require,
        info_class=info.gpu_class if info else None,
        info_brand=info.brand if info else None,
        driver_cuda_version=driver_cuda_version,
        arch=arch,
        common=common,
    )
    return _apply_generation(verdict, target=target, driver=driver, arch_covered=arch.covered if arch else None)


def _apply_generation(
    verdict: Verdict, *, target: str | None, driver: str | None, arch_covered: bool | None
) -> Verdict:
    """GPU generation rules (``gpu-archs.csv``): the driver branch must support the GPU's architecture
    (first/last branch) and so must the image's CUDA release (first toolkit / last major); else ``blocked``."""
    gen = check_generation(target, driver=driver, image_cuda=verdict.image_cuda, image_archs_cover=arch_covered is True)
    if gen.row is None and not gen.notes:
        return verdict
    reasons = verdict.reasons + gen.notes + gen.blocked
    need = verdict.min_driver
    if gen.cuda_blocked or (gen.driver_blocked and gen.row is not None and gen.row.last_driver_branch is not None):
        need = None  # no newer driver helps: the CUDA release lacks the architecture, or the driver dropped it
    elif gen.min_driver and (need is None or Version(gen.min_driver) > Version(need)):
        need = gen.min_driver
    if gen.blocked:
        return dataclasses.replace(
            verdict, verdict="blocked", reasons=reasons, min_driver=need, needs_cuda_compat=False
        )
    return dataclasses.replace(verdict, reasons=reasons, min_driver=need)


_UNKNOWN = {"", "n/a", "[n/a]", "not found", "unknown", "none", "null", "-"}


def _known(value: str | None) -> str | None:
    """Tool placeholders (``N/A``, ``[N/A]``, ``Not Found``, empty) mean unknown: None."""
    if value is None:
        return None
    v = value.strip()
    return None if v.lower() in _UNKNOWN else v


__all__ = ["ImageSpec", "check_compat", "check_image"]
