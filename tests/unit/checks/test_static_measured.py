"""Static verdicts on saved hosts judge the GPU code measured in the image (builder.compat.kernels), not
the declared list: real recorded hosts (an RTX 5070, sm_120, driver 575: tests/data/nvidia-smi/nvidia-smi-16.txt;
the H200 device machine: tests/data/h200/hostinfo.json) and a CUDA 12.8 image whose custom library has
SASS for sm_80 and sm_90 only (the targets tests/unit/image/test_gpu_code.py reads from a library made by
NVIDIA's ptxas + fatbinary)."""

from __future__ import annotations

from pathlib import Path

from builder.checks.host.reading import load_hostinfo
from builder.checks.image import ImageFacts, facts_from_config
from builder.checks.static import host_verdict
from builder.compat.kernels import KernelBinary

DATA = Path(__file__).resolve().parents[2] / "data"
ENV = {"CUDA_VERSION": "12.8.1", "NVIDIA_REQUIRE_CUDA": "cuda>=12.8"}
STALE = KernelBinary("/opt/ext/lib/libcustom_kernels.so", sass=("sm_80", "sm_90"))
FIXED = KernelBinary("/opt/ext/lib/libcustom_kernels.so", sass=("sm_80", "sm_90", "sm_120"))


def _facts(labels: dict[str, str] | None = None) -> ImageFacts:
    config = {"config": {"Env": [f"{k}={v}" for k, v in ENV.items()], "Labels": labels or {}}}
    return facts_from_config(config, repository="r", digest="sha256:a", platform_digest="sha256:a", platform=None)


def test_host_verdicts_from_measured_code() -> None:
    rtx5070 = load_hostinfo(DATA / "nvidia-smi" / "nvidia-smi-16.txt")
    h200 = load_hostinfo(DATA / "h200" / "hostinfo.json")
    facts = _facts({"io.builder.gpu-archs": "sm_80,sm_90,sm_120"})  # the label claims sm_120
    blocked = host_verdict(facts, rtx5070, (STALE,))
    assert blocked.verdict == "blocked"
    assert any("libcustom_kernels.so: no SASS for sm_120" in r for r in blocked.reasons)
    assert host_verdict(facts, rtx5070, (FIXED,)).verdict != "blocked"
    assert host_verdict(facts, h200, (STALE,)).verdict != "blocked"
    # without measured code the label is all there is (and it claims sm_120)
    assert host_verdict(facts, rtx5070).verdict != "blocked"
