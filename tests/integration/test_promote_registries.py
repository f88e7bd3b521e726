"""Promotion into a stage held in another registry (a second real distribution registry started
for the test on loopback): only missing blobs are copied, evidence travels, real cosign verifies
it there; and multi-platform indexes (buildx output) are copied with their children."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from builder.errors import BuilderError
from builder.predicates import DEVICE_CHECK_V1
from builder.promote import Target, apply_promotion, plan_promotion
from builder.registry import OCI_INDEX, RegistryClient
from tests.conftest import require_tool
from tests.integration import test_promote
from tests.integration.test_promote import VARIANT, World, _to_staging
from tests.integration.test_promote_support import device_check, push_image, write_policy

world = test_promote.world  # the shared fixture of the promotion tests

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def second_registry(tmp_path: Path, registry_address: str) -> Iterator[str]:
    binary = require_tool("docker-registry", "registry")
    port = _free_port()
    config = tmp_path / "registry2.yml"
    config.write_text(
        f"version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: {tmp_path / 'r2'}}}\n"
        f"  delete: {{enabled: true}}\nhttp: {{addr: 127.0.0.1:{port}}}\n"
    )
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    address = f"127.0.0.1:{port}"
    client = RegistryClient(address, insecure=True, retries=0)
    for _ in range(100):
        try:
            client.ping()
            break
        except BuilderError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail(f"second registry did not start: {proc.stderr.read() if proc.stderr else b''!r}")
    yield address
    proc.terminate()
    proc.wait(10)


def test_prod_in_another_registry_copies_only_missing_blobs(
    world: World, second_registry: str, tmp_path: Path, cosign_bin: str
) -> None:
    policy = write_policy(tmp_path / "two-registries.yaml", world.keys)
    text = policy.read_text().replace(
        '    repository: "prod/{repository}"',
        f'    repository: "prod/{{repository}}"\n    registry: "{second_registry}"',
    )
    policy.write_text(text)
    digest = _to_staging(world, b"to another registry")
    for who in ("alice", "bob"):
        world.approve(who, digest, "prod")
    world.attest(
        "check-runner",
        digest,
        DEVICE_CHECK_V1,
        device_check("nvidia", gpus=("NVIDIA H200",), driver="580.65.06", digest=digest),
    )
    env = world.env(policy_path=policy)
    plan = plan_promotion(env, world.target, "prod", ticket="CHG-1234")
    assert plan.decision.allowed, plan.decision.failed()
    assert str(plan.destination) == f"{second_registry}/prod/{world.repo}:{VARIANT}-prod"
    applied = apply_promotion(env, plan)
    other = RegistryClient(second_registry, insecure=True)
    assert other.resolve(f"prod/{world.repo}", f"{VARIANT}-prod") == digest
    assert applied.copy is not None and applied.copy.copied >= 2 and applied.copy.mounted == 0, applied.copy
    # evidence travelled byte for byte: real cosign verifies signature and attestation there
    ref = f"{second_registry}/prod/{world.repo}@{digest}"
    for args in (
        ["verify", "--key", str(world.keys.pub("build"))],
        ["verify-attestation", "--key", str(world.keys.pub("check-runner")), "--type", DEVICE_CHECK_V1],
    ):
        out = subprocess.run(
            [cosign_bin, *args, "--insecure-ignore-tlog", "--allow-insecure-registry", ref],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
    # a second promotion of a digest sharing the layer copies only what is missing
    env2 = world.env(policy_path=policy)
    from builder.promote import Location
    from builder.promote.transfer import copy_manifest
    from builder.registry import CopyStats

    shared = push_image(
        world.client,
        world.repo,
        None,
        labels={"variant": "another one"},
        layers=[world.client.get_blob(world.repo, world.client.get_manifest(world.repo, digest).layers[0].digest)],
    )
    stats = CopyStats()
    copy_manifest(
        env2,
        Location(world.registry, world.repo),
        Location(second_registry, f"prod/{world.repo}"),
        world.client.get_manifest(world.repo, shared),
        stats,
    )
    assert stats.present == 1 and stats.copied == 1, stats  # the layer was there; only the config moved


def test_multi_platform_index_is_copied_with_its_children(world: World) -> None:
    # what buildx pushes: an index of a platform image and an attestation manifest
    image = push_image(world.client, world.repo, None, content=b"platform image")
    att = push_image(world.client, world.repo, None, content=b"provenance")
    child = world.client.get_manifest(world.repo, image)
    att_m = world.client.get_manifest(world.repo, att)
    index = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            {
                "mediaType": child.media_type,
                "digest": image,
                "size": len(child.raw),
                "platform": {"architecture": "amd64", "os": "linux"},
            },
            {
                "mediaType": att_m.media_type,
                "digest": att,
                "size": len(att_m.raw),
                "platform": {"architecture": "unknown", "os": "unknown"},
                "annotations": {
                    "vnd.docker.reference.type": "attestation-manifest",
                    "vnd.docker.reference.digest": image,
                },
            },
        ],
    }
    raw = json.dumps(index, separators=(",", ":")).encode()
    digest = world.client.put_manifest(world.repo, VARIANT, raw, OCI_INDEX)
    from builder.signing.sign import sign_image

    sign_image(world.client, world.repo, digest, world.keys.signer("build"), lock_dir=world.state / "locks")
    # promote the index by reference into a stage of another repository
    policy = write_policy(world.state / "index.yaml", world.keys)
    text = policy.read_text().replace(
        "  dev:\n    from: build\n", '  dev:\n    from: build\n    repository: "dev/{repository}"\n'
    )
    policy.write_text(text)
    env = world.env(policy_path=policy)
    target = Target(VARIANT, world.repo, world.registry, digest=digest)
    applied = apply_promotion(env, plan_promotion(env, target, "dev"))
    dst = f"dev/{world.repo}"
    assert world.client.resolve(dst, f"{VARIANT}-dev") == digest
    assert world.client.get_manifest(dst, image).digest == image  # children are there too
    assert world.client.get_manifest(dst, att).digest == att
    assert applied.copy is not None and applied.copy.manifests >= 3 and applied.copy.copied == 0
