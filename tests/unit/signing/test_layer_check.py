"""Classification of verified items (ok / untrusted / invalid: the signer-annotation rule), and the
`builder verify` human output, on real signatures (cryptography keys, recorded cosign layers).

Run against real ECDSA signatures; the rendering is printed to a real rich Console and read back.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec
from rich.console import Console

from builder.cli.sign import render_verification
from builder.predicates import DEVICE_CHECK_V1, SLSA_PROVENANCE_V1
from builder.signing.attest import prepare_attestation
from builder.signing.fingerprints import short_fingerprint
from builder.signing.keys import KeyPairSigner, PublicKey
from builder.signing.layer import (
    SIGNATURE_ANNOTATION,
    SIGNER_HINT_ANNOTATION,
    SIMPLESIGNING_MEDIA_TYPE,
    SignatureLayer,
    simple_signing_payload,
)
from builder.signing.layer_check import check_attestation_layer, check_signature_layer
from builder.signing.report import (
    VerificationReport,
    VerifiedItem,
    check_result,
    describe_failures,
    signer_label,
)
from builder.signing.verifiers import verifiers_for

DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "signing"
DIGEST = (DATA / "cosign-subject-digest.txt").read_text().strip()
OTHER = "sha256:" + "ab" * 32


def _signer() -> KeyPairSigner:
    return KeyPairSigner(ec.generate_private_key(ec.SECP256R1()))


def _pub(signer: KeyPairSigner, source: str = "given.pub") -> PublicKey:
    return PublicKey(signer.public_key, source)


def _sig_layer(signer: KeyPairSigner, digest: str = DIGEST, hint: str | None = "") -> tuple[dict[str, Any], bytes]:
    payload = simple_signing_payload("r/x", digest)
    ann = {SIGNATURE_ANNOTATION: base64.b64encode(signer.sign(payload)).decode()}
    if hint is not None:
        ann[SIGNER_HINT_ANNOTATION] = hint or signer.fingerprint
    layer = SignatureLayer(SIMPLESIGNING_MEDIA_TYPE, payload, ann)
    return layer.descriptor(), payload


def _att_layer(signer: KeyPairSigner, ptype: str, predicate: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    prepared = prepare_attestation("127.0.0.1:5000", "r/x", DIGEST, ptype, predicate, signer)
    return prepared.layer.descriptor(), prepared.layer.blob


def _edited(desc: dict[str, Any], blob: bytes) -> tuple[dict[str, Any], bytes]:
    """The layer with its payload edited (docker-reference) and its descriptor rehashed: well formed, still
    for DIGEST, but the signature no longer matches the bytes."""
    doc = json.loads(blob)
    doc["critical"]["identity"]["docker-reference"] += "-edited"
    edited = json.dumps(doc, separators=(",", ":")).encode()
    return {**desc, "digest": SignatureLayer("x", edited, {}).digest, "size": len(edited)}, edited


def test_own_layer_verifies() -> None:
    mine = _signer()
    item = check_signature_layer(*_sig_layer(mine), DIGEST, verifiers_for([_pub(mine)]))
    assert item.classification == "ok" and item.signer == mine.fingerprint and item.reason == ""


def test_payload_edited_on_a_layer_naming_a_given_key_is_invalid() -> None:
    mine = _signer()
    item = check_signature_layer(*_edited(*_sig_layer(mine)), DIGEST, verifiers_for([_pub(mine)]))
    assert item.classification == "invalid" and not item.untrusted
    assert "signature does not match the key it names: payload or signature edited" in item.reason
    assert item.signer == mine.fingerprint
    # also when several keys are given and the named one is not the first
    vs = verifiers_for([_pub(_signer()), _pub(mine)])
    assert check_signature_layer(*_edited(*_sig_layer(mine)), DIGEST, vs).classification == "invalid"
    # a signature (not the payload) replaced by garbage DER on our own layer: invalid too
    desc, blob = _sig_layer(mine)
    ann = {
        **desc["annotations"],
        SIGNATURE_ANNOTATION: base64.b64encode(b"0\x06\x02\x01\x01\x02\x01\x01").decode(),
    }
    item = check_signature_layer({**desc, "annotations": ann}, blob, DIGEST, verifiers_for([_pub(mine)]))
    assert item.classification == "invalid"


def test_a_layer_by_a_key_not_given_is_untrusted_with_its_unverified_claim() -> None:
    mine, theirs = _signer(), _signer()
    vs = verifiers_for([_pub(mine)])
    desc, blob = _sig_layer(theirs)
    item = check_signature_layer(desc, blob, DIGEST, vs)
    assert not item.ok and item.untrusted and item.classification == "untrusted"
    assert item.signer == theirs.fingerprint and "wrong key?" in item.reason
    assert f"claims {short_fingerprint(theirs.fingerprint)} (unverified" in item.reason
    assert item.to_json()["classification"] == "untrusted"
    # the same well-formed layer copied onto another digest is invalid, not merely untrusted
    item = check_signature_layer(desc, blob, OTHER, vs)
    assert item.classification == "invalid" and "another digest" in item.reason
    # malformed layers by a key not given stay invalid: blob not matching its descriptor, bad payload
    item = check_signature_layer({**desc, "size": len(blob) + 1}, blob, DIGEST, vs)
    assert item.classification == "invalid" and "truncated" in item.reason
    junk = b'{"critical": {}}'
    jdesc = {**desc, "digest": SignatureLayer("x", junk, {}).digest, "size": len(junk)}
    item = check_signature_layer(jdesc, junk, DIGEST, vs)
    assert item.classification == "invalid" and "not a simple-signing document" in item.reason


def test_without_that_key_an_edited_layer_by_another_key_reads_as_untrusted() -> None:
    """No key recovery: a layer claiming a key that was not given and not verifying with any given key
    is 'untrusted' whether it was edited or not (never counted either way); given the key it claims,
    the edit shows as invalid."""
    mine, theirs = _signer(), _signer()
    edited = _edited(*_sig_layer(theirs))
    item = check_signature_layer(*edited, DIGEST, verifiers_for([_pub(mine)]))
    assert item.classification == "untrusted" and item.signer == theirs.fingerprint
    item = check_signature_layer(*edited, DIGEST, verifiers_for([_pub(mine), _pub(theirs)]))
    assert item.classification == "invalid" and "payload or signature edited" in item.reason


def test_cosign_layer_by_a_key_not_given_is_untrusted_without_a_fingerprint() -> None:
    manifest = json.loads((DATA / "cosign-sig-manifest.json").read_text())
    desc, blob = manifest["layers"][0], (DATA / "cosign-sig-layer.json").read_bytes()
    assert SIGNER_HINT_ANNOTATION not in desc["annotations"]
    item = check_signature_layer(desc, blob, DIGEST, verifiers_for([_pub(_signer())]))
    assert item.classification == "untrusted" and item.signer is None
    assert "wrong key?" in item.reason and "names no signer" in item.reason
    # a cosign-written layer with its payload edited, by a key not given: also untrusted (cannot be told apart)
    item = check_signature_layer(*_edited(desc, blob), DIGEST, verifiers_for([_pub(_signer())]))
    assert item.classification == "untrusted" and item.signer is None


def test_untrusted_attestation_carries_no_statement() -> None:
    mine, theirs = _signer(), _signer()
    desc, blob = _att_layer(theirs, DEVICE_CHECK_V1, {"result": "passed"})
    item = check_attestation_layer(desc, blob, DIGEST, verifiers_for([_pub(mine)]))
    assert item.classification == "untrusted" and item.signer == theirs.fingerprint
    assert item.predicate_type == DEVICE_CHECK_V1 and item.statement is None and item.predicate is None
    ok = check_attestation_layer(desc, blob, DIGEST, verifiers_for([_pub(theirs)]))
    assert ok.classification == "ok" and ok.predicate == {"result": "passed"}


def _report(items: list[VerifiedItem], problems: tuple[str, ...] = ()) -> VerificationReport:
    return VerificationReport("127.0.0.1:5000/r/x:v1", "r/x", DIGEST, tuple(items), problems)


def _render(report: VerificationReport, names: dict[str, str]) -> str:
    buf = io.StringIO()
    con = Console(file=buf, width=250, force_terminal=False, color_system=None)
    render_verification(con, report, names, header="127.0.0.1:5000/r/x:v1", name="127.0.0.1:5000/r/x")
    return buf.getvalue()


def _items(
    builder_key: KeyPairSigner, runner: KeyPairSigner, stranger: KeyPairSigner, result: str
) -> list[VerifiedItem]:
    given = verifiers_for([_pub(builder_key), _pub(runner)])
    out = [check_signature_layer(*_sig_layer(builder_key), DIGEST, given)]
    out.append(check_signature_layer(*_sig_layer(stranger), DIGEST, given))
    for signer, ptype, pred in (
        (builder_key, SLSA_PROVENANCE_V1, {"runDetails": {"metadata": {"finishedOn": "2026-11-30T17:00:00Z"}}}),
        (runner, DEVICE_CHECK_V1, {"result": result, "timestamp": "2026-11-30T17:05:00Z"}),
    ):
        out.append(check_attestation_layer(*_att_layer(signer, ptype, pred), DIGEST, given))
    return out


def test_render_names_key_files_and_fingerprints_and_device_check_results() -> None:
    builder_key, runner, stranger = _signer(), _signer(), _signer()
    names = {
        builder_key.fingerprint: ".builder/keys/builder.pub",
        runner.fingerprint: ".builder/keys/check-runner/builder.pub",
    }
    items = _items(builder_key, runner, stranger, "failed")
    assert [i.classification for i in items] == ["ok", "untrusted", "ok", "ok"]
    text = _render(_report(items), names)
    assert f".builder/keys/builder.pub ({short_fingerprint(builder_key.fingerprint)})" in text
    assert f".builder/keys/check-runner/builder.pub ({short_fingerprint(runner.fingerprint)})" in text
    assert (
        "untrusted" in text
        and f"claims {short_fingerprint(stranger.fingerprint)} (unverified; not given)" in text
        and "INVALID" not in text
    )
    assert "device-check: FAILED" in text and "validly signed device check(s) record a result other" in text
    assert f"VERIFIED 127.0.0.1:5000/r/x@{DIGEST}: signature by .builder/keys/builder.pub" in text
    assert "attestations: slsa-provenance (.builder/keys/builder.pub), device-check FAILED" in text
    assert (
        f"also present: 1 item(s) by keys you did not pass (claimed: {short_fingerprint(stranger.fingerprint)})" in text
    )
    passed = _render(_report(_items(builder_key, runner, stranger, "passed")), names)
    assert "device-check: passed" in passed and "FAILED" not in passed and "note:" not in passed


def test_render_failure_tells_wrong_key_from_not_signed_from_tampered() -> None:
    mine, theirs = _signer(), _signer()
    vs = verifiers_for([_pub(mine)])
    wrong = _report([check_signature_layer(*_sig_layer(theirs), DIGEST, vs)], ("none of the 1 signature(s)",))
    assert wrong.diagnosis == "wrong-key" and wrong.other_signers == (theirs.fingerprint,)
    text = _render(wrong, {mine.fingerprint: "k/builder.pub"})
    assert "NOT VERIFIED" in text and "wrong key given?" in text and short_fingerprint(theirs.fingerprint) in text
    nothing = _report([], ("no signatures found",))
    assert nothing.diagnosis == "not-signed" and "not signed at all" in _render(nothing, {})
    desc, blob = _sig_layer(mine)
    edited = blob.replace(b"r/x", b"r/y")
    bad = check_signature_layer({**desc, "size": len(edited)}, edited, DIGEST, vs)
    tampered = _report([bad], ("none of the 1 signature(s)",))
    assert tampered.diagnosis == "tampered"
    text = _render(tampered, {})
    assert "INVALID" in text and "#1 invalid:" in text and "tampered or broken" in text
    js = tampered.to_json()
    assert js["diagnosis"] == "tampered" and js["items"][0]["classification"] == "invalid"
    assert {"ok", "reason", "signer", "statement", "untrusted"} <= set(js["items"][0])


def test_describe_failures() -> None:
    mine, theirs = _signer(), _signer()
    vs = verifiers_for([_pub(mine)])
    items = [check_signature_layer(*_sig_layer(theirs), DIGEST, vs)]
    items.append(check_signature_layer(*_sig_layer(theirs, hint=None), DIGEST, vs))
    items.append(check_signature_layer(*_sig_layer(theirs), OTHER, vs))
    text = describe_failures(items)
    who = f"claimed: {short_fingerprint(theirs.fingerprint)}, 1 unnamed key(s)"
    assert text == f"2 by keys or identities not given ({who}), 1 invalid (tampered or broken)"


def test_labels() -> None:
    assert check_result({"result": {"status": "failed"}}) == "failed"
    assert check_result({"passed": True}) == "passed" and check_result({}) == "unknown"
    assert signer_label("sha256:" + "a" * 64, {}) == "SHA256:aaaaaaaaaaaa…"
    assert signer_label("dev@example.com", {}) == "dev@example.com" and signer_label(None, {}) == "-"


def test_a_promotion_signature_is_named_as_one_and_its_role_is_signed() -> None:
    """The role a promotion signature carries is read from the signed payload (``optional``, as
    ``cosign sign -a`` writes it): the verdict names it, ``--json`` carries it, the summary says
    "promotion signature", not "signature by"; an edited role no longer verifies."""
    from builder.labels import PROMOTION_ROLE, SIGNATURE_ROLE

    signer = _signer()
    payload = simple_signing_payload("r/x", DIGEST, {SIGNATURE_ROLE: PROMOTION_ROLE})
    ann = {SIGNATURE_ANNOTATION: base64.b64encode(signer.sign(payload)).decode()}
    layer = SignatureLayer(SIMPLESIGNING_MEDIA_TYPE, payload, ann)
    item = check_signature_layer(layer.descriptor(), payload, DIGEST, verifiers_for([_pub(signer)]))
    assert item.ok and item.role == PROMOTION_ROLE and item.is_promotion and item.to_json()["role"] == "promotion"
    names = {signer.fingerprint: "given.pub"}
    text = _render(_report([item]), names)
    assert "promotion signature by given.pub" in text and "(no image signature)" in text, text
    assert "signature (promotion)" in text
    desc, plain = _sig_layer(signer)
    image = check_signature_layer(desc, plain, DIGEST, verifiers_for([_pub(signer)]))
    assert image.ok and image.role is None and not image.is_promotion
    both = _render(_report([image, item]), names)
    assert "signature by given.pub; promotion signature by given.pub" in both, both
    assert "(no image signature)" not in both
    stripped = payload.replace(b'"promotion"', b'"build"')  # the role is signed: editing it breaks the signature
    forged = SignatureLayer(SIMPLESIGNING_MEDIA_TYPE, stripped, ann)
    assert not check_signature_layer(forged.descriptor(), stripped, DIGEST, verifiers_for([_pub(signer)])).ok
