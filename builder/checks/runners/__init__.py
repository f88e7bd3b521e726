"""Check runners: where a device check's containers run, behind one interface.

A fleet cluster's ``runner:`` (:class:`builder.compat.fleet_model.RunnerSettings`) names its kind;
:func:`open_session` opens a :class:`RunnerSession` for it:

* ``docker`` / ``podman`` (:mod:`.engines`): the engine's CLI on this host, or at ``host``
  (``ssh://user@gpu-01``, ``tcp://...``).
* ``slurm`` (:mod:`.slurm`): one job per check (``sbatch``), each container started by ``srun`` inside
  that job, with the engine on the allocated node.
* ``kubernetes`` (:mod:`.kubernetes`): one Job per check; no cluster is reachable from here, so the
  session refuses to run and :func:`builder.checks.runners.kubernetes.job_manifest` renders the Job
  (docs/kubernetes.md gives the run path).

A session runs containers (the ``runner`` callable :func:`builder.checks.device.run_device_check`
takes), describes the node it runs on (:meth:`RunnerSession.host`) and says where the check ran
(:class:`Placement`: cluster, runner kind, node, job id), which the signed ``device-check/v1``
predicate carries.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Protocol

from typing_extensions import TypedDict, Unpack

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from contextlib import AbstractContextManager

    from builder.checks.host.model import HostInfo
    from builder.compat.fleet_model import RunnerSettings
    from builder.engine import ContainerOptions, ContainerResult


class PlacementDocument(TypedDict):
    """Where a check ran: the fleet ``cluster`` (null: this host, no cluster named), the ``runner`` kind
    (``docker``, ``podman``, ``slurm``, ``kubernetes``), the ``node`` (host name) and the scheduler's
    ``job_id`` (null for an engine without a scheduler)."""

    cluster: str | None
    runner: str
    node: str | None
    job_id: str | None


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a check ran (see :class:`PlacementDocument`)."""

    cluster: str | None
    runner: str
    node: str | None = None
    job_id: str | None = None

    def to_json(self) -> PlacementDocument:
        return {"cluster": self.cluster, "runner": self.runner, "node": self.node, "job_id": self.job_id}


class RunnerSession(Protocol):
    """One check's use of a cluster: containers run, the node described, the placement known afterwards."""

    def run_container(self, image: str, argv: Sequence[str], **options: Unpack[ContainerOptions]) -> ContainerResult:
        """Run one fresh container (``docker run --rm -i`` semantics, ``options``:
        :class:`builder.engine.ContainerOptions`); a failing container is a result."""
        ...

    def host(self) -> HostInfo:
        """The facts of the node the containers run on (engine, GPUs, driver where its tools say them)."""
        ...

    def placement(self) -> Placement:
        """Where the containers ran (after :meth:`run_container`: the node and job id are known)."""
        ...

    def node_tools(self) -> Callable[[Sequence[str]], tuple[int, str]] | None:
        """How to run a tool on the node itself, outside any container (``nvidia-smi topo -m``, ``dcgmi diag``):
        a call returning the exit code and the output (127: not installed there); None when builder cannot
        run commands on the node (a remote engine)."""
        ...

    def cpu_model(self) -> str | None:
        """The CPU model of the node the containers run on (``/proc/cpuinfo`` there; None: not known), which a
        benchmark's hardware class records."""
        ...


def open_session(
    cluster: str | None, settings: RunnerSettings, *, gpus: bool = True
) -> AbstractContextManager[RunnerSession]:
    """A session on ``cluster`` through ``settings.kind`` (``gpus``: the check needs GPUs, so a Slurm job asks
    for the cluster's ``gres``); leaving the context releases what it holds (the
    Slurm job is cancelled). Raises RunnerError when the runner cannot start (no ``sbatch``, the job refused),
    ChecksIncompleteError for a Kubernetes cluster (builder renders its Jobs, it does not reach it)."""
    if settings.kind == "slurm":
        from builder.checks.runners.slurm import slurm_session

        return slurm_session(cluster, settings, gpus=gpus)
    if settings.kind == "kubernetes":
        from builder.checks.runners.kubernetes import kubernetes_session

        return kubernetes_session(cluster, settings)
    from builder.checks.runners.engines import engine_session

    return engine_session(cluster, settings)


__all__ = ["Placement", "PlacementDocument", "RunnerSession", "open_session"]
