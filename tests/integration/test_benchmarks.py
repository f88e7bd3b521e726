"""Every benchmark script keeps working: its --quick mode runs and ends with one figures line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[2] / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("script", BENCHMARKS, ids=[p.stem for p in BENCHMARKS])
def test_benchmark_quick_mode(script: Path, docker_engine: str, registry_address: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(script), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=script.parents[1],
        env={**os.environ, "BUILDER_REGISTRY": registry_address},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("benchmark="), last
    figures = dict(kv.split("=", 1) for kv in last.split())
    assert len(figures) >= 3, last
