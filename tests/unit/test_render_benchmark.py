"""benchmarks/render.py --quick keeps working and stays well inside the 1 s target."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_render_benchmark_quick_mode() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "render.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    figures = dict(kv.split("=", 1) for kv in last.split())
    assert figures["benchmark"] == "render"
    assert int(figures["variants"]) >= 100
    # ~120 variants: a tenth of the full benchmark; generous bound for a loaded CI machine
    assert float(figures["seconds"]) < 1.0, last
