"""Pure parts of keyless signing, and the Sigstore test instance's cryptography checked with
sigstore-python's own (independent) verification code: Merkle proofs, SETs, checkpoints, SCTs, chains."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import TYPE_CHECKING

import pytest
import rfc8785
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.verification import PolicyBuilder, Store

from builder.errors import ConfigError, SigningError
from builder.signing import dsse
from builder.signing.dsse import payload_of_pae
from builder.signing.keyless.identity import (
    ANY_IDENTITY,
    GITHUB_ACTIONS_ISSUER,
    IdentityPolicy,
    cert_identities,
    github_workflow_identity,
    parse_signer,
    policies_from_options,
    signer_text,
)
from builder.signing.keyless.identity import der_utf8 as decode_der_utf8
from builder.signing.keyless.set_layer import body_matches
from builder.signing.keyless.trust import load_trust_config, load_trusted_root
from builder.signing.keyless.write import check_formats
from tests.sigstore_instance.ca import Identity, TestCA, der_utf8
from tests.sigstore_instance.rekor import TestRekor, inclusion_path, leaf_hash, merkle_root

if TYPE_CHECKING:
    from pathlib import Path

    from cryptography import x509

GH = "https://github.com/org/repo/.github/workflows/build.yml@refs/heads/main"
GH_ISSUER = GITHUB_ACTIONS_ISSUER


# ------------------------------------------------------------------------------------------------
# identity policies


def test_exact_identity_and_issuer() -> None:
    p = IdentityPolicy(identity=GH, issuer=GH_ISSUER).validate()
    assert p.matches([GH], GH_ISSUER)
    assert not p.matches([GH + "x"], GH_ISSUER)
    assert not p.matches([GH], "https://accounts.google.com")
    assert not p.matches([GH], None)
    assert p.matches(["someone@example.com", GH], GH_ISSUER)  # any SAN may match


def test_regexp_is_a_full_match() -> None:
    branch = IdentityPolicy(
        identity_regexp=r"https://github\.com/org/repo/\.github/workflows/build\.yml@refs/heads/.+", issuer=GH_ISSUER
    )
    assert branch.matches([GH], GH_ISSUER)
    assert not branch.matches([GH.replace("refs/heads/main", "refs/tags/v1")], GH_ISSUER)
    # a prefix alone does not match: re.fullmatch, not re.search
    prefix = IdentityPolicy(identity_regexp=r"https://github\.com/org/repo", issuer=GH_ISSUER)
    assert not prefix.matches([GH], GH_ISSUER)
    issuer_re = IdentityPolicy(identity=GH, issuer_regexp=r"https://token\.actions\.githubusercontent\.com")
    assert issuer_re.matches([GH], GH_ISSUER)
    assert not issuer_re.matches([GH], GH_ISSUER + ".evil.example")


def test_policy_validation_errors() -> None:
    with pytest.raises(ConfigError, match="needs --identity"):
        IdentityPolicy(issuer=GH_ISSUER).validate()
    with pytest.raises(ConfigError, match="has no issuer"):
        IdentityPolicy(identity=GH).validate()
    with pytest.raises(ConfigError, match="invalid regular expression"):
        IdentityPolicy(identity_regexp="(", issuer=GH_ISSUER).validate()


def test_policies_from_options_and_github_helper() -> None:
    ps = policies_from_options([GH], [r".*@refs/tags/.*"], GH_ISSUER, None)
    assert [p.identity for p in ps] == [GH, None]
    assert ps[1].identity_regexp == r".*@refs/tags/.*"
    gh = github_workflow_identity("org/repo", "build.yml")
    assert gh.identity == GH and gh.issuer == GH_ISSUER


# ------------------------------------------------------------------------------------------------
# certificates from the test CA


@pytest.fixture(scope="module")
def ca() -> TestCA:
    return TestCA()


def _leaf(ca: TestCA, identity: Identity) -> x509.Certificate:
    return ca.issue(ec.generate_private_key(ec.SECP256R1()).public_key(), identity)


def test_cert_identities_reads_san_and_issuer_extensions(ca: TestCA) -> None:
    cert = _leaf(ca, Identity(san_email=None, san_uri=GH, issuer=GH_ISSUER))
    assert cert_identities(cert) == ([GH], GH_ISSUER)
    cert = _leaf(ca, Identity(san_email="dev@example.com", san_uri=None, issuer="https://accounts.google.com"))
    assert cert_identities(cert) == (["dev@example.com"], "https://accounts.google.com")


def test_der_utf8_long_form() -> None:
    long = "x" * 300
    assert decode_der_utf8(der_utf8(long)) == long
    assert decode_der_utf8(b"\x04\x01a") is None


def test_leaf_chains_to_the_test_root_and_embeds_a_valid_sct(ca: TestCA) -> None:
    """The checks sigstore-python's Verifier makes, run on the test CA's output directly."""
    from sigstore._internal.sct import verify_sct
    from sigstore._internal.trust import CTKeyring, Keyring
    from sigstore_models.common import v1 as common_v1

    cert = _leaf(ca, Identity(san_email=None, san_uri=GH, issuer=GH_ISSUER))
    verifier = (
        PolicyBuilder()
        .store(Store([ca.root]))
        .time(cert.not_valid_before_utc)
        .extension_policies(
            ca_policy=_ext_policy(ca=True),
            ee_policy=_ext_policy(ca=False),
        )
        .build_client_verifier()
    )
    chain = verifier.verify(cert, [ca.intermediate]).chain
    assert chain[-1] == ca.root
    from tests.sigstore_instance.ca import spki_der

    ct_key = common_v1.PublicKey(
        raw_bytes=base64.b64encode(spki_der(ca.ct.key.public_key())),
        key_details=common_v1.PublicKeyDetails.PKIX_ECDSA_P256_SHA_256,
    )
    verify_sct(cert, [ca.intermediate, ca.root], CTKeyring(Keyring([ct_key])))
    # and an SCT from another CT key does not verify
    other = common_v1.PublicKey(
        raw_bytes=base64.b64encode(spki_der(ec.generate_private_key(ec.SECP256R1()).public_key())),
        key_details=common_v1.PublicKeyDetails.PKIX_ECDSA_P256_SHA_256,
    )
    from sigstore.errors import VerificationError

    with pytest.raises(VerificationError):
        verify_sct(cert, [ca.intermediate, ca.root], CTKeyring(Keyring([other])))


def _ext_policy(*, ca: bool) -> object:
    from cryptography.x509 import ExtendedKeyUsage
    from cryptography.x509.verification import Criticality, ExtensionPolicy

    base = ExtensionPolicy.webpki_defaults_ca() if ca else ExtensionPolicy.webpki_defaults_ee()
    return base.may_be_present(ExtendedKeyUsage, Criticality.NON_CRITICAL, None)


# ------------------------------------------------------------------------------------------------
# the test Rekor log


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 8, 9, 16, 17])
def test_inclusion_proofs_verify_with_sigstore_merkle_code(size: int) -> None:
    from sigstore._internal import merkle

    leaves = [leaf_hash(f"leaf-{i}".encode()) for i in range(size)]
    root = merkle_root(leaves)
    for index in range(size):
        proof = inclusion_path(index, leaves)
        inner, border = merkle._decomp_inclusion_proof(index, size)
        assert len(proof) == inner + border
        seed = merkle._chain_inner(leaves[index], proof[:inner], index)
        assert merkle._chain_border_right(seed, proof[inner:]) == root


def _hashedrekord(key: ec.EllipticCurvePrivateKey, data: bytes) -> dict[str, object]:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    digest = hashlib.sha256(data).digest()
    from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

    sig = key.sign(digest, ec.ECDSA(Prehashed(hashes.SHA256())))
    pem = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    return {
        "apiVersion": "0.0.1",
        "kind": "hashedrekord",
        "spec": {
            "signature": {
                "content": base64.b64encode(sig).decode(),
                "publicKey": {"content": base64.b64encode(pem).decode()},
            },
            "data": {"hash": {"algorithm": "sha256", "value": digest.hex()}},
        },
    }


def test_rekor_entries_sets_and_checkpoints() -> None:
    from sigstore._internal.rekor.checkpoint import SignedCheckpoint

    log = TestRekor()
    key = ec.generate_private_key(ec.SECP256R1())
    responses = [log.add(_hashedrekord(key, f"artifact {i}".encode())) for i in range(3)]
    indexes = [next(iter(r.values()))["logIndex"] for r in responses]
    assert indexes == [1, 2, 3]  # index 0 is the genesis leaf (sigstore-go treats 0 as "missing")
    ((uuid, entry),) = log.render(2).items()
    assert uuid.endswith(leaf_hash(base64.b64decode(entry["body"])).hex())
    payload = {k: entry[k] for k in ("body", "integratedTime", "logID", "logIndex")}
    set_sig = base64.b64decode(entry["verification"]["signedEntryTimestamp"])
    log.key.public_key().verify(set_sig, rfc8785.dumps(payload), ec.ECDSA(hashes.SHA256()))
    proof = entry["verification"]["inclusionProof"]
    assert proof["treeSize"] == 4
    checkpoint = SignedCheckpoint.from_text(proof["checkpoint"])
    assert checkpoint.checkpoint.log_hash == proof["rootHash"]
    assert checkpoint.checkpoint.origin == log.origin
    (sig,) = checkpoint.signed_note.signatures
    assert sig.sig_hash == log.log_id[:4]
    log.key.public_key().verify(
        base64.b64decode(sig.signature), checkpoint.signed_note.note.encode(), ec.ECDSA(hashes.SHA256())
    )
    # the same entry twice is a conflict, as in Rekor
    from tests.sigstore_instance.rekor import RekorError

    with pytest.raises(RekorError) as err:
        log.add(json.loads(base64.b64decode(entry["body"])))
    assert err.value.code == 409


def test_rekor_refuses_a_signature_that_does_not_verify() -> None:
    from tests.sigstore_instance.rekor import RekorError

    log = TestRekor()
    proposal = _hashedrekord(ec.generate_private_key(ec.SECP256R1()), b"a")
    proposal["spec"]["data"]["hash"]["value"] = hashlib.sha256(b"b").hexdigest()  # type: ignore[index]
    with pytest.raises(RekorError, match="does not verify"):
        log.add(proposal)


# ------------------------------------------------------------------------------------------------
# trust configuration


def test_trust_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_trust_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ConfigError, match="invalid Sigstore trust config"):
        load_trust_config(bad)
    with pytest.raises(ConfigError, match="invalid Sigstore trusted root"):
        load_trusted_root(bad)


def test_rekor_v1_is_pinned(tmp_path: Path) -> None:
    """A signing config offering only a Rekor v2 log is refused: the legacy bundle annotation needs a SET."""
    from tests.sigstore_instance import SigstoreTestInstance, write_trust_files

    with SigstoreTestInstance() as inst:
        files = write_trust_files(inst, tmp_path)
        tc = load_trust_config(files.trust_config)
        assert tc.force_tlog_version == 1
        doc = json.loads(files.trust_config.read_text())
    doc["signingConfig"]["rekorTlogUrls"][0]["majorApiVersion"] = 2
    v2 = tmp_path / "v2.json"
    v2.write_text(json.dumps(doc))
    with pytest.raises(SigningError, match="Rekor v1"):
        load_trust_config(v2)
    # both file shapes are accepted as a pinned root for verification
    assert load_trusted_root(files.trusted_root)._inner.tlogs
    assert load_trusted_root(files.trust_config)._inner.tlogs


def test_unknown_output_format_refused() -> None:
    with pytest.raises(ConfigError, match="unknown or empty keyless output formats"):
        check_formats(["legacy", "bogus"])
    assert check_formats(["bundle"]) == {"bundle"}


def test_signer_text_round_trips_to_policy_identity() -> None:
    text = signer_text([GH, "other@example.com"], GH_ISSUER)
    assert text == f"{GH} (issuer {GH_ISSUER})"
    assert parse_signer(text) == (GH_ISSUER, GH)
    assert parse_signer("sha256:" + "ab" * 32) is None
    assert parse_signer(None) is None
    assert ANY_IDENTITY.validate().matches([GH], GH_ISSUER)


def test_payload_of_pae() -> None:
    body = b'{"_type":"https://in-toto.io/Statement/v1"} with spaces 12 '
    pae = dsse.pae("application/vnd.in-toto+json", body)
    assert payload_of_pae(pae) == body
    assert payload_of_pae(pae + b"x") is None  # length mismatch
    assert payload_of_pae(b"not pae") is None


def test_rekor_body_must_describe_the_layer(ca: TestCA) -> None:
    from cryptography.hazmat.primitives.serialization import Encoding

    key = ec.generate_private_key(ec.SECP256R1())
    cert = ca.issue(key.public_key(), Identity(san_email="a@example.com", san_uri=None, issuer=GH_ISSUER))
    data = b"simple signing payload"
    sig = key.sign(data, ec.ECDSA(hashes.SHA256()))
    cert_b64 = base64.b64encode(cert.public_bytes(Encoding.PEM)).decode()
    body = {
        "kind": "hashedrekord",
        "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": hashlib.sha256(data).hexdigest()}},
            "signature": {"content": base64.b64encode(sig).decode(), "publicKey": {"content": cert_b64}},
        },
    }
    assert body_matches(body, data, sig, cert) == ""
    assert "other content" in body_matches(body, data + b"!", sig, cert)
    assert "another signature" in body_matches(body, data, sig[:-1] + b"\x00", cert)
    other = ca.issue(key.public_key(), Identity(san_email="b@example.com", san_uri=None, issuer=GH_ISSUER))
    assert "another certificate" in body_matches(body, data, sig, other)
    pae = dsse.pae("application/vnd.in-toto+json", b"{}")
    dsse_body = {
        "kind": "dsse",
        "spec": {
            "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(b"{}").hexdigest()},
            "signatures": [{"signature": base64.b64encode(sig).decode(), "verifier": cert_b64}],
        },
    }
    assert body_matches(dsse_body, pae, sig, cert) == ""
    assert "payloadHash" in body_matches(dsse_body, dsse.pae("t", b"[]"), sig, cert)
    assert "unsupported Rekor entry kind" in body_matches({"kind": "intoto"}, data, sig, cert)
