"""``bases update`` against the real registry: a tag re-published with a new digest and a new
NVIDIA_REQUIRE_CUDA (as the official CUDA images have been) is reported and locked."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from builder.bases import read_bases_lock, update_bases
from builder.registry import OCI_MANIFEST, RegistryClient, canonical_json, sha256_digest

if TYPE_CHECKING:
    from pathlib import Path


CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar"
# NVIDIA_REQUIRE_CUDA values as published in nvidia/cuda 12.8.1 images (before/after a re-publish);
# the second adds the brand=unknown constraints of a newer Dockerfile generation.
REQUIRE_OLD = "cuda>=12.8 brand=tesla,driver>=470,driver<471"
REQUIRE_NEW = "cuda>=12.8 brand=unknown,driver>=470,driver<471 brand=tesla,driver>=535,driver<536"


def push_base(client: RegistryClient, repo: str, tag: str, env: list[str]) -> str:
    layer = os.urandom(64)
    client.put_blob(repo, layer)
    cfg = canonical_json(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Env": env},
            "rootfs": {"type": "layers", "diff_ids": [sha256_digest(layer)]},
        }
    )
    client.put_blob(repo, cfg)
    manifest = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": CONFIG, "digest": sha256_digest(cfg), "size": len(cfg)},
            "layers": [{"mediaType": LAYER, "digest": sha256_digest(layer), "size": len(layer)}],
        }
    )
    return client.put_manifest(repo, tag, manifest, OCI_MANIFEST)


def test_bases_update_reports_new_digest_and_changed_cuda_requirement(
    registry_address: str, unique_repo: str, tmp_path: Path
) -> None:
    client = RegistryClient(registry_address, insecure=True)
    repo = f"{unique_repo}/cuda"
    ref = f"{registry_address}/{repo}:12.8.1-base-ubuntu24.04"
    other = f"{registry_address}/{unique_repo}/plain:1"
    first = push_base(
        client, repo, "12.8.1-base-ubuntu24.04", ["CUDA_VERSION=12.8.1", f"NVIDIA_REQUIRE_CUDA={REQUIRE_OLD}"]
    )
    push_base(client, f"{unique_repo}/plain", "1", ["PATH=/bin"])
    lock = tmp_path / "bases.lock.json"

    def resolve_client(registry: str) -> RegistryClient:
        assert registry == registry_address
        return client

    changes = update_bases([ref, other], lock, resolve_client=resolve_client)
    by_ref = {c.reference: c for c in changes}
    assert (by_ref[ref].old_digest, by_ref[ref].new_digest, by_ref[ref].changed) == (None, first, True)
    doc = json.loads(lock.read_text())
    assert doc["version"] == 1
    assert doc["bases"][ref] == {
        "digest": first,
        "pulled_from": ref,
        "nvidia_require_cuda": REQUIRE_OLD,
        "cuda_version": "12.8.1",
        "nv_cudnn_version": None,
        "nccl_version": None,
    }
    assert doc["bases"][other]["nvidia_require_cuda"] is None

    # the bases lock we wrote reads back
    assert read_bases_lock(lock)[ref] == first

    # unchanged: nothing reported as changed
    again = update_bases([ref, other], lock, resolve_client=resolve_client)
    assert not any(c.changed for c in again)

    # the tag is re-published with a new digest and a new requirement
    second = push_base(
        client, repo, "12.8.1-base-ubuntu24.04", ["CUDA_VERSION=12.8.1", f"NVIDIA_REQUIRE_CUDA={REQUIRE_NEW}"]
    )
    assert second != first
    changes = update_bases([ref], lock, resolve_client=resolve_client, write=False)
    (c,) = changes
    assert c.changed and (c.old_digest, c.new_digest) == (first, second)
    assert c.fact_changes == {"NVIDIA_REQUIRE_CUDA": (REQUIRE_OLD, REQUIRE_NEW)}
    assert json.loads(lock.read_text())["bases"][ref]["digest"] == first  # write=False left it
    update_bases([ref], lock, resolve_client=resolve_client)
    doc = json.loads(lock.read_text())
    assert doc["bases"][ref]["digest"] == second and other not in doc["bases"]  # unused refs dropped
    assert c.to_json()["fact_changes"]["NVIDIA_REQUIRE_CUDA"] == {"old": REQUIRE_OLD, "new": REQUIRE_NEW}
