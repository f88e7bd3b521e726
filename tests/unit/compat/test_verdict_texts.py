"""The words of a fleet verdict: a CPU image's GPU architecture coverage is "not applicable (no GPU
code)", not "unknown"; an AMD cluster's configuration is labelled with its ROCm release ("ROCm
6.3"), not as if 6.3 were the amdgpu driver's version (amd-smi prints that one as 6.10.5)."""

from __future__ import annotations

from pathlib import Path

from builder.checks.host.reading import load_host
from builder.compat.fleets import check_cluster, load_fleet

DEMO = Path(__file__).resolve().parents[3] / "fleets" / "demo.yaml"


def test_a_cpu_image_has_no_arch_coverage_question() -> None:
    fleet = load_fleet(DEMO, load_host=load_host)
    for cluster in fleet.clusters:
        verdict = check_cluster(cluster).verdict
        assert verdict.verdict == "ok" and verdict.arch_text == "not applicable (no GPU code)"


def test_a_gpu_image_still_says_whether_its_arch_is_covered() -> None:
    fleet = load_fleet(DEMO, load_host=load_host)
    h100 = next(c for c in fleet.clusters if c.name == "h100-train")
    assert check_cluster(h100, cuda="12.8", image_archs=("sm_90",)).verdict.arch_text == "yes"
    assert check_cluster(h100, cuda="12.8", image_archs=("sm_80",)).verdict.arch_text == "no"
    assert check_cluster(h100, cuda="12.8").verdict.arch_text == "unknown"


def test_an_amd_cluster_is_labelled_with_its_rocm_release() -> None:
    fleet = load_fleet(DEMO, load_host=load_host)
    mi300x = next(c for c in fleet.clusters if c.vendor == "amd")
    reasons = check_cluster(mi300x, rocm="6.3").verdict.reasons
    assert reasons and all(r.startswith("ROCm 6.3, AMD Instinct MI300X:") for r in reasons)
    assert not any(r.startswith("driver 6.3") for r in reasons)
    nvidia = next(c for c in fleet.clusters if c.vendor == "nvidia")
    assert check_cluster(nvidia, cuda="12.8").verdict.reasons[0].startswith("driver ")
