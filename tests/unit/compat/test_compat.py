"""builder.compat: driver table, NVIDIA_REQUIRE_CUDA grammar, verdicts, GPU table.

Data: tests/data/compat/ (reference tables with their source lines, and real
NVIDIA_REQUIRE_CUDA values of official images in require-cuda-real.txt).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from builder import compat
from builder.compat import Host, check_compat, evaluate, parse_requirement
from builder.errors import ConfigError, NotFoundError

DATA = Path(__file__).resolve().parents[2] / "data" / "compat"


def _real_requirements() -> dict[str, str]:
    """'<release>[@<platform>]' -> the real NVIDIA_REQUIRE_CUDA value (tests/data/compat/require-cuda-real.txt)."""
    out = {}
    for line in (DATA / "require-cuda-real.txt").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        release, value = line.split(" ", 1)
        out[release] = value
    return out


REAL = _real_requirements()
REAL_AMD64 = {k: v for k, v in REAL.items() if "@" not in k}
REQ_1281 = REAL["12.8.1"]


def _decoded_lines() -> list[tuple[str, str, list[int], list[str]]]:
    """The decoded image lines of nvidia-require-cuda.txt: (release, cuda, branches, brands)."""
    out = []
    for line in (DATA / "nvidia-require-cuda.txt").read_text().splitlines():
        m = re.match(r"\s+(\d+\.\d+\.\d+)\s+cuda>=(\S+)\s+OR driver branch in \{([^}]*)\}\s+\(brands: ([^)]*)\)", line)
        if m:
            branches = [int(b.strip().lstrip("R")) for b in m.group(3).split(",")]
            out.append((m.group(1), m.group(2), branches, m.group(4).split(",")))
    return out


# ------------------------------------------------------------------------------------------ driver table


def test_min_driver_rule_lowest_linux_minimum_of_the_line() -> None:
    assert compat.min_driver("12.8") == "570.26"
    assert compat.min_driver("11.0") == "450.36.06"
    assert compat.min_driver("12.6") == "560.28.03"
    assert compat.min_driver("13.0") == "580.65.06"
    assert compat.min_driver("12.4") == "550.54.14"
    assert compat.min_driver("12.8.1") == "570.26"  # a release maps to its line


def test_min_driver_matches_the_source_table_for_every_line() -> None:
    text = (DATA / "cuda-driver.csv").read_text().splitlines()
    rows = list(csv.DictReader(text[1:]))
    from packaging.version import Version

    lines: dict[str, list[str]] = {}
    for r in rows:
        lines.setdefault(r["cuda_major_minor"], []).append(r["linux_x86_64_min_driver"].lstrip(">="))
    assert len(lines) == 30
    for line, mins in lines.items():
        assert compat.min_driver(line) == min(mins, key=Version), line


def test_min_driver_row_records_the_row_used() -> None:
    row = compat.min_driver_row("12.6")
    assert row.toolkit == "CUDA 12.6 GA"
    assert row.branch == "R560"
    assert "cuda-driver.csv line" in row.source


def test_unknown_cuda_line_is_not_found() -> None:
    with pytest.raises(NotFoundError, match=r"CUDA 14\.9"):
        compat.min_driver("14.9")


def test_driver_cuda_and_numeric_driver_comparison() -> None:
    assert compat.driver_cuda("550.144.03") == "12.4"
    assert compat.driver_cuda("535.161.08") == "12.2"
    assert compat.driver_cuda("580.65.06") == "13.0"
    assert compat.driver_cuda("525.60.13") == "12.0"
    assert compat.driver_cuda("550.135") == "12.4"  # two-part version (nvidia-smi 05)
    assert compat.driver_cuda("570.9") is not None and compat.driver_cuda("570.9") == "12.6"  # 570.9 < 570.26
    assert compat.driver_cuda("300.1") is None


def test_minor_version_floors() -> None:
    assert compat.minor_floor("12.4") == "525.60.13"
    assert compat.minor_floor("13.0") == "580"
    assert compat.minor_floor("11.8") == "450.80.02"
    assert compat.minor_floor("10.2") is None


def test_parse_cuda_encodings() -> None:
    assert str(compat.parse_cuda("cu128")) == "12.8"
    assert str(compat.parse_cuda("11000")) == "11.0"  # cudaDriverGetVersion: found version 11000
    with pytest.raises(ConfigError):
        compat.parse_cuda("twelve")
    with pytest.raises(ConfigError):
        compat.parse_driver("R550")


# --------------------------------------------------------------------------------- requirement grammar


@pytest.mark.parametrize("release", sorted(REAL_AMD64))
def test_parser_on_real_strings(release: str) -> None:
    req = parse_requirement(REAL[release])
    assert req.cuda == release.rsplit(".", 1)[0]
    assert req.terms[0].text == f"cuda>={req.cuda}"
    assert all(t.is_exemption for t in req.terms[1:])
    assert all(len(t.constraints) == 3 for t in req.terms[1:])
    # every exemption is a one-branch window [N, N+1)
    for t in req.terms[1:]:
        lo = next(c for c in t.constraints if c.key == "driver" and c.op == ">=")
        hi = next(c for c in t.constraints if c.key == "driver" and c.op == "<")
        assert int(hi.value) == int(lo.value) + 1


def test_parser_accepts_env_and_quotes() -> None:
    line = (DATA / "nvidia-require-cuda.txt").read_text().splitlines()[-1]
    assert line.startswith("ENV NVIDIA_REQUIRE_CUDA=")
    req = parse_requirement(line)
    assert len(req.terms) == 1 + 5 * 12  # cuda term + 5 branches x 12 brands
    assert parse_requirement(f"NVIDIA_REQUIRE_CUDA='{REQ_1281}'").terms == req.terms


def test_parser_rejects_garbage_naming_the_constraint() -> None:
    with pytest.raises(ConfigError, match="colour=blue"):
        parse_requirement("cuda>=12.8 colour=blue")
    with pytest.raises(ConfigError, match="driver"):
        parse_requirement("driver>=abc")


def test_empty_requirement_is_satisfied() -> None:
    ev = evaluate("", Host(driver="450.80.02", cuda="11.0"))
    assert ev.satisfied and ev.empty


@pytest.mark.parametrize(("release", "cuda", "branches", "brands"), _decoded_lines())
def test_decoded_image_lines_match_the_constructed_strings(
    release: str, cuda: str, branches: list[int], brands: list[str]
) -> None:
    info = compat.require_cuda_info(release)
    assert not info.constructed
    req = parse_requirement(info.expr)
    assert req.cuda == cuda
    got = req.exemptions()
    assert sorted({b for _, b in got}) == branches
    assert sorted({b for b, _ in got}) == sorted(brands)


@pytest.mark.parametrize("key", sorted(REAL))
def test_require_cuda_reproduces_real_strings_byte_for_byte(key: str) -> None:
    release, _, platform = key.partition("@")
    assert compat.require_cuda(release, platform=platform or "linux/amd64") == REAL[key]


def test_real_strings_cover_old_and_new_brand_sets() -> None:
    assert {"11.8.0", "12.2.2", "12.4.1", "12.6.3", "12.8.1", "12.9.1", "13.0.2"} <= set(REAL)
    assert "brand=geforce" in REAL["12.4.1"] and "brand=geforce" not in REAL["12.6.3"]


def test_require_cuda_by_line_and_constructed_releases() -> None:
    assert compat.require_cuda("12.8") == REQ_1281
    info = compat.require_cuda_info("12.5.1")  # not recorded: pattern with the nearest older exemptions (12.4.1)
    assert info.constructed and info.image_release == "12.4.1" and "constructed" in info.note
    assert info.expr.startswith("cuda>=12.5 brand=tesla,driver>=470,driver<471")
    arm = compat.require_cuda("12.2.2", platform="linux/arm64")
    assert arm == "cuda>=12.2"  # arm64 images of 11.8.0-12.2.2 carry no exemptions


def test_evaluate_reports_match_and_what_would_satisfy() -> None:
    ok = evaluate(REQ_1281, Host(driver="570.124.06", cuda="12.8", brand="geforce"))
    assert ok.satisfied and ok.matched == "cuda>=12.8" and not ok.matched_exemption

    exempt = evaluate(REQ_1281, Host(driver="550.144.03", cuda="12.4", brand="tesla"))
    assert exempt.satisfied and exempt.matched_exemption
    assert exempt.matched == "brand=tesla,driver>=550,driver<551"

    bad = evaluate(REQ_1281, Host(driver="550.144.03", cuda="12.4", brand="geforce"))
    assert not bad.satisfied and bad.matched is None
    assert bad.min_driver == "570.26"
    assert any("driver >= 570.26" in s for s in bad.satisfy)
    assert any("geforce" in s for s in bad.satisfy)
    assert bad.last_failed is not None  # what nvidia-container-cli would name


def test_evaluate_operators_and_arch() -> None:
    host = Host(driver="535.161.08", cuda="12.2", brand="nvidia", arch="9.0")
    assert evaluate("arch>=8.0", host).satisfied
    assert not evaluate("arch<8.0", host).satisfied
    assert evaluate("brand!=geforce,driver>535.54", host).satisfied
    assert not evaluate("cuda>=12.4 driver<500", host).satisfied
    assert evaluate("cuda>=12.4 driver<500 cuda=12.2", host).matched == "cuda=12.2"
    unknown = evaluate("brand=tesla", Host(driver="535.161.08", cuda="12.2"))
    assert not unknown.satisfied and unknown.terms[0].unknown == ("brand=tesla",)


# -------------------------------------------------------------------- the decisions of docs/compat.md


def test_expected_geforce_4090_on_r550_vs_1281_is_blocked_needs_570_26() -> None:
    v = check_compat(driver="550.144.03", gpu="NVIDIA GeForce RTX 4090", brand="GeForce", require=REQ_1281)
    assert v.verdict == "blocked"
    assert v.min_driver == "570.26"
    text = " ".join(v.reasons)
    assert ">= 570.26" in text and "geforce" in text and "not exempted" in text
    assert v.brand_source == "host"


@pytest.mark.parametrize(
    ("gpu", "brand", "exemption"),
    [
        ("NVIDIA H100 80GB HBM3", "NVIDIA", "brand=nvidia,driver>=550,driver<551"),
        ("Tesla T4", "Tesla", "brand=tesla,driver>=550,driver<551"),
        ("Tesla T4", None, "brand=tesla,driver>=550,driver<551"),  # brand from the name (fallback)
    ],
)
def test_expected_datacenter_on_r550_vs_1281_is_forward_compat(gpu: str, brand: str | None, exemption: str) -> None:
    v = check_compat(driver="550.144.03", gpu=gpu, brand=brand, require=REQ_1281)
    assert v.verdict == "forward-compat"
    assert v.matched_term == exemption
    assert v.needs_cuda_compat
    assert v.min_driver == "570.26"
    assert any("cuda-compat" in r for r in v.reasons)
    assert v.brand_source == ("host" if brand else "gpu-name")


def test_expected_h100_r535_cuda_124_app_is_minor_version_compat_with_warning() -> None:
    v = check_compat(driver="535.161.08", gpu="NVIDIA H100 80GB HBM3", brand="NVIDIA", cuda="12.4")
    assert v.verdict == "minor-version-compat"
    assert v.min_driver == "550.54.14"
    assert v.driver_cuda == "12.2"
    assert any("minor-version compatibility" in r and "missing" in r for r in v.reasons)


@pytest.mark.parametrize(
    ("gpu", "brand"),
    [("NVIDIA H100 80GB HBM3", "NVIDIA"), ("NVIDIA GeForce RTX 4090", "GeForce"), ("Tesla T4", "Tesla"), (None, None)],
)
def test_expected_r580_runs_cuda_130(gpu: str | None, brand: str | None) -> None:
    assert check_compat(driver="580.65.06", gpu=gpu, brand=brand, cuda="13.0").verdict == "ok"
    # the official 13.0.2 image too: its cuda>=13.0 term matches
    assert check_compat(driver="580.65.06", gpu=gpu, brand=brand, require=REAL["13.0.2"]).verdict == "ok"


@pytest.mark.parametrize(
    ("gpu", "brand"),
    [("NVIDIA H100 80GB HBM3", "NVIDIA"), ("NVIDIA GeForce RTX 4090", "GeForce"), ("Tesla T4", "Tesla"), (None, None)],
)
def test_expected_r525_cannot_run_cuda_130(gpu: str | None, brand: str | None) -> None:
    v = check_compat(driver="525.60.13", gpu=gpu, brand=brand, cuda="13.0")
    assert v.verdict == "blocked"
    assert v.min_driver == "580.65.06"
    assert any("13.x needs driver >= 580" in r for r in v.reasons)
    assert check_compat(driver="525.60.13", gpu=gpu, brand=brand, require=REAL["13.0.2"]).verdict == "blocked"


# ---------------------------------------------------------------------------------- more verdicts


def test_hook_refuses_even_when_minor_version_compat_would_run() -> None:
    v = check_compat(driver="535.161.08", gpu="NVIDIA H100 80GB HBM3", brand="NVIDIA", require="cuda>=12.4")
    assert v.verdict == "blocked"
    assert any("NVIDIA_DISABLE_REQUIRE" in r for r in v.reasons)


def test_geforce_through_an_old_exemption_runs_only_by_minor_version_compat() -> None:
    # 12.4.1 images still exempt geforce on R535; forward compat then fails on consumer GPUs (804)
    v = check_compat(driver="535.161.08", gpu="NVIDIA GeForce RTX 4070", brand=None, require=REAL["12.4.1"])
    assert v.verdict == "minor-version-compat"
    assert v.matched_term == "brand=geforce,driver>=535,driver<536"
    assert any("804" in r for r in v.reasons)


def test_forward_compat_without_hook_on_listed_branch_for_datacenter_only() -> None:
    dc = check_compat(driver="550.144.03", gpu="NVIDIA H100 80GB HBM3", brand="NVIDIA", cuda="13.0")
    assert dc.verdict == "forward-compat" and dc.needs_cuda_compat
    consumer = check_compat(driver="550.144.03", gpu="NVIDIA GeForce RTX 4090", brand="GeForce", cuda="13.0")
    assert consumer.verdict == "blocked"
    assert any("804" in r for r in consumer.reasons)


def test_unknown_driver_fails_closed() -> None:
    v = check_compat(driver=None, gpu="NVIDIA H100 80GB HBM3", brand=None, cuda="12.8")
    assert v.verdict == "blocked" and v.min_driver == "570.26"


def test_reported_driver_cuda_is_used() -> None:
    v = check_compat(driver="550.144.03", gpu="Tesla T4", brand="Tesla", cuda="12.4", driver_cuda_version="12.4")
    assert v.verdict == "ok" and v.driver_cuda == "12.4"


def test_architecture_coverage_blocks_missing_sm() -> None:
    # Blackwell consumer card vs a cu126 torch build (no sm_120): "no kernel image is available"
    archs = compat.compiled_archs("torch", "2.9", "cuda", "12.6")
    v = check_compat(driver="575.64.03", gpu="NVIDIA GeForce RTX 5070", brand="GeForce", cuda="12.6", image_archs=archs)
    assert v.arch_covered is False and v.verdict == "blocked"
    assert any("sm_120" in r for r in v.reasons)
    ok = check_compat(
        driver="575.64.03",
        gpu="NVIDIA GeForce RTX 5070",
        brand="GeForce",
        cuda="12.8",
        image_archs=compat.compiled_archs("torch", "2.9", "cuda", "12.8"),
    )
    assert ok.arch_covered is True and ok.verdict == "ok"


def test_arch_coverage_rules() -> None:
    assert compat.arch_coverage("8.6", ("sm_80",)).how == "binary"
    assert compat.arch_coverage("8.9", ("sm_80", "sm_90")).how == "binary"
    assert compat.arch_coverage("9.0", ("sm_80", "compute_80")).how == "ptx"
    assert compat.arch_coverage("7.0", ("sm_75", "sm_80")).covered is False
    assert compat.arch_coverage("12.0", ("sm_90", "sm_100")).covered is False
    assert compat.arch_coverage("sm_90", ("sm_90a",)).how == "exact"
    assert compat.arch_coverage("gfx942", ("gfx90a",)).covered is False
    assert compat.arch_coverage("gfx942", ()).covered is None
    assert compat.arch_coverage(None, ("sm_80",)).covered is None


def test_amd_host_rocm_image() -> None:
    archs = compat.compiled_archs("torch", "2.5", "rocm", "6.2")
    assert "gfx942" in archs
    v = check_compat(driver="6.3", gpu="AMD Instinct MI300X", brand=None, rocm="6.2.4", image_archs=archs)
    assert v.verdict == "ok" and v.vendor == "amd" and v.arch_covered is True
    missing = check_compat(driver=None, gpu="AMD Radeon RX 9070 XT", brand=None, rocm="6.3", image_archs=archs)
    assert missing.verdict == "blocked" and missing.target == "gfx1201"
    assert any("hipErrorNoBinaryForGpu" in r for r in missing.reasons)
    old_kmd = check_compat(driver="6.0", gpu="AMD Instinct MI300X", brand=None, rocm="6.3.3")
    assert old_kmd.verdict == "blocked"  # ROCm 6.3 user space is tested with 6.1-6.3 kernel drivers
    amdgpu = check_compat(driver="6.10.5", gpu="AMD Instinct MI300X", brand=None, rocm="6.3.3")
    assert amdgpu.verdict == "ok" and any("not a known ROCm release" in r for r in amdgpu.reasons)
    cuda_on_amd = check_compat(driver="6.3", gpu="AMD Instinct MI300X", brand=None, cuda="12.8")
    assert cuda_on_amd.verdict == "blocked"
    rocm_on_nvidia = check_compat(driver="550.144.03", gpu="Tesla T4", brand=None, rocm="6.3")
    assert rocm_on_nvidia.verdict == "blocked"


def test_cpu_image_is_ok_anywhere() -> None:
    assert check_compat(driver=None, gpu=None, brand=None).verdict == "ok"


def test_verdict_to_json_shape() -> None:
    d = check_compat(driver="550.144.03", gpu="Tesla T4", brand="Tesla", require=REQ_1281).to_json()
    assert d["verdict"] == "forward-compat" and d["min_driver"] == "570.26"
    assert isinstance(d["reasons"], list) and d["reasons"]
    assert "arch_covered" in d


# ------------------------------------------------------------------------------------------- GPUs


@pytest.mark.parametrize(
    ("name", "model", "target", "cls"),
    [
        ("NVIDIA H100 80GB HBM3", "H100", "9.0", "datacenter"),
        ("NVIDIA A100 80G...", "A100", "8.0", "datacenter"),  # truncated by nvidia-smi
        ("NVIDIA A100-SXM4-40GB", "A100", "8.0", "datacenter"),
        ("GRID A100D-1-20C", "A100", "8.0", "datacenter"),
        ("Tesla P4", "Tesla P4", "6.1", "datacenter"),
        ("NVIDIA GeForce RTX 4070", "GeForce RTX 4070", "8.9", "consumer"),
        ("NVIDIA GeForce RTX 5070", "GeForce RTX 5070", "12.0", "consumer"),
        ("NVIDIA L4", "L4", "8.9", "datacenter"),
        ("NVIDIA L40S", "L40S", "8.9", "datacenter"),
        ("NVIDIA RTX A6000", "RTX A6000", "8.6", "professional"),
        ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada", "8.9", "professional"),
        ("AMD Instinct MI300X", "Instinct MI300X", "gfx942", "datacenter"),
        ("MI250X", "Instinct MI250X", "gfx90a", "datacenter"),
        ("gfx1100", "Radeon PRO W7900", "gfx1100", "professional"),
    ],
)
def test_gpu_info(name: str, model: str, target: str, cls: str) -> None:
    info = compat.gpu_info(name)
    assert info is not None
    assert (info.model, info.target, info.gpu_class) == (model, target, cls)


def test_gpu_info_unknown_and_sm() -> None:
    assert compat.gpu_info("Matrox G200") is None
    info = compat.gpu_info("NVIDIA H100 80GB HBM3")
    assert info is not None and info.sm == "sm_90" and info.compute_capability == "9.0" and info.gfx_target is None


def test_gpu_table_covers_every_source_row() -> None:
    rows = list(csv.DictReader((DATA / "gpu-arch.csv").read_text().splitlines()[1:]))
    for r in rows:
        info = compat.gpu_info(r["gpu"])
        assert info is not None, r["gpu"]
        assert info.target == r["compute_capability_or_gfx"], r["gpu"]


@pytest.mark.parametrize(
    ("brand", "hook"),
    [
        ("NVIDIA", "nvidia"),
        ("Tesla", "tesla"),
        ("GeForce", "geforce"),
        ("NVIDIA RTX", "nvidiartx"),
        ("Quadro RTX", "quadrortx"),
        ("NVIDIA Virtual Compute Server", "vcs"),
        ("N/A", None),
        ("[N/A]", None),
        ("Not Found", None),
        (None, None),
    ],
)
def test_normalize_brand(brand: str | None, hook: str | None) -> None:
    assert compat.normalize_brand(brand) == hook


@pytest.mark.parametrize(
    ("name", "brand"),
    [
        ("NVIDIA GeForce RTX 4090", "geforce"),
        ("NVIDIA TITAN RTX", "titanrtx"),
        ("Tesla T4", "tesla"),
        ("NVIDIA H100 80GB HBM3", "nvidia"),
        ("NVIDIA RTX A6000", "nvidiartx"),
        ("GRID A100-40C", "grid"),
        ("Quadro RTX 8000", "quadrortx"),
        ("AMD Instinct MI300X", None),
    ],
)
def test_brand_from_name_fallback(name: str, brand: str | None) -> None:
    assert compat.brand_from_name(name) == brand


def test_tool_placeholders_mean_unknown() -> None:
    # nvidia-smi 16: "CUDA Version: N/A" must be unknown, not a parse failure
    v = check_compat(
        driver="575.64.03", gpu="NVIDIA GeForce RTX 5070", brand="[N/A]", cuda="12.8", driver_cuda_version="N/A"
    )
    assert v.verdict == "ok" and v.driver_cuda == "12.9" and v.brand_source == "gpu-name"
    assert check_compat(driver="N/A", gpu="Tesla T4", brand=None, cuda="12.8").verdict == "blocked"
    assert compat.normalize_brand("Unknown") == "unknown"  # NVML's own brand: exempted as brand=unknown


def test_hook_passes_but_application_needs_a_newer_cuda() -> None:
    # image says cuda>=12.4, its application is built with 12.8; R550 reports 12.4
    v = check_compat(
        driver="550.144.03", gpu="NVIDIA H100 80GB HBM3", brand="NVIDIA", cuda="12.8", require="cuda>=12.4"
    )
    assert v.verdict == "minor-version-compat" and v.min_driver == "570.26"
    assert any("newer than its NVIDIA_REQUIRE_CUDA" in r for r in v.reasons)


# ------------------------------------------------------------------------------------ GPU generations


def test_gpu_archs_table_matches_nvidias_architecture_matrix() -> None:
    """Every row of NVIDIA's architecture matrix (tests/data/compat/arch-matrix.txt) is in gpu-archs.csv."""
    from builder.compat.generations import arch_row

    seen = 0
    for line in (DATA / "arch-matrix.txt").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        arch, cc, first, last_cuda, last_driver = line.split("|")
        row = arch_row(cc)
        assert row is not None, cc
        assert row.architecture.split()[0] == arch.split()[0] or arch == "Ada", (cc, row)
        assert row.first_cuda == first, cc
        major = re.match(r"CUDA (\d+)", last_cuda)
        assert row.last_cuda_major == (int(major.group(1)) if major else None), cc
        assert row.last_driver_branch == (int(last_driver[1:]) if last_driver.startswith("R") else None), cc
        seen += 1
    assert seen == 17


