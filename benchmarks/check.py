"""``builder check`` of the CPU demo image (a fresh process: start-up, registry pin, engine facts,
the probe container, and the declared tests and benchmark) against bare ``docker run`` of exactly
the same containers, interleaved.

Target (issue 19 item 4): builder <= 1.25x the bare runs. The peer is not guessed: one recording
round runs builder with ``$BUILDER_DOCKER`` pointing at a wrapper that saves each ``docker run``
argv and its standard input (the probe program, a test script) and then runs it; every later round
times builder as a user runs it (no wrapper, ``--no-attest``) and, interleaved, the recorded runs
replayed one after another with plain ``docker`` (a fresh ``--name`` each). So the ratio is
builder's own cost on top of the containers it must run.

Two cases: ``full`` (the project, so the variant's declared tests and benchmark run too) and
``device`` (from an empty project directory, so only the device-check probe runs).

CPU time (user + system, load-independent where wall time is not) is measured for both sides from
the finished process tree (``getrusage(RUSAGE_CHILDREN)``): builder's includes the ``docker`` clients
it starts (``docker info``, ``docker run``), the peer's is those ``docker run`` clients alone, so
``own_cpu_s`` is builder's own work on top of them (the containers' CPU is the engine's, on neither).

Needs the demo image (``bash scripts/demo``) in 127.0.0.1:5000. Ends with one line per case:
``benchmark=check case=.. builder_s=.. docker_s=.. ratio=.. builder_cpu_s=.. docker_cpu_s=..
own_cpu_s=..`` (medians; ``--quick``: the device case, one round).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the demo JAX CPU variant (``bash scripts/demo``) in $BUILDER_REGISTRY (default 127.0.0.1:5000)
IMAGE = f"{os.environ.get('BUILDER_REGISTRY') or '127.0.0.1:5000'}/demo/jax:jax0.7-cpu-py3.11-debian12"

#: saves ``docker run`` argv (JSON) and stdin under $BENCH_RECORD, then runs it
WRAPPER = """#!/bin/sh
if [ "$1" = run ]; then
  n=$(ls "$BENCH_RECORD" | grep -c "argv$")
  python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "$@" > "$BENCH_RECORD/$n.argv"
  case " $* " in
    *" -i "*) tee "$BENCH_RECORD/$n.stdin" | docker "$@"; exit $? ;;
    *) : > "$BENCH_RECORD/$n.stdin"; exec docker "$@" ;;
  esac
fi
exec docker "$@"
"""


def builder_argv() -> list[str]:
    return [sys.executable, "-m", "builder", "check", IMAGE, "--no-attest"]


def children_cpu() -> float:
    """User + system seconds of every finished child process (and the children they waited for)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], cwd: Path, env: dict[str, str], stdin: bytes | None = None) -> tuple[float, float]:
    """Run ``cmd``; its wall time and the CPU time of its process tree, in seconds."""
    cpu, t = children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, input=stdin, capture_output=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd[:8])} ... failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return wall, children_cpu() - cpu


def record(cwd: Path, env: dict[str, str], work: Path) -> list[tuple[list[str], bytes | None]]:
    """The ``docker run`` argv and stdin of each container one ``builder check`` runs, in order."""
    rec = work / f"rec-{uuid.uuid4().hex[:6]}"
    rec.mkdir()
    wrapper = work / "docker-wrapper"
    wrapper.write_text(WRAPPER)
    wrapper.chmod(0o755)
    timed(builder_argv(), cwd, {**env, "BUILDER_DOCKER": str(wrapper), "BENCH_RECORD": str(rec)})
    runs: list[tuple[list[str], bytes | None]] = []
    for n in range(len(list(rec.glob("*.argv")))):
        argv = json.loads((rec / f"{n}.argv").read_text())
        data = (rec / f"{n}.stdin").read_bytes()
        runs.append((argv, data if "-i" in argv else None))
    return runs


def replay(runs: list[tuple[list[str], bytes | None]], env: dict[str, str]) -> tuple[float, float]:
    """The recorded ``docker run``s one after another (a fresh ``--name`` each): wall and CPU seconds."""
    wall = cpu = 0.0
    for recorded, data in runs:
        argv = list(recorded)
        argv[argv.index("--name") + 1] = f"bench-check-{uuid.uuid4().hex[:8]}"
        w, c = timed(["docker", *argv], ROOT, env, data)
        wall, cpu = wall + w, cpu + c
    return wall, cpu


def require_image(env: dict[str, str]) -> None:
    probe = subprocess.run(["docker", "buildx", "imagetools", "inspect", IMAGE], env=env, capture_output=True)
    if probe.returncode != 0:
        sys.exit(f"{IMAGE} is not in the registry: run `bash scripts/demo` first")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="the device case, one round")
    parser.add_argument("--case", choices=("full", "device", "both"), default="both", help="which case to run")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # users' installs have bytecode
    require_image(env)
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        work = Path(tmp)
        empty = work / "project"
        (empty / "matrices").mkdir(parents=True)
        (empty / "builder.toml").write_text(f'registry = "{IMAGE.split("/", 1)[0]}"\n')
        env["PYTHONPATH"] = str(ROOT)
        chosen = "device" if args.quick else args.case
        cases = tuple((name, cwd) for name, cwd in (("full", ROOT), ("device", empty)) if chosen in (name, "both"))
        for case, cwd in cases:
            runs = record(cwd, env, work)
            print(f"{case}: {len(runs)} container(s) per check", file=sys.stderr)
            mine: list[tuple[float, float]] = []
            peer: list[tuple[float, float]] = []
            for i in range(rounds):
                mine.append(timed(builder_argv(), cwd, env))
                peer.append(replay(runs, env))
                print(
                    f"  round {i + 1}: builder {mine[-1][0]:.2f} s (CPU {mine[-1][1]:.3f} s), "
                    f"docker run {peer[-1][0]:.2f} s (CPU {peer[-1][1]:.3f} s)",
                    file=sys.stderr,
                )
            b, d = statistics.median(w for w, _ in mine), statistics.median(w for w, _ in peer)
            bc, dc = statistics.median(c for _, c in mine), statistics.median(c for _, c in peer)
            own = statistics.median(m[1] - p[1] for m, p in zip(mine, peer, strict=True))
            print(
                f"benchmark=check case={case} builder_s={b:.2f} docker_s={d:.2f} ratio={b / d:.2f} "
                f"builder_cpu_s={bc:.3f} docker_cpu_s={dc:.3f} own_cpu_s={own:.3f}"
            )


if __name__ == "__main__":
    main()
