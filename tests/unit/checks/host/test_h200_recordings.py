"""Parsers and the probe's result format on real recordings from an H200 device machine
(tests/data/h200/README.md says how they were made)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from builder.checks.host.reading import load_hostinfo

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


def probe(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((H200 / name).read_text())
    return doc


def test_h200_probe_torch_passes_every_step() -> None:
    d = probe("probe.json")
    assert d["schema"] == "builder-probe/1" and d["ok"] is True and d["framework"] == "torch"
    steps = {s["name"]: s for s in d["steps"]}
    assert list(steps) == ["python", "nvidia-smi", "framework-import", "devices", "compute", "arch-coverage"]
    assert steps["devices"]["detail"]["device_count"] == 1
    assert steps["compute"]["detail"]["results"][0]["device"] == "cuda:0"
    assert steps["arch-coverage"]["detail"]["devices"] == [{"device": 0, "target": "sm_90", "covered": True}]
    assert all(s["seconds"] >= 0 for s in d["steps"])


def test_h200_probe_jax_passes() -> None:
    d = probe("probe-jax.json")
    assert d["ok"] is True and d["framework"] == "jax"


def test_h200_hidden_gpu_fails_although_nvidia_smi_passes() -> None:
    d = probe("probe-hidden.json")
    steps = {s["name"]: s for s in d["steps"]}
    assert steps["nvidia-smi"]["ok"] is True
    assert steps["devices"]["ok"] is False and "is_available() is False" in steps["devices"]["error"]
    assert d["ok"] is False


def test_h200_first_run_recorded_the_gcnarch_bug() -> None:
    d = probe("probe-run1-gcnarch-bug.json")
    steps = {s["name"]: s for s in d["steps"]}
    assert steps["arch-coverage"]["detail"]["devices"][0]["target"] == "NVIDIA H200"  # the bug, since fixed