def test_every_nvidia_gpu_in_the_gpu_table_has_a_generation_row() -> None:
    from builder.compat._data import gpu_rows
    from builder.compat.generations import arch_row

    for row in gpu_rows():
        if row.vendor == "nvidia":
            assert arch_row(row.target) is not None, row.gpu


def test_kepler_on_r570_with_cuda_128_is_blocked_by_driver_and_cuda() -> None:
    v = check_compat(driver="570.86.15", gpu="Tesla K80", brand=None, cuda="12.8")
    assert v.verdict == "blocked"
    assert v.min_driver is None  # no newer driver helps
    text = "\n".join(v.reasons)
    assert "no longer supports Kepler (sm_37): the last branch supporting it is R470" in text
    assert "CUDA 12.8 dropped Kepler (sm_37): the last CUDA supporting it is 11.x" in text
    assert "gpu-archs.csv line" in text and "Kepler 3.5 3.7" in text  # the row used


def test_kepler_on_r470_with_cuda_114_is_ok() -> None:
    v = check_compat(driver="470.82.01", gpu="Tesla K80", brand="Tesla", cuda="11.4")
    assert v.verdict == "ok", v.reasons


def test_rtx_5090_on_r535_with_cuda_124_is_blocked() -> None:
    v = check_compat(driver="535.0", gpu="NVIDIA GeForce RTX 5090", brand=None, cuda="12.4")
    assert v.verdict == "blocked"
    text = "\n".join(v.reasons)
    assert "predates Blackwell consumer and workstation (sm_120): the first branch supporting it is R570" in text
    assert (
        "CUDA 12.4 does not support Blackwell consumer and workstation (sm_120): first supported by CUDA 12.8" in text
    )
    assert v.min_driver is None  # CUDA 12.4 lacks sm_120: no driver makes this image ok


