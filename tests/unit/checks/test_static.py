"""Image facts from an image config (labels first, environment as fallback) and static verdicts.

The environment used is real: the H200 device machine's CUDA image environment, recorded by the
probe (tests/data/h200/probe.json "env")."""

from __future__ import annotations

import json
from pathlib import Path

from builder.checks.host.reading import load_hostinfo
from builder.checks.image import arch_list_from_env, facts_from_config
from builder.checks.static import fleet_verdict, host_verdict

DATA = Path(__file__).resolve().parents[2] / "data"


def real_env() -> dict[str, str]:
    return dict(json.loads((DATA / "h200" / "probe.json").read_text())["env"])


def config(env: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, object]:
    return {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": [f"{k}={v}" for k, v in env.items()], "Labels": labels or {}},
    }


def test_env_fallback_on_nvidia_environment() -> None:
    f = facts_from_config(
        config(real_env()), repository="r", digest="sha256:a", platform_digest="sha256:a", platform=None
    )
    assert f.accelerator == "cuda" and f.sources["accelerator"] == "derived"
    assert f.cuda_version == "13.0.2" and f.sources["cuda.version"] == "env"
    assert f.require_cuda is not None and f.require_cuda.startswith("cuda>=13.0")


def test_labels_win_over_env() -> None:
    labels = {
        "io.builder.accelerator": "cuda",
        "io.builder.cuda.version": "12.8",
        "io.builder.gpu-archs": "sm_90,sm_100",
    }
    f = facts_from_config(config(real_env(), labels), repository="r", digest="d", platform_digest="d", platform=None)
    assert f.cuda_version == "12.8" and f.sources["cuda.version"] == "label"
    assert f.gpu_archs == ("sm_90", "sm_100")


def test_arch_lists_from_env() -> None:
    assert arch_list_from_env("7.5;8.0;9.0+PTX") == ("sm_75", "sm_80", "sm_90", "compute_90")
    assert arch_list_from_env("8.0 8.6") == ("sm_80", "sm_86")
    assert arch_list_from_env("gfx90a;gfx942") == ("gfx90a", "gfx942")
    f = facts_from_config(
        config({"PYTORCH_ROCM_ARCH": "gfx90a;gfx942", "ROCM_VERSION": "6.4"}),
        repository="r",
        digest="d",
        platform_digest="d",
        platform=None,
    )
    assert f.accelerator == "rocm" and f.gpu_archs == ("gfx90a", "gfx942")


def test_cpu_image() -> None:
    f = facts_from_config(config({"PATH": "/usr/bin"}), repository="r", digest="d", platform_digest="d", platform=None)
    assert f.accelerator == "cpu" and f.cuda_version is None


def test_static_verdict_h200_and_arch_coverage() -> None:
    host = load_hostinfo(DATA / "h200" / "nvidia-smi-q.txt")
    f = facts_from_config(config(real_env()), repository="r", digest="d", platform_digest="d", platform=None)
    assert host_verdict(f, host).verdict == "ok"
    labels = {
        "io.builder.accelerator": "cuda",
        "io.builder.cuda.version": "12.8",
        "io.builder.gpu-archs": "sm_100,sm_120",
    }
    f2 = facts_from_config(config(real_env(), labels), repository="r", digest="d", platform_digest="d", platform=None)
    out = host_verdict(f2, host)
    assert out.gpus[0].verdict.arch_covered is False  # sm_90 not compiled
    assert out.to_json()["gpus"][0]["index"] == out.gpus[0].gpu.index


def test_static_verdict_consumer_blocked_and_cpu_host() -> None:
    f = facts_from_config(
        config({"NVIDIA_REQUIRE_CUDA": "cuda>=12.8 brand=tesla,driver>=550,driver<551", "CUDA_VERSION": "12.8.1"}),
        repository="r",
        digest="d",
        platform_digest="d",
        platform=None,
    )
    out = host_verdict(f, load_hostinfo(DATA / "nvidia-smi" / "nvidia-smi-04.txt"))
    assert out.blocked and out.gpus[0].verdict.min_driver == "570.26"
    assert all(r.startswith(f"{out.gpus[0].verdict.gpu}: ") for r in out.reasons)
    none = load_hostinfo(DATA / "nvidia-smi" / "nvidia-smi-11.txt")
    assert host_verdict(f, none).to_json() == {
        "verdict": "blocked",
        "reasons": [f"the image needs a GPU (cuda) and the host has none (vendor {none.vendor})"],
        "gpus": [],
    }


def test_fleet_verdict_applies_the_image_vendor(tmp_path: Path) -> None:
    """A CUDA image against a fleet with an AMD cluster: that cluster does not apply and never blocks; the
    document is the one `builder compat fleet` prints."""
    fleet = tmp_path / "mixed.yaml"
    fleet.write_text(
        "clusters:\n"
        "  - {name: a100, vendor: nvidia, gpus: ['NVIDIA A100-SXM4-80GB'], drivers: ['580.65.06']}\n"
        "  - {name: mi300x, vendor: amd, gpus: ['AMD Instinct MI300X'], rocm: ['6.3']}\n"
    )
    f = facts_from_config(
        config({"NVIDIA_REQUIRE_CUDA": "cuda>=12.8", "CUDA_VERSION": "12.8.1"}),
        repository="r",
        digest="d",
        platform_digest="d",
        platform=None,
    )
    check = fleet_verdict(f, fleet)
    assert check.summary.verdict == "ok" and check.summary.not_applicable == ("mi300x",)
    doc = check.to_json()
    assert doc["fleet"] == "mixed" and doc["header"].startswith("fleet mixed: ok")
    assert [(c["cluster"], c["applies"]) for c in doc["clusters"]] == [("a100", True), ("mi300x", False)]


def test_a_hostile_config_is_facts_with_nothing_claimed_never_a_traceback() -> None:
    """An image's config is whatever its pusher wrote: Labels as a list, Env as a number, config as a
    string, and a gpu-archs label with an arch of 5,000 digits (Python refuses to convert more than
    4,300) read as no labels, no environment and no such arch."""
    for doc in ({"config": {"Labels": ["a", "b"], "Env": 3}}, {"config": "x"}, {"config": {"Labels": None}}):
        facts = facts_from_config(doc, repository="r", digest="d", platform_digest="d", platform=None)
        assert facts.gpu_archs in ((), None), facts
    from builder.compat.frameworks import arch_coverage

    coverage = arch_coverage("9.0", ("sm_" + "9" * 5000,))
    assert coverage.covered is not True, coverage
