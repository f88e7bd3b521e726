"""Static compatibility verdicts of an image (nothing runs): on a saved host, or on every cluster of a fleet.
Both ask ``builder.compat`` (``check_compat`` per GPU; ``check_fleet_image`` per fleet), so they agree with
``builder compat check`` / ``builder compat fleet``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from typing_extensions import TypedDict

from builder import compat
from builder.compat import ImageSpec, Verdict, VerdictDocument
from builder.compat.fleet_verdicts import FleetCheck, check_fleet_image, image_vendor
from builder.compat.verdict import VerdictName

if TYPE_CHECKING:
    from pathlib import Path

    from builder.checks.host.model import HostGpu, HostInfo
    from builder.checks.image import ImageFacts
    from builder.compat.fleets import HostLoader
    from builder.compat.kernels import KernelBinary


def image_spec(image: ImageFacts, kernels: tuple[KernelBinary, ...] = ()) -> ImageSpec:
    """The compatibility question's image side from the image's facts: its CUDA line and
    ``NVIDIA_REQUIRE_CUDA`` for a CUDA image, its ROCm release for a ROCm image, its compiled
    architectures as declared, and ``kernels``, the GPU code measured in its libraries
    (:meth:`builder.image.inspection.ImageInspection.kernel_binaries`): when measured, each library is
    judged per GPU instead of the declared list."""
    cuda = image.accelerator == "cuda"
    return ImageSpec(
        cuda=image.cuda_version if cuda else None,
        require=image.require_cuda if cuda else None,
        rocm=image.rocm_version if image.accelerator == "rocm" else None,
        archs=() if kernels else tuple(image.gpu_archs),
        kernels=kernels,
    )


class GpuVerdictDocument(VerdictDocument):
    """The verdict on one GPU of the host; ``index``: the GPU's index on the host."""

    index: int | None


class HostCheckDocument(TypedDict):
    """The verdict of an image on a saved host: the worst over its GPUs (``reasons`` from the GPUs with
    that verdict, prefixed with the GPU's name) and each GPU's."""

    verdict: VerdictName
    reasons: list[str]
    gpus: list[GpuVerdictDocument]


@dataclasses.dataclass(frozen=True)
class GpuVerdict:
    """:func:`builder.compat.check_compat` on one GPU of a host."""

    gpu: HostGpu
    verdict: Verdict

    def to_json(self) -> GpuVerdictDocument:
        return {**self.verdict.to_json(), "index": self.gpu.index}


@dataclasses.dataclass(frozen=True)
class HostCheck:
    """The verdict of an image on a host: ``verdict`` (the worst GPU's; without GPUs ``ok`` for a CPU image
    and ``blocked`` for a GPU image), ``reasons`` and each GPU's :class:`GpuVerdict`."""

    verdict: VerdictName
    reasons: tuple[str, ...]
    gpus: tuple[GpuVerdict, ...] = ()

    @property
    def blocked(self) -> bool:
        return self.verdict == "blocked"

    def to_json(self) -> HostCheckDocument:
        return {"verdict": self.verdict, "reasons": list(self.reasons), "gpus": [g.to_json() for g in self.gpus]}


def host_verdict(image: ImageFacts, host: HostInfo, kernels: tuple[KernelBinary, ...] = ()) -> HostCheck:
    """Compatibility verdict of ``image`` on ``host`` (each GPU; the worst wins), including architecture
    coverage (from the measured ``kernels`` when given). Raises ConfigError for versions that do not parse."""
    gpu_image = image.accelerator in ("cuda", "rocm")
    if not host.gpus:
        if gpu_image:
            reason = f"the image needs a GPU ({image.accelerator}) and the host has none (vendor {host.vendor})"
            return HostCheck("blocked", (reason,))
        return HostCheck("ok", ("CPU image",))
    spec = image_spec(image, kernels)
    rows = tuple(
        GpuVerdict(
            g,
            compat.check_compat(
                driver=host.driver_version if host.vendor == "nvidia" else host.rocm_version,
                gpu=g.name,
                brand=g.brand if g.brand_source == "nvidia-smi -q" else None,
                cuda=spec.cuda,
                require=spec.require,
                rocm=spec.rocm,
                image_archs=spec.archs,
                compute_capability=g.compute_capability or g.gfx_target,
                driver_cuda_version=host.cuda_version,
                vendor=host.vendor if host.vendor != "none" else None,
                kernels=spec.kernels,
            ),
        )
        for g in host.gpus
    )
    worst = compat.worst([r.verdict for r in rows])
    assert worst is not None  # the host has GPUs
    reasons = tuple(
        f"{r.verdict.gpu}: {x}" for r in rows if r.verdict.verdict == worst.verdict for x in r.verdict.reasons
    )
    return HostCheck(worst.verdict, reasons, rows)


def fleet_verdict(
    image: ImageFacts,
    fleet_path: Path,
    *,
    load_host: HostLoader | None = None,
    kernels: tuple[KernelBinary, ...] = (),
) -> FleetCheck:
    """Verdict of ``image`` for every cluster of the fleet file and the fleet's verdict
    (:func:`builder.compat.fleets.check_fleet_image`, the one ``builder compat fleet`` uses): the WORST over
    the clusters of the image's vendor (cuda -> nvidia, rocm -> amd; a CPU image: every cluster); clusters of
    another vendor do not apply and never block; ``blocked`` when an applicable cluster is blocked or none
    applies. ``load_host`` reads the clusters' ``hostinfo:`` files (default:
    :func:`builder.checks.host.reading.load_host`). ``kernels``: the GPU code measured in the image (each
    library judged per GPU of each cluster). Raises ConfigError for an invalid fleet file."""
    from builder.compat.fleets import load_fleet  # pydantic's fleet and host schemas: only for a fleet verdict

    if load_host is None:
        from builder.checks.host.reading import load_host
    fleet = load_fleet(fleet_path, load_host=load_host)
    return check_fleet_image(fleet, image_spec(image, kernels), image_vendor=image_vendor(image.accelerator))


__all__ = [
    "GpuVerdict",
    "GpuVerdictDocument",
    "HostCheck",
    "HostCheckDocument",
    "fleet_verdict",
    "host_verdict",
    "image_spec",
]
