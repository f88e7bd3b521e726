"""Fleet verdicts: :func:`check_compat` for every host configuration of a cluster, the cluster's worst,
and the one fleet summary every command prints (:class:`FleetSummary`, docs/fleets.md).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from packaging.version import Version
from typing_extensions import TypedDict

from builder.compat.check import ImageSpec, check_compat
from builder.compat.verdict import SEVERITY, Verdict, VerdictDocument, VerdictName, worst
from builder.errors import IncompatibleError
from builder.models import Vendor

if TYPE_CHECKING:
    from collections.abc import Iterable

    from builder.compat.fleet_model import Cluster, Fleet, HostConfig
    from builder.compat.kernels import KernelBinary


class HostConfigDocument(TypedDict):
    """One (driver, GPU) combination of a cluster; ``source``: ``inline`` or the ``hostinfo:`` file."""

    driver: str | None
    gpu: str | None
    brand: str | None
    driver_cuda: str | None
    compute_capability: str | None
    source: str


class HostVerdictDocument(VerdictDocument):
    """The verdict of one host configuration of a cluster."""

    host: HostConfigDocument


class ClusterVerdictDocument(VerdictDocument):
    """A cluster's verdict (the worst of its configurations, reasons prefixed with the configuration)
    and each configuration's."""

    cluster: str
    hosts: list[HostVerdictDocument]


@dataclasses.dataclass(frozen=True)
class ClusterVerdict:
    """Verdict of one cluster: the worst of its host configurations, plus each one."""

    cluster: str
    verdict: Verdict
    configs: tuple[tuple[HostConfig, Verdict], ...]

    def to_json(self) -> ClusterVerdictDocument:
        return {
            "cluster": self.cluster,
            **self.verdict.to_json(),
            "hosts": [{"host": _host_json(h), **v.to_json()} for h, v in self.configs],
        }


def _host_json(h: HostConfig) -> HostConfigDocument:
    return {
        "driver": h.driver,
        "gpu": h.gpu,
        "brand": h.brand,
        "driver_cuda": h.driver_cuda,
        "compute_capability": h.compute_capability,
        "source": h.source,
    }


def check_cluster(
    cluster: Cluster,
    *,
    cuda: str | None = None,
    require: str | None = None,
    rocm: str | None = None,
    image_archs: tuple[str, ...] = (),
    kernels: tuple[KernelBinary, ...] = (),
) -> ClusterVerdict:
    """:func:`check_compat` for every configuration of a cluster; the cluster's verdict is the worst one,
    its reasons prefixed with the configuration ("driver 550.144.03, NVIDIA H100 ...: ..."). ``kernels``:
    the GPU code measured in the image's libraries (judged per GPU, :func:`check_compat`)."""
    results: list[tuple[HostConfig, Verdict]] = []
    for h in cluster.configs:
        v = check_compat(
            driver=h.driver,
            gpu=h.gpu,
            brand=h.brand,
            cuda=cuda,
            require=require,
            rocm=rocm,
            image_archs=image_archs,
            compute_capability=h.compute_capability,
            driver_cuda_version=h.driver_cuda,
            vendor=cluster.vendor,
            kernels=kernels,
        )
        results.append((h, v))
    if not results:
        empty = Verdict("blocked", None, (f"cluster {cluster.name} has no host configurations",), vendor=cluster.vendor)
        return ClusterVerdict(cluster.name, empty, ())
    worst_v = worst([v for _, v in results])
    assert worst_v is not None  # results is not empty
    reasons = tuple(
        f"{h.label}: {v.verdict}: {r}" for h, v in results if v.verdict == worst_v.verdict for r in v.reasons
    )
    drivers = [v.min_driver for _, v in results if v.min_driver]
    need = max(drivers, key=Version) if drivers else None
    covered = [v.arch_covered for _, v in results]
    arch = False if False in covered else (None if None in covered else True)
    combined = dataclasses.replace(worst_v, reasons=reasons, min_driver=need, arch_covered=arch)
    return ClusterVerdict(cluster.name, combined, tuple(results))


