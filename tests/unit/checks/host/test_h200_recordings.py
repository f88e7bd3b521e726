"""Parsers and the probe's result format on real recordings from an H200 device machine
(tests/data/h200/README.md says how they were made)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.checks.device import CheckResult, run_device_check
from builder.checks.host.reading import load_hostinfo
from builder.engine import ContainerResult

H200 = Path(__file__).resolve().parents[3] / "data" / "h200"


@pytest.mark.parametrize("name", ["nvidia-smi.txt", "nvidia-smi-q.txt", "nvidia-smi-query.csv", "hostinfo.json"])
def test_h200_host_facts(name: str) -> None:
    h = load_hostinfo(H200 / name)
    assert h.vendor == "nvidia" and h.driver_version == "580.159.04" and h.diagnosis is None
    (g,) = h.gpus
    assert g.name == "NVIDIA H200" and g.memory_mib == 143771 and g.compute_capability == "9.0"
    assert g.bus_id == "0000:00:06.0" and g.mig_mode == "Disabled" and g.brand == "NVIDIA"
    if name != "nvidia-smi-query.csv":
        assert h.cuda_version == "13.0"


def test_h200_q_has_brand_vbios_gsp() -> None:
    g = load_hostinfo(H200 / "nvidia-smi-q.txt").gpus[0]
    assert (g.brand, g.brand_source) == ("NVIDIA", "nvidia-smi -q")
    assert g.vbios == "96.00.A5.00.1A" and g.firmware == "580.159.04" and g.architecture == "Hopper"


def test_h200_live_probe_json_equals_parse_of_raw() -> None:
    live = load_hostinfo(H200 / "hostinfo.json")
    q = load_hostinfo(H200 / "nvidia-smi-q.txt")
    assert live.gpus[0].uuid == q.gpus[0].uuid and live.gpus[0].vbios == q.gpus[0].vbios
    assert live.toolkit is not None and not live.toolkit.present  # no container toolkit on that machine


def run_recorded(name: str, framework: str = "torch") -> CheckResult:
    """run_device_check on the H200 host facts with a runner that replays the recorded containers: nvidia-smi
    as recorded, then the probe's own JSON output (tests/data/h200/<name>)."""
    host = load_hostinfo(H200 / "hostinfo.json")
    smi = (H200 / "nvidia-smi.txt").read_text()

    def runner(image: str, argv: list[str], **_: object) -> ContainerResult:
        if argv == ["nvidia-smi"]:
            return ContainerResult(0, smi, "", 0.1, ("docker", "run", image, *argv))
        out = (H200 / name).read_text()
        code = 0 if json.loads(out)["ok"] else 1
        return ContainerResult(code, out, "", 1.0, ("docker", "run", image, *argv))

    return run_device_check("reg/x@sha256:0", None, host, mode="nvidia", framework=framework, runner=runner)


def test_h200_probe_torch_passes_every_step() -> None:
    r = run_recorded("probe.json")
    assert r.passed and r.diagnosis is None and r.device_request == "--gpus all"
    steps = {s.name: s for s in r.steps}
    assert list(steps) == [
        "container-start+nvidia-smi",
        "probe/python",
        "probe/nvidia-smi",
        "probe/framework-import",
        "probe/devices",
        "probe/compute",
        "probe/arch-coverage",
    ]
    assert steps["probe/devices"].detail["device_count"] == 1
    assert steps["probe/arch-coverage"].detail["devices"] == [{"device": 0, "target": "sm_90", "covered": True}]
    assert r.predicate()["result"] == "passed"
    assert r.predicate()["host"]["gpus"][0]["name"] == "NVIDIA H200"


def test_h200_probe_jax_passes() -> None:
    r = run_recorded("probe-jax.json", framework="jax")
    assert r.passed and any(s.name == "probe/compute" and s.ok for s in r.steps)


def test_h200_hidden_gpu_fails_although_nvidia_smi_passes() -> None:
    r = run_recorded("probe-hidden.json")
    steps = {s.name: s for s in r.steps}
    assert steps["container-start+nvidia-smi"].ok and steps["probe/nvidia-smi"].ok
    assert not steps["probe/devices"].ok and "is_available() is False" in str(steps["probe/devices"].error)
    assert not r.passed and r.diagnosis is not None and r.predicate()["result"] == "failed"
