"""``builder promote --confirm`` end to end (a fresh process: start-up, policy, evidence, copy,
signed record, ledger) against ``skopeo copy --preserve-digests`` of the same digest, interleaved.

Target (issue 19): builder <= 1.5x skopeo. Each round promotes the signed source image of
``benchmarks/promote.py`` (``bench/promote-src:p-<size>mib``, pushed and signed here when missing)
into a new stage repository of the same registry (cross-repository mounts, no bytes copied), and
skopeo copies the same digest into another new repository (it mounts too). The policy file is
the same in every round, as a user's is (its validated copy is read from ``<state_dir>/cache``
after one untimed warm-up promotion); each round's new destination comes from a new
``BUILDER_REPOSITORY_PREFIX``.

Ends with one line: ``benchmark=promote-cli size_mib=.. builder_s=.. skopeo_s=.. ratio=..``
(``--quick``: 16 MiB, 2 rounds).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import promote as bench_promote  # the source image and the policy of benchmarks/promote.py

from builder.registry import RegistryClient
from builder.signing.keys import load_signer
from builder.signing.sign import sign_image


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="16 MiB, 2 rounds")
    args = parser.parse_args()
    size, rounds = (16, 2) if args.quick else (args.size_mib, args.rounds)
    skopeo = shutil.which("skopeo")
    if skopeo is None:
        sys.exit("skopeo is not installed: cannot measure the reference")
    registry = os.environ.get("BUILDER_REGISTRY", "127.0.0.1:5000")  # as the other benchmarks and tests
    with tempfile.TemporaryDirectory(prefix="bench-promote-cli-") as tmp:
        work = Path(tmp)
        key, pub = bench_promote.write_fixed_key_pair(work / "keys")
        setup = RegistryClient(registry, insecure=True)
        variant = f"p-{size}mib"
        digest = bench_promote.ensure_big(setup, variant, size)
        sign_image(setup, bench_promote.SRC_REPO, digest, load_signer(key, None), lock_dir=work / "locks")
        (work / "builder.toml").write_text(f'registry = "{registry}"\nstate_dir = ".builder"\n')
        (work / "matrices").mkdir()
        source = f"{registry}/{bench_promote.SRC_REPO}:{variant}"
        policy = bench_promote.write_policy(work / "policy.yaml", pub, "rel")
        builder = [sys.executable, "-m", "builder", "promote", source, "--variant-id", variant, "--to", "rel"]
        builder += ["--confirm", "--policy", str(policy), "--key", str(key)]
        ours: list[float] = []
        theirs: list[float] = []
        for r in range(-1, rounds):  # round -1: the untimed warm-up
            prefix = f"bench/pcli-{uuid.uuid4().hex[:10]}"
            env = {**os.environ, "BUILDER_REPOSITORY_PREFIX": prefix}
            copy = [skopeo, "copy", "--quiet", "--src-tls-verify=false", "--dest-tls-verify=false"]
            copy += ["--preserve-digests", f"docker://{source}", f"docker://{registry}/{prefix}-skopeo/src:copied"]
            if r < 0:
                timed(builder, work, env)
                continue
            for which in ("builder", "skopeo") if r % 2 == 0 else ("skopeo", "builder"):
                if which == "builder":
                    ours.append(timed(builder, work, env))
                else:
                    theirs.append(timed(copy, work))
            dst = f"{prefix}/rel/{bench_promote.SRC_REPO}"
            assert setup.resolve(dst, f"{variant}-rel") == digest
            print(f"round {r + 1}: builder promote --confirm {ours[-1]:.3f} s, skopeo copy {theirs[-1]:.3f} s")
        b, s = statistics.median(ours), statistics.median(theirs)
    print(f"medians over {rounds} rounds: builder {b:.3f} s, skopeo {s:.3f} s, ratio {b / s:.1f}x (target <= 1.5x)")
    print(f"benchmark=promote-cli size_mib={size} builder_s={b:.3f} skopeo_s={s:.3f} ratio={b / s:.2f}")


if __name__ == "__main__":
    main()
