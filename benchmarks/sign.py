"""Signing plus one attestation on an image already in the registry, against `cosign sign --key`.

Target: under 200 ms on loopback. Each run takes fresh tiny images already pushed to the
registry (so every run really writes new .sig and .att manifests) and measures, in this process:

- ``ms``: resolve the tag to a digest, sign and attest one SLSA provenance predicate with
  ``sign_and_attest_build`` (what the build step calls per image, key loaded once: the .sig and
  .att read-modify-writes run concurrently; each is GET, 2 blob uploads in parallel, PUT, re-read);
- ``cold_ms``: the same on another image, starting with loading the encrypted key (PKCS#8,
  PBKDF2-HMAC-SHA256 600k rounds: deliberately slow, ``key_ms``);
- ``cosign_ms``: ``cosign sign --key K --tlog-upload=false -y REF@digest`` on the same image, the
  same key (written in cosign's format), a signature only (no attestation);
- ``cli_ms``: ``builder sign`` + ``builder attest`` as two processes (for reference).

cosign has no way to keep a key loaded, so its figure includes process start and its scrypt
key decryption; compare it with ``cold_ms`` (``cold_ratio``) for like with like.
Ends with ``benchmark=sign ms=.. cold_ms=.. key_ms=.. cosign_ms=.. cli_ms=.. ratio=.. cold_ratio=..``
(ratio = ms / cosign_ms; below 1: faster than cosign signing alone). ``--quick``: 3 runs.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from builder.registry import RegistryClient  # noqa: E402
from builder.signing import cosign_key, keys, sign, verify  # noqa: E402
from tests.integration.test_sign import push_tiny_image  # noqa: E402

PASSWORD = "benchmark-password"
PROVENANCE = {
    "buildDefinition": {
        "buildType": "https://builder-project.github.io/buildtypes/docker/v1",
        "externalParameters": {},
    },
    "runDetails": {"builder": {"id": "https://builder-project.github.io/benchmark"}, "metadata": {}},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="3 runs (CI keeps the script working)")
    parser.add_argument("--registry", default=os.environ.get("BUILDER_REGISTRY", "127.0.0.1:5000"))
    args = parser.parse_args()
    runs = 3 if args.quick else args.runs
    cosign_bin = shutil.which("cosign")
    if cosign_bin is None:
        sys.exit("cosign is not on PATH: run `bash scripts/setup`")
    client = RegistryClient(args.registry, insecure=True)
    repo = f"bench/sign-{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        key_path, _, _ = keys.generate_key_pair(work / "keys", PASSWORD)
        cosign_file = work / "cosign.key"
        cosign_file.write_bytes(cosign_key.cosign_key_pem(keys.load_signer(key_path, PASSWORD).private_key, PASSWORD))
        tags = [f"run{n}" for n in range(runs * 2 + 1)]
        digests = {t: push_tiny_image(client, repo, t, f"benchmark {repo} {t}\n".encode()) for t in tags}
        lock_dir = work / "locks"
        ours, warm, key_load, theirs, cli = [], [], [], [], []
        warm_signer = keys.load_signer(key_path, PASSWORD)
        # warm-up: connections, imports, cosign's first start
        sign.sign_image(client, repo, digests[tags[-1]], warm_signer, lock_dir=lock_dir)
        env = {**os.environ, "COSIGN_PASSWORD": PASSWORD, "BUILDER_KEY_PASSWORD": PASSWORD}
        env["BUILDER_REGISTRY"], env["BUILDER_STATE_DIR"] = args.registry, str(work / "state")
        for n in range(runs):
            tag, tag2 = tags[2 * n], tags[2 * n + 1]
            t0 = time.perf_counter()
            signer = keys.load_signer(key_path, PASSWORD)
            key_load.append(time.perf_counter() - t0)
            digest = client.resolve(repo, tag)
            sign.sign_and_attest_build(client, repo, digest, signer, PROVENANCE, lock_dir=lock_dir)
            ours.append(time.perf_counter() - t0)

            t0 = time.perf_counter()
            digest2 = client.resolve(repo, tag2)
            sign.sign_and_attest_build(client, repo, digest2, warm_signer, PROVENANCE, lock_dir=lock_dir)
            warm.append(time.perf_counter() - t0)

            ref = f"{args.registry}/{repo}@{digests[tag]}"
            t0 = time.perf_counter()
            proc = subprocess.run(
                [cosign_bin, "sign", "--key", str(cosign_file), "--tlog-upload=false", "-y", ref],
                env=env,
                capture_output=True,
                text=True,
            )
            theirs.append(time.perf_counter() - t0)
            if proc.returncode != 0:
                sys.exit(f"cosign sign failed: {proc.stderr[-500:]}")

            pred = work / "pred.json"
            pred.write_text('{"note": "cli"}')
            t0 = time.perf_counter()
            for argv in (
                ["sign", f"{repo}:{tag2}", "--key", str(key_path)],
                [
                    "attest",
                    f"{repo}:{tag2}",
                    "--key",
                    str(key_path),
                    "--predicate-type",
                    "https://x.example/cli/v1",
                    "--predicate",
                    str(pred),
                ],
            ):
                p = subprocess.run(
                    [sys.executable, "-m", "builder", *argv], env=env, capture_output=True, text=True, cwd=work
                )
                if p.returncode != 0:
                    sys.exit(f"builder {argv[0]} failed: {p.stderr[-500:]}")
            cli.append(time.perf_counter() - t0)
        # everything written verifies (a benchmark of broken output would mean nothing)
        pub = [keys.PublicKey(warm_signer.public_key, "bench")]
        for tag in tags[: 2 * runs]:
            report = verify.verify_image(
                client, repo, digests[tag], keys=pub, predicate_types=["https://slsa.dev/provenance/v1"]
            )
            if not report.ok:
                sys.exit(f"written evidence does not verify for {tag}: {report.problems}")

    cold_ms, ms = statistics.median(ours) * 1000, statistics.median(warm) * 1000
    key_ms, cosign_ms, cli_ms = (statistics.median(x) * 1000 for x in (key_load, theirs, cli))
    print(f"registry {args.registry}, repository {repo}, {runs} runs (medians)")
    print(f"builder sign + attest (resolve, 2 concurrent writes)  {ms:7.1f} ms   target < 200 ms")
    print(f"  the same plus loading the encrypted key               {cold_ms:7.1f} ms   (key load {key_ms:.1f} ms)")
    print(f"cosign sign --key (signature only, one process)       {cosign_ms:7.1f} ms")
    print(f"builder sign + builder attest (two processes)         {cli_ms:7.1f} ms")
    print(
        f"benchmark=sign ms={ms:.1f} cold_ms={cold_ms:.1f} key_ms={key_ms:.1f} cosign_ms={cosign_ms:.1f} "
        f"cli_ms={cli_ms:.1f} ratio={ms / cosign_ms:.2f} cold_ratio={cold_ms / cosign_ms:.2f}"
    )


if __name__ == "__main__":
    main()
