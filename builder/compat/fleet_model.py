"""Fleet values: clusters, their (driver, GPU) host configurations, and what a saved host must say.

Frozen dataclasses built by :mod:`builder.compat.fleets` (the loader) and checked by
:mod:`builder.compat.fleet_verdicts`. :class:`HostFacts` / :class:`GpuFacts` are protocols: the host
descriptions come from a loader the caller injects (``builder.checks.host.load_host``), so compat never
imports ``builder.checks``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from builder.models import GpuVendor


class GpuFacts(Protocol):
    """What a fleet needs to know about one GPU of a saved host (``builder.checks.host.HostGpu`` has it).
    ``brand_source``: ``"name"`` when the brand was derived from the GPU name, not reported by the tool."""

    @property
    def name(self) -> str | None: ...
    @property
    def brand(self) -> str | None: ...
    @property
    def brand_source(self) -> str | None: ...
    @property
    def compute_capability(self) -> str | None: ...
    @property
    def gfx_target(self) -> str | None: ...


class HostFacts(Protocol):
    """What a fleet needs to know about a saved host (``builder.checks.host.HostInfo`` has it): the vendor
    (``nvidia`` | ``amd`` | ``none``), driver version, the CUDA line the driver supports, the ROCm release
    and the GPUs."""

    @property
    def vendor(self) -> str: ...
    @property
    def driver_version(self) -> str | None: ...
    @property
    def cuda_version(self) -> str | None: ...
    @property
    def rocm_version(self) -> str | None: ...
    @property
    def gpus(self) -> Sequence[GpuFacts]: ...


#: Reads one ``hostinfo:`` file (raw tool output or hostinfo JSON). Raises a BuilderError naming the file
#: when it cannot be read or holds no host description.
HostLoader = Callable[[Path], HostFacts]


@dataclasses.dataclass(frozen=True)
class HostConfig:
    """One (driver, GPU) combination of a cluster: what :func:`check_compat` is asked about.

    ``driver``: for ``vendor`` ``nvidia`` the NVIDIA driver version (``550.144.03``); for ``amd`` the
    ROCm release of the host's amdgpu driver (``6.3``: what ROCm's compatibility matrix is keyed by,
    https://rocm.docs.amd.com/en/latest/compatibility/compatibility-matrix.html), never the amdgpu
    kernel driver's own version (``6.10.5``)."""

    driver: str | None
    gpu: str | None
    brand: str | None = None
    driver_cuda: str | None = None
    compute_capability: str | None = None
    source: str = "inline"
    vendor: str = "nvidia"

    @property
    def label(self) -> str:
        """``driver 550.144.03, NVIDIA H100 80GB HBM3`` / ``ROCm 6.3, AMD Instinct MI300X``."""
        if self.vendor == "amd":
            return f"ROCm {self.driver or 'unknown'}, {self.gpu or 'unknown GPU'}"
        return f"driver {self.driver or 'unknown'}, {self.gpu or 'unknown GPU'}"


#: how a cluster runs a check container: the local engine (or ``host``), Podman, Slurm or Kubernetes
RunnerKind = Literal["docker", "podman", "slurm", "kubernetes"]

#: how a Slurm job step starts the container on its node (``launcher:``): the engine there (``docker``,
#: ``podman``) or the site's HPC runtime (``apptainer exec``, enroot through the ``pyxis`` plugin of ``srun``;
#: docs/hpc.md)
SlurmLauncher = Literal["docker", "podman", "apptainer", "pyxis"]


@dataclasses.dataclass(frozen=True)
class RunnerSettings:
    """How checks reach a cluster (``runner:`` of a fleet cluster, docs/fleets.md).

    ``docker`` / ``podman``: the engine's CLI, on this host or at ``host`` (``ssh://user@gpu-01``,
    ``tcp://...``; https://docs.docker.com/engine/security/protection/). ``slurm``: one job (``sbatch``)
    in ``partition`` (``account``, ``qos``, ``time_limit`` in minutes), GPUs as ``gres`` (``gpu:1``,
    ``gpu:h100:8``; https://slurm.schedmd.com/gres.html), the check's steps run with ``srun`` and started
    by ``launcher`` on the node (``docker``, ``podman``, ``apptainer``, ``pyxis``). ``kubernetes``: one
    Job per check in ``namespace`` (``context``: the kubeconfig context), ``gpus`` of the cluster vendor's
    device-plugin resource, ``runtime_class``,
    nodes picked by GPU feature discovery's ``gpu_product`` label and ``node_selector``."""

    kind: RunnerKind
    host: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    gres: str | None = None
    time_limit: int | None = None
    launcher: SlurmLauncher = "docker"
    context: str | None = None
    namespace: str = "default"
    runtime_class: str | None = None
    gpu_product: str | None = None
    node_selector: tuple[tuple[str, str], ...] = ()
    gpus: int = 1


@dataclasses.dataclass(frozen=True)
class Cluster:
    """A cluster of a fleet. ``configs``: every (driver, GPU) combination its hosts run (inline: the cross
    product of ``drivers`` x ``gpus``; ``hostinfo``: one per host and GPU model)."""

    name: str
    vendor: GpuVendor
    gpus: tuple[str, ...]
    drivers: tuple[str, ...]
    brand: str | None
    cuda: str | None
    rocm: tuple[str, ...]
    nodes: int | None
    configs: tuple[HostConfig, ...]
    sources: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    runner: RunnerSettings | None = None


@dataclasses.dataclass(frozen=True)
class Fleet:
    name: str
    path: str
    clusters: tuple[Cluster, ...]
    description: str | None = None

    def cluster(self, name: str) -> Cluster | None:
        return next((c for c in self.clusters if c.name == name), None)
