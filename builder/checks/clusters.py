"""``builder check REF --cluster NAME`` and ``builder check REF --fleet F``: device checks on fleet clusters.

Each cluster's ``runner:`` (docs/fleets.md) opens a check-runner session
(:func:`builder.checks.runners.open_session`: the local or a remote engine, Slurm, Kubernetes) and
:func:`builder.checks.run.check_reference` runs the check through it, so the result, its diagnosis
and the signed ``device-check/v1`` attestation are those of a local check, plus the placement
(cluster, runner kind, node, job id). A fleet's clusters are checked in parallel, one row each.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal

from typing_extensions import TypedDict

from builder.checks.evidence import SkippedCheck, SkippedDocument
from builder.checks.run import (
    CheckRequest,
    DeviceCheck,
    DeviceRunDocument,
    PinnedImage,
    check_reference,
    declared_checks,
    pin_image,
)
from builder.checks.runners import open_session
from builder.checks.static import StaticFleetDocument, StaticHostDocument
from builder.error_documents import ErrorBody
from builder.errors import (
    BuilderError,
    CheckFailedError,
    ChecksIncompleteError,
    ConfigError,
    IncompatibleError,
    RunnerError,
)
from builder.models import SummaryRow

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path

    from builder.compat.fleet_model import Cluster, Fleet
    from builder.registry import RegistryClient
    from builder.selection import HasVariants
    from builder.signing.signer import Signer


@dataclasses.dataclass(frozen=True)
class CheckServices:
    """What a device check needs from the composition root (see :func:`builder.checks.run.check_reference`):
    ``root`` is the project whose matrices declare the variant's tests and benchmark (their scripts are read
    from it), ``commit()`` its commit, recorded in their signed results."""

    registries: Callable[[str], RegistryClient]
    default_registry: str
    matrices: Callable[[], Iterable[HasVariants]]
    signer: Callable[[Path], Signer]
    default_key: Path
    lock_dir: Path
    root: Path
    commit: Callable[[], str | None]


def no_runner(cluster: str, fleet_path: str | None) -> ChecksIncompleteError:
    """Why nothing ran on ``cluster`` (of the fleet file ``fleet_path``): it names no ``runner:``. One
    definition for ``check --cluster`` and ``check --fleet``: skipped, exit 23 (checks-incomplete), with
    what to do; never a usage error (the user named a real cluster)."""
    where = f" in {fleet_path}" if fleet_path is not None else ""
    return ChecksIncompleteError(
        f"cluster {cluster} has no `runner:`{where}, so builder does not know how to reach it: skipped, "
        "nothing ran there",
        hint="add e.g. `runner: {kind: slurm, partition: gpu}` to the cluster (docs/fleets.md), or check a "
        "saved host report of it with `builder check REF --static --host FILE`",
        cluster=cluster,
    )


def check_on_cluster(
    request: CheckRequest,
    cluster: Cluster,
    services: CheckServices,
    *,
    on_run: Callable[[str], None] | None = None,
) -> DeviceCheck:
    """Run ``request``'s device check on ``cluster`` through its runner, then the tests and benchmark the
    variant declares (as a local check: :func:`builder.checks.run.check_reference`) through the same runner;
    the result carries the placement.
    Raises RunnerError (the runner could not run it), ChecksIncompleteError (no ``runner:``,
    :func:`no_runner`; a Kubernetes cluster: builder does not reach it), and what
    :func:`check_reference` raises. A failed check is a result (its ``failure()``)."""
    if cluster.runner is None:
        raise no_runner(cluster.name, None)
    if cluster.runner.kind == "kubernetes":
        from builder.checks.runners.kubernetes import not_run_here

        raise not_run_here(cluster.name, cluster.runner, request.reference)
    with open_session(cluster.name, cluster.runner) as session:
        outcome = check_reference(
            dataclasses.replace(request, static=False, host_file=None, fleet_file=None),
            registries=services.registries,
            default_registry=services.default_registry,
            matrices=services.matrices,
            signer=services.signer,
            default_key=services.default_key,
            lock_dir=services.lock_dir,
            host=session.host,
            on_run=on_run,
            runner=session.run_container,
            placement=session.placement,
            # the same declared tests and benchmark as a local check, through the same runner (srun + launcher)
            commit=services.commit,
            root=services.root,
            cpu=session.cpu_model,  # the node's CPU model for the benchmark's hardware class
            node_tools=session.node_tools(),  # its topology and DCGM diagnostic, read on the node
        )
    assert isinstance(outcome, DeviceCheck)  # not static
    return outcome


ClusterStatus = Literal["passed", "failed", "error", "skipped", "not-applicable"]


class ClusterRowDocument(TypedDict):
    """One cluster of ``builder check REF --fleet F --json``: its ``status`` (``passed``, ``failed``,
    ``error``: the runner could not run it, ``skipped``: builder does not run checks there (no ``runner:``,
    or a Kubernetes cluster, whose Jobs it renders), ``not-applicable``: a GPU image of the other vendor),
    the runner kind, the node and job id it ran on, the check (null unless it ran) and the error (null
    unless ``error`` or ``skipped``: then why, and what to do in its ``hint``)."""

    cluster: str
    status: ClusterStatus
    runner: str | None
    node: str | None
    job_id: str | None
    check: DeviceRunDocument | None
    error: ErrorBody | None


class FleetRunDocument(TypedDict):
    """``builder check REF --fleet F --json`` (without ``--static``): the fleet, the reference and one row
    per cluster."""

    fleet: str
    reference: str
    clusters: list[ClusterRowDocument]


@dataclasses.dataclass(frozen=True)
class ClusterRun:
    """One cluster's part of a fleet check: the check that ran, or the error that stopped it (a
    ChecksIncompleteError: skipped, builder does not run checks there)."""

    cluster: str
    runner: str | None
    check: DeviceCheck | None = None
    error: BuilderError | None = None
    applies: bool = True

    @property
    def status(self) -> ClusterStatus:
        if self.check is not None:
            return "passed" if self.check.passed else "failed"
        if not self.applies:
            return "not-applicable"
        return "skipped" if isinstance(self.error, ChecksIncompleteError) else "error"

    def to_json(self) -> ClusterRowDocument:
        placement = self.check.result.placement if self.check is not None else None
        return {
            "cluster": self.cluster,
            "status": self.status,
            "runner": self.runner,
            "node": placement.node if placement else None,
            "job_id": placement.job_id if placement else None,
            "check": self.check.to_json() if self.check is not None else None,
            "error": self.error.to_json() if self.error is not None else None,
        }


@dataclasses.dataclass(frozen=True)
class FleetRun:
    """The device checks of ``reference`` on every cluster of ``fleet`` (one :class:`ClusterRun` each)."""

    fleet: str
    reference: str
    clusters: tuple[ClusterRun, ...]

    def summary_rows(self) -> tuple[SummaryRow, ...]:
        """One row per cluster: the cluster (as the variant column), the checked digest, the status."""
        digest = self.reference.rsplit("@", 1)[-1] if "@" in self.reference else ""
        return tuple(SummaryRow(f"{c.cluster} ({c.runner or 'no runner'})", digest, c.status) for c in self.clusters)

    def to_json(self) -> FleetRunDocument:
        return {"fleet": self.fleet, "reference": self.reference, "clusters": [c.to_json() for c in self.clusters]}

    def failure(self) -> BuilderError | None:
        """CheckFailedError (20) when a check failed on a cluster, else RunnerError (22) when a runner could
        not run one, else ChecksIncompleteError (23) when a cluster was skipped (builder does not run checks
        there), else None (not-applicable clusters are no failure)."""
        failed = [c for c in self.clusters if c.status == "failed"]
        if failed:
            return CheckFailedError(
                f"device check of {self.reference} failed on {', '.join(c.cluster for c in failed)}",
                hint="each cluster's diagnosis is in its row (--json: clusters[].check.diagnosis)",
                result=self.to_json(),
            )
        broken = [c for c in self.clusters if c.status == "error"]
        if broken:
            return RunnerError(
                f"the check of {self.reference} could not run on {', '.join(c.cluster for c in broken)}",
                hint="each cluster's error is in its row",
                result=self.to_json(),
            )
        skipped = [c for c in self.clusters if c.status == "skipped"]
        if skipped:
            return ChecksIncompleteError(
                f"the check of {self.reference} passed where it ran; not checked from here: "
                f"{', '.join(c.cluster for c in skipped)}",
                hint="each skipped cluster's row says how to check it there",
                result=self.to_json(),
            )
        return None


def check_on_fleet(
    request: CheckRequest,
    fleet: Fleet,
    services: CheckServices,
    *,
    on_event: Callable[[str, str], None] | None = None,
) -> FleetRun:
    """Run ``request``'s device check on every cluster of ``fleet`` at once (one thread per cluster). The
    reference is pinned to one digest first, so every cluster checks the same image; a cluster without a
    ``runner:`` or on Kubernetes is skipped (its row's error says why and what to do), one of the other GPU
    vendor than the image's is not applicable (:func:`builder.compat.fleet_verdicts.image_vendor`: a CPU
    image applies everywhere).
    ``on_event(cluster, line)`` hears each start and end. Never raises for one cluster's failure or
    error (its row says it); the answer's ``failure()`` is the error. Raises what pinning raises
    (NotFoundError, registry errors)."""
    from builder.compat.fleet_verdicts import image_vendor

    image = _pin(request, services)
    vendor = image_vendor(image.facts.accelerator)
    request = dataclasses.replace(request, reference=image.reference)

    def one(cluster: Cluster) -> ClusterRun:
        kind = cluster.runner.kind if cluster.runner else None
        if vendor not in ("none", cluster.vendor):
            return ClusterRun(cluster.name, kind, applies=False)
        if kind is None:
            return ClusterRun(cluster.name, None, error=no_runner(cluster.name, fleet.path))
        if on_event is not None:
            on_event(cluster.name, f"starting on {kind}")
        try:
            done = check_on_cluster(
                request,
                cluster,
                services,
                on_run=(lambda line: on_event(cluster.name, line)) if on_event is not None else None,
            )
        except BuilderError as exc:
            if on_event is not None:
                skipped = isinstance(exc, ChecksIncompleteError)
                on_event(cluster.name, f"{'skipped' if skipped else 'error'}: {exc.message}")
            return ClusterRun(cluster.name, kind, error=exc)
        if on_event is not None:
            where = done.result.placement
            on_event(cluster.name, f"{'passed' if done.passed else 'failed'} on node {where.node or '?'}")
        return ClusterRun(cluster.name, kind, check=done)

    with ThreadPoolExecutor(max_workers=max(1, len(fleet.clusters)), thread_name_prefix="cluster") as pool:
        runs = tuple(pool.map(one, fleet.clusters))
    return FleetRun(fleet.name, image.reference, runs)


class KubernetesJobsDocument(TypedDict):
    """``builder check REF --cluster NAME --manifest --json``: the ``batch/v1`` Jobs (Kubernetes objects) that
    run the check's steps on a ``kubernetes`` cluster, in order, for the pinned ``reference``; ``stdin``: the
    step whose container reads the probe from standard input (``kubectl attach -i``); ``evidence_skipped``:
    the tests, benchmark and collective the variant declares, which these Jobs do not run, each with why."""

    cluster: str
    reference: str
    stdin: str
    jobs: list[dict[str, Any]]
    evidence_skipped: list[SkippedDocument]


@dataclasses.dataclass(frozen=True)
class KubernetesJobs:
    """The Jobs of one check on a Kubernetes cluster (see :class:`KubernetesJobsDocument`)."""

    cluster: str
    reference: str
    jobs: tuple[dict[str, Any], ...]
    stdin: str
    skipped: tuple[SkippedCheck, ...] = ()

    def to_json(self) -> KubernetesJobsDocument:
        return {
            "cluster": self.cluster,
            "reference": self.reference,
            "stdin": self.stdin,
            "jobs": list(self.jobs),
            "evidence_skipped": [s.to_json() for s in self.skipped],
        }

    def to_yaml(self) -> str:
        """The Jobs as one YAML stream (``kubectl apply -f -`` reads it)."""
        import io

        from ruamel.yaml import YAML

        out = io.StringIO()
        yaml = YAML(typ="safe", pure=True)
        yaml.default_flow_style = False
        yaml.dump_all(list(self.jobs), out)
        return out.getvalue()

    def failure(self) -> None:
        return None


def kubernetes_jobs(request: CheckRequest, cluster: Cluster, services: CheckServices) -> KubernetesJobs:
    """The Jobs that would run ``request``'s check on the ``kubernetes`` cluster ``cluster``: for an NVIDIA
    image ``nvidia-smi`` first, then the probe (streamed in on standard input), each a
    :func:`builder.checks.runners.kubernetes.job_manifest` of the probed platform manifest. Raises ConfigError
    when the cluster's runner is not ``kubernetes``; registry errors."""
    from builder.checks.device import PYTHON_SHIM, mode_for
    from builder.checks.runners.kubernetes import job_manifest

    if cluster.runner is None or cluster.runner.kind != "kubernetes":
        kind = cluster.runner.kind if cluster.runner else "no runner"
        raise ConfigError(
            f"--manifest renders Kubernetes Jobs, but cluster {cluster.name} runs checks with {kind}",
            hint="leave out --manifest to run the check there, or name a cluster with `runner: {kind: kubernetes}`",
        )
    image = _pin(request, services)
    facts, run_ref = image.facts, image.run_reference
    mode = mode_for(facts, None, request.mode)  # the image decides; no host is known here
    vendor = {"nvidia": "nvidia", "amd": "amd"}.get(mode)
    steps: list[tuple[str, list[str], bool]] = []
    if mode == "nvidia":
        steps.append(("nvidia-smi", ["nvidia-smi"], False))
    probe = ["sh", "-c", PYTHON_SHIM, "sh", "--mode", mode, "--framework", request.framework]
    steps.append(("probe", probe, True))
    jobs = tuple(
        job_manifest(
            cluster=cluster.name,
            settings=cluster.runner,
            vendor=vendor,
            gpu_names=cluster.gpus,
            image=run_ref,
            command=command,
            step=step,
            stdin=stdin,
            timeout=request.timeout,
            shm_size=request.shm_size,
        )
        for step, command, stdin in steps
    )
    # the variant's declared checks are not rendered (yet): named, never left out silently
    why = "the rendered Jobs run the probe only; run the declared checks with a slurm/docker/podman runner"
    declared = declared_checks(services.matrices, facts.variant) if facts.variant else ()
    skipped = tuple(SkippedCheck(c.kind, why) for c in declared)
    return KubernetesJobs(cluster.name, image.reference, jobs, stdin="probe", skipped=skipped)


