"""Static compatibility verdicts of an image (nothing runs): on a saved host, or on every cluster of a fleet.
Both ask ``builder.compat`` (``check_compat`` per GPU; ``check_fleet_image`` per fleet), so they agree with
``builder compat check`` / ``builder compat fleet``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from typing_extensions import TypedDict

from builder import compat
from builder.checks.image import ImageFacts, ImageFactsDocument
from builder.compat import ImageSpec, Verdict, VerdictDocument
from builder.compat.fleet_verdicts import FleetCheck, FleetCheckDocument, check_fleet_image, image_vendor
from builder.compat.verdict import VerdictName
from builder.errors import IncompatibleError
from builder.models import SummaryRow

if TYPE_CHECKING:
    from pathlib import Path

    from builder.checks.host.model import HostGpu, HostInfo
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


class StaticHostDocument(HostCheckDocument):
    """``builder check REF --static --host FILE --json``: the pinned reference, the image's facts and the
    verdict on the host."""

    reference: str
    image: ImageFactsDocument


class StaticFleetDocument(FleetCheckDocument):
    """``builder check REF --static --fleet NAME --json``: the pinned reference, the image's facts and the
    fleet verdict (the document of ``builder compat fleet``)."""

    reference: str
    image: ImageFactsDocument


@dataclasses.dataclass(frozen=True)
class StaticCheck:
    """``builder check REF --static``: the verdict on ``reference`` (``registry/repository@digest``) on a
    host or on a fleet."""

    reference: str
    image: ImageFacts
    verdict: HostCheck | FleetCheck

    @property
    def blocked(self) -> bool:
        return self.verdict.summary.blocked if isinstance(self.verdict, FleetCheck) else self.verdict.blocked

    @property
    def reasons(self) -> tuple[str, ...]:
        v = self.verdict
        return v.summary.reasons if isinstance(v, FleetCheck) else v.reasons

    def summary_rows(self) -> tuple[SummaryRow, ...]:
        """One row: the image (reference without its digest), its digest, ``blocked`` or ``compatible``."""
        status = "blocked" if self.blocked else "compatible"
        return (SummaryRow(self.reference.split("@", 1)[0], self.image.digest, f"static {status}"),)

    def to_json(self) -> StaticHostDocument | StaticFleetDocument:
        if isinstance(self.verdict, FleetCheck):
            return {"reference": self.reference, "image": self.image.to_json(), **self.verdict.to_json()}
        return {"reference": self.reference, "image": self.image.to_json(), **self.verdict.to_json()}

    def failure(self) -> IncompatibleError | None:
        """The error ``builder check --static`` exits with (11) when the verdict is blocked, else None."""
        if not self.blocked:
            return None
        reasons = "; ".join(self.reasons or ("see clusters",))
        return IncompatibleError(f"{self.reference} is blocked: " + reasons[:800], verdict=self.verdict.to_json())


__all__ = [
    "GpuVerdict",
    "GpuVerdictDocument",
    "HostCheck",
    "HostCheckDocument",
    "StaticCheck",
    "StaticFleetDocument",
    "StaticHostDocument",
    "fleet_verdict",
    "host_verdict",
    "image_spec",
]
