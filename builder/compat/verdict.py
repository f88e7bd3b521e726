"""The answer to "can image X start and run on host Y?": :class:`Verdict`, its ``--json`` document, the
verdict names and their severity. The question is asked in :mod:`builder.compat.check`
(:func:`~builder.compat.check.check_compat`); the vendor rules live in :mod:`builder.compat.nvidia_verdict`
and :mod:`builder.compat.amd_verdict`.

Verdicts (sources: CUDA compatibility guide, https://docs.nvidia.com/deploy/cuda-compatibility/ for
minor-version and forward compatibility; container toolkit ``NVIDIA_REQUIRE_CUDA``,
https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html):

- ``ok``: the host driver supports the image's CUDA line (and, for an image with ``NVIDIA_REQUIRE_CUDA``,
  a ``cuda>=`` term of it matches);
- ``minor-version-compat``: an application without a hook requirement, built with a newer CUDA minor of
  the same major, runs on a driver at or above the major's floor (12.x: 525.60.13), without features or
  PTX that need the newer driver - warn;
- ``forward-compat``: the image starts through an exemption term (``brand=B,driver>=N,driver<N+1``) or,
  without a hook requirement, the driver branch is one NVIDIA lists for forward compatibility of that
  line; needs the ``cuda-compat`` package in the image; works on data-center/professional GPUs only
  (GeForce/TITAN fail with CUDA error 804);
- ``blocked``: the container hook refuses it, or it cannot run (no driver path, GPU architecture not in
  the image's compiled list, CUDA image on an AMD host, ...).

An ``NVIDIA_REQUIRE_CUDA`` whose evaluation is undetermined (an exemption term would match if the unknown
brand were exempted) is ``blocked`` - fail closed: nothing shows the image starts - and the reason says that
the brand decides it and how to supply it; it never reads as a match or as a refusal by brand.

``min_driver`` is the driver that would make the verdict ``ok`` (the lowest Linux minimum of the image's
CUDA line); ``reasons`` say why, naming the rule and the table row.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Literal

from typing_extensions import TypedDict

from builder.compat.gpus import GpuClass
from builder.errors import IncompatibleError
from builder.models import GpuVendor

if TYPE_CHECKING:
    from builder.compat.frameworks import ArchCoverage

VerdictName = Literal["ok", "minor-version-compat", "forward-compat", "blocked"]
#: where the brand of a verdict came from: the host's tool (``nvidia-smi -q``), the GPU name, or nowhere
BrandSource = Literal["host", "gpu-name", "unknown"]
#: worst last: used to combine verdicts (a fleet's worst cluster, a cluster's worst host).
SEVERITY: dict[str, int] = {"ok": 0, "minor-version-compat": 1, "forward-compat": 2, "blocked": 3}


class VerdictDocument(TypedDict):
    """A :class:`Verdict` as JSON (``builder compat check --json``; each cluster, host and GPU row of the
    fleet and static verdicts extends it)."""

    verdict: VerdictName
    min_driver: str | None
    reasons: list[str]
    arch_covered: bool | None
    vendor: GpuVendor
    driver: str | None
    driver_cuda: str | None
    image_cuda: str | None
    image_rocm: str | None
    gpu: str | None
    gpu_model: str | None
    gpu_class: GpuClass
    brand: str | None
    brand_source: BrandSource
    target: str | None
    matched_term: str | None
    needs_cuda_compat: bool
    min_driver_row: str | None


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The answer of :func:`check_compat`.

    ``verdict``: ok | minor-version-compat | forward-compat | blocked; ``min_driver``: the driver that would
    make it ``ok`` (None when no driver helps or the CUDA line is unknown); ``reasons``: why, one sentence
    each; ``arch_covered``: the GPU's compute capability / gfx target is in the image's compiled list (None
    when either is unknown). The other fields record the inputs as understood."""

    verdict: VerdictName
    min_driver: str | None
    reasons: tuple[str, ...]
    arch_covered: bool | None = None
    vendor: GpuVendor = "nvidia"
    driver: str | None = None
    driver_cuda: str | None = None
    image_cuda: str | None = None
    image_rocm: str | None = None
    gpu: str | None = None
    gpu_model: str | None = None
    gpu_class: GpuClass = "unknown"
    brand: str | None = None
    brand_source: BrandSource = "unknown"
    target: str | None = None  # compute capability or gfx target
    matched_term: str | None = None
    needs_cuda_compat: bool = False
    min_driver_row: str | None = None
    gpu_code: bool = True  # False: a CPU image (no CUDA, NVIDIA_REQUIRE_CUDA or ROCm): nothing to cover

    @property
    def arch_text(self) -> str:
        """``arch_covered`` for people: ``yes`` | ``no`` | ``unknown`` | ``not applicable (no GPU
        code)`` for a CPU image, whose GPU architecture coverage is no question at all."""
        if not self.gpu_code:
            return "not applicable (no GPU code)"
        return {True: "yes", False: "no", None: "unknown"}[self.arch_covered]

    @property
    def ok(self) -> bool:
        """True unless blocked (the exit-code rule of ``builder compat check``)."""
        return self.verdict != "blocked"

    def to_json(self) -> VerdictDocument:
        return {
            "verdict": self.verdict,
            "min_driver": self.min_driver,
            "reasons": list(self.reasons),
            "arch_covered": self.arch_covered,
            "vendor": self.vendor,
            "driver": self.driver,
            "driver_cuda": self.driver_cuda,
            "image_cuda": self.image_cuda,
            "image_rocm": self.image_rocm,
            "gpu": self.gpu,
            "gpu_model": self.gpu_model,
            "gpu_class": self.gpu_class,
            "brand": self.brand,
            "brand_source": self.brand_source,
            "target": self.target,
            "matched_term": self.matched_term,
            "needs_cuda_compat": self.needs_cuda_compat,
            "min_driver_row": self.min_driver_row,
        }

    def incompatibility(self) -> IncompatibleError | None:
        """The error ``builder compat check`` exits with (11) when the verdict is ``blocked``, else None."""
        if self.ok:
            return None
        return IncompatibleError(
            "the image cannot start or run on this host"
            + (f": needs driver >= {self.min_driver}" if self.min_driver else ""),
            verdict=self.to_json(),
        )


def worst(verdicts: list[Verdict]) -> Verdict | None:
    """The most severe verdict (blocked > forward-compat > minor-version-compat > ok)."""
    return max(verdicts, key=lambda v: SEVERITY[v.verdict]) if verdicts else None


def finish_verdict(
    verdict: VerdictName, need: str | None, reasons: list[str], arch: ArchCoverage | None, base: dict[str, Any]
) -> Verdict:
    """The :class:`Verdict` of ``verdict`` with ``base`` (its other fields): the architecture coverage ``arch``
    adds its reason last and blocks the verdict when the GPU's architecture is not covered."""
    if arch is not None:
        reasons.append(("architecture: " if arch.covered is not False else "architecture not covered: ") + arch.detail)
        if arch.covered is False:
            verdict = "blocked"
    return Verdict(verdict=verdict, min_driver=need, reasons=tuple(reasons), **base)


__all__ = [
    "SEVERITY",
    "BrandSource",
    "Verdict",
    "VerdictDocument",
    "VerdictName",
    "finish_verdict",
    "worst",
]
