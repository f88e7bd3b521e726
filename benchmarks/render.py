"""Load, validate, render and write a generated matrix: 1,070 variants (target < 1 s) or, with
``--variants 10000``, 10,000 (issue #19: rendered and written in under 2 s).

The matrix is generated into a temporary directory: Python-only images (framework ``none``,
template family ``tiny``) for CPU, every CUDA line with official images and every ROCm release in
builder/compat/data, on Ubuntu 20.04/22.04/24.04 and Debian 12, amd64 and arm64, many Pythons,
with the exclude rules that keep only cells that can exist. Every cell goes through the same
validation as a real matrix (schema, compat.variant_problems, placeholders) and is rendered with
its content hash.

What a user sees, measured in a fresh process (cold caches: the first load and render is what CI
pays; library imports are reported separately), wall and CPU time:

1. *first render*: load + validate, render, and the write into a folder that does not exist yet
   (``render.write_renders``: one ``<matrix>/<id>.Dockerfile`` per variant, each one ``open``,
   ``write``, ``close``); ``written_s`` is this figure (#19's target);
2. *re-render* over that output (the common case): load, render, and a write that finds every file
   unchanged and writes none of them (the script asserts that each file keeps its inode and
   modification time, so docker's build context and git see no change); ``rerender_s``.

Method: ``os.sync()`` runs before the clock starts and again after the script's own clean-up;
the time of the first sync is printed (not counted). On a file system without a journal (the
development VM's root: ``/proc/fs/jbd2`` is empty) ext4 does not reuse an inode deleted less than
60 s ago (300 s more while its inode-table block is dirty) and checks every such inode, one by one,
each time it allocates one (``recently_deleted`` in fs/ext4/ialloc.c,
https://github.com/torvalds/linux/blob/master/fs/ext4/ialloc.c): creating 10,000 files within a
minute of deleting 10,000 costs seconds of system CPU (``perf``: half of it in
``recently_deleted``) against 0.3-0.4 s otherwise. The sync shortens that window to 60 s; it does
not close it. A user's render does not delete the previous output first: for runs back to back,
``--keep-output`` leaves each run's folder in place (delete them after the last run, and wait a
minute before a timed run).

Then the best of three warm repeats of load + render. Peers in the same run: the naive way, one
``render_variant`` call (a new Jinja environment and template compile) per variant, extrapolated
from a sample, and plain Jinja (one environment, ``Template.render`` per variant, no sections) for
the Dockerfile texts alone, against the sectioned renderer's texts (:mod:`builder.templating`).

Prints one line at the end: ``benchmark=render variants=N seconds=S written_s=.. ...``
(``seconds``: load + render, ``written_s``: load + render + first write, ``rerender_s``: load +
render + unchanged write, ``*_cpu_s``: CPU seconds of the same, ``write_cpu_s``: of the first
write alone). ``--quick``: a ~100-variant matrix (CI keeps the script working).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    parser.add_argument(
        "--keep-output",
        action="store_true",
        help="leave the scratch folder (its path is printed; delete it after the last run): runs back to "
        "back then do not create their files right after the previous run deleted as many",
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

    from builder import compat, render  # noqa: F401  (loaded before the clock)

    compat.variant_problems  # noqa: B018  (attribute access: the package is loaded)
    import_s = time.perf_counter() - t_import
    tmp = tempfile.mkdtemp(prefix="builder-render-bench-")
    try:
        path = Path(tmp) / "bench.yaml"
        path.write_text(matrix_yaml(pythons, oses, platforms))
        f = _measure(path, Path(tmp))
    finally:
        if args.keep_output:
            print(f"kept {tmp} (--keep-output: delete it after the last run)")
        else:
            shutil.rmtree(tmp)
        os.sync()  # this clean-up's work is not left to the next run's timed write

    n = f["variants"]
    print(
        f"matrix: {n} variants ({len(pythons)} Pythons x {len(oses)} OSes x {len(platforms)} platforms x accelerators)"
    )
    print(f"import builder.matrix + render       {import_s:.3f} s (not counted)")
    print(f"os.sync() before the clock            {f['sync_s']:.3f} s (not counted)")
    cold = f["load_s"] + f["render_s"]
    print(f"cold: load + validate {f['load_s']:.3f} s, render {f['render_s']:.3f} s, total {cold:.3f} s")
    print(f"      first write ({n} files) {f['write_s']:.3f} s: rendered and written {cold + f['write_s']:.3f} s")
    print(f"      CPU time {f['cpu_s']:.3f} s, of it the write {f['write_cpu_s']:.3f} s (wall: also waiting for a CPU)")
    again = f["load2_s"] + f["render2_s"] + f["write2_s"]
    print(
        f"again: load {f['load2_s']:.3f} s, render {f['render2_s']:.3f} s, "
        f"write ({n} unchanged) {f['write2_s']:.3f} s, "
        f"total {again:.3f} s, CPU {f['rerender_cpu_s']:.3f} s (write {f['rerender_write_cpu_s']:.3f} s); "
        f"every file kept its inode and mtime"
    )
    print(f"warm: best of 3 load + render        {f['warm_s']:.3f} s")
    print(f"naive render (new environment per variant; {f['sample']} timed, scaled to {n}) {f['naive_s']:.3f} s")
    print(f"Dockerfile texts: plain Jinja {f['plain_s']:.3f} s, sectioned {f['sectioned_s']:.3f} s")
    print(
        f"benchmark=render variants={n} seconds={cold:.3f} written_s={cold + f['write_s']:.3f} "
        f"rerender_s={again:.3f} cpu_s={f['cpu_s']:.3f} rerender_cpu_s={f['rerender_cpu_s']:.3f} "
        f"write_cpu_s={f['write_cpu_s']:.3f} rerender_write_cpu_s={f['rerender_write_cpu_s']:.3f} "
        f"sync_s={f['sync_s']:.3f} load_s={f['load_s']:.3f} render_s={f['render_s']:.3f} "
        f"write_s={f['write_s']:.3f} warm_s={f['warm_s']:.3f} naive_render_s={f['naive_s']:.3f} "
        f"ratio={f['naive_s'] / f['render_s']:.1f} plain_text_s={f['plain_s']:.3f} "
        f"sectioned_text_s={f['sectioned_s']:.3f} text_ratio={f['plain_s'] / f['sectioned_s']:.2f}"
    )


def _measure(path: Path, tmp: Path) -> dict[str, Any]:
    """The figures of one run over the matrix file ``path`` (scratch folders under ``tmp``): the
    first render into a new folder, the re-render over it, warm repeats and the peers (seconds;
    ``variants`` and ``sample`` are counts). Asserts what a render must do (every file added, then
    every file unchanged and not rewritten)."""
    from builder import bases, matrix, render

    locks_dir = tmp / "locks"
    locks_dir.mkdir()
    out_dir = tmp / "rendered"  # created by the first write, as `builder render` does
    resolution = bases.BaseResolution()

    def run(write: bool) -> tuple[int, float, float, float, float, render.RenderReport | None]:
        t0 = time.perf_counter()
        m = matrix.load_matrix(path, bases=resolution)
        t1 = time.perf_counter()
        rendered = render.render_all(m.variants, images_dir=ROOT / "images", locks_dir=locks_dir, bases=resolution)
        t2 = time.perf_counter()
        c2 = time.process_time()
        report = render.write_renders(out_dir, rendered) if write else None
        t3 = time.perf_counter()
        write_cpu = time.process_time() - c2
        assert len(rendered) == len(m.variants) and len({r.content_hash for r in rendered}) == len(rendered)
        return len(m.variants), t1 - t0, t2 - t1, t3 - t2, write_cpu, report

    f: dict[str, Any] = {}
    t_sync = time.perf_counter()
    os.sync()  # earlier runs' deletions and this run's matrix file flushed before the clock starts
    f["sync_s"] = time.perf_counter() - t_sync
    cpu0 = time.process_time()
    n, f["load_s"], f["render_s"], f["write_s"], f["write_cpu_s"], first = run(write=True)
    f["cpu_s"] = time.process_time() - cpu0
    files = _identities(out_dir)
    cpu1 = time.process_time()
    _, f["load2_s"], f["render2_s"], f["write2_s"], f["rerender_write_cpu_s"], again = run(write=True)
    f["rerender_cpu_s"] = time.process_time() - cpu1
    assert first is not None and again is not None
    assert len(first.added) == n and again.unchanged == n and not again.stale
    assert len(files) == n and _identities(out_dir) == files, "an unchanged render was rewritten"
    f["variants"] = n
    f["warm_s"] = min(sum(run(write=False)[1:3]) for _ in range(3))
    m = matrix.load_matrix(path, bases=resolution)
    sample = m.variants[:: max(1, len(m.variants) // 50)]
    t0 = time.perf_counter()
    for v in sample:
        render.render_variant(v, images_dir=ROOT / "images", locks_dir=locks_dir, bases=resolution)
    f["naive_s"] = (time.perf_counter() - t0) * len(m.variants) / len(sample)  # extrapolated
    f["sample"] = len(sample)
    f["plain_s"], f["sectioned_s"] = _texts(m.variants, resolution)
    return f


def _identities(out_dir: Path) -> dict[str, tuple[int, int]]:
    """Each render file (relative path) -> (inode, mtime in ns): a file written again, even with the
    same bytes, gets a new mtime (and, replaced by a rename, a new inode)."""
    found: dict[str, tuple[int, int]] = {}
    for folder in os.scandir(out_dir):
        for entry in os.scandir(folder.path):
            st = entry.stat()
            found[f"{folder.name}/{entry.name}"] = (st.st_ino, st.st_mtime_ns)
    return found


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
