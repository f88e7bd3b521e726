"""Fleets: schema, loader (inline and hostinfo pointers to real saved tool output), validation with
locations, and check_fleet on the shipped demo fleet."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder import compat
from builder.checks.host.reading import load_host
from builder.compat.fleets import check_cluster, check_fleet, fleet_from_data, load_fleet
from builder.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
FLEETS = Path(__file__).resolve().parents[2] / "data" / "compat" / "fleets"
DEMO = ROOT / "fleets" / "demo.yaml"


def test_demo_fleet_loads() -> None:
    fleet = load_fleet(DEMO)
    assert fleet.name == "demo"
    names = [c.name for c in fleet.clusters]
    assert names == ["h100-train", "a100-inference", "ws-4090", "mi300x"]
    h100 = fleet.cluster("h100-train")
    assert h100 is not None and h100.vendor == "nvidia" and h100.brand == "nvidia"
    assert h100.drivers == ("550.144.03", "550.127.08")
    assert len(h100.configs) == 2
    a100 = fleet.cluster("a100-inference")
    assert a100 is not None and len(a100.configs) == 4  # 2 drivers x 2 GPU models
    mi = fleet.cluster("mi300x")
    assert mi is not None and mi.vendor == "amd" and mi.rocm == ("6.3",)
    assert [h.driver for h in mi.configs] == ["6.3"]


def test_demo_fleet_against_the_official_1281_image() -> None:
    fleet = load_fleet(DEMO)
    results = {c.name: v for c, v in check_fleet(fleet, require=compat.require_cuda("12.8.1"))}
    assert results["h100-train"].verdict == "forward-compat"
    assert results["a100-inference"].verdict == "ok"
    assert results["ws-4090"].verdict == "blocked"
    assert results["ws-4090"].min_driver == "570.26"
    assert results["mi300x"].verdict == "blocked"  # a CUDA image on an AMD cluster
    assert all(r.startswith("driver ") for r in results["ws-4090"].reasons)


def test_demo_fleet_against_cuda_130_and_rocm() -> None:
    fleet = load_fleet(DEMO)
    results = {c.name: v.verdict for c, v in check_fleet(fleet, cuda="13.0")}
    assert results == {
        "h100-train": "forward-compat",
        "a100-inference": "ok",
        "ws-4090": "blocked",
        "mi300x": "blocked",
    }
    rocm = dict(
        (c.name, v)
        for c, v in check_fleet(fleet, rocm="6.3", image_archs=("gfx90a", "gfx942"), clusters=["mi300x", "h100-train"])
    )
    assert set(rocm) == {"mi300x", "h100-train"}
    assert rocm["mi300x"].verdict == "ok" and rocm["mi300x"].arch_covered is True
    assert rocm["h100-train"].verdict == "blocked"
    no_gfx942 = dict(check_fleet(fleet, rocm="6.3", image_archs=("gfx90a",), clusters=["mi300x"]))
    assert next(iter(no_gfx942.values())).verdict == "blocked"


def test_cluster_detail_keeps_each_configuration() -> None:
    fleet = load_fleet(DEMO)
    a100 = fleet.cluster("a100-inference")
    assert a100 is not None
    detail = check_cluster(a100, cuda="12.8")
    assert len(detail.configs) == 4 and all(v.verdict == "ok" for _, v in detail.configs)
    doc = detail.to_json()
    assert doc["cluster"] == "a100-inference" and doc["verdict"] == "ok" and len(doc["hosts"]) == 4


def test_hostinfo_pointers_to_real_tool_output() -> None:
    fleet = load_fleet(FLEETS / "pointers.yaml", load_host=load_host)
    h100 = fleet.cluster("h100-azure")
    assert h100 is not None
    assert h100.drivers == ("535.161.08",) and h100.gpus == ("NVIDIA H100 80GB HBM3",)
    (cfg,) = h100.configs
    assert cfg.driver_cuda == "12.2" and cfg.compute_capability == "9.0"
    assert cfg.brand is None  # brand derived from the name by the parser is not the host's Product Brand
    v100 = fleet.cluster("v100-hami")
    assert v100 is not None and v100.configs[0].brand == "Tesla"  # from nvidia-smi -q "Product Brand"
    a100 = fleet.cluster("a100-r580")
    assert a100 is not None and len(a100.configs) == 1  # two identical GPUs: one configuration

    results = {c.name: v for c, v in check_fleet(fleet, cuda="12.4")}
    assert results["h100-azure"].verdict == "minor-version-compat"  # docs/compat.md: 535.161.08 + H100 + 12.4 app
    assert results["workstations"].verdict == "ok"  # 550.40.07 reports CUDA 12.4
    assert results["a100-r580"].verdict == "ok"
    assert results["mi300x-rocm64"].verdict == "blocked"  # a CUDA application on an AMD cluster
    mi = fleet.cluster("mi300x-rocm64")
    assert mi is not None and mi.vendor == "amd"
    assert [h.driver for h in mi.configs] == ["6.4.1"]  # amd-smi "ROCm version"; one config per GPU model
    rocm = dict(check_fleet(fleet, rocm="6.4", image_archs=compat.compiled_archs("torch", "2.9", "rocm", "6.4")))
    amd = next(v for c, v in rocm.items() if c.name == "mi300x-rocm64")
    assert amd.verdict == "ok" and amd.arch_covered is True
    hook = {c.name: v for c, v in check_fleet(fleet, require=compat.require_cuda("12.8.1"))}
    assert hook["h100-azure"].verdict == "forward-compat"  # brand nvidia (fallback) on R535
    assert hook["v100-hami"].verdict == "forward-compat"  # Tesla on R535
    assert hook["workstations"].verdict == "blocked"  # GeForce on R550: no exemption from 12.6.3 on
    assert hook["a100-r580"].verdict == "ok"


def test_invalid_schema_lists_every_problem_with_file_line_and_field() -> None:
    with pytest.raises(ConfigError) as info:
        load_fleet(FLEETS / "bad.yaml")
    problems = info.value.details["problems"]
    fields = {p["path"] for p in problems}
    assert "clusters[0].drivers[0]" in fields  # 550.135 read as a number
    assert "clusters[1].vendor" in fields
    assert "clusters[3].colour" in fields
    # schema errors in some clusters do not hide the semantic problems of the others
    assert {"clusters[2].gpus[0]", "clusters[2].cuda", "clusters[4].hostinfo[0]"} <= fields
    assert [p["line"] for p in problems] == sorted(p["line"] for p in problems)
    by_field = {p["path"]: p for p in problems}
    assert by_field["clusters[0].drivers[0]"]["line"] == 5
    assert "quote" in by_field["clusters[0].drivers[0]"]["message"]
    assert by_field["clusters[1].vendor"]["line"] == 7
    assert by_field["clusters[3].colour"]["line"] == 16
    assert all(p["file"].endswith("bad.yaml") for p in problems)
    assert "bad.yaml:5" in info.value.message


def test_semantic_problems_are_all_collected() -> None:
    with pytest.raises(ConfigError) as info:
        load_fleet(FLEETS / "semantic.yaml")
    problems = info.value.details["problems"]
    text = [(p["path"], p["line"], p["message"]) for p in problems]
    fields = [f for f, _, _ in text]
    assert "clusters[0].drivers[0]" in fields  # "R550" is not a driver version
    assert "clusters[1].name" in fields  # duplicate
    assert "clusters[1].drivers" in fields  # NVIDIA cluster without drivers
    assert "clusters[2].gpus[0]" in fields  # NVIDIA GPU in an AMD cluster
    assert "clusters[2].cuda" in fields
    assert "clusters[3].gpus" in fields  # neither gpus nor hostinfo
    assert "clusters[4].hostinfo[0]" in fields  # missing file
    lines = {f: line for f, line, _ in text}
    assert lines["clusters[1].name"] == 6
    assert lines["clusters[4].hostinfo[0]"] == 17


def test_not_yaml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "f.yaml"
    bad.write_text("clusters:\n  - name: a\n    description: x: y\n")
    with pytest.raises(ConfigError) as info:
        load_fleet(bad)
    assert info.value.details["problems"][0]["line"] == 3
    with pytest.raises(ConfigError):
        load_fleet(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError) as empty:
        fleet_from_data({"clusters": []}, path=tmp_path / "x.yaml")
    assert empty.value.details["problems"][0]["path"] == "clusters"


def test_fleet_values_are_frozen() -> None:
    fleet = load_fleet(DEMO)
    with pytest.raises(AttributeError):
        fleet.clusters[0].name = "x"  # type: ignore[misc]


def test_resolve_fleet_by_name_and_load_directory(tmp_path: Path) -> None:
    from builder.compat.fleets import load_fleets, resolve_fleet_path
    from builder.errors import NotFoundError

    assert resolve_fleet_path("demo", ROOT / "fleets") == ROOT / "fleets" / "demo.yaml"
    assert resolve_fleet_path(str(DEMO), tmp_path) == DEMO
    with pytest.raises(NotFoundError, match="demo"):
        resolve_fleet_path("prod", ROOT / "fleets")
    with pytest.raises(NotFoundError):
        resolve_fleet_path(str(tmp_path / "missing.yaml"), ROOT / "fleets")
    fleets = load_fleets(ROOT / "fleets")
    assert [f.name for f in fleets] == ["demo"]
    assert load_fleets(tmp_path / "none") == ()


def test_committed_json_schema_is_current_and_validates_with_check_jsonschema() -> None:
    import json
    import shutil
    import subprocess
    import sys

    from builder.compat.fleets import fleet_json_schema

    committed = ROOT / "fleets" / "fleet.schema.json"
    assert json.loads(committed.read_text()) == fleet_json_schema(), "regenerate fleets/fleet.schema.json"
    exe = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent)) or "check-jsonschema"
    good = subprocess.run(
        [exe, "--schemafile", str(committed), str(DEMO), str(FLEETS / "pointers.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert good.returncode == 0, good.stdout + good.stderr
    bad = subprocess.run(
        [exe, "--schemafile", str(committed), str(FLEETS / "bad.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert bad.returncode == 1
    assert "clusters[0].drivers[0]" in bad.stdout and "colour" in bad.stdout


def test_real_h200_host_recorded_on_the_lent_machine() -> None:
    """nvidia-smi -q of a real H200 (driver 580.159.04): the tables agree with what the host reports."""
    fleet = load_fleet(FLEETS / "pointers.yaml", load_host=load_host)
    h200 = fleet.cluster("h200-lent")
    assert h200 is not None
    (cfg,) = h200.configs
    assert (cfg.driver, cfg.driver_cuda, cfg.brand, cfg.compute_capability) == ("580.159.04", "13.0", "NVIDIA", "9.0")
    assert compat.driver_cuda("580.159.04") == cfg.driver_cuda  # the driver table's rule matches the host's report
    info = compat.gpu_info("NVIDIA H200")
    assert info is not None and info.compute_capability == cfg.compute_capability and info.gpu_class == "datacenter"
    assert compat.normalize_brand(cfg.brand) == info.brand == "nvidia"
    # torch 2.11.0+cu130 get_arch_list() recorded on the same host (tests/data/matrices/recorded-h200-torch.txt)
    archs = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
    assert compat.compiled_archs("torch", "2.11", "cuda", "13.0") == archs
    results = {c.name: v for c, v in check_fleet(fleet, require=compat.require_cuda("13.0.2"), image_archs=archs)}
    assert results["h200-lent"].verdict == "ok" and results["h200-lent"].arch_covered is True
    assert results["h100-azure"].verdict == "forward-compat"  # R535 is an exempted branch of 13.0.2
    assert results["workstations"].verdict == "blocked"  # GeForce on R550 vs CUDA 13.0


def test_hostinfo_files_need_the_injected_host_loader() -> None:
    """compat never imports builder.checks: without a loader a hostinfo cluster is a problem, not a guess."""
    with pytest.raises(ConfigError) as info:
        load_fleet(FLEETS / "pointers.yaml")
    problems = info.value.details["problems"]
    assert {p["path"] for p in problems} >= {"clusters[0].hostinfo[0]", "clusters[4].hostinfo[0]"}
    assert all("no host loader" in p["message"] for p in problems)
    assert all(set(p) == {"file", "line", "col", "path", "message", "severity"} for p in problems)


def test_fleet_resolver_takes_a_name_or_a_file(tmp_path: Path) -> None:
    from builder.compat.fleets import resolve_fleet_path
    from builder.errors import NotFoundError

    assert resolve_fleet_path("demo", ROOT / "fleets") == ROOT / "fleets" / "demo.yaml"
    assert resolve_fleet_path(str(DEMO), tmp_path) == DEMO
    with pytest.raises(NotFoundError, match="known: demo"):
        resolve_fleet_path("nope", ROOT / "fleets")
    with pytest.raises(NotFoundError, match="does not exist"):
        resolve_fleet_path("some/dir/nope", ROOT / "fleets")


@pytest.mark.parametrize("text", ["- a\n- b\n", "", "just text\n"])
def test_a_fleet_that_is_not_a_mapping_says_so(tmp_path: Path, text: str) -> None:
    f = tmp_path / "fleet.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_fleet(f)
    assert "a fleet file is a mapping with `clusters:`" in err.value.message
    assert "_FleetIn" not in err.value.message


def test_a_yaml_syntax_error_is_named_once_with_its_place(tmp_path: Path) -> None:
    f = tmp_path / "fleet.yaml"
    f.write_text("clusters: [a\n")
    with pytest.raises(ConfigError) as err:
        load_fleet(f)
    assert err.value.message.count("not valid YAML") == 1 and f"{f}:2:" in err.value.message
