"""The link bandwidth an all-reduce's busbw is compared with (builder/compat/data/nvlink.csv), for the
topologies of the recorded ``nvidia-smi topo -m`` outputs (tests/data/topology)."""

from __future__ import annotations

from pathlib import Path

from builder.checks.topology import parse_nvidia_topo
from builder.compat.links import expected_allreduce_gbps, nvlink_of, nvlink_rows

DATA = Path(__file__).resolve().parents[2] / "data" / "topology"


def _peers_of_gpu0(name: str) -> list[int]:
    t = parse_nvidia_topo((DATA / name).read_text())
    return [x.links or 0 for x in t.links if 0 in (x.a, x.b)]


def test_every_row_is_consistent_with_its_sources() -> None:
    # bidirectional per GPU = links x per-link x 2: P100 160, V100 300, A100 600, H100 900, B200 1800 GB/s
    totals = {r.arch: r.links_per_gpu * r.gbps_per_link * 2 for r in nvlink_rows()}
    assert totals["Pascal GP100"] == 160 and totals["Volta GV100"] == 300 and totals["Ampere GA100"] == 600
    assert totals["Hopper GH100"] == 900 and totals["Blackwell"] == 1800
    assert nvlink_of("NVIDIA H100 80GB HBM3").generation == 4  # type: ignore[union-attr]
    assert nvlink_of("NVIDIA A100-SXM4-40GB").gbps_per_link == 25  # type: ignore[union-attr]
    assert nvlink_of("AMD Instinct MI300X") is None and nvlink_of("no such gpu") is None


def test_nvswitch_h100_expects_18_links() -> None:
    e = expected_allreduce_gbps("NVIDIA H100 80GB HBM3", _peers_of_gpu0("nvidia-smi-topo-01-h100-nvswitch.txt"))
    assert e.gbps == 450 and e.link.startswith("NVSwitch: 18 NVLink 4 links")


def test_point_to_point_mesh_sums_the_links_to_peers() -> None:
    e = expected_allreduce_gbps("NVIDIA H100 80GB HBM3", _peers_of_gpu0("nvidia-smi-topo-06-h100x4-nv6-nics.txt"))
    assert e.gbps == 450 and "18 NVLink 4 links to 3 peers" in e.link


def test_pcie_only_and_single_gpu_have_no_expected_bandwidth() -> None:
    pcie = expected_allreduce_gbps("NVIDIA GeForce RTX 4090", _peers_of_gpu0("nvidia-smi-topo-02-4090-pcie.txt"))
    assert pcie.gbps is None and "PCIe only" in pcie.link
    single = expected_allreduce_gbps("NVIDIA H200", _peers_of_gpu0("nvidia-smi-topo-05-h200-single.txt"))
    assert single.gbps is None and "one GPU" in single.link
    assert expected_allreduce_gbps("NVIDIA GeForce RTX 3090", [4]).gbps == 4 * 14.0625