def test_rtx_5090_on_r535_with_cuda_128_needs_r570() -> None:
    v = check_compat(driver="535.104.05", gpu="NVIDIA GeForce RTX 5090", brand="GeForce", cuda="12.8")
    assert v.verdict == "blocked"
    assert v.min_driver == "570.26"
    ok = check_compat(driver="570.86.15", gpu="NVIDIA GeForce RTX 5090", brand="GeForce", cuda="12.8")
    assert ok.verdict == "ok", ok.reasons


def test_h100_on_r535_is_ok() -> None:
    v = check_compat(driver="535.161.08", gpu="NVIDIA H100 80GB HBM3", brand="NVIDIA", cuda="12.2")
    assert v.verdict == "ok", v.reasons
    assert any("Hopper (sm_90) is supported by driver branch R535" in r for r in v.reasons)


def test_a100_on_cuda_13_is_ok_p100_is_blocked() -> None:
    a100 = check_compat(driver="580.65.06", gpu="NVIDIA A100-SXM4-80GB", brand="NVIDIA", cuda="13.0")
    assert a100.verdict == "ok", a100.reasons
    p100 = check_compat(driver="580.65.06", gpu="Tesla P100-PCIE-16GB", brand="Tesla", cuda="13.0")
    assert p100.verdict == "blocked"
    assert any("CUDA 13.0 dropped Pascal (sm_60): the last CUDA supporting it is 12.x" in r for r in p100.reasons)
    # the same card with a CUDA 12 image on the same driver (R580 is Pascal's last branch) is fine
    assert check_compat(driver="580.65.06", gpu="Tesla P100", brand="Tesla", cuda="12.8").verdict == "ok"


