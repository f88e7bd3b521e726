"""Hostile evidence documents (round 6, integrity under attack): JSON nested past the parser's
recursion limit and manifests listing more layers than builder reads are verdicts or one clear
RegistryError (exit 7), never a RecursionError traceback. Real ECDSA signatures over the crafted
payloads: the attacker holds a key of their own, so the layer passes the signature step and the
payload is parsed."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from builder.errors import RegistryError
from builder.registry.manifest import load_json, parse_json_object
from builder.signing.dsse import IN_TOTO_PAYLOAD_TYPE, pae
from builder.signing.keys import KeyPairSigner, PublicKey
from builder.signing.layer import (
    DSSE_MEDIA_TYPE,
    MAX_EVIDENCE_LAYERS,
    PREDICATE_TYPE_ANNOTATION,
    SIGNATURE_ANNOTATION,
    SIMPLESIGNING_MEDIA_TYPE,
    SignatureLayer,
    evidence_layers,
)
from builder.signing.layer_check import check_attestation_layer, check_signature_layer, signed_role
from builder.signing.verifiers import verifiers_for

DIGEST = "sha256:" + "ab" * 32
DEEP = b"[" * 200_000 + b"]" * 200_000


def _signer() -> KeyPairSigner:
    return KeyPairSigner(ec.generate_private_key(ec.SECP256R1()))


def test_load_json_turns_deep_nesting_into_value_error() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        load_json(DEEP)
    assert load_json(b'{"a": [[1]]}') == {"a": [[1]]}
    with pytest.raises(RegistryError, match="nested too deeply") as err:
        parse_json_object(b'{"layers":' + DEEP + b"}", "r/x:sha256-ab.sig")
    assert err.value.exit_code == 7 and "r/x:sha256-ab.sig" in err.value.message


def test_a_signed_deeply_nested_simple_signing_payload_is_a_verdict() -> None:
    attacker = _signer()
    payload = b'{"critical":' + DEEP + b"}"
    ann = {SIGNATURE_ANNOTATION: base64.b64encode(attacker.sign(payload)).decode()}
    layer = SignatureLayer(SIMPLESIGNING_MEDIA_TYPE, payload, ann)
    for key in (attacker, _signer()):  # the attacker's own key given, and a key not given
        item = check_signature_layer(
            layer.descriptor(), payload, DIGEST, verifiers_for([PublicKey(key.public_key, "k.pub")])
        )
        assert not item.ok and "not a simple-signing document" in item.reason
    assert signed_role(payload) is None


def test_deeply_nested_dsse_envelopes_and_statements_are_verdicts() -> None:
    attacker = _signer()
    vs = verifiers_for([PublicKey(attacker.public_key, "k.pub")])
    ann = {SIGNATURE_ANNOTATION: "", PREDICATE_TYPE_ANNOTATION: "https://example.com/p"}
    # the envelope itself nested too deeply (read before any signature)
    desc = SignatureLayer(DSSE_MEDIA_TYPE, DEEP, ann).descriptor()
    item = check_attestation_layer(desc, DEEP, DIGEST, vs)
    assert not item.ok and "not a DSSE envelope" in item.reason
    # a well-formed envelope, validly signed, whose statement is nested too deeply
    statement = b'{"_type":' + DEEP + b"}"
    sig = base64.b64encode(attacker.sign(pae(IN_TOTO_PAYLOAD_TYPE, statement))).decode()
    env = json.dumps(
        {
            "payloadType": IN_TOTO_PAYLOAD_TYPE,
            "payload": base64.b64encode(statement).decode(),
            "signatures": [{"sig": sig}],
        }
    ).encode()
    desc = SignatureLayer(DSSE_MEDIA_TYPE, env, ann).descriptor()
    item = check_attestation_layer(desc, env, DIGEST, vs)
    assert not item.ok and "not a JSON in-toto statement" in item.reason


def test_evidence_layers_are_bounded_by_count() -> None:
    layer = {"mediaType": SIMPLESIGNING_MEDIA_TYPE, "digest": DIGEST, "size": 1}
    assert len(evidence_layers({"layers": [layer] * MAX_EVIDENCE_LAYERS}, "r/x:t")) == MAX_EVIDENCE_LAYERS
    assert evidence_layers(None, "r/x:t") == [] and evidence_layers({"layers": "x"}, "r/x:t") == []
    assert evidence_layers({"layers": [layer, "junk", 3]}, "r/x:t") == [layer]
    with pytest.raises(RegistryError) as err:
        evidence_layers({"layers": [layer] * (MAX_EVIDENCE_LAYERS + 1)}, "reg/r/x:sha256-ab.sig")
    assert err.value.exit_code == 7
    assert f"reg/r/x:sha256-ab.sig lists {MAX_EVIDENCE_LAYERS + 1:,} layers" in err.value.message


def test_deep_nesting_in_keyless_annotations_and_image_files_is_bad_input_not_a_traceback() -> None:
    """The other parsers of registry content: cosign's ``bundle`` annotation of a keyless ``.sig``
    layer (any pusher can attach one with a self-made certificate), the full Sigstore bundle
    annotation, and a file inside an inspected image (``cuda/version.json``)."""
    from builder.image.stack import _cuda_json
    from builder.signing.keyless.set_layer import _log_entry
    from builder.signing.keyless.verify import _annotations_match

    with pytest.raises(ValueError, match="nested too deeply"):
        _log_entry(DEEP.decode())
    assert "does not parse" in _annotations_match(DEEP.decode(), {}, "")
    assert _cuda_json(DEEP.decode()) is None


def test_a_layer_digest_that_is_no_digest_is_never_put_in_a_request_path() -> None:
    """A manifest names its layers' digests; a crafted ``sha256:../../x`` would become a blob URL
    path the server normalises elsewhere: refused before any request (exit 7)."""
    from builder.registry import RegistryClient

    client = RegistryClient("127.0.0.1:9", insecure=True)  # nothing listens: a request would fail otherwise
    for digest in ("sha256:../../../../tmp/pwn", "sha256:" + "A" * 64, "../x", "sha256:ab"):
        with pytest.raises(RegistryError, match="is not a digest"):
            client.get_blob("r/x", digest)
    assert client.requests_sent == 0