def _pin(request: CheckRequest, services: CheckServices) -> PinnedImage:
    return pin_image(
        request.reference,
        registries=services.registries,
        default_registry=services.default_registry,
        matrices=services.matrices,
        platform=request.platform,
    )


def check_clusters(
    request: CheckRequest,
    services: CheckServices,
    *,
    cluster: str | None,
    fleet_file: Path | None,
    fleets_dir: Path,
    on_event: Callable[[str, str], None] | None = None,
    manifest: bool = False,
) -> DeviceCheck | FleetRun | KubernetesJobs:
    """``builder check REF --cluster NAME [--fleet F]`` (one cluster: a :class:`DeviceCheck` with its
    placement) or ``builder check REF --fleet F`` (every cluster, :func:`check_on_fleet`). Without
    ``fleet_file`` the cluster is looked up in every fleet of ``fleets_dir``. Raises NotFoundError (no such
    cluster), ConfigError (an invalid fleet file), IncompatibleError (a GPU
    image of the other vendor than the cluster's), RunnerError, ChecksIncompleteError (a Kubernetes cluster, or one
    without ``runner:``: :func:`no_runner`). ``manifest``:
    the cluster's Kubernetes Jobs instead (:func:`kubernetes_jobs`), nothing runs."""
    from builder.checks.host.reading import load_host
    from builder.compat.fleets import find_cluster, load_fleet, load_fleets

    fleets = (
        (load_fleet(fleet_file, load_host=load_host),) if fleet_file else load_fleets(fleets_dir, load_host=load_host)
    )
    if cluster is None:
        assert len(fleets) == 1, "check_clusters needs a cluster or a fleet file"
        return check_on_fleet(request, fleets[0], services, on_event=on_event)
    home, found = find_cluster(fleets, cluster)
    if manifest:
        return kubernetes_jobs(request, found, services)
    from builder.compat.fleet_verdicts import image_vendor

    image = _pin(request, services)
    vendor = image_vendor(image.facts.accelerator)
    if vendor not in ("none", found.vendor):
        raise IncompatibleError(
            f"{image.reference} is built for {vendor} GPUs; cluster {found.name} has {found.vendor} GPUs",
            hint="check it on a cluster of its vendor, or pick the variant built for this one",
            cluster=found.name,
        )
    if found.runner is None:
        raise no_runner(found.name, home.path)
    on_run = (lambda line: on_event(found.name, line)) if on_event is not None else None
    return check_on_cluster(dataclasses.replace(request, reference=image.reference), found, services, on_run=on_run)


#: ``builder check --json``: a static verdict, a device check (here or on one cluster), a fleet's checks, or
#: the Kubernetes Jobs of a check (``--manifest``)
CheckCommandDocument = (
    StaticHostDocument | StaticFleetDocument | DeviceRunDocument | FleetRunDocument | KubernetesJobsDocument
)


__all__ = [
    "CheckCommandDocument",
    "CheckServices",
    "ClusterRowDocument",
    "ClusterRun",
    "FleetRun",
    "FleetRunDocument",
    "KubernetesJobs",
    "KubernetesJobsDocument",
    "check_clusters",
    "check_on_cluster",
    "check_on_fleet",
    "kubernetes_jobs",
]
