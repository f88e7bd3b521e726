"""The envelope annotation and the registry's 4 MiB manifest limit, on the real registry: an
attestation appended to a ``.att`` manifest already over ``ENVELOPE_MANIFEST_BUDGET`` is written
without its envelope annotation (its blob is read instead) and verifies like the others."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient
from builder.signing.attest import attest_image
from builder.signing.layer import ATT_SUFFIX, ENVELOPE_ANNOTATION, ENVELOPE_MANIFEST_BUDGET, signature_tag
from builder.signing.verify import read_attestations
from tests.integration.test_sign import new_signer, public_key, push_tiny_image

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration


@pytest.fixture
def client(registry_address: str) -> RegistryClient:
    return RegistryClient(registry_address, insecure=True)


def test_a_large_att_manifest_gets_no_more_envelope_annotations(
    client: RegistryClient, unique_repo: str, tmp_path: Path
) -> None:
    digest = push_tiny_image(client, unique_repo, "v1")
    signer = new_signer(tmp_path / "k")
    attest_image(client, unique_repo, digest, "https://x/first/v1", {"n": 1}, signer, lock_dir=tmp_path)
    tag = signature_tag(digest, ATT_SUFFIX)
    manifest = client.get_manifest(unique_repo, tag)
    doc = json.loads(manifest.raw)
    assert ENVELOPE_ANNOTATION in doc["layers"][0]["annotations"]
    # another writer's bulky annotation (still a valid manifest, under distribution's 4 MiB)
    doc["layers"][0]["annotations"]["dev.example/padding"] = "x" * ENVELOPE_MANIFEST_BUDGET
    client.put_manifest(unique_repo, tag, json.dumps(doc).encode(), manifest.media_type)

    attest_image(client, unique_repo, digest, "https://x/second/v1", {"n": 2}, signer, lock_dir=tmp_path)
    layers = client.get_manifest(unique_repo, tag).json["layers"]
    assert [ENVELOPE_ANNOTATION in d["annotations"] for d in layers] == [True, False]
    got = read_attestations(client, unique_repo, digest, keys=[public_key(signer)])
    assert [(a.predicate_type, a.ok) for a in got] == [("https://x/first/v1", True), ("https://x/second/v1", True)]
