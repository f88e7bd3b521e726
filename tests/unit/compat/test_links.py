"""The link bandwidth an all-reduce's busbw is compared with (builder/compat/data/nvlink.csv), for the
topologies of the recorded ``nvidia-smi topo -m`` outputs (tests/data/topology)."""

from __future__ import annotations

from pathlib import Path

from builder.checks.topology import parse_nvidia_topo
from builder.compat.links import expected_allreduce_gbps, nvlink_of, nvlink_rows, pcie_gbps, pcie_rows

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


def _paths_of_gpu0(name: str) -> list[str]:
    t = parse_nvidia_topo((DATA / name).read_text())
    return [x.code for x in t.links if 0 in (x.a, x.b) and x.kind != "nvlink"]


def test_pcie_rows_follow_pci_sig_rates_and_encodings() -> None:
    # x16 per direction: Gen3 ~15.75, Gen4 ~31.5, Gen5 ~63 GB/s (PCI-SIG: 32/64/128 GB/s both directions, raw)
    by_gen = {r.generation: r for r in pcie_rows()}
    for gen, row in by_gen.items():
        efficiency = 0.8 if row.encoding == "8b/10b" else (128 / 130 if row.encoding == "128b/130b" else 1.0)
        assert abs(row.gbps_per_lane - row.gt_per_s * efficiency / 8) < 1e-5, gen
    assert round(pcie_gbps(4, 16) or 0, 2) == 31.51 and round(pcie_gbps(5, 16) or 0, 2) == 63.02
    assert pcie_gbps(3, 16) == by_gen[3].gbps_per_lane * 16 and pcie_gbps(9, 16) is None
    assert pcie_gbps(None, 16) is None and pcie_gbps(4, None) is None and pcie_gbps(4, 0) is None


def test_pcie_only_host_expects_the_slowest_gpu_link() -> None:
    name = "nvidia-smi-topo-02-4090-pcie.txt"
    peers, paths = _peers_of_gpu0(name), _paths_of_gpu0(name)
    e = expected_allreduce_gbps("NVIDIA GeForce RTX 4090", peers, [(4, 16)] * 8, paths)
    assert e.gbps == round(pcie_gbps(4, 16) or 0, 3) and "PCIe (SYS)" in e.link and "Gen4 x16" in e.link
    slow = expected_allreduce_gbps("NVIDIA GeForce RTX 4090", peers, [(4, 16)] * 7 + [(4, 8)], paths)
    assert slow.gbps == round(pcie_gbps(4, 8) or 0, 3) and "slowest of 8 GPUs' link Gen4 x8" in slow.link
    mixed = _paths_of_gpu0("nvidia-smi-topo-03-mixed-pcie-numa.txt")
    assert "SYS" in expected_allreduce_gbps(None, [0] * 4, [(3, 16)] * 5, mixed).link


def test_nvlink_mesh_with_a_pcie_peer_is_bounded_by_pcie() -> None:
    name = "nvidia-smi-topo-08-nvlink-mesh-and-sys.txt"
    peers = _peers_of_gpu0(name)
    assert sorted(peers) == [0, 0, 0, 1, 1, 2, 2]
    e = expected_allreduce_gbps("Tesla V100-SXM2-16GB", peers, [(3, 16)] * 8, _paths_of_gpu0(name))
    assert e.gbps == round(pcie_gbps(3, 16) or 0, 3) and e.link.startswith("PCIe (SYS)")


def test_nvlink_bridged_pairs_are_bounded_by_pcie_between_the_pairs() -> None:
    # 4x A30 (GA100, PCIe Gen4 x16 cards): NV4 to the partner, SYS to the other pair's GPUs
    name = "nvidia-smi-topo-09-a30x4-nv4-pairs-sys.txt"
    peers, paths = _peers_of_gpu0(name), _paths_of_gpu0(name)
    assert sorted(peers) == [0, 0, 4] and paths == ["SYS", "SYS"]
    e = expected_allreduce_gbps("NVIDIA A30", peers, [(4, 16)] * 4, paths)
    assert e.gbps == round(pcie_gbps(4, 16) or 0, 3) and e.link.startswith("PCIe (SYS)")
    pair = expected_allreduce_gbps("NVIDIA A30", [4])  # the two bridged GPUs alone: 4 NVLink 3 links
    # NVIDIA A30 datasheet: "Third-generation NVLink 200GB/s" (https://www.nvidia.com/en-us/data-center/products/a30-gpu/)
    assert pair.gbps == 100 and "4 NVLink 3 links" in pair.link


def test_pcie_without_recorded_generation_and_single_gpu_have_no_expected_bandwidth() -> None:
    pcie = expected_allreduce_gbps("NVIDIA GeForce RTX 4090", _peers_of_gpu0("nvidia-smi-topo-02-4090-pcie.txt"))
    assert pcie.gbps is None and "PCIe only" in pcie.link and "not recorded" in pcie.link
    partial = expected_allreduce_gbps(None, [0, 0], [(4, 16), (None, 16), (4, 16)], ["PHB"])
    assert partial.gbps is None and "unknown for a GPU" in partial.link
    single = expected_allreduce_gbps("NVIDIA H200", _peers_of_gpu0("nvidia-smi-topo-05-h200-single.txt"))
    assert single.gbps is None and "needs >= 2 GPUs" in single.link
    assert expected_allreduce_gbps("NVIDIA GeForce RTX 3090", [4]).gbps == 4 * 14.0625


def test_xgmi_is_not_mistaken_for_pcie() -> None:
    e = expected_allreduce_gbps("AMD Instinct MI300X", [0] * 7, [], ["XGMI"] * 7)
    assert e.gbps is None and "XGMI" in e.link
