"""Topology (nvidia-smi topo -m, rocm-smi --showtopo) and nccl-tests parsers on real recorded outputs
(tests/data/topology, tests/data/nccl-tests: each file's first line names its public source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.checks.nccl_tests import parse_nccl_tests
from builder.checks.topology import (
    parse_nvidia_pcie,
    parse_nvidia_topo,
    parse_nvlink_status,
    parse_rocm_topo,
    probe_topology,
)

DATA = Path(__file__).resolve().parents[2] / "data"


def _read(kind: str, name: str) -> str:
    text = (DATA / kind / name).read_text()
    assert text.startswith("# Source: "), "every recording names its public source"
    return text


def test_nvswitch_8_gpu_every_pair_on_18_nvlinks() -> None:
    t = parse_nvidia_topo(_read("topology", "nvidia-smi-topo-01-h100-nvswitch.txt"))
    assert t.fabric == "nvlink-all"
    assert [g.index for g in t.gpus] == list(range(8))
    assert len(t.links) == 28 and {x.links for x in t.links} == {18}
    assert t.gpus[0].cpu_affinity == "0-47,96-143" and t.gpus[7].cpu_affinity == "48-95,144-191"
    assert t.numa_nodes == ("0", "1") and t.gpus[3].gpu_numa_id is None
    assert not t.notes


def test_pcie_only_8_gpu_nic_columns_and_rows_are_not_gpu_links() -> None:
    t = parse_nvidia_topo(_read("topology", "nvidia-smi-topo-02-4090-pcie.txt"))
    assert t.fabric == "pcie"
    assert len(t.gpus) == 8 and {x.code for x in t.links} == {"SYS"}
    assert t.gpus[6].numa_affinity == "1" and t.gpus[6].cpu_affinity == "56-111,168-223"


def test_mixed_numa_placement_links_by_pair() -> None:
    t = parse_nvidia_topo(_read("topology", "nvidia-smi-topo-03-mixed-pcie-numa.txt"))
    assert t.fabric == "pcie"
    link = t.link(2, 1)
    assert link is not None and link.code == "PHB"
    assert t.link(0, 4).code == "SYS"  # type: ignore[union-attr]
    assert t.link(1, 3).code == "NODE"  # type: ignore[union-attr]
    assert t.gpus[0].numa_affinity == "1" and t.gpus[1].numa_affinity == "0"


def test_4_gpu_nvlink_with_nics_and_scattered_numa() -> None:
    t = parse_nvidia_topo(_read("topology", "nvidia-smi-topo-06-h100x4-nv6-nics.txt"))
    assert t.fabric == "nvlink-all" and {x.links for x in t.links} == {6}
    assert t.numa_nodes == ("3", "1", "7", "5")
    assert t.gpus[2].cpu_affinity == "7,15,23,31"


def test_old_driver_and_tab_separated_without_numa_column() -> None:
    t = parse_nvidia_topo(_read("topology", "nvidia-smi-topo-07-pcie-switches-tabs.txt"))
    assert len(t.gpus) == 8 and t.gpus[4].cpu_affinity == "14-27" and t.gpus[4].numa_affinity is None
    assert t.link(0, 1).code == "PIX" and t.link(0, 2).code == "PXB"  # type: ignore[union-attr]
    cut = parse_nvidia_topo(_read("topology", "nvidia-smi-topo-04-pcie-switches-old-driver.txt"))
    assert len(cut.gpus) == 5 and any("no row" in n for n in cut.notes)


def test_h200_recording_with_ansi_header_is_one_gpu() -> None:
    t = parse_nvidia_topo(_read("topology", "nvidia-smi-topo-05-h200-single.txt"))
    assert t.fabric == "single" and t.gpus[0].cpu_affinity == "0-15" and t.gpus[0].numa_affinity == "0"


def test_rocm_showtopo_weights_hops_and_link_types() -> None:
    t = parse_rocm_topo(_read("topology", "rocm-smi-showtopo-01-pcie-4gpu.txt"))
    assert t.fabric == "pcie" and len(t.links) == 6
    assert {(x.weight, x.hops, x.code) for x in t.links} == {(52, 3, "PCIE")}
    numa = parse_rocm_topo(_read("topology", "rocm-smi-showtoponuma-02-8gpu.txt"))
    assert numa.fabric == "unknown" and numa.numa_nodes == ("0", "1") and numa.notes


def test_rocm_showtopo_all_xgmi_8_gpu_with_a_warning_line() -> None:
    t = parse_rocm_topo(_read("topology", "rocm-smi-showtopo-03-xgmi-8gpu-warning.txt"))
    assert t.fabric == "xgmi-all" and len(t.links) == 28 and not t.notes
    assert {(x.weight, x.hops, x.kind) for x in t.links} == {(15, 1, "xgmi")}
    assert t.numa_nodes == ("0", "1") and t.gpus[3].numa_affinity == "0" and t.gpus[4].numa_affinity == "1"


def test_rocm_showtopo_older_gpu_n_numa_lines() -> None:
    t = parse_rocm_topo(_read("topology", "rocm-smi-showtopo-04-mi210-xgmi-4gpu.txt"))
    assert t.fabric == "xgmi-all" and len(t.links) == 6
    assert [g.numa_affinity for g in t.gpus] == ["0", "1", "2", "3"]  # "GPU 0   : (Topology) ..." lines


def test_nvlink_mesh_with_sys_between_quads_is_partial_nvlink() -> None:
    t = parse_nvidia_topo(_read("topology", "nvidia-smi-topo-08-nvlink-mesh-and-sys.txt"))
    assert t.fabric == "nvlink-partial" and len(t.gpus) == 8 and len(t.links) == 28
    assert t.link(0, 1).links == 2 and t.link(0, 3).links == 1  # type: ignore[union-attr]
    assert t.link(0, 5).kind == "pcie" and t.link(0, 5).code == "SYS"  # type: ignore[union-attr]
    assert sum(1 for x in t.links if x.kind == "nvlink") == 16  # 4 links per GPU: a hybrid cube mesh
    assert t.gpus[4].cpu_affinity == "24-47,72-95" and t.gpus[4].numa_affinity is None


def test_nvlink_bridged_pairs_with_sys_between_them() -> None:
    t = parse_nvidia_topo(_read("topology", "nvidia-smi-topo-09-a30x4-nv4-pairs-sys.txt"))
    assert t.fabric == "nvlink-partial" and len(t.gpus) == 4 and not t.notes
    assert [(x.a, x.b, x.code) for x in t.links if x.kind == "nvlink"] == [(0, 1, "NV4"), (2, 3, "NV4")]
    assert {x.code for x in t.links if x.kind == "pcie"} == {"SYS"}
    assert t.numa_nodes == ("0", "1") and t.gpus[2].cpu_affinity == "24-47,72-95"


def test_junk_is_notes_not_a_crash() -> None:
    t = parse_nvidia_topo("Failed to initialize NVML: Driver/library version mismatch\n")
    assert t.fabric == "none" and t.notes
    assert parse_nccl_tests("segfault\n").notes == ("no result rows",)


def test_pcie_generation_and_width_from_nvidia_smi_q() -> None:
    [pcie] = parse_nvidia_pcie((DATA / "h200" / "nvidia-smi-q.txt").read_text())
    assert (pcie.bus_id, pcie.gen_current, pcie.gen_max, pcie.width_current, pcie.width_max) == (
        "00000000:00:06.0",
        5,
        5,
        16,
        16,
    )


def test_nvlink_states_active_and_inactive() -> None:
    gb200 = parse_nvlink_status(_read("topology", "nvidia-smi-nvlink-s-01-gb200.txt"))
    first = gb200[0]
    assert (first.gpu, first.name, first.active, first.inactive, first.gbps_per_link) == (
        0,
        "NVIDIA GB200",
        18,
        0,
        53.125,
    )
    assert len(gb200) == 2 and gb200[1].active == 2  # the reporter cut GPU 1 short
    [v100] = parse_nvlink_status(_read("topology", "nvidia-smi-nvlink-s-02-v100-inactive.txt"))
    assert (v100.gpu, v100.active, v100.inactive, v100.gbps_per_link) == (3, 4, 2, 25.781)


def test_probe_topology_adds_pcie_and_nvlink_from_their_tools() -> None:
    outputs = {
        "nvidia-smi topo -m": (0, _read("topology", "nvidia-smi-topo-05-h200-single.txt")),
        "nvidia-smi -q": (0, (DATA / "h200" / "nvidia-smi-q.txt").read_text()),
        "nvidia-smi nvlink -s": (6, ""),  # no NVLink on this GPU: the tool exits non-zero
    }
    t = probe_topology("nvidia", run=lambda argv: outputs[" ".join(argv)])
    assert t.fabric == "single" and t.pcie[0].gen_current == 5 and t.nvlink == ()
    assert t.to_json()["pcie"][0]["width_max"] == 16


def test_probe_topology_runs_the_vendor_tool_and_reports_failure() -> None:
    seen: list[list[str]] = []

    def run(argv: object) -> tuple[int, str]:
        seen.append(list(argv))  # type: ignore[call-overload]
        return 9, ""

    t = probe_topology("nvidia", run=run)
    assert seen == [["nvidia-smi", "topo", "-m"]] and t.notes == ("nvidia-smi topo -m exited with 9",)
    assert probe_topology("none", run=run).fabric == "none" and len(seen) == 1


@pytest.mark.parametrize(
    ("name", "rows", "avg", "peak", "in_place"),
    [
        ("all-reduce-01-4090-pcie-tree.txt", 1, None, 0.0, None),
        ("all-reduce-02-2gpu-tail.txt", 1, 8.62002, 25.86, 25.88),
        ("all-reduce-03-p5-mpirun-prefix.txt", 3, None, 0.0, 0.0),
        ("all-reduce-04-rows-no-summary.txt", 10, None, 0.18, 0.0),
    ],
)
def test_nccl_tests_tables(name: str, rows: int, avg: float | None, peak: float, in_place: float | None) -> None:
    r = parse_nccl_tests(_read("nccl-tests", name))
    assert len(r.rows) == rows and r.avg_busbw_gbps == avg and r.peak_busbw_gbps == peak
    assert r.rows[0].in_place_busbw_gbps == in_place and r.ok


def test_nccl_tests_row_fields_and_interleaved_log_lines() -> None:
    r = parse_nccl_tests(_read("nccl-tests", "all-reduce-02-2gpu-tail.txt"))
    row = r.rows[0]
    assert (row.size_bytes, row.count, row.type, row.redop) == (134217728, 33554432, "float", "sum")
    assert (row.time_us, row.algbw_gbps, row.busbw_gbps, row.wrong) == (5190.8, 25.86, 25.86, 0)
    assert r.out_of_bounds == 0


def test_nccl_tests_old_header_without_root_and_wrong_values() -> None:
    head = _read("nccl-tests", "all-reduce-05-old-format-no-root.txt")
    assert parse_nccl_tests(head).rows == ()
    # the old layout (no root column): a row as that header lays it out, with 3 wrong values
    r = parse_nccl_tests(head + "  1310720000  327680000     float     sum   51234.5   25.58   25.58      3\n")
    assert len(r.rows) == 1 and r.rows[0].busbw_gbps == 25.58 and r.rows[0].wrong == 3 and not r.ok
