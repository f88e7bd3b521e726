"""Load, validate, render and write a generated matrix: 1,070 variants (target < 1 s) or, with
``--variants 10000``, 10,000 (issue #19: rendered and written in under 2 s).

The matrix is generated into a temporary directory: Python-only images (framework ``none``,
template family ``tiny``) for CPU, every CUDA line with official images and every ROCm release in
builder/compat/data, on Ubuntu 20.04/22.04/24.04 and Debian 12, amd64 and arm64, many Pythons,
with the exclude rules that keep only cells that can exist. Every cell goes through the same
validation as a real matrix (schema, compat.variant_problems, placeholders) and is rendered with
its content hash.

Measured in a fresh process (cold caches: the first load and render is what CI pays; library
imports are reported separately), wall and CPU time: load + validate, render, the first write into
an empty folder (``render.write_renders``: one ``<matrix>/<id>.Dockerfile`` per variant) and a
second full pass whose write finds every file unchanged (the common re-render); then the best of
three warm repeats of load + render. Peers in the same run: the naive way, one ``render_variant``
call (a new Jinja environment and template compile) per variant, extrapolated from a sample, and
plain Jinja (one environment, ``Template.render`` per variant, no sections) for the Dockerfile
texts alone, against the sectioned renderer's texts (:mod:`builder.templating`).

Prints one line at the end: ``benchmark=render variants=N seconds=S written_s=.. ...``
(``seconds``: load + render, ``written_s``: load + render + first write, ``rerender_s``: load +
render + unchanged write). ``--quick``: a ~100-variant matrix (CI keeps the script working).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from builder.bases import BaseResolution
    from builder.models import Variant

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


def pythons_for(variants: int) -> list[str]:
    """Python minors (3.6, 3.7, ...: synthetic where no such release exists) enough for ``variants`` cells."""
    oses, platforms = ["ubuntu20.04", "ubuntu22.04", "ubuntu24.04", "debian12"], ["linux/amd64", "linux/arm64"]
    from builder import matrix

    with tempfile.TemporaryDirectory() as tmp:
        n = 11
        while True:
            pythons = [f"3.{k}" for k in range(6, 6 + n)]
            path = Path(tmp) / "count.yaml"
            path.write_text(matrix_yaml(pythons, oses, platforms))
            count = len(matrix.load_matrix(path).variants)
            if count >= variants:
                return pythons
            n = max(n + 1, int(n * variants / count))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="~100 variants, no naive comparison repeat")
    parser.add_argument(
        "--variants", type=int, default=1000, metavar="N", help="at least N variants (default 1000; #19: 10000)"
    )
    args = parser.parse_args()
    oses = ["ubuntu20.04", "ubuntu22.04", "ubuntu24.04", "debian12"]
    platforms = ["linux/amd64", "linux/arm64"]
    if args.quick:
        pythons, oses = ["3.11", "3.12"], ["ubuntu22.04", "debian12"]
    elif args.variants <= 1070:
        pythons = [f"3.{n}" for n in range(6, 17)]  # 11 Python minors: the 1,070-variant matrix
    else:
        pythons = pythons_for(args.variants)

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
        out_dir = Path(tmp) / "rendered"
        resolution = bases.BaseResolution()

        def run(write: bool) -> tuple[int, float, float, float, render.RenderReport | None]:
            t0 = time.perf_counter()
            m = matrix.load_matrix(path, bases=resolution)
            t1 = time.perf_counter()
            rendered = render.render_all(m.variants, images_dir=ROOT / "images", locks_dir=locks_dir, bases=resolution)
            t2 = time.perf_counter()
            report = render.write_renders(out_dir, rendered) if write else None
            t3 = time.perf_counter()
            assert len(rendered) == len(m.variants) and len({r.content_hash for r in rendered}) == len(rendered)
            return len(m.variants), t1 - t0, t2 - t1, t3 - t2, report

        cpu0 = time.process_time()
        n, load_s, render_s, write_s, first = run(write=True)
        cpu_s = time.process_time() - cpu0
        cpu1 = time.process_time()
        _, load2_s, render2_s, write2_s, again = run(write=True)
        cpu2_s = time.process_time() - cpu1
        assert first is not None and again is not None
        assert len(first.added) == n and again.unchanged == n and not again.stale
        cold = load_s + render_s
        warm = min(sum(run(write=False)[1:3]) for _ in range(3))
        m = matrix.load_matrix(path, bases=resolution)
        sample = m.variants[:: max(1, len(m.variants) // 50)]
        t0 = time.perf_counter()
        for v in sample:
            render.render_variant(v, images_dir=ROOT / "images", locks_dir=locks_dir, bases=resolution)
        naive_render = (time.perf_counter() - t0) * len(m.variants) / len(sample)  # extrapolated
        plain_s, sectioned_s = _texts(m.variants, resolution)

    print(
        f"matrix: {n} variants ({len(pythons)} Pythons x {len(oses)} OSes x {len(platforms)} platforms x accelerators)"
    )
    print(f"import builder.matrix + render       {import_s:.3f} s (not counted)")
    print(f"cold: load + validate {load_s:.3f} s, render {render_s:.3f} s, total {cold:.3f} s")
    print(f"      first write ({len(first.added)} files) {write_s:.3f} s: rendered and written {cold + write_s:.3f} s")
    print(f"      CPU time {cpu_s:.3f} s (wall time above includes waiting for a shared CPU)")
    print(
        f"again: load {load2_s:.3f} s, render {render2_s:.3f} s, write ({again.unchanged} unchanged) {write2_s:.3f} s, "
        f"total {load2_s + render2_s + write2_s:.3f} s, CPU {cpu2_s:.3f} s"
    )
    print(f"warm: best of 3 load + render        {warm:.3f} s")
    print(f"naive render (new environment per variant; {len(sample)} timed, scaled to {n}) {naive_render:.3f} s")
    print(f"Dockerfile texts: plain Jinja {plain_s:.3f} s, sectioned {sectioned_s:.3f} s")
    print(
        f"benchmark=render variants={n} seconds={cold:.3f} written_s={cold + write_s:.3f} "
        f"rerender_s={load2_s + render2_s + write2_s:.3f} cpu_s={cpu_s:.3f} rerender_cpu_s={cpu2_s:.3f} "
        f"load_s={load_s:.3f} render_s={render_s:.3f} write_s={write_s:.3f} warm_s={warm:.3f} "
        f"naive_render_s={naive_render:.3f} ratio={naive_render / render_s:.1f} "
        f"plain_text_s={plain_s:.3f} sectioned_text_s={sectioned_s:.3f} text_ratio={plain_s / sectioned_s:.2f}"
    )


def _texts(variants: Sequence[Variant], bases: BaseResolution) -> tuple[float, float]:
    """Seconds to make every variant's Dockerfile text with plain Jinja (one environment,
    ``Template.render``) and with the sectioned renderer; asserts the texts are the same."""
    import jinja2

    from builder import render
    from builder.templating import SectionedTemplate, SectionLoader

    names = {"tiny/Dockerfile.j2"} | {f"{v.family}/Dockerfile.j2" for v in variants}
    envs = [
        render.jinja_environment(loader)
        for loader in (
            jinja2.FileSystemLoader(str(ROOT / "images")),
            SectionLoader(str(ROOT / "images"), volatile=render._VOLATILE),
        )
    ]
    plain_env, sectioned_env = envs
    inputs = [
        (f"{v.family}/Dockerfile.j2", render.template_variables(v, bases.resolve(v.base.reference))) for v in variants
    ]
    plain = {name: plain_env.get_template(name) for name in names}
    t0 = time.perf_counter()
    plain_texts = [plain[name].render(variables) for name, variables in inputs]
    t1 = time.perf_counter()
    sectioned = {name: SectionedTemplate(sectioned_env, name, frozenset(inputs[0][1])) for name in names}
    texts = [sectioned[name].render(variables) for name, variables in inputs]
    t2 = time.perf_counter()
    assert texts == plain_texts, "sectioned render differs from Template.render"
    return t1 - t0, t2 - t1


if __name__ == "__main__":
    main()
