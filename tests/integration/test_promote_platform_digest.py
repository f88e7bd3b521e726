"""A platform manifest of an indexed build, promoted by digest: its variant label is confirmed by
no content tag (the content tag names the index), so it is refused (exit 8) before any write, and
the message says what the digest is (a platform manifest of the index the content tag names) and
gives the command that promotes that index instead; that command then works."""

from __future__ import annotations

import functools
import hashlib
from typing import TYPE_CHECKING

import pytest

from builder.labels import own
from builder.registry import OCI_INDEX, RegistryClient
from builder.registry.manifest import canonical_json
from tests.integration.test_promote_cli import VARIANT, _project
from tests.integration.test_promote_support import push_image

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli

pytestmark = pytest.mark.integration


def _push_indexed_build(client: RegistryClient, repository: str, variant: str, content: bytes) -> tuple[str, str]:
    """What an indexed (multi-platform) build leaves: two platform images labelled as
    `builder render` labels them, an OCI index of them under the content tag and the variant tag.
    Returns (index digest, the linux/amd64 platform manifest's digest)."""
    content_hash = hashlib.sha256(content).hexdigest()
    labels = {own("variant"): variant, own("content-hash"): content_hash}
    children = []
    for arch in ("amd64", "arm64"):
        digest = push_image(client, repository, None, content=content + arch.encode(), labels=labels)
        size = client.get_manifest(repository, digest).size
        children.append(
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": digest,
                "size": size,
                "platform": {"architecture": arch, "os": "linux"},
            }
        )
    index = canonical_json({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": children})
    for tag in (f"{variant}-{content_hash[:12]}", variant):
        digest = client.put_manifest(repository, tag, index, OCI_INDEX)
    return digest, str(children[0]["digest"])


def test_a_platform_manifest_of_an_indexed_build_names_its_index(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    project = _project(tmp_path / "p", registry_address, unique_repo)
    run = functools.partial(cli, cwd=project, env={"HOME": str(project)})
    client = RegistryClient(registry_address, insecure=True)
    index, platform = _push_indexed_build(client, unique_repo, VARIANT, b"indexed build")

    err = run("promote", f"{registry_address}/{unique_repo}@{platform}", "--to", "dev", "--confirm", "--json", code=8)
    said = " ".join(err.json()["error"]["message"].split())
    hint = " ".join(err.json()["error"]["hint"].split())
    assert f"{platform} is a platform manifest (linux/amd64) of the index {index}" in said, said
    command = f"builder promote {registry_address}/{unique_repo}@{index} --to STAGE"
    assert command in hint, hint
    assert not any(t.endswith("-dev") for t in client.list_tags(unique_repo))  # nothing written
    human = run("promote", f"{registry_address}/{unique_repo}@{platform}", "--to", "dev", code=8).stderr
    assert "is a platform manifest (linux/amd64) of the index" in human and "hint: promote the index" in human

    plan = run("promote", f"{registry_address}/{unique_repo}@{index}", "--to", "dev", "--json").json()
    assert plan["results"][0]["variant"] == VARIANT  # the index, promoted as the hint says
