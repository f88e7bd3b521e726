"""How close is `builder inspect` to the floor of reading the same layers, and what does the cache save?

Image truth (#15 item 7). Three runs, side by side, against the registry (BUILDER_REGISTRY, default
127.0.0.1:5000):

- floor: every layer of the image downloaded and decompressed by `curl -s URL | gzip -dc` (or
  `zstd -dc`) to /dev/null, one after the other: the least work any reader of the layers must do;
- first: `builder inspect IMAGE --no-cache`-equivalent with an empty layer cache (every layer streamed,
  ELF files scanned), its peak memory (max RSS of the process);
- sibling: `builder inspect` of a sibling variant (the image plus one small layer, built here FROM it) with
  the cache the first run filled: only the new layer is read.

Targets: first within 1.5x of the floor, sibling under 10 % of the first, memory under 128 MiB.
Default image: the demo JAX CPU variant (`bash scripts/demo`); --quick: the mirrored Debian base.
Prints one line at the end: `benchmark=inspect first_s=.. floor_s=.. ratio=.. sibling_s=.. sibling_ratio=..
max_rss_mib=..`.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from builder.registry import Manifest, RegistryClient

ROOT = Path(__file__).resolve().parents[1]
BUILDER = [sys.executable, "-m", "builder"]


def _registry() -> str:
    return os.environ.get("BUILDER_REGISTRY", "127.0.0.1:5000")


def _image(reference: str) -> tuple[RegistryClient, str, Manifest]:
    """(client, repository, image manifest) of ``reference``: the platform ``builder inspect`` reads
    (:func:`builder.registry.copy.platform_manifest`), through builder's registry client."""
    sys.path.insert(0, str(ROOT))
    from builder.registry import RegistryClient, parse_reference
    from builder.registry.copy import platform_manifest

    r = parse_reference(reference, _registry())
    client = RegistryClient(r.registry, insecure=True)
    _, m, _ = platform_manifest(client, r.repository, r.digest or r.tag or "latest")
    return client, r.repository, m


def _layers(reference: str) -> list[tuple[str, str]]:
    """(digest, media type) of the image's layers."""
    return [(d.digest, d.media_type) for d in _image(reference)[2].layers]


def floor(reference: str) -> float:
    """Seconds to download and decompress every layer with curl and gzip/zstd."""
    repo = reference.split("/", 1)[1].rsplit(":", 1)[0]
    t0 = time.perf_counter()
    for digest, media_type in _layers(reference):
        tool = "zstd -dc" if "zstd" in media_type else "gzip -dc"
        url = f"http://{_registry()}/v2/{repo}/blobs/{digest}"
        subprocess.run(f"curl -sf {url} | {tool} > /dev/null", shell=True, check=True)
    return time.perf_counter() - t0


def inspect(reference: str, state: Path, *extra: str) -> tuple[float, dict[str, Any]]:
    env = {**os.environ, "BUILDER_STATE_DIR": str(state), "BUILDER_REGISTRY": _registry()}
    t0 = time.perf_counter()
    out = subprocess.run(
        [*BUILDER, "inspect", reference, "--json", *extra], check=True, capture_output=True, env=env, cwd=ROOT
    )
    return time.perf_counter() - t0, json.loads(out.stdout)


def sibling_of(reference: str) -> str:
    """The image plus one small layer on top (a variant that shares every other layer, as sibling
    variants built from one base and lock do), pushed as ``bench/inspect-sibling:<id>``: the base's layers
    and config are mounted, a new gzip layer, config and manifest are written (what ``crane append`` does;
    a ``docker build FROM`` would re-compress the base layers under the docker driver)."""
    from builder.registry import canonical_json, sha256_digest

    client, source, m = _image(reference)
    repo = "bench/inspect-sibling"
    manifest = json.loads(m.raw)
    for blob in [manifest["config"], *manifest["layers"]]:
        if not client.mount_blob(repo, blob["digest"], source):
            client.put_blob(repo, client.get_blob(source, blob["digest"]), blob["digest"])
    raw_tar = io.BytesIO()
    with tarfile.open(fileobj=raw_tar, mode="w") as tar:
        data = uuid.uuid4().hex.encode()
        info = tarfile.TarInfo("etc/variant.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    layer = gzip.compress(raw_tar.getvalue())
    client.put_blob(repo, layer)
    config = json.loads(client.get_blob(source, manifest["config"]["digest"]))
    config["rootfs"]["diff_ids"].append(sha256_digest(raw_tar.getvalue()))
    config_raw = canonical_json(config)
    client.put_blob(repo, config_raw)
    manifest["config"] = {**manifest["config"], "digest": sha256_digest(config_raw), "size": len(config_raw)}
    media = "application/vnd.oci.image.layer.v1.tar+gzip"
    if "docker" in manifest.get("mediaType", ""):
        media = "application/vnd.docker.image.rootfs.diff.tar.gzip"
    manifest["layers"].append({"mediaType": media, "digest": sha256_digest(layer), "size": len(layer)})
    tag = uuid.uuid4().hex[:8]
    client.put_manifest(repo, tag, canonical_json(manifest), m.media_type)
    return f"{client.registry}/{repo}:{tag}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", default=None, help="image to inspect (default: the demo JAX CPU variant)")
    parser.add_argument(
        "--quick", action="store_true", help="the small mirrored Debian base (CI keeps the script working)"
    )
    args = parser.parse_args()
    image = args.image or (
        f"{_registry()}/mirror/debian:bookworm" if args.quick else f"{_registry()}/demo/jax:jax0.7-cpu-py3.11-debian12"
    )
    with tempfile.TemporaryDirectory(prefix="inspect-state-") as tmp:
        state = Path(tmp)
        first_s, first = inspect(image, state)
        rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the only child so far
        sibling = sibling_of(image)
        sibling_s, second = inspect(sibling, state)
        floor_s = floor(image)
    read = [x for x in second["layers"] if not x["cached"]]
    size = sum(int(x["size"]) for x in first["layers"]) / (1 << 20)
    print(f"image {image}: {len(first['layers'])} layers, {size:.1f} MiB compressed")
    print(f"floor (curl | gzip -dc, every layer)   {floor_s:7.2f} s")
    print(f"builder inspect, empty cache          {first_s:7.2f} s   ratio {first_s / floor_s:.2f} (target <= 1.5)")
    print(
        f"builder inspect, sibling (cache)      {sibling_s:7.2f} s   {sibling_s / first_s:.1%} of the first "
        f"(target < 10 %), {len(read)} layer(s) read"
    )
    print(f"peak memory of builder inspect        {rss_mib:7.1f} MiB (target < 128)")
    print(
        f"benchmark=inspect first_s={first_s:.2f} floor_s={floor_s:.2f} ratio={first_s / floor_s:.2f} "
        f"sibling_s={sibling_s:.2f} sibling_ratio={sibling_s / first_s:.3f} max_rss_mib={rss_mib:.0f}"
    )


if __name__ == "__main__":
    main()
