"""GPU-GPU link bandwidth: what an all-reduce's bus bandwidth (busbw) is compared with.

Facts: ``data/nvlink.csv`` (NVLink generation, links per GPU and GB/s per link per direction for each
compute capability, with NVIDIA's whitepapers as sources). busbw of an all-reduce approaches the
bandwidth one GPU can send on its links (nccl-tests PERFORMANCE.md: "busbw ... should reflect the
speed of the hardware bottleneck", https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md),
so the expected value is the per-GPU NVLink bandwidth in one direction: the links a GPU uses to reach
its peers (all of them through NVSwitch, where ``nvidia-smi topo -m`` shows the same NV# for every
pair) times the per-link bandwidth.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

from builder.compat._data import read_table
from builder.compat.gpus import gpu_info

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class NvlinkRow:
    compute_capability: str
    arch: str
    generation: int
    links_per_gpu: int
    gbps_per_link: float  # one direction


@functools.cache
def nvlink_rows() -> tuple[NvlinkRow, ...]:
    _, rows = read_table("nvlink.csv")
    return tuple(
        NvlinkRow(
            r["compute_capability"],
            r["arch"],
            int(r["nvlink_generation"]),
            int(r["links_per_gpu"]),
            float(r["gbps_per_link_per_direction"]),
        )
        for r in rows
    )


def nvlink_of(gpu_name: str) -> NvlinkRow | None:
    """The NVLink facts of a GPU model as nvidia-smi names it (``NVIDIA H100 80GB HBM3``); None for a GPU
    the tables do not know or whose architecture has no NVLink row."""
    info = gpu_info(gpu_name)
    if info is None or info.vendor != "nvidia":
        return None
    return next((r for r in nvlink_rows() if r.compute_capability == info.target), None)


@dataclasses.dataclass(frozen=True)
class ExpectedBandwidth:
    """``gbps`` (one direction, per GPU; None when not known) and how it was derived (``link``)."""

    gbps: float | None
    link: str


def expected_allreduce_gbps(gpu_name: str | None, nvlinks_to_peers: Sequence[int]) -> ExpectedBandwidth:
    """The per-GPU link bandwidth an all-reduce's busbw compares with, for a GPU of ``gpu_name`` whose
    NVLink counts to each peer are ``nvlinks_to_peers`` (NV# of ``nvidia-smi topo -m``, 0 for a PCIe
    path). NVSwitch (every peer shows the GPU's full link count): that count; point to point: the sum
    over peers, at most the GPU's links. No NVLink to some peer, or an unknown GPU: ``gbps`` None."""
    row = nvlink_of(gpu_name) if gpu_name else None
    if not nvlinks_to_peers:
        return ExpectedBandwidth(None, "one GPU: no link")
    if min(nvlinks_to_peers) == 0:
        return ExpectedBandwidth(None, "a peer is reached over PCIe only (PCIe generation and width not recorded)")
    if row is None:
        return ExpectedBandwidth(None, f"no NVLink facts for {gpu_name or 'an unknown GPU'}")
    peers = len(nvlinks_to_peers)
    if peers > 1 and len(set(nvlinks_to_peers)) == 1 and nvlinks_to_peers[0] >= row.links_per_gpu:
        links = row.links_per_gpu
        how = f"NVSwitch: {links} NVLink {row.generation} links"
    else:
        links = min(sum(nvlinks_to_peers), row.links_per_gpu)
        how = f"{links} NVLink {row.generation} links to {len(nvlinks_to_peers)} peers"
    return ExpectedBandwidth(links * row.gbps_per_link, f"{how} x {row.gbps_per_link:g} GB/s ({row.arch})")


__all__ = ["ExpectedBandwidth", "NvlinkRow", "expected_allreduce_gbps", "nvlink_of", "nvlink_rows"]
