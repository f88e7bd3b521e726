"""Two measurements of image copies, each against its peers run by this script.

``--cross`` (the streamed copy between two registries, issue 19 item 1): see
:mod:`benchmarks.registry_stream` (``registry_stream.py``), which this mode runs.

Default (same registry): manifest-level copy of a 512 MiB image to another repository of the
same registry, against ``skopeo copy`` of the same image run by this script.

Target: under 100 ms on loopback. ``ms`` is ``builder.registry.copy_image`` with a fresh client
(new connections): HEAD the destination, GET the manifest, HEAD+mount each blob (cross-repository
mount: no bytes move), PUT the manifest, HEAD the tag to verify the digest. ``skopeo_ms`` is
``skopeo copy --preserve-digests docker://SRC@digest docker://DST:tag`` (TLS verification off
for loopback) of the
same image into a new repository (skopeo also mounts: it remembers blob locations in its
blob-info cache). Both copies are verified to give the same digest.
Source image: ``bench/copy-src:<size>mib`` (4 layers of random bytes, pushed once and reused).

Prints one line at the end:
``benchmark=registry-copy size_mib=512 ms=.. skopeo_ms=.. ratio=..``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from builder.registry import (
    OCI_MANIFEST,
    CopyStats,
    RegistryClient,
    canonical_json,
    copy_image,
    sha256_digest,
)

LAYERS = 4


def ensure_source(client: RegistryClient, repo: str, tag: str, size_mib: int) -> str:
    """Push (once) an image of ``size_mib`` MiB of random layers; return its digest."""
    existing = client.try_resolve(repo, tag)
    if existing is not None:
        return existing
    layer_size = size_mib * 1024 * 1024 // LAYERS
    descs = []
    for _ in range(LAYERS):
        data = os.urandom(layer_size)
        client.put_blob(repo, data)
        descs.append(
            {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": sha256_digest(data), "size": len(data)}
        )
        del data
    cfg = canonical_json(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": [d["digest"] for d in descs]},
        }
    )
    client.put_blob(repo, cfg)
    manifest = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": sha256_digest(cfg),
                "size": len(cfg),
            },
            "layers": descs,
        }
    )
    return client.put_manifest(repo, tag, manifest, OCI_MANIFEST)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mib", type=int, default=512)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="16 MiB, 2 runs (CI keeps the script working)")
    parser.add_argument(
        "--cross", action="store_true", help="streamed copy between two registries vs oras/skopeo/crane/curl"
    )
    args, rest = parser.parse_known_args()
    if args.cross:
        from registry_stream import main as cross_main

        cross_main([*rest, *(["--quick"] if args.quick else [])])
        return
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    size = 16 if args.quick else args.size_mib
    runs = 2 if args.quick else args.runs
    registry = os.environ.get("BUILDER_REGISTRY", "127.0.0.1:5000")
    src_repo, tag = "bench/copy-src", f"{size}mib"
    setup = RegistryClient(registry, insecure=True)
    t0 = time.perf_counter()
    digest = ensure_source(setup, src_repo, tag, size)
    print(f"source {registry}/{src_repo}:{tag} = {digest} ({size} MiB, ready in {time.perf_counter() - t0:.1f} s)")

    ours: list[float] = []
    for _ in range(runs):
        dst_repo = f"bench/copy-dst-{uuid.uuid4().hex[:10]}"
        client = RegistryClient(registry, insecure=True)  # fresh connections each run
        stats = CopyStats()
        t = time.perf_counter()
        got = copy_image(client, src_repo, digest, client, dst_repo, tag="copied", stats=stats)
        ours.append((time.perf_counter() - t) * 1000)
        assert got == digest and client.resolve(dst_repo, "copied") == digest
        assert stats.copied == 0 and stats.mounted == LAYERS + 1, stats
    ms = statistics.median(ours)
    print(f"copy_image (mount + PUT + verify): median {ms:.1f} ms over {runs} runs {[round(x, 1) for x in ours]}")

    skopeo = shutil.which("skopeo")
    if skopeo is None:
        print("skopeo is not installed: cannot measure the reference", file=sys.stderr)
        sys.exit(2)
    theirs: list[float] = []
    for _ in range(max(1, runs // 2)):
        dst_repo = f"bench/skopeo-dst-{uuid.uuid4().hex[:10]}"
        cmd = [
            skopeo,
            "copy",
            "--quiet",
            "--src-tls-verify=false",
            "--dest-tls-verify=false",
            "--preserve-digests",
            f"docker://{registry}/{src_repo}@{digest}",
            f"docker://{registry}/{dst_repo}:copied",
        ]
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        theirs.append((time.perf_counter() - t) * 1000)
        assert setup.resolve(dst_repo, "copied") == digest, "skopeo changed the digest"
    skopeo_ms = statistics.median(theirs)
    print(f"skopeo copy:                       median {skopeo_ms:.1f} ms over {len(theirs)} runs")
    print(f"benchmark=registry-copy size_mib={size} ms={ms:.1f} skopeo_ms={skopeo_ms:.1f} ratio={skopeo_ms / ms:.1f}")


if __name__ == "__main__":
    main()
