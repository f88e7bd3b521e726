"""GPU-GPU link bandwidth: what an all-reduce's bus bandwidth (busbw) is compared with.

Facts: ``data/nvlink.csv`` (NVLink generation, links per GPU and GB/s per link per direction for each
compute capability, with NVIDIA's whitepapers as sources). busbw of an all-reduce approaches the
bandwidth one GPU can send on its links (nccl-tests PERFORMANCE.md: "busbw ... should reflect the
speed of the hardware bottleneck", https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md),
so the expected value is the per-GPU NVLink bandwidth in one direction: the links a GPU uses to reach
its peers (all of them through NVSwitch, where ``nvidia-smi topo -m`` shows the same NV# for every
pair) times the per-link bandwidth.

Over PCIe (some peer reached without NVLink: ``PIX``/``PXB``/``PHB``/``NODE``/``SYS``) a ring all-reduce
crosses every GPU's PCIe link, so busbw is bounded by the slowest of them: its generation's bandwidth
per lane in one direction (``data/pcie.csv``, PCI-SIG's table) times its width. A path across a host
bridge (``PHB``/``NODE``) or between sockets (``SYS``) adds links whose speed ``nvidia-smi`` does not
report (the CPU's root complex, UPI/Infinity Fabric); they are assumed no slower than the GPUs' own
links, so the expected value is an upper bound and the recorded ratio says how far below it the
host ran.
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


@dataclasses.dataclass(frozen=True)
class PcieRow:
    generation: int
    gt_per_s: float
    encoding: str
    gbps_per_lane: float  # one direction


@functools.cache
def pcie_rows() -> tuple[PcieRow, ...]:
    _, rows = read_table("pcie.csv")
    return tuple(
        PcieRow(int(r["generation"]), float(r["gt_per_s"]), r["encoding"], float(r["gbps_per_lane_per_direction"]))
        for r in rows
    )


def pcie_gbps(generation: int | None, width: int | None) -> float | None:
    """One direction's bandwidth in GB/s of a PCIe link of ``generation`` (1-6) and ``width`` (lanes);
    None when either is unknown or the generation is not in ``data/pcie.csv``."""
    if generation is None or width is None or width <= 0:
        return None
    row = next((r for r in pcie_rows() if r.generation == generation), None)
    return None if row is None else row.gbps_per_lane * width


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


def expected_allreduce_gbps(
    gpu_name: str | None,
    nvlinks_to_peers: Sequence[int],
    pcie_links: Sequence[tuple[int | None, int | None]] = (),
    pcie_paths: Sequence[str] = (),
) -> ExpectedBandwidth:
    """The per-GPU link bandwidth (GB/s, one direction) an all-reduce's busbw compares with, for a GPU of
    ``gpu_name`` whose NVLink counts to each peer are ``nvlinks_to_peers`` (NV# of ``nvidia-smi topo
    -m``, 0 for a PCIe path). NVSwitch (every peer shows the GPU's full link count): that count; point
    to point: the sum over peers, at most the GPU's links. Some peer over PCIe only: the slowest of
    ``pcie_links`` (each GPU's PCIe ``(generation, width)``; ``nvidia-smi -q`` "Max": "the maximum PCI-E
    link generation possible with this GPU and system configuration",
    https://docs.nvidia.com/deploy/nvidia-smi/index.html; an idle GPU's "Current" drops to save power),
    ``pcie_paths`` (the topology codes of those paths) only named in ``link``. ``gbps`` None with the
    reason in ``link``: one GPU, an unknown GPU, AMD XGMI (no bandwidth table yet), PCIe generation or
    width not recorded."""
    if not nvlinks_to_peers:
        return ExpectedBandwidth(None, "fewer than 2 GPUs: no GPU-GPU link (the collective check needs >= 2 GPUs)")
    if any(p.upper() == "XGMI" for p in pcie_paths):
        return ExpectedBandwidth(None, "AMD XGMI links: no XGMI bandwidth facts in builder/compat/data yet")
    if min(nvlinks_to_peers) == 0:
        return _pcie_expected(pcie_links, pcie_paths)
    row = nvlink_of(gpu_name) if gpu_name else None
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


def _pcie_expected(links: Sequence[tuple[int | None, int | None]], paths: Sequence[str]) -> ExpectedBandwidth:
    via = "/".join(dict.fromkeys(p for p in paths if p)) or "PCIe"
    known = [(g, w, pcie_gbps(g, w)) for g, w in links]
    if not known or any(b is None for _, _, b in known):
        why = "not recorded" if not known else "unknown for a GPU"
        return ExpectedBandwidth(None, f"a peer is reached over PCIe only ({via}); PCIe generation and width {why}")
    gen, width, gbps = min(known, key=lambda k: k[2] or 0.0)
    slowest = "the" if len(known) == 1 else f"the slowest of {len(known)} GPUs'"
    return ExpectedBandwidth(
        round(gbps or 0.0, 3),
        f"PCIe ({via}): {slowest} link Gen{gen} x{width} = {gbps:.3g} GB/s per direction",
    )


__all__ = [
    "ExpectedBandwidth",
    "NvlinkRow",
    "PcieRow",
    "expected_allreduce_gbps",
    "nvlink_of",
    "nvlink_rows",
    "pcie_gbps",
    "pcie_rows",
]
