"""Load, validate and render a 1,000-variant matrix: target under 1 s.

The matrix is generated into a temporary directory: Python-only images (framework ``none``,
template family ``tiny``) for CPU, every CUDA line with official images and every ROCm release in
builder/compat/data, on Ubuntu 20.04/22.04/24.04 and Debian 12, amd64 and arm64, many Pythons,
with the exclude rules that keep only cells that can exist. Every cell goes through the same
validation as a real matrix (schema, compat.variant_problems, placeholders) and is rendered with
its content hash.

Measured in a fresh process (cold caches: the first load and render is what CI pays; library
imports are reported separately), wall and CPU time, then the best of three warm repeats. The
alternative it is compared with: the naive way, one ``render_variant`` call (a new Jinja
environment and template compile) per variant.

Prints one line at the end: ``benchmark=render variants=N seconds=S warm_s=.. naive_s=.. ratio=..``.
``--quick``: a ~100-variant matrix (CI keeps the script working).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CUDA_LINES = ["11.8", "12.0", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6", "12.8", "12.9", "13.0", "13.1"]
ROCM_LINES = ["6.0", "6.1", "6.2", "6.3", "6.4", "7.0", "7.1", "7.2"]


def matrix_yaml(pythons: list[str], oses: list[str], platforms: list[str]) -> str:
    accel = ["    - {kind: cpu}"]
    accel += [f'    - {{kind: cuda, version: "{v}"}}' for v in CUDA_LINES]
    accel += [f'    - {{kind: rocm, version: "{v}"}}' for v in ROCM_LINES]

    def tags(kind: str, versions: list[str]) -> str:
        return "[" + ", ".join(("cu" + v.replace(".", "")) if kind == "cuda" else f"rocm{v}" for v in versions) + "]"

    excludes = [
        # CUDA lines without official nvidia/cuda images for that Ubuntu (cuda-images.csv)
        ("ubuntu24.04", tags("cuda", CUDA_LINES[:6])),
        ("ubuntu20.04", tags("cuda", ["13.0", "13.1"])),
        # ROCm releases that do not support that OS (rocm.csv)
        ("ubuntu20.04", tags("rocm", ROCM_LINES[2:])),
        ("ubuntu24.04", tags("rocm", ROCM_LINES[:2])),
        ("debian12", tags("rocm", ROCM_LINES[:3])),
    ]
    lines = [
        "family: tiny",
        "repository: bench/python",
        "axes:",
        "  accelerator:",
        *accel,
        "  framework: {name: none, versions: ['0']}",
        f"  python: [{', '.join(repr(p) for p in pythons)}]",
        f"  os: [{', '.join(oses)}]",
        f"  platform: [{', '.join(platforms)}]",
        "exclude:",
        *[f"  - {{os: {os_}, accelerator: {acc}}}" for os_, acc in excludes if os_ in oses],
    ]
    if "debian12" in oses:
        others = [p for p in pythons if p != "3.11"]
        if others:
            lines.append(f"  - {{os: debian12, python: [{', '.join(repr(p) for p in others)}]}}")
    lines += [
        "packages:",
        "  default: ['six==1.17.0']",
        "base:",
        "  cuda: 'nvidia/cuda:{accel_version}.0-cudnn-runtime-{os_name}{os_version}'",
        "  rocm: 'rocm/dev-{os_name}-{os_version}:{accel_version}'",
        "  cpu: '{os_name}:{os_version}'",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="~100 variants, no naive comparison repeat")
    args = parser.parse_args()
    if args.quick:
        pythons, oses, platforms = ["3.11", "3.12"], ["ubuntu22.04", "debian12"], ["linux/amd64", "linux/arm64"]
    else:
        # 11 Python minors (3.6 ... 3.16: synthetic where no such release exists) give > 1,000 valid cells
        pythons = [f"3.{n}" for n in range(6, 17)]
        oses = ["ubuntu20.04", "ubuntu22.04", "ubuntu24.04", "debian12"]
        platforms = ["linux/amd64", "linux/arm64"]

    t_import = time.perf_counter()
    import jinja2  # noqa: F401  (library imports are start-up cost, reported separately)

    from builder import bases, compat, matrix, render

    compat.variant_problems  # noqa: B018  (attribute access: the package is loaded)
    import_s = time.perf_counter() - t_import
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.yaml"
        path.write_text(matrix_yaml(pythons, oses, platforms))
        locks_dir = Path(tmp) / "locks"
        locks_dir.mkdir()
        bases = bases.BaseResolution()

        def run() -> tuple[int, float, float]:
            t0 = time.perf_counter()
            m = matrix.load_matrix(path, bases=bases)
            t1 = time.perf_counter()
            rendered = render.render_all(m.variants, images_dir=ROOT / "images", locks_dir=locks_dir, bases=bases)
            t2 = time.perf_counter()
            assert len(rendered) == len(m.variants) and len({r.content_hash for r in rendered}) == len(rendered)
            return len(m.variants), t1 - t0, t2 - t1

        cpu0 = time.process_time()
        n, load_s, render_s = run()
        cpu_s = time.process_time() - cpu0
        cold = load_s + render_s
        warm = min(sum(run()[1:]) for _ in range(3))
        m = matrix.load_matrix(path, bases=bases)
        sample = m.variants[:: max(1, len(m.variants) // 50)]
        t0 = time.perf_counter()
        for v in sample:
            render.render_variant(v, images_dir=ROOT / "images", locks_dir=locks_dir, bases=bases)
        naive_render = (time.perf_counter() - t0) * len(m.variants) / len(sample)  # extrapolated

    print(
        f"matrix: {n} variants ({len(pythons)} Pythons x {len(oses)} OSes x {len(platforms)} platforms x accelerators)"
    )
    print(f"import builder.matrix + render       {import_s:.3f} s (not counted)")
    print(f"cold: load + validate {load_s:.3f} s, render {render_s:.3f} s, total {cold:.3f} s (target < 1 s)")
    print(f"cold CPU time {cpu_s:.3f} s (wall time above includes waiting for a shared CPU)")
    print(f"warm: best of 3 total                {warm:.3f} s")
    print(f"naive render (new environment per variant; {len(sample)} timed, scaled to {n}) {naive_render:.3f} s")
    print(
        f"benchmark=render variants={n} seconds={cold:.3f} cpu_s={cpu_s:.3f} "
        f"load_s={load_s:.3f} render_s={render_s:.3f} "
        f"warm_s={warm:.3f} naive_render_s={naive_render:.3f} ratio={naive_render / render_s:.1f}"
    )


if __name__ == "__main__":
    main()
