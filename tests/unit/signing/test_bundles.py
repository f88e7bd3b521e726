"""Key-pair Sigstore bundles (cosign 3's format), judged from bytes: a bundle recorded from real
cosign 2.5 (`cosign attest --new-bundle-format --key`, tests/data/signing/README.md) and bundles
`builder.signing.bundles.key_bundle` writes, verified, tampered and given the wrong key."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives.asymmetric import ec

from builder.predicates import COSIGN_SIGN_V1, SLSA_PROVENANCE_V1
from builder.signing.bundles import (
    BUNDLE_MEDIA_TYPE,
    check_key_bundle,
    hint_fingerprint,
    is_key_bundle,
    key_bundle,
    key_hint,
)
from builder.signing.dsse import IN_TOTO_PAYLOAD_TYPE, make_statement, pae
from builder.signing.keys import KeyPairSigner, PublicKey, load_public_keys
from builder.signing.signer import signer_public_key
from builder.signing.verifiers import verifiers_for

if TYPE_CHECKING:
    from builder.signing.report import VerifiedItem

DATA = Path(__file__).resolve().parents[2] / "data" / "signing"
RECORDED = (DATA / "cosign-bundle-attestation.json").read_bytes()
RECORDED_SUBJECT = "sha256:65855d7eaf01d6d664dfafe2cd651fd2cae08a09f7b9e259d960e7b5a4cdd925"
DIGEST = "sha256:" + "ab" * 32


def _check(blob: bytes, digest: str, keys: list[PublicKey], annotated: str | None = SLSA_PROVENANCE_V1) -> VerifiedItem:
    return check_key_bundle(
        blob,
        digest,
        verifiers_for(keys),
        where="sha256-x -> sha256:r",
        referrer_digest="sha256:r",
        annotated_type=annotated,
    )


def _signer() -> KeyPairSigner:
    return KeyPairSigner(ec.generate_private_key(ec.SECP256R1()), source="k")


def _builder_bundle(signer: KeyPairSigner, digest: str = DIGEST, ptype: str = SLSA_PROVENANCE_V1) -> bytes:
    statement = make_statement("127.0.0.1:5000/ml/jax", digest, ptype, {"a": 1})
    return key_bundle(statement, signer.sign(pae(IN_TOTO_PAYLOAD_TYPE, statement)), signer.fingerprint)


def test_recorded_cosign_bundle_verifies_with_its_key() -> None:
    (pub,) = load_public_keys([DATA / "cosign.pub"])
    assert is_key_bundle(RECORDED)
    item = _check(RECORDED, RECORDED_SUBJECT, [pub])
    assert item.ok and item.kind == "attestation" and item.predicate_type == SLSA_PROVENANCE_V1
    assert item.signer == pub.fingerprint and item.time == "2026-12-02T00:00:00Z"
    assert item.statement is not None and item.statement["_type"] == "https://in-toto.io/Statement/v0.1"
    # cosign's publicKey.hint is the same fingerprint builder uses
    hint = json.loads(RECORDED)["verificationMaterial"]["publicKey"]["hint"]
    assert hint_fingerprint(hint) == pub.fingerprint


def test_recorded_bundle_with_another_key_is_untrusted_and_names_the_claimed_key() -> None:
    (cosign_pub,) = load_public_keys([DATA / "cosign.pub"])
    item = _check(RECORDED, RECORDED_SUBJECT, [signer_public_key(_signer())])
    assert not item.ok and item.untrusted and item.statement is None
    assert item.signer == cosign_pub.fingerprint  # claimed by the (unsigned) hint: display only


def test_recorded_bundle_for_another_digest_or_type_is_invalid() -> None:
    (pub,) = load_public_keys([DATA / "cosign.pub"])
    other = _check(RECORDED, DIGEST, [pub])
    assert not other.ok and not other.untrusted and "another digest" in other.reason
    typed = _check(RECORDED, RECORDED_SUBJECT, [pub], annotated="https://example.com/other/v1")
    assert not typed.ok and not typed.untrusted and "differs from the signed statement" in typed.reason


def test_edited_payload_is_invalid_when_the_named_key_is_given() -> None:
    signer = _signer()
    doc = json.loads(_builder_bundle(signer))
    statement = json.loads(base64.b64decode(doc["dsseEnvelope"]["payload"]))
    statement["predicate"] = {"a": 2}
    doc["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    item = _check(json.dumps(doc).encode(), DIGEST, [signer_public_key(signer)])
    assert not item.ok and not item.untrusted and "payload or signature edited" in item.reason


def test_builder_bundle_shape_and_cosign3_signature_kind() -> None:
    signer = _signer()
    doc = json.loads(_builder_bundle(signer))
    assert doc["mediaType"] == BUNDLE_MEDIA_TYPE and doc["dsseEnvelope"]["payloadType"] == IN_TOTO_PAYLOAD_TYPE
    assert doc["verificationMaterial"] == {"publicKey": {"hint": key_hint(signer.fingerprint)}}
    ok = _check(_builder_bundle(signer), DIGEST, [signer_public_key(signer)])
    assert ok.ok and ok.kind == "attestation"
    sig = _check(
        _builder_bundle(signer, ptype=COSIGN_SIGN_V1),
        DIGEST,
        [signer_public_key(signer)],
        annotated=COSIGN_SIGN_V1,
    )
    assert sig.ok and sig.kind == "signature" and sig.predicate_type is None and sig.statement is None


def test_message_signature_or_junk_bundle_is_a_failed_item() -> None:
    signer = _signer()
    message = json.dumps(
        {
            "mediaType": BUNDLE_MEDIA_TYPE,
            "verificationMaterial": {"publicKey": {"hint": ""}},
            "messageSignature": {"signature": "AA=="},
        }
    ).encode()
    assert not is_key_bundle(b'{"verificationMaterial": "x"}') and not is_key_bundle(b"[1]")
    odd = b'{"verificationMaterial": "x", "dsseEnvelope": {"signatures": "x"}}'
    for blob in (message, b"not json", odd, b"[1]"):
        item = _check(blob, DIGEST, [signer_public_key(signer)])
        assert not item.ok and not item.untrusted and "no DSSE envelope" in item.reason


def test_verify_output_tells_bundle_rows_from_legacy_layers() -> None:
    import io

    from rich.console import Console

    from builder.cli.sign import render_verification
    from builder.signing.report import VerificationReport

    (pub,) = load_public_keys([DATA / "cosign.pub"])
    bundle = _check(RECORDED, RECORDED_SUBJECT, [pub])
    report = VerificationReport("r", "repo", RECORDED_SUBJECT, (bundle,), (), (SLSA_PROVENANCE_V1,), None)
    out = io.StringIO()
    render_verification(Console(file=out, width=160), report, {}, header="r", name="repo")
    assert bundle.is_bundle and "attestation (bundle)" in out.getvalue()
