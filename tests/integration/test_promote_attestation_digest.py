"""A digest promoted is an image, whoever names the variant: BuildKit's attestation manifest of a
build (its in-toto layer, `vnd.docker.reference.type: attestation-manifest` in the index) is
refused with --variant-id too (exit 8, nothing written, the index named with the command that
promotes it), and a platform manifest of an indexed build gets the same explanation with
--variant-id as without. The index is pushed as BuildKit writes one: the attestation manifest's
config is BuildKit's own (``unknown/unknown``, recorded from a `docker buildx build` of
scripts/demo), its layer an in-toto statement; format:
https://docs.docker.com/build/metadata/attestations/attestation-storage/"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import TYPE_CHECKING

import pytest

from builder.labels import own
from builder.registry import OCI_INDEX, OCI_MANIFEST, RegistryClient
from builder.registry.manifest import canonical_json
from tests.integration.test_promote_cli import VARIANT, _project
from tests.integration.test_promote_support import push_image

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli

pytestmark = pytest.mark.integration


def _attestation_manifest(client: RegistryClient, repository: str, subject: str) -> tuple[str, int]:
    """A BuildKit attestation manifest of ``subject`` (an SLSA provenance statement as its one
    in-toto layer, BuildKit's compatibility config); returns (digest, size)."""
    statement = json.dumps(
        {
            "_type": "https://in-toto.io/Statement/v0.1",
            "predicateType": "https://slsa.dev/provenance/v0.2",
            "subject": [{"name": "pkg:docker/demo/jax", "digest": {"sha256": subject.removeprefix("sha256:")}}],
            "predicate": {"builder": {"id": ""}, "buildType": "https://mobyproject.org/buildkit@v1"},
        }
    ).encode()
    layer = client.put_blob(repository, statement)
    config = json.dumps(
        {"architecture": "unknown", "os": "unknown", "config": {}, "rootfs": {"type": "layers", "diff_ids": [layer]}},
        separators=(",", ":"),
    ).encode()
    manifest = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": client.put_blob(repository, config),
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.in-toto+json",
                    "digest": layer,
                    "size": len(statement),
                    "annotations": {"in-toto.io/predicate-type": "https://slsa.dev/provenance/v0.2"},
                }
            ],
        }
    )
    digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    client.put_manifest(repository, digest, manifest, OCI_MANIFEST)
    return digest, len(manifest)


