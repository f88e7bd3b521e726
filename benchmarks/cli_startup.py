"""How fast does builder start, against the peers' start-up and the floor?

- `builder --help` and `builder --version` (no daemon needed; target under 0.3 s each) against a
  bare `python -c pass` in the same interpreter (the floor) and the peers' own start-up:
  `skopeo --version`, `oras version`, `cosign version`.
- `python -c "import click, urllib3"` (`libraries_s`): the command-line parser and the HTTP client
  every registry command imports, and nothing of builder: the floor under `resolve`;
  `ratio_resolve_libraries` is `resolve` over it, which moves less than either between machines
  and loads (builder's own part: 1.49 before round 7, 1.26 after, on the 2-core machine).
- `builder resolve VARIANT --stage dev --no-verify` (start-up, policy, the stage pointer read from
  the registry; issue 19 target: under 0.15 s) against the same tag resolved by
  `oras resolve --plain-http` and `skopeo inspect --format {{.Digest}}`, when the demo's dev
  pointer exists (`bash scripts/demo`); `--no-verify`, because which promoters a checkout trusts
  is local: the trusted resolve costs one signature verification more.

- `builder resolve VARIANT --stage dev` with the trusted-record check, when the pointer carries a
  record by a promoter this checkout trusts (`verified_resolve_s`), against `cosign
  verify-attestation --type <promotion/v1>` of the same digest with the
  checkout's promoter key when cosign and `.builder/keys/builder.pub` are there.

Every round runs each command once (interleaved), medians over the rounds; besides wall time each
command's CPU time (user + system, `getrusage(RUSAGE_CHILDREN)`), which moves far less with the
load of a shared machine. Prints one line at the end: `benchmark=cli-startup help_s=..
version_s=.. python_s=.. ratio_help=.. libraries_s=.. libraries_cpu_s=.. [resolve_s=..
resolve_cpu_s=.. oras_resolve_s=.. ratio_resolve_oras=..]`. A missing peer is left out.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from builder.predicates import PROMOTION_V1

ROOT = Path(__file__).resolve().parents[1]
BUILDER = [sys.executable, "-m", "builder"]
VARIANT = "jax0.7-cpu-py3.11-debian12"
REGISTRY = os.environ.get("BUILDER_REGISTRY") or "127.0.0.1:5000"
DEV_TAG = f"{REGISTRY}/demo/jax:{VARIANT}-dev"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # users' installs have bytecode


def once(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, cwd=ROOT, env=ENV)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def commands() -> dict[str, list[str]]:
    cmds = {
        "help": [*BUILDER, "--help"],
        "version": [*BUILDER, "--version"],
        "python": [sys.executable, "-c", "pass"],
        # the libraries every registry command needs, imported and nothing else: the floor of resolve
        "libraries": [sys.executable, "-c", "import click, urllib3"],
    }
    peers = {"skopeo": ["skopeo", "--version"], "oras": ["oras", "version"], "cosign": ["cosign", "version"]}
    cmds.update({name: argv for name, argv in peers.items() if shutil.which(argv[0])})
    resolve = [*BUILDER, "resolve", VARIANT, "--stage", "dev", "--no-verify"]
    if subprocess.run(resolve, capture_output=True, cwd=ROOT, env=ENV).returncode == 0:
        cmds["resolve"] = resolve
        if shutil.which("oras"):
            cmds["oras_resolve"] = ["oras", "resolve", "--plain-http", DEV_TAG]
        if shutil.which("skopeo"):
            cmds["skopeo_inspect"] = [
                "skopeo",
                "inspect",
                "--tls-verify=false",
                "--format",
                "{{.Digest}}",
                f"docker://{DEV_TAG}",
            ]
    else:
        print(f"no {DEV_TAG} (run `bash scripts/demo`): resolve not measured", file=sys.stderr)
        return cmds
    verified = [*BUILDER, "resolve", VARIANT, "--stage", "dev"]
    if subprocess.run(verified, capture_output=True, cwd=ROOT, env=ENV).returncode == 0:
        cmds["verified_resolve"] = verified
        pub = ROOT / ".builder" / "keys" / "builder.pub"
        cosign = [
            "cosign", "verify-attestation", "--key", str(pub), "--insecure-ignore-tlog",
            "--type", PROMOTION_V1, "--allow-http-registry", DEV_TAG,
        ]  # fmt: skip
        if shutil.which("cosign") and pub.exists() and subprocess.run(cosign, capture_output=True).returncode == 0:
            cmds["cosign_verify"] = cosign
    else:
        print(
            "no record by a promoter this checkout trusts on the dev pointer: verified resolve not measured",
            file=sys.stderr,
        )
    return cmds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="3 runs (CI keeps the script working)")
    args = parser.parse_args()
    runs = 3 if args.quick else args.runs
    cmds = commands()
    for argv in cmds.values():  # warm the page cache and the bytecode once
        once(argv)
    samples: dict[str, list[float]] = {name: [] for name in cmds}
    cpu: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(runs):
        for name, argv in cmds.items():
            wall, used = once(argv)
            samples[name].append(wall)
            cpu[name].append(used)
    med = {name: statistics.median(s) for name, s in samples.items()}
    med_cpu = {name: statistics.median(s) for name, s in cpu.items()}
    for name, argv in cmds.items():
        shown = " ".join(Path(a).name if i == 0 else a for i, a in enumerate(argv))[:60]
        print(f"{shown:<60} {med[name]:.3f} s  (cpu {med_cpu[name]:.3f} s)")
    line = (
        f"benchmark=cli-startup help_s={med['help']:.3f} version_s={med['version']:.3f} "
        f"python_s={med['python']:.3f} ratio_help={med['help'] / med['python']:.1f}"
    )
    for peer in ("skopeo", "oras", "cosign"):
        if peer in med:
            line += f" {peer}_s={med[peer]:.3f}"
    line += f" libraries_s={med['libraries']:.3f} libraries_cpu_s={med_cpu['libraries']:.3f}"
    if "resolve" in med:
        line += f" resolve_s={med['resolve']:.3f} resolve_cpu_s={med_cpu['resolve']:.3f}"
        line += f" ratio_resolve_libraries={med['resolve'] / med['libraries']:.2f}"
        for peer in ("oras_resolve", "skopeo_inspect"):
            if peer in med:
                line += f" {peer}_s={med[peer]:.3f} ratio_resolve_{peer.split('_')[0]}={med['resolve'] / med[peer]:.1f}"
    if "verified_resolve" in med:
        verified = med["verified_resolve"]
        line += f" verified_resolve_s={verified:.3f} verified_resolve_cpu_s={med_cpu['verified_resolve']:.3f}"
        if "cosign_verify" in med:
            cosign = med["cosign_verify"]
            line += f" cosign_verify_s={cosign:.3f} ratio_verified_cosign={verified / cosign:.1f}"
    print(f"(medians of {runs} interleaved rounds)")
    print(line)


if __name__ == "__main__":
    main()
