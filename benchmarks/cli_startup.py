"""How fast do `builder --help` and `builder --version` answer (no daemon needed)?

Target: under 0.3 s each. Measured against the floor: a bare `python -c pass` in the same
interpreter, run side by side in this process. Prints one line at the end:
`benchmark=cli-startup help_s=.. version_s=.. python_s=.. ratio_help=..`.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

BUILDER = [sys.executable, "-m", "builder"]


def timed(argv: list[str], runs: int) -> float:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, cwd=Path(__file__).resolve().parents[1])
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="3 runs (CI keeps the script working)")
    args = parser.parse_args()
    runs = 3 if args.quick else args.runs
    help_s = timed([*BUILDER, "--help"], runs)
    version_s = timed([*BUILDER, "--version"], runs)
    python_s = timed([sys.executable, "-c", "pass"], runs)
    print(f"builder --help     median {help_s:.3f} s over {runs} runs")
    print(f"builder --version  median {version_s:.3f} s")
    print(f"python -c pass     median {python_s:.3f} s (floor)")
    print(
        f"benchmark=cli-startup help_s={help_s:.3f} version_s={version_s:.3f} "
        f"python_s={python_s:.3f} ratio_help={help_s / python_s:.1f}"
    )


if __name__ == "__main__":
    main()