def test_generation_rules_apply_to_hook_requirements_and_explicit_capabilities() -> None:
    # the official 13.0.2 image on a Volta card: the hook would start it, CUDA 13 cannot use the GPU
    v = check_compat(driver="580.95.05", gpu="Tesla V100", brand="Tesla", require=REAL["13.0.2"])
    assert v.verdict == "blocked" and any("dropped Volta (sm_70)" in r for r in v.reasons)
    # no GPU name, only the compute capability
    v = check_compat(driver="560.35.03", gpu=None, brand="NVIDIA", cuda="12.6", compute_capability="10.0")
    assert v.verdict == "blocked" and any("first branch supporting it is R570" in r for r in v.reasons)


def test_image_list_with_ptx_lets_an_older_cuda_reach_a_newer_gpu() -> None:
    """A CUDA 12.4 build carrying compute_90 PTX runs on sm_120 through the driver's JIT (R570+)."""
    v = check_compat(
        driver="570.86.15", gpu="GeForce RTX 5090", brand="GeForce", cuda="12.4", image_archs=("sm_90", "compute_90")
    )
    assert v.verdict == "ok", v.reasons
    assert v.arch_covered is True
    assert any("predates Blackwell" in r and "compiled list covers it" in r for r in v.reasons)


def test_unknown_brand_does_not_matter_when_every_brand_is_exempted() -> None:
    """Issue 16 item 10: every brand NVML reports is exempted on the driver's branch, so an unknown brand cannot
    change the hook's answer: the verdict is not `blocked` for lack of a brand."""
    from builder import compat
    from builder.compat.gpus import PRODUCT_BRANDS

    every = "cuda>=12.8 " + " ".join(f"brand={b},driver>=535,driver<536" for b in sorted(PRODUCT_BRANDS))
    host = compat.Host(driver="535.183.01", cuda="12.2", brand=None)
    ev = compat.evaluate(every, host)
    assert ev.satisfied and not ev.undetermined and ev.matched_exemption
    verdict = compat.check_compat(driver="535.183.01", gpu=None, brand=None, require=every, cuda="12.8")
    assert verdict.verdict != "blocked"
    # some brands only: the brand still decides, so the answer stays undetermined
    some = "cuda>=12.8 brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536"
    assert compat.evaluate(some, host).undetermined
    # another driver branch is not exempted, whatever the brand
    assert not compat.evaluate(every, compat.Host(driver="545.23.08", cuda="12.3", brand=None)).satisfied


def test_an_unknown_gpu_is_never_ok_in_silence() -> None:
    from builder import compat

    v = compat.check_compat(driver="570.86.15", gpu="NVIDIA Zorg X900", brand=None, require="cuda>=12.8", cuda="12.8")
    assert any("not in builder's GPU table" in r and "--cc" in r for r in v.reasons)
    # the GPU named with its compute capability is checked, so nothing is said
    known = compat.check_compat(
        driver="570.86.15", gpu="NVIDIA Zorg X900", brand=None, cuda="12.8", compute_capability="9.0"
    )
    assert not any("not in builder's GPU table" in r for r in known.reasons)
    # an AMD name is an AMD host even when the model is unknown: a CUDA image cannot run there
    amd = compat.check_compat(driver="6.4", gpu="AMD Instinct MI999", brand=None, cuda="12.8")
    assert amd.vendor == "amd" and amd.verdict == "blocked"