def check_fleet(
    fleet: Fleet,
    *,
    cuda: str | None = None,
    require: str | None = None,
    rocm: str | None = None,
    image_archs: tuple[str, ...] = (),
    clusters: Iterable[str] | None = None,
) -> list[tuple[Cluster, Verdict]]:
    """Check an image (its CUDA line / NVIDIA_REQUIRE_CUDA / ROCm release and compiled architectures)
    against every cluster of a fleet (or the named ones). Returns ``[(cluster, verdict)]`` in file order,
    each verdict the worst over the cluster's configurations. Use :func:`check_cluster` for the detail."""
    wanted = set(clusters) if clusters is not None else None
    out = []
    for c in fleet.clusters:
        if wanted is not None and c.name not in wanted:
            continue
        out.append((c, check_cluster(c, cuda=cuda, require=require, rocm=rocm, image_archs=image_archs).verdict))
    return out


# --------------------------------------------------------------------------------- fleet summary

NOT_APPLICABLE = "not-applicable"


def image_vendor(accelerator: str | None) -> Vendor:
    """The GPU vendor an image is built for, from its accelerator kind (the ``io.builder.accelerator``
    label / ``Accelerator.kind``): ``cuda`` -> ``nvidia``, ``rocm`` -> ``amd``, anything else (``cpu``,
    unknown) -> ``none`` (a CPU image applies to every cluster)."""
    return "nvidia" if accelerator == "cuda" else "amd" if accelerator == "rocm" else "none"


class FleetSummaryDocument(TypedDict):
    """The fleet verdict (:class:`FleetSummary`): the worst over the applicable clusters."""

    verdict: VerdictName
    image_vendor: Vendor
    runs_on: list[str]
    blocked_on: list[str]
    not_applicable: list[str]


@dataclasses.dataclass(frozen=True)
class FleetSummary:
    """One fleet verdict, the same for ``builder compat fleet``, ``builder check --static --fleet`` and
    ``builder run``: the WORST verdict over the *applicable* clusters.

    A cluster applies when its vendor is the image's (``image_vendor``; a CPU image, vendor ``none``,
    applies to every cluster); the others are ``not-applicable`` (a CUDA image is not expected to run on
    an AMD cluster), never ``blocked``. ``verdict``: ``blocked`` when any applicable cluster is blocked,
    or when no cluster applies (nothing in the fleet can run the image); else the worst of ``ok`` <
    ``minor-version-compat`` < ``forward-compat``. ``runs_on``: applicable clusters not blocked;
    ``blocked_on``: applicable clusters blocked; ``not_applicable``: clusters of another vendor;
    ``clusters``: ``(cluster, verdict)`` in file order, ``not-applicable`` for the skipped ones.
    ``blocked`` is what the CLIs turn into exit 11 (IncompatibleError)."""

    verdict: VerdictName
    runs_on: tuple[str, ...]
    blocked_on: tuple[str, ...]
    not_applicable: tuple[str, ...]
    clusters: tuple[tuple[str, str], ...]
    image_vendor: Vendor

    @property
    def blocked(self) -> bool:
        return self.verdict == "blocked"

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the verdict is what it is, one line (empty when every applicable cluster is ok)."""
        if not self.runs_on and not self.blocked_on:
            return (f"no cluster of the fleet has the image's GPU vendor ({self.image_vendor})",)
        if self.blocked_on:
            return (f"cannot run on cluster(s): {', '.join(self.blocked_on)}",)
        return ()

    def header(self, fleet: str) -> str:
        """The one-line summary both CLIs print first (plain text, no markup)."""
        text = f"fleet {fleet}: {self.verdict}"
        if self.runs_on:
            text += f"  runs on: {', '.join(self.runs_on)}"
        if self.blocked_on:
            text += f"  blocked on: {', '.join(self.blocked_on)}"
        if self.not_applicable:
            text += f"  not applicable ({self.image_vendor} image): {', '.join(self.not_applicable)}"
        return text

    def to_json(self) -> FleetSummaryDocument:
        return {
            "verdict": self.verdict,
            "image_vendor": self.image_vendor,
            "runs_on": list(self.runs_on),
            "blocked_on": list(self.blocked_on),
            "not_applicable": list(self.not_applicable),
        }


def summarize(results: Iterable[tuple[str, str, VerdictName]], image_vendor: Vendor | None) -> FleetSummary:
    """The fleet verdict (see :class:`FleetSummary`) of ``results``: ``(cluster name, cluster vendor,
    cluster verdict)`` in file order (e.g. from :func:`check_fleet`: ``(c.name, c.vendor, v.verdict)``).
    ``image_vendor``: ``nvidia`` | ``amd`` | ``none``/None (CPU image: every cluster applies)."""
    vendor: Vendor = image_vendor or "none"
    rows: list[tuple[str, str]] = []
    applicable: list[tuple[str, VerdictName]] = []
    skipped: list[str] = []
    for name, cluster_vendor, verdict in results:
        if vendor not in ("none", cluster_vendor):
            skipped.append(name)
            rows.append((name, NOT_APPLICABLE))
        else:
            applicable.append((name, verdict))
            rows.append((name, verdict))
    overall: VerdictName = "blocked"
    if applicable:
        overall = max((v for _, v in applicable), key=lambda v: SEVERITY.get(v, SEVERITY["blocked"]))
    return FleetSummary(
        verdict=overall,
        runs_on=tuple(n for n, v in applicable if v != "blocked"),
        blocked_on=tuple(n for n, v in applicable if v == "blocked"),
        not_applicable=tuple(skipped),
        clusters=tuple(rows),
        image_vendor=vendor,
    )


# --------------------------------------------------------------------------------- fleet check


class ClusterRowDocument(ClusterVerdictDocument):
    """A cluster of a fleet check: its verdict, and whether it ``applies`` (its vendor is the image's;
    a cluster that does not apply never blocks)."""

    applies: bool


class FleetCheckDocument(FleetSummaryDocument):
    """An image checked against a fleet (``builder compat fleet --json``, ``builder check --static
    --fleet``): the fleet's name and file, its verdict, the one-line ``header`` both commands print,
    ``reasons`` (empty when every applicable cluster runs it) and every cluster checked, in file order."""

    fleet: str
    path: str
    header: str
    reasons: list[str]
    clusters: list[ClusterRowDocument]


@dataclasses.dataclass(frozen=True)
class FleetCheck:
    """An image checked against the clusters of a fleet: each cluster's :class:`ClusterVerdict` (in file
    order) and the fleet's :class:`FleetSummary`."""

    fleet: str
    path: str
    clusters: tuple[tuple[Cluster, ClusterVerdict], ...]
    summary: FleetSummary

    def applies(self, cluster: str) -> bool:
        """The cluster has the image's vendor (or the image is a CPU image)."""
        return cluster not in self.summary.not_applicable

    @property
    def header(self) -> str:
        """The one-line summary (``fleet demo: blocked  runs on: ...``; plain text)."""
        return self.summary.header(self.fleet)

    def to_json(self) -> FleetCheckDocument:
        return {
            "fleet": self.fleet,
            "path": self.path,
            **self.summary.to_json(),
            "header": self.header,
            "reasons": list(self.summary.reasons),
            "clusters": [{**cv.to_json(), "applies": self.applies(c.name)} for c, cv in self.clusters],
        }

    def incompatibility(self) -> IncompatibleError | None:
        """The error ``builder compat fleet`` exits with (11) when the fleet's verdict is blocked, else None."""
        if not self.summary.blocked:
            return None
        return IncompatibleError(
            f"fleet {self.fleet} is blocked: " + "; ".join(self.summary.reasons),
            clusters=list(self.summary.blocked_on),
        )


