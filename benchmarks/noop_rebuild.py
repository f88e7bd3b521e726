"""No-op rebuild of a 50-variant matrix whose images exist, from an empty state directory,
against ``docker buildx build`` of the same targets with a warm cache.

Target: under 5 s. The script writes a throwaway project (one matrix: 5 accelerators x 5 Python
versions x 2 OS = 50 variants, a one-line template FROM the mirrored Debian base), makes sure
every image exists (``builder build``, untimed; later runs find them in the registry), then
measures in the same run:

- ``seconds``: ``builder build --json`` as a subprocess (interpreter start, load + validate the
  matrix, render 50 Dockerfiles, 50 registry look-ups) with ``BUILDER_STATE_DIR`` pointing at a
  new directory holding only the machine-local mirror record (the base digest: an input, not
  build state). It must report 50 ``up-to-date`` and build nothing.
- ``buildx_seconds``: ``docker buildx build`` of the same 50 rendered Dockerfiles (same build
  args and secrets, no output: the cheapest thing buildx can do), with the same number of
  parallel workers, after the cache was warmed (by the set-up builds in this run, or by an
  untimed warm-up pass when the images already existed).

Prints one line at the end:
``benchmark=noop-rebuild variants=50 seconds=.. buildx_seconds=.. ratio=..``.
``--quick``: 5 variants (CI keeps the script working).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ACCELERATORS = "    - {kind: cpu}\n" + "".join(
    f'    - {{kind: cuda, version: "{v}"}}\n' for v in ("12.5", "12.6", "12.8", "12.9")
)
MATRIX = """\
family: bench
repository: {repo}
axes:
  accelerator:
{accelerators}  framework:
    name: none
    versions: ["0"]
  python: {pythons}
  os: {oses}
base:
  default: "mirror:debian:bookworm"
"""
TEMPLATE = """\
ARG BASE_IMAGE={{ base_default }}
FROM ${BASE_IMAGE}
RUN echo "{{ variant.id }} {{ accelerator.tag }} python{{ python }} {{ os }}" > /variant.txt
"""


def write_project(d: Path, registry: str, quick: bool) -> None:
    pythons = ["3.11"] if quick else ["3.9", "3.10", "3.11", "3.12", "3.13"]
    oses = ["ubuntu24.04"] if quick else ["ubuntu22.04", "ubuntu24.04"]
    repo = "bench/noop-quick" if quick else "bench/noop"
    (d / "matrices").mkdir(parents=True, exist_ok=True)
    (d / "images" / "bench").mkdir(parents=True, exist_ok=True)
    (d / "matrices" / "bench.yaml").write_text(
        MATRIX.format(repo=repo, accelerators=ACCELERATORS, pythons=json.dumps(pythons), oses=json.dumps(oses))
    )
    (d / "images" / "bench" / "Dockerfile.j2").write_text(TEMPLATE)
    (d / "builder.toml").write_text(f'registry = "{registry}"\nstate_dir = "state"\nworkers = 2\n')
    (d / "state").mkdir(exist_ok=True)
    shutil.copy(ROOT / ".builder" / "mirror.json", d / "state" / "mirror.json")


def builder_build(project: Path, env: dict[str, str]) -> tuple[float, dict[str, int]]:
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "builder", "-C", str(project), "build", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **env},
        timeout=3600,
    )
    seconds = time.perf_counter() - t
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        for log in sorted((project / "state" / "logs").glob("*.log")):
            text = log.read_text(errors="replace")
            if "# FAILED" in text:
                sys.stderr.write(f"--- {log.name} (tail)\n" + "\n".join(text.splitlines()[-25:]) + "\n")
        raise SystemExit(f"builder build failed with exit code {proc.returncode}")
    return seconds, json.loads(proc.stdout)["counts"]


def buildx_pass(project: Path, workers: int) -> float:
    """``docker buildx build`` of every rendered variant (no output), ``workers`` at a time."""
    from builder.build.plan import DEFAULT_CA_BUNDLE, default_secrets
    from builder.build.variant import materialize
    from builder.config import load_config
    from builder.variants import render_matrices

    cfg = load_config(project, {})
    rendered = render_matrices(cfg)
    secrets = default_secrets(DEFAULT_CA_BUNDLE)
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for r in rendered:
            ctx, dockerfile = materialize(r, Path(tmp) / r.variant.id)
            cmd = ["docker", "buildx", "build", "--progress", "quiet", "--file", str(dockerfile)]
            for k, v in r.build_args:
                cmd += ["--build-arg", f"{k}={v}"]
            for sid, src in secrets:
                cmd += ["--secret", f"id={sid},src={src}"]
            jobs.append([*cmd, str(ctx)])
        t = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            for proc in pool.map(lambda c: subprocess.run(c, capture_output=True, text=True, check=False), jobs):
                if proc.returncode != 0:
                    raise SystemExit(f"docker buildx build failed: {proc.stderr[-2000:]}")
        return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="5 variants (CI keeps the script working)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    registry = os.environ.get("BUILDER_REGISTRY", "127.0.0.1:5000")
    with tempfile.TemporaryDirectory(prefix="bench-noop-") as tmp:
        project = Path(tmp) / "project"
        write_project(project, registry, args.quick)
        env = {"BUILDER_REGISTRY": registry, "BUILDER_WORKERS": str(args.workers)}
        setup_s, counts = builder_build(project, env)
        n = sum(counts.values())
        print(f"set-up: {counts} in {setup_s:.1f} s")
        if counts["built"] < n:
            warm = buildx_pass(project, args.workers)
            print(f"buildx warm-up pass (untimed for the ratio): {warm:.1f} s")

        fresh = Path(tmp) / "fresh-state"
        fresh.mkdir()
        shutil.copy(project / "state" / "mirror.json", fresh / "mirror.json")
        seconds, noop = builder_build(project, {**env, "BUILDER_STATE_DIR": str(fresh)})
        if noop != {"built": 0, "up-to-date": n, "signed": 0, "failed": 0}:
            raise SystemExit(f"the no-op run was not a no-op: {noop}")
        print(f"builder build (no-op, empty state dir): {seconds:.2f} s for {n} variants {noop}")

        buildx_seconds = buildx_pass(project, args.workers)
        print(f"docker buildx build x {n} (warm cache, {args.workers} workers): {buildx_seconds:.1f} s")
    print(
        f"benchmark=noop-rebuild variants={n} seconds={seconds:.2f} buildx_seconds={buildx_seconds:.1f} "
        f"ratio={buildx_seconds / seconds:.1f}"
    )


if __name__ == "__main__":
    main()
