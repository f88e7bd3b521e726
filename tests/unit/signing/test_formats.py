"""Signature formats and byte-level verification, on layers real cosign 2.5 wrote (tests/data/signing).

The recorded files come from `cosign sign --key cosign.key --tlog-upload=false` and
`cosign attest --key cosign.key --tlog-upload=false --type https://example.com/t/v1` on a tiny
image whose digest is in cosign-subject-digest.txt (see tests/data/signing/README.md).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from builder.predicates import STATEMENT_V1
from builder.signing import dsse
from builder.signing.dsse import make_statement
from builder.signing.keys import PublicKey, load_public_keys, load_signer
from builder.signing.layer import (
    SIGNATURE_ANNOTATION,
    SIGNER_HINT_ANNOTATION,
    SIMPLESIGNING_MEDIA_TYPE,
    SignatureLayer,
    signature_config,
    signature_tag,
    simple_signing_payload,
)
from builder.signing.layer_check import check_attestation_layer, check_signature_layer, predicate_time
from builder.signing.verifiers import LayerVerifier, verifiers_for

DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "signing"
DIGEST = (DATA / "cosign-subject-digest.txt").read_text().strip()
OTHER = "sha256:" + "ab" * 32


def _layer(kind: str) -> tuple[dict[str, Any], bytes]:
    manifest = json.loads((DATA / f"cosign-{kind}-manifest.json").read_text())
    return manifest["layers"][0], (DATA / f"cosign-{kind}-layer.json").read_bytes()


@pytest.fixture(scope="module")
def cosign_verifiers() -> tuple[LayerVerifier, ...]:
    return verifiers_for(load_public_keys([DATA / "cosign.pub"]))


@pytest.fixture(scope="module")
def other_verifiers() -> tuple[LayerVerifier, ...]:
    from cryptography.hazmat.primitives.asymmetric import ec

    return verifiers_for([PublicKey(ec.generate_private_key(ec.SECP256R1()).public_key(), "other.pub")])


def test_simple_signing_payload_is_byte_identical_to_cosign() -> None:
    _, blob = _layer("sig")
    doc = json.loads(blob)
    ours = simple_signing_payload(doc["critical"]["identity"]["docker-reference"], DIGEST)
    assert ours == blob


def test_signature_tag() -> None:
    assert signature_tag(DIGEST, ".sig") == "sha256-" + DIGEST[7:] + ".sig"
    with pytest.raises(ValueError):
        signature_tag("sha512:abc", ".sig")


def test_signature_config_matches_cosign_shape() -> None:
    cfg = json.loads(signature_config(["sha256:" + "1" * 64]))
    assert cfg["rootfs"] == {"type": "layers", "diff_ids": ["sha256:" + "1" * 64]}
    assert cfg["created"] == "0001-01-01T00:00:00Z" and cfg["config"] == {}


def test_pae_dsse_spec_example() -> None:
    # DSSE protocol.md example
    assert dsse.pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_statement_v1_shape() -> None:
    st = json.loads(make_statement("r/x", DIGEST, "https://p/v1", {"a": 1}))
    assert st == {
        "_type": STATEMENT_V1,
        "subject": [{"name": "r/x", "digest": {"sha256": DIGEST[7:]}}],
        "predicateType": "https://p/v1",
        "predicate": {"a": 1},
    }


def test_cosign_signature_layer_verifies(cosign_verifiers: tuple[LayerVerifier, ...]) -> None:
    desc, blob = _layer("sig")
    item = check_signature_layer(desc, blob, DIGEST, cosign_verifiers)
    assert item.ok, item.reason
    assert item.signer == load_public_keys([DATA / "cosign.pub"])[0].fingerprint
    assert item.time is None  # key-pair signatures carry no time


def test_cosign_v01_attestation_verifies(cosign_verifiers: tuple[LayerVerifier, ...]) -> None:
    desc, blob = _layer("att")
    item = check_attestation_layer(desc, blob, DIGEST, cosign_verifiers)
    assert item.ok, item.reason
    assert item.predicate_type == "https://example.com/t/v1"
    assert item.statement is not None and item.statement["_type"] == "https://in-toto.io/Statement/v0.1"
    assert item.time == "2026-11-30T17:00:00Z"  # predicate startedOn


def test_wrong_key(other_verifiers: tuple[LayerVerifier, ...]) -> None:
    desc, blob = _layer("sig")
    item = check_signature_layer(desc, blob, DIGEST, other_verifiers)
    assert not item.ok and "wrong key" in item.reason
    desc, blob = _layer("att")
    item = check_attestation_layer(desc, blob, DIGEST, other_verifiers)
    assert not item.ok and "wrong key" in item.reason


def test_signature_for_another_digest(cosign_verifiers: tuple[LayerVerifier, ...]) -> None:
    desc, blob = _layer("sig")
    item = check_signature_layer(desc, blob, OTHER, cosign_verifiers)
    assert not item.ok and f"another digest ({DIGEST})" in item.reason
    desc, blob = _layer("att")
    item = check_attestation_layer(desc, blob, OTHER, cosign_verifiers)
    assert not item.ok and "another digest" in item.reason


def _rehash(desc: dict[str, Any], blob: bytes) -> dict[str, Any]:
    return {**desc, "digest": SignatureLayer("x", blob, {}).digest, "size": len(blob)}


def test_payload_edited(cosign_verifiers: tuple[LayerVerifier, ...]) -> None:
    desc, blob = _layer("sig")
    edited = blob.replace(b"test/drecord", b"test/evil")
    item = check_signature_layer(_rehash(desc, edited), edited, DIGEST, cosign_verifiers)
    # a cosign layer names no signer: an edit cannot be told from another key's signature (never counted)
    assert item.classification == "untrusted" and "payload edited" in item.reason
    desc, blob = _layer("att")
    env = json.loads(blob)
    st = json.loads(base64.b64decode(env["payload"]))
    st["predicate"]["buildType"] = "https://evil"
    env["payload"] = base64.b64encode(json.dumps(st).encode()).decode()
    edited = json.dumps(env).encode()
    item = check_attestation_layer(_rehash(desc, edited), edited, DIGEST, cosign_verifiers)
    assert not item.ok and "payload edited" in item.reason


def test_payload_edited_names_our_key_when_the_layer_does(tmp_path: Path) -> None:
    signer = load_signer(DATA / "cosign.key", "test-password")
    payload = simple_signing_payload("r/x", DIGEST)
    sig = signer.sign(payload)
    edited = payload.replace(b"r/x", b"r/y")
    layer = SignatureLayer(
        SIMPLESIGNING_MEDIA_TYPE,
        edited,
        {SIGNATURE_ANNOTATION: base64.b64encode(sig).decode(), SIGNER_HINT_ANNOTATION: signer.fingerprint},
    )
    vs = verifiers_for(load_public_keys([DATA / "cosign.pub"]))
    item = check_signature_layer(layer.descriptor(), edited, DIGEST, vs)
    assert item.classification == "invalid" and item.signer == signer.fingerprint
    assert "signature does not match the key it names: payload or signature edited" in item.reason


def test_stripped_annotations(cosign_verifiers: tuple[LayerVerifier, ...]) -> None:
    desc, blob = _layer("sig")
    item = check_signature_layer({**desc, "annotations": {}}, blob, DIGEST, cosign_verifiers)
    assert not item.ok and "stripped" in item.reason
    desc, blob = _layer("att")
    ann = {k: v for k, v in desc["annotations"].items() if k != "predicateType"}
    item = check_attestation_layer({**desc, "annotations": ann}, blob, DIGEST, cosign_verifiers)
    assert not item.ok and "predicateType is missing (stripped)" in item.reason


def test_predicate_type_annotation_mismatch(cosign_verifiers: tuple[LayerVerifier, ...]) -> None:
    desc, blob = _layer("att")
    ann = {**desc["annotations"], "predicateType": "https://slsa.dev/provenance/v1"}
    item = check_attestation_layer({**desc, "annotations": ann}, blob, DIGEST, cosign_verifiers)
    assert not item.ok and "differs from the signed statement" in item.reason


def test_truncated_layer(cosign_verifiers: tuple[LayerVerifier, ...]) -> None:
    for kind, check in (("sig", check_signature_layer), ("att", check_attestation_layer)):
        desc, blob = _layer(kind)
        item = check(desc, blob[:-10], DIGEST, cosign_verifiers)
        assert not item.ok and "truncated layer" in item.reason, item.reason
        item = check(desc, None, DIGEST, cosign_verifiers)
        assert not item.ok and "missing" in item.reason
        # truncated blob re-hashed into the descriptor: content no longer parses / verifies
        cut = blob[: len(blob) // 2]
        item = check(_rehash(desc, cut), cut, DIGEST, cosign_verifiers)
        assert not item.ok and item.reason


def test_no_verifiers_is_a_failure_not_a_crash() -> None:
    desc, blob = _layer("sig")
    item = check_signature_layer(desc, blob, DIGEST, ())
    assert not item.ok and "no key or identity" in item.reason


def test_predicate_time() -> None:
    assert predicate_time({"timestamp": "t1"}) == "t1"
    assert predicate_time({"runDetails": {"metadata": {"finishedOn": "t2"}}}) == "t2"
    assert predicate_time({"metadata": {"buildFinishedOn": "t3"}}) == "t3"
    assert predicate_time({"x": 1}) is None
    assert predicate_time([]) is None