def check_fleet_image(
    fleet: Fleet, image: ImageSpec, *, image_vendor: Vendor, clusters: Iterable[str] = ()
) -> FleetCheck:
    """:func:`check_cluster` for every cluster of ``fleet`` (only those named in ``clusters``, when any) and
    the fleet verdict (:func:`summarize`) for an image built for ``image_vendor``. Raises ConfigError for
    unparsable versions, NotFoundError for an unknown ``image.image_cuda`` release."""
    wanted = set(clusters)
    require = image.requirement
    rows = tuple(
        (
            c,
            check_cluster(
                c, cuda=image.cuda, require=require, rocm=image.rocm, image_archs=image.archs, kernels=image.kernels
            ),
        )
        for c in fleet.clusters
        if not wanted or c.name in wanted
    )
    summary = summarize(((c.name, c.vendor, cv.verdict.verdict) for c, cv in rows), image_vendor)
    return FleetCheck(fleet.name, fleet.path, rows, summary)


__all__ = [
    "NOT_APPLICABLE",
    "ClusterRowDocument",
    "ClusterVerdict",
    "ClusterVerdictDocument",
    "FleetCheck",
    "FleetCheckDocument",
    "FleetSummary",
    "FleetSummaryDocument",
    "HostConfigDocument",
    "HostVerdictDocument",
    "check_cluster",
    "check_fleet",
    "check_fleet_image",
    "image_vendor",
    "summarize",
]