def _push_buildkit_build(client: RegistryClient, repository: str, content: bytes) -> tuple[str, str, str]:
    """A build as `docker buildx build --push` leaves it: an OCI index of the linux/amd64 image and
    its attestation manifest under the content tag and the variant tag. Returns (index, platform
    manifest, attestation manifest) digests."""
    content_hash = hashlib.sha256(content).hexdigest()
    labels = {own("variant"): VARIANT, own("content-hash"): content_hash}
    image = push_image(client, repository, None, content=content, labels=labels)
    attestation, size = _attestation_manifest(client, repository, image)
    children = [
        {
            "mediaType": OCI_MANIFEST,
            "digest": image,
            "size": client.get_manifest(repository, image).size,
            "platform": {"architecture": "amd64", "os": "linux"},
        },
        {
            "mediaType": OCI_MANIFEST,
            "digest": attestation,
            "size": size,
            "annotations": {"vnd.docker.reference.digest": image, "vnd.docker.reference.type": "attestation-manifest"},
            "platform": {"architecture": "unknown", "os": "unknown"},
        },
    ]
    index = canonical_json({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": children})
    for tag in (f"{VARIANT}-{content_hash[:12]}", VARIANT):
        digest = client.put_manifest(repository, tag, index, OCI_INDEX)
    return digest, image, attestation


def test_an_attestation_manifest_is_never_promoted_whoever_names_the_variant(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    project = _project(tmp_path / "p", registry_address, unique_repo)
    run = functools.partial(cli, cwd=project, env={"HOME": str(project)})
    client = RegistryClient(registry_address, insecure=True)
    index, _, attestation = _push_buildkit_build(client, unique_repo, b"buildkit build")
    name = f"{registry_address}/{unique_repo}@{attestation}"

    for extra in (["--variant-id", VARIANT], []):
        err = run("promote", name, "--to", "dev", "--confirm", *extra, "--json", code=8).json()["error"]
        said = " ".join(err["message"].split())
        assert f"{attestation} is a BuildKit attestation manifest" in said and "not an image" in said, said
        # the variant's tags (--variant-id, else those of the variants built into the repository)
        assert f", listed by the index {index} that {registry_address}/{unique_repo}:{VARIANT} names" in said, said
        assert f"builder promote {registry_address}/{unique_repo}@{index} --to STAGE" in err["hint"], err
    assert not any(t.endswith("-dev") for t in client.list_tags(unique_repo))  # nothing written
    human = run("promote", name, "--to", "dev", "--variant-id", VARIANT, code=8).stderr
    assert "attestation manifest" in human and "would promote" not in human, human
    run("resolve", VARIANT, "--stage", "dev", code=8)  # the stage never pointed at it


def test_a_platform_manifest_named_by_variant_id_names_its_index(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    project = _project(tmp_path / "p", registry_address, unique_repo)
    run = functools.partial(cli, cwd=project, env={"HOME": str(project)})
    client = RegistryClient(registry_address, insecure=True)
    index, image, _ = _push_buildkit_build(client, unique_repo, b"buildkit platform")
    name = f"{registry_address}/{unique_repo}@{image}"

    for extra in (["--variant-id", VARIANT], []):  # the same explanation with and without --variant-id
        err = run("promote", name, "--to", "dev", *extra, "--json", code=8).json()["error"]
        said = " ".join(err["message"].split())
        assert f"{image} is a platform manifest (linux/amd64) of the index {index}" in said, (extra, said)
        assert f"builder promote {registry_address}/{unique_repo}@{index} --to STAGE" in err["hint"], err
    run("promote", name, "--to", "dev", "--variant-id", VARIANT, "--confirm", code=8)
    assert not any(t.endswith("-dev") for t in client.list_tags(unique_repo))

    plan = run("promote", f"{registry_address}/{unique_repo}@{index}", "--to", "dev", "--variant-id", VARIANT, "--json")
    assert plan.json()["results"][0]["variant"] == VARIANT  # the index itself is promoted


def test_approving_what_promote_never_promotes_warns_naming_the_index(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    """Newcomer report: `approve REPO@<platform digest> --stage prod --key alice` said "approved ...
    as alice" and nothing else, though promote reads the approvals of the index: the approval is
    written (the key is alice's), with a warning naming the index to approve instead."""
    project = _project(tmp_path / "p", registry_address, unique_repo)
    run = functools.partial(cli, cwd=project, env={"HOME": str(project)})
    client = RegistryClient(registry_address, insecure=True)
    index, image, attestation = _push_buildkit_build(client, unique_repo, b"buildkit approve")
    alice = str(project / "state" / "keys" / "alice" / "builder.key")  # the policy's approver of prod
    base = f"{registry_address}/{unique_repo}"

    done = run("approve", f"{base}@{image}", "--stage", "prod", "--key", alice, "--ticket", "CHG-1234", "--json")
    [warning] = done.json()["warnings"]
    assert f"platform manifest (linux/amd64) of the index {index}" in warning, warning
    assert f"approve the index instead: {base}@{index}" in warning and "would never count" in warning, warning
    assert "warning:" in done.stderr

    done = run("approve", f"{base}@{attestation}", "--stage", "prod", "--key", alice, "--ticket", "CHG-1234", "--json")
    [warning] = done.json()["warnings"]
    assert "attestation manifest" in warning and f"{base}@{index}" in warning, warning

    for counted in (f"{base}@{index}", f"{base}:{VARIANT}"):  # the index itself: no warning
        done = run("approve", counted, "--stage", "prod", "--key", alice, "--ticket", "CHG-1234", "--json")
        assert done.json()["warnings"] == [], done.json()
