"""`builder approve` reads the key's earlier approvals of a digest (for its "counts once" note) the
way status and promote read approval layers (``builder.signing.layer.fetch_blob``): the DSSE
envelope each layer descriptor carries in ``dev.builder-project/envelope``, taken when its size and
sha256 are the layer's, else the blob. Counted with ``RegistryClient.requests_sent`` on the real
registry: the manifest only (it read every layer's blob as well); a layer without the annotation
(an approval written before builder carried it) or with an edited one is read from its blob."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING

import pytest

from builder.promote.approve import earlier_approvals
from builder.registry import OCI_MANIFEST, RegistryClient
from builder.signing.approvals import approval_suffix, approve
from builder.signing.layer import ENVELOPE_ANNOTATION, signature_tag, without_envelope
from tests.integration.test_sign import new_signer, push_tiny_image

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration

TIMES = ("2026-12-01T10:00:00.000000Z", "2026-12-02T09:00:00.000000Z")


def test_earlier_approvals_are_read_from_the_carried_envelopes(
    registry_address: str, unique_repo: str, tmp_path: Path
) -> None:
    client = RegistryClient(registry_address, insecure=True)
    digest = push_tiny_image(client, unique_repo, "v1")
    signer = new_signer(tmp_path / "k")
    for time in TIMES:
        when = dt.datetime.fromisoformat(time)
        approve(client, unique_repo, digest, "prod", signer, lock_dir=tmp_path / "locks", name="alice", now=when)
    approve(client, unique_repo, digest, "staging", signer, lock_dir=tmp_path / "locks", name="alice")
    tag = signature_tag(digest, approval_suffix(signer.fingerprint))
    assert len(client.get_manifest(unique_repo, tag).json["layers"]) == 3

    before = client.requests_sent
    assert earlier_approvals(client, unique_repo, digest, "prod", signer.fingerprint) == list(TIMES)
    assert client.requests_sent - before == 1  # the manifest; three layers, no blob read

    # an approval layer without the carried envelope (written before builder carried it), and one
    # whose annotation was edited after signing: each read from its blob, the answer the same
    manifest = client.get_manifest(unique_repo, tag).json
    layers = manifest["layers"]
    layers[0] = without_envelope(layers[0])
    edited = json.loads(layers[1]["annotations"][ENVELOPE_ANNOTATION])
    edited["payload"] = edited["payload"][:-4] + "AAA="
    layers[1]["annotations"][ENVELOPE_ANNOTATION] = json.dumps(edited)
    client.put_manifest(unique_repo, tag, json.dumps(manifest).encode(), OCI_MANIFEST)
    before = client.requests_sent
    assert earlier_approvals(client, unique_repo, digest, "prod", signer.fingerprint) == list(TIMES)
    assert client.requests_sent - before == 3  # the manifest, the two blobs
    assert earlier_approvals(client, unique_repo, digest, "dev", signer.fingerprint) == []
