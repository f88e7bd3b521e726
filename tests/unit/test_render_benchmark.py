"""benchmarks/render.py --quick keeps working: it renders and writes every variant into a new folder,
finds them all unchanged on the second pass and leaves those files untouched (inode and mtime), and
its sectioned texts equal plain Jinja's (the script asserts each).
No time bound: wall time on a shared machine is noise (docs/benchmarks.md has the figures)."""

from __future__ import annotations

import os
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
    lines = proc.stdout.strip().splitlines()
    figures = dict(kv.split("=", 1) for kv in lines[-1].split())
    assert figures["benchmark"] == "render"
    n = int(figures["variants"])
    assert n >= 100
    assert f"first write ({n} files)" in proc.stdout and f"write ({n} unchanged)" in proc.stdout
    assert float(figures["written_s"]) >= float(figures["seconds"]) > 0
    assert "every file kept its inode and mtime" in proc.stdout
    assert float(figures["cpu_s"]) >= float(figures["write_cpu_s"]) >= 0 and float(figures["sync_s"]) >= 0


def test_keep_output_leaves_the_scratch_folder(tmp_path: Path) -> None:
    """--keep-output (runs back to back: no deletion of the previous run's files) leaves the folder
    it names, holding the matrix's renders; without it the folder is gone."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "render.py"), "--quick", "--keep-output"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    kept = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("kept ")]
    assert len(kept) == 1 and Path(kept[0]).parent == tmp_path
    n = int(dict(kv.split("=", 1) for kv in proc.stdout.strip().splitlines()[-1].split())["variants"])
    assert len(list((Path(kept[0]) / "rendered").glob("*/*.Dockerfile"))) == n
