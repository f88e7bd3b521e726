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
from typing import Literal, Protocol


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
    """One (driver, GPU) combination of a cluster: what :func:`check_compat` is asked about."""

    driver: str | None
    gpu: str | None
    brand: str | None = None
    driver_cuda: str | None = None
    compute_capability: str | None = None
    source: str = "inline"

    @property
    def label(self) -> str:
        return f"driver {self.driver or 'unknown'}, {self.gpu or 'unknown GPU'}"


@dataclasses.dataclass(frozen=True)
class Cluster:
    """A cluster of a fleet. ``configs``: every (driver, GPU) combination its hosts run (inline: the cross
    product of ``drivers`` x ``gpus``; ``hostinfo``: one per host and GPU model)."""

    name: str
    vendor: Literal["nvidia", "amd"]
    gpus: tuple[str, ...]
    drivers: tuple[str, ...]
    brand: str | None
    cuda: str | None
    rocm: tuple[str, ...]
    nodes: int | None
    configs: tuple[HostConfig, ...]
    sources: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Fleet:
    name: str
    path: str
    clusters: tuple[Cluster, ...]
    description: str | None = None

    def cluster(self, name: str) -> Cluster | None:
        return next((c for c in self.clusters if c.name == name), None)
