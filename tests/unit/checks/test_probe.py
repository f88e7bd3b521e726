"""The in-container probe program, run for real by this machine's python3 (stdlib only, from stdin
as in a container), and its arch-coverage rule."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builder.checks import probe

PROBE = Path(probe.__file__)


def run_probe(*args: str, python: str = sys.executable) -> tuple[int, dict]:  # type: ignore[type-arg]
    p = subprocess.run([python, "-", *args], input=PROBE.read_bytes(), capture_output=True, timeout=120, check=False)
    return p.returncode, json.loads(p.stdout)


def test_cpu_mode_without_framework_passes() -> None:
    code, doc = run_probe("--mode", "cpu", "--framework", "none")
    assert code == 0 and doc["ok"] is True and doc["schema"] == "builder-probe/1"
    names = [s["name"] for s in doc["steps"]]
    assert names == ["python", "framework-import", "compute"]


def test_cpu_mode_auto_framework_pure_python_fallback() -> None:
    code, doc = run_probe("--mode", "cpu")
    steps = {s["name"]: s for s in doc["steps"]}
    assert steps["compute"]["ok"] and code == 0


def test_gpu_mode_without_gpu_fails_with_structured_steps() -> None:
    code, doc = run_probe("--mode", "nvidia", "--framework", "none")
    assert code == 1 and doc["ok"] is False
    steps = {s["name"]: s for s in doc["steps"]}
    if shutil.which("nvidia-smi") is None:
        assert steps["nvidia-smi"]["ok"] is False and "not found" in steps["nvidia-smi"]["error"]
    assert steps["devices"]["ok"] is False


def test_missing_framework_fails() -> None:
    code, doc = run_probe("--mode", "cpu", "--framework", "tensorflow_not_installed_xyz")
    assert code == 1
    assert next(s for s in doc["steps"] if s["name"] == "framework-import")["ok"] is False


@pytest.mark.skipif(shutil.which("python3") is None, reason="no system python3")
def test_runs_under_other_python() -> None:
    code, doc = run_probe("--mode", "cpu", "--framework", "none", python=shutil.which("python3") or "python3")
    assert code == 0 and doc["ok"]


def test_arch_coverage_rule() -> None:
    assert probe._covered("sm_90", ["sm_80", "sm_90"])
    assert not probe._covered("sm_120", ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"])
    assert probe._covered("sm_120", ["sm_80", "compute_90"])  # PTX JIT
    assert not probe._covered("sm_75", ["sm_80", "compute_90"])
