"""Layers the shipped matrices build and store, with the current templates against the templates
at a git ref (``--before``, default the commit before the shared-layers-first order), computed
from the rendered Dockerfiles the way BuildKit keys its cache.

A ``RUN`` layer's cache key is its parent's key, its command and the environment it runs with
(every ``ENV`` and ``ARG`` declared before it); ``LABEL`` changes only the image config
(https://docs.docker.com/build/cache/invalidation/). Two variants whose keys agree build the layer
once and the registry stores it once. Reported per template set: distinct ``RUN`` layers over
all variants, distinct Python (apt + venv) layers, and the bytes those Python layers take in the
registry, each counted at the compressed size of that layer in the demo image
(``127.0.0.1:5000/demo/jax:jax0.7-cpu-py3.11-debian12``, measured when it exists, else the
issue's 55 MiB): CUDA bases have their own size, so the bytes are an estimate; the counts are
exact.

Ends with one line:
``benchmark=layer-sharing variants=.. python_layers_before=.. python_layers_after=.. run_layers_before=..
run_layers_after=.. python_mib_before=.. python_mib_after=.. ratio=..``
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from builder import bases, matrix, render
from builder.errors import BuilderError
from builder.registry import RegistryClient
from tests.dockerfiles import instructions

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "82e3822"  # the last commit with the accelerator environment before the Python layer
BASE_TEMPLATE = "images/_common/Dockerfile.base.j2"
DEMO = ("demo/jax", "jax0.7-cpu-py3.11-debian12")
ISSUE_PYTHON_LAYER_MIB = 55.0


def run_keys(variant_id: str, dockerfile: str) -> list[str]:
    """The cache key of each RUN layer (a RUN that binds the variant's own lock is its own)."""
    key, env, keys = "", "", []
    for step in instructions(dockerfile):
        word = step.split(" ", 1)[0]
        if word == "FROM":
            key = hashlib.sha256(step.encode() + env.encode()).hexdigest()  # ARG BASE_IMAGE default
        elif word in ("ENV", "ARG"):
            env += step + "\n"
        elif word == "RUN":
            own = variant_id if "type=bind" in step else ""
            key = hashlib.sha256(f"{key}\n{env}\n{step}\n{own}".encode()).hexdigest()
            keys.append(key)
    return keys


def template_dir(ref: str, tmp: Path) -> Path:
    """``images/`` with the base template as it was at ``ref``."""
    images = tmp / "images"
    shutil.copytree(ROOT / "images", images)
    old = subprocess.run(["git", "show", f"{ref}:{BASE_TEMPLATE}"], cwd=ROOT, capture_output=True, text=True)
    if old.returncode != 0:
        sys.exit(f"cannot read {BASE_TEMPLATE} at {ref}: {old.stderr.strip()}")
    (images / "_common" / "Dockerfile.base.j2").write_text(old.stdout)
    return images


def python_layer_mib() -> tuple[float, str]:
    """The compressed size of the demo image's Python layer (the first after its base's one)."""
    registry = os.environ.get("BUILDER_REGISTRY", "127.0.0.1:5000")
    try:
        client = RegistryClient(registry, insecure=True)
        m = client.get_manifest(DEMO[0], DEMO[1])
        if m.is_index:
            m = client.get_manifest(DEMO[0], m.manifests[0].digest)
        return m.layers[1].size / 1024 / 1024, f"{registry}/{DEMO[0]}:{DEMO[1]} layer 2"
    except (BuilderError, IndexError):
        return ISSUE_PYTHON_LAYER_MIB, "issue 19's figure (demo image not in the registry)"


def count(variants: list[matrix.Variant], images: Path, res: bases.BaseResolution) -> tuple[int, int]:
    python, runs = set(), set()
    for v in variants:
        text = render.render_variant(v, images_dir=images, locks_dir=ROOT / "locks", bases=res).dockerfile
        keys = run_keys(v.id, text)
        python.add(keys[0])
        runs.update(keys)
    return len(python), len(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default=BEFORE, help=f"git ref of the templates to compare with (default {BEFORE})")
    parser.add_argument("--quick", action="store_true", help="the same (it is static and fast)")
    args = parser.parse_args()
    variants = [v for m in matrix.load_matrices(sorted((ROOT / "matrices").glob("*.yaml"))) for v in m.variants]
    res = bases.BaseResolution(upstream={}, mirrors={})
    with tempfile.TemporaryDirectory() as tmp:
        py_before, run_before = count(variants, template_dir(args.before, Path(tmp)), res)
    py_after, run_after = count(variants, ROOT / "images", res)
    mib, source = python_layer_mib()
    print(f"{len(variants)} shipped variants; Python layer {mib:.1f} MiB ({source})")
    print(f"before ({args.before}): {py_before} Python layers, {run_before} RUN layers, ~{py_before * mib:.0f} MiB")
    print(f"after  (working tree): {py_after} Python layers, {run_after} RUN layers, ~{py_after * mib:.0f} MiB")
    print(
        f"benchmark=layer-sharing variants={len(variants)} python_layers_before={py_before} "
        f"python_layers_after={py_after} run_layers_before={run_before} run_layers_after={run_after} "
        f"python_mib_before={py_before * mib:.0f} python_mib_after={py_after * mib:.0f} "
        f"ratio={py_before / max(py_after, 1):.1f}"
    )


if __name__ == "__main__":
    main()
