"""Does `builder sbom` stay n log n as an image's Python distributions grow (#19 round 7, users' leftovers)?

An image with thousands of tiny `*.dist-info` directories (a layer of `METADATA` files, PyPA core
metadata: https://packaging.python.org/en/latest/specifications/core-metadata/) is pushed to the
registry (BUILDER_REGISTRY, default 127.0.0.1:5000) and inspected once (`inspect_image`, as `builder
sbom` does). Then, side by side on the same components, CPU time (`time.process_time`, not wall
clock: the machine is shared) and `BomRef` comparisons (the library's `__eq__` and `__lt__`,
counted) of:

- builder: `builder.image.sbom.image_bom` (components and dependency graph set in one go, the
  library's serializer);
- library path: what builder did before round 7 and what cyclonedx-python-lib documents: each
  component `bom.components.add(...)`, `bom.register_dependency(image, components)`, then
  `JsonV1Dot6(bom).output_as_string()` (which runs `Bom.validate()`; its linear scans:
  https://github.com/CycloneDX/cyclonedx-python-lib/issues/1006). Its time leaves out making the
  component objects (builder's includes it), so the ratio understates the difference.

Default sizes 2,000 and 20,000 distributions (the library path at 20,000 takes minutes of CPU:
`--library-up-to` caps it); `--quick`: 200 and 400. Prints one line per size and, last, the figures
line of the largest size: `benchmark=sbom components=.. builder_cpu_s=.. builder_compared=..
library_cpu_s=.. library_compared=.. ratio=..`.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import io
import json
import os
import sys
import tarfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

ROOT = Path(__file__).resolve().parents[1]
SITE = "usr/local/lib/python3.11/site-packages"
COMPARED = {"n": 0}


def _count_bom_ref_comparisons() -> None:
    """Count every ``BomRef.__eq__`` / ``__lt__`` call in :data:`COMPARED` (the real methods still run)."""
    from cyclonedx.model.bom_ref import BomRef

    for name in ("__eq__", "__lt__"):
        original: Callable[[object, object], object] = getattr(BomRef, name)

        @functools.wraps(original)
        def counted(self: object, other: object, _original: Callable[[object, object], object] = original) -> object:
            COMPARED["n"] += 1
            return _original(self, other)

        setattr(BomRef, name, counted)


def push_distributions(count: int) -> tuple[Any, str, str]:
    """(client, repository, digest) of an image with ``count`` tiny distributions (pushed each run)."""
    from builder.registry import OCI_MANIFEST, RegistryClient, canonical_json, sha256_digest

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i in range(count):
            name, version = f"pkg{i:05d}", f"1.{i % 7}"
            data = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
            info = tarfile.TarInfo(f"{SITE}/{name}-{version}.dist-info/METADATA")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    layer = gzip.compress(raw.getvalue(), mtime=0)
    client = RegistryClient(os.environ.get("BUILDER_REGISTRY", "127.0.0.1:5000"), insecure=True)
    repo = "bench/sbom-scale"
    client.put_blob(repo, layer)
    config = canonical_json(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": [sha256_digest(raw.getvalue())]},
        }
    )
    client.put_blob(repo, config)
    manifest = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": sha256_digest(config),
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": sha256_digest(layer),
                    "size": len(layer),
                }
            ],
        }
    )
    return client, repo, client.put_manifest(repo, f"n{count}-{uuid.uuid4().hex[:6]}", manifest, OCI_MANIFEST)


def library_path(doc: dict[str, Any]) -> dict[str, Any]:
    """The same BOM built the way cyclonedx-python-lib documents (components added one by one,
    ``register_dependency``, ``output_as_string`` with its ``validate()``); the parse of ``doc`` is
    not timed."""
    from cyclonedx.model import Property
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component
    from cyclonedx.output.json import JsonV1Dot6

    image = Component.from_json(doc["metadata"]["component"])  # type: ignore[attr-defined]
    components = [Component.from_json(c) for c in doc["components"]]  # type: ignore[attr-defined]
    props = [Property(name=p["name"], value=p["value"]) for p in doc["metadata"].get("properties", [])]
    t0, c0 = time.process_time(), COMPARED["n"]
    bom = Bom()
    bom.metadata.component = image
    bom.metadata.properties.update(props)
    for c in components:
        bom.components.add(c)
    bom.register_dependency(image, list(bom.components))
    out: dict[str, Any] = json.loads(JsonV1Dot6(bom).output_as_string())
    out["_cpu_s"], out["_compared"] = time.process_time() - t0, COMPARED["n"] - c0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--counts", type=int, nargs="+", default=[2000, 20000], help="distributions per image")
    parser.add_argument("--library-up-to", type=int, default=20000, help="run the library path up to this size")
    parser.add_argument("--quick", action="store_true", help="200 and 400 distributions (CI keeps the script working)")
    args = parser.parse_args()
    counts = [200, 400] if args.quick else args.counts
    sys.path.insert(0, str(ROOT))
    from builder.image.inspection import inspect_image
    from builder.image.sbom import image_bom

    _count_bom_ref_comparisons()
    figures = ""
    for count in counts:
        client, repo, digest = push_distributions(count)
        t0 = time.process_time()
        inspection = inspect_image(client, repo, digest)
        inspect_s = time.process_time() - t0
        t0, c0 = time.process_time(), COMPARED["n"]
        doc = image_bom(inspection)
        ours_s, ours_n = time.process_time() - t0, COMPARED["n"] - c0
        components = len(doc["components"])
        line = (
            f"{components:6d} components: inspect {inspect_s:6.2f} s CPU; "
            f"builder {ours_s:6.2f} s CPU, {ours_n} BomRef comparisons"
        )
        lib_s, lib_n, ratio = "-", "-", "-"
        if count <= args.library_up_to:
            theirs = library_path(doc)
            lib_s, lib_n = f"{theirs['_cpu_s']:.2f}", str(theirs["_compared"])
            ratio = f"{theirs['_cpu_s'] / ours_s:.1f}" if ours_s > 0 else "-"
            line += f"; library path {lib_s} s CPU, {lib_n} comparisons ({ratio}x builder's CPU)"
        print(line, flush=True)
        figures = (
            f"benchmark=sbom components={components} builder_cpu_s={ours_s:.2f} builder_compared={ours_n} "
            f"library_cpu_s={lib_s} library_compared={lib_n} ratio={ratio}"
        )
    print(figures)


if __name__ == "__main__":
    main()
