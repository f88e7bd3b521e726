"""Tampering in the registry is caught with a clear reason, never a crash (CLI exit 18).

Each case edits what is stored in the real registry the way an attacker or a broken tool
would, then verifies with the library and with the `builder verify` command.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

import pytest

from builder.registry import OCI_MANIFEST, RegistryClient, sha256_digest
from builder.signing.attest import attest_image
from builder.signing.fingerprints import short_fingerprint
from builder.signing.layer import signature_tag
from builder.signing.sign import sign_image
from builder.signing.verify import verify_image
from tests.integration.test_sign import SignCli, new_signer, public_key, push_tiny_image

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from builder.signing.keys import KeyPairSigner
    from builder.signing.report import VerificationReport
    from tests.conftest import Cli

PTYPE = "https://slsa.dev/provenance/v1"


@pytest.fixture
def run_cli(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> SignCli:
    """``builder ARGS`` in-process (``tests.integration.test_sign.SignCli``)."""
    return SignCli(cli, monkeypatch)


@pytest.fixture
def client(registry_address: str) -> RegistryClient:
    return RegistryClient(registry_address, insecure=True)


@pytest.fixture
def signed(client: RegistryClient, unique_repo: str, tmp_path: Path) -> tuple[str, str, KeyPairSigner]:
    """A tiny image at tag v1, signed and attested (SLSA provenance) by a fresh key."""
    repo = unique_repo
    digest = push_tiny_image(client, repo, "v1")
    signer = new_signer(tmp_path / "k")
    sign_image(client, repo, digest, signer, lock_dir=tmp_path / "locks")
    attest_image(client, repo, digest, PTYPE, {"builder": {"id": "test"}}, signer, lock_dir=tmp_path / "locks")
    return repo, digest, signer


def rewrite_layer(
    client: RegistryClient,
    repo: str,
    tag: str,
    edit: Callable[[dict[str, Any], bytes], tuple[dict[str, Any], bytes | None]],
) -> None:
    """Replace layer 0 of ``repo:tag``: ``edit(descriptor, blob) -> (descriptor, new blob or None)``."""
    manifest = client.get_manifest(repo, tag).json
    desc = manifest["layers"][0]
    blob = client.get_blob(repo, desc["digest"])
    new_desc, new_blob = edit(dict(desc), blob)
    if new_blob is not None:
        client.put_blob(repo, new_blob)
    manifest["layers"][0] = new_desc
    client.put_manifest(repo, tag, json.dumps(manifest).encode(), OCI_MANIFEST)


def rehashed(desc: dict[str, Any], blob: bytes) -> tuple[dict[str, Any], bytes]:
    return {**desc, "digest": sha256_digest(blob), "size": len(blob)}, blob


def verify(client: RegistryClient, repo: str, digest: str, signer: KeyPairSigner, **kw: Any) -> VerificationReport:
    report = verify_image(client, repo, digest, keys=[public_key(signer)], **kw)
    assert not report.ok
    return report


def reasons(report: VerificationReport, kind: str) -> str:
    return " | ".join(i.reason for i in report.items if i.kind == kind)


def classes(report: VerificationReport, kind: str) -> set[str]:
    return {i.classification for i in report.items if i.kind == kind}


def test_payload_edited(
    run_cli: SignCli, client: RegistryClient, signed: tuple[str, str, KeyPairSigner], tmp_path: Path
) -> None:
    repo, digest, signer = signed
    tag = signature_tag(digest, ".sig")
    rewrite_layer(client, repo, tag, lambda d, b: rehashed(d, b.replace(b'"optional":null', b'"optional":{"x":"y"}')))
    r = verify(client, repo, digest, signer)
    assert "signature does not match the key it names: payload or signature edited" in reasons(r, "signature")
    assert "none of the 1 signature(s) is valid" in r.problems[0]
    assert classes(r, "signature") == {"invalid"} and r.diagnosis == "tampered"
    assert "1 invalid (tampered or broken)" in r.problems[0]
    (tmp_path / "k.pub").write_text(signer.public_key_pem)
    cli = run_cli(["verify", f"{repo}:v1", "--key", "k.pub"], tmp_path, client.registry)
    assert cli.code == 18 and "INVALID" in cli.stderr and "#1 invalid: signature does not match" in cli.stderr
    assert "tampered or broken item(s) present: do not use this digest" in cli.stderr
    assert "valid items by: k.pub" in cli.stderr  # the attestation is intact


def test_attestation_statement_edited(client: RegistryClient, signed: tuple[str, str, KeyPairSigner]) -> None:
    repo, digest, signer = signed

    def edit(d: dict[str, Any], b: bytes) -> tuple[dict[str, Any], bytes]:
        env = json.loads(b)
        st = json.loads(base64.b64decode(env["payload"]))
        st["predicate"]["builder"]["id"] = "evil"
        env["payload"] = base64.b64encode(json.dumps(st).encode()).decode()
        return rehashed(d, json.dumps(env).encode())

    rewrite_layer(client, repo, signature_tag(digest, ".att"), edit)
    r = verify(client, repo, digest, signer, predicate_types=[PTYPE])
    assert "signature does not match the key it names: payload or signature edited" in reasons(r, "attestation")
    assert classes(r, "attestation") == {"invalid"}
    assert r.problems == (f"no valid attestation of type {PTYPE}; found: {PTYPE} (invalid)",)


def test_signature_for_another_digest(
    client: RegistryClient, signed: tuple[str, str, KeyPairSigner], tmp_path: Path
) -> None:
    """An attacker copies the .sig/.att of a signed image onto another image's digest."""
    repo, digest, signer = signed
    other = push_tiny_image(client, repo, "v2", b"other content\n")
    for suffix in (".sig", ".att"):
        raw = client.get_manifest(repo, signature_tag(digest, suffix)).raw
        client.put_manifest(repo, signature_tag(other, suffix), raw, OCI_MANIFEST)
    r = verify(client, repo, other, signer, predicate_types=[PTYPE])
    assert f"signature is for another digest ({digest})" in reasons(r, "signature")
    assert f"attestation is for another digest ({digest})" in reasons(r, "attestation")
    assert classes(r, "signature") == classes(r, "attestation") == {"invalid"}


def test_wrong_key(client: RegistryClient, signed: tuple[str, str, KeyPairSigner], tmp_path: Path) -> None:
    repo, digest, signer = signed
    stranger = new_signer(tmp_path / "stranger")
    r = verify(client, repo, digest, stranger, predicate_types=[PTYPE])
    assert f"wrong key? none of the given keys ({short_fingerprint(stranger.fingerprint)}) verifies" in reasons(
        r, "signature"
    )
    assert f"the layer claims {short_fingerprint(signer.fingerprint)} (unverified" in reasons(r, "signature")
    assert "wrong key?" in reasons(r, "attestation")
    # not tampering: well-formed items by a key that was not given, shown with the signer they claim
    assert classes(r, "signature") == classes(r, "attestation") == {"untrusted"}
    assert r.diagnosis == "wrong-key" and r.other_signers == (signer.fingerprint,)


def test_image_replaced_under_same_tag(
    run_cli: SignCli, client: RegistryClient, signed: tuple[str, str, KeyPairSigner], tmp_path: Path
) -> None:
    repo, digest, signer = signed
    replaced = push_tiny_image(client, repo, "v1", b"replacement\n")
    # by tag@digest: the tag must still point at the signed digest
    r = verify(client, repo, digest, signer, tag="v1")
    assert f"image replaced under the same tag: v1 now points at {replaced}" in r.problems[0]
    # by tag: the digest it points at now has no signatures
    r2 = verify(client, repo, replaced, signer)
    assert "no signatures found" in r2.problems[0]
    assert r.diagnosis == "reference" and r2.diagnosis == "not-signed"
    (tmp_path / "k.pub").write_text(signer.public_key_pem)
    cli = run_cli(["verify", f"{repo}:v1@{digest}", "--key", "k.pub"], tmp_path, client.registry)
    assert cli.code == 18 and "image replaced under the same tag" in cli.stderr
    assert "the reference itself did not check out" in cli.stderr
    cli = run_cli(["verify", f"{repo}:v1", "--key", "k.pub"], tmp_path, client.registry)
    assert cli.code == 18 and "not signed at all" in cli.stderr and "nothing has signed this digest" in cli.stderr


def test_wrong_predicate_type(client: RegistryClient, signed: tuple[str, str, KeyPairSigner]) -> None:
    repo, digest, signer = signed
    r = verify(
        client, repo, digest, signer, predicate_types=["https://builder-project.github.io/attestations/device-check/v1"]
    )
    assert r.problems == (
        "no valid attestation of type https://builder-project.github.io/attestations/device-check/v1; "
        f"found: {PTYPE} (valid)",
    )
    # the predicateType annotation rewritten to claim another type
    rewrite_layer(
        client,
        repo,
        signature_tag(digest, ".att"),
        lambda d, b: ({**d, "annotations": {**d["annotations"], "predicateType": "https://evil/v1"}}, None),
    )
    r2 = verify(client, repo, digest, signer, predicate_types=["https://evil/v1"])
    assert f"predicateType annotation (https://evil/v1) differs from the signed statement's ({PTYPE})" in reasons(
        r2, "attestation"
    )


@pytest.mark.parametrize(
    ("suffix", "annotation", "expected"),
    [
        (".sig", "dev.cosignproject.cosign/signature", "dev.cosignproject.cosign/signature is missing (stripped)"),
        (".att", "dev.cosignproject.cosign/signature", "dev.cosignproject.cosign/signature is missing (stripped)"),
        (".att", "predicateType", "predicateType is missing (stripped)"),
    ],
)
def test_stripped_annotation(
    client: RegistryClient, signed: tuple[str, str, KeyPairSigner], suffix: str, annotation: str, expected: str
) -> None:
    repo, digest, signer = signed

    def strip(d: dict[str, Any], b: bytes) -> tuple[dict[str, Any], None]:
        return {**d, "annotations": {k: v for k, v in d["annotations"].items() if k != annotation}}, None

    rewrite_layer(client, repo, signature_tag(digest, suffix), strip)
    kind = "signature" if suffix == ".sig" else "attestation"
    r = verify(client, repo, digest, signer, predicate_types=[PTYPE] if kind == "attestation" else ())
    assert expected in reasons(r, kind)
    assert classes(r, kind) == {"invalid"}


@pytest.mark.parametrize("suffix", [".sig", ".att"])
def test_truncated_layer(client: RegistryClient, signed: tuple[str, str, KeyPairSigner], suffix: str) -> None:
    repo, digest, signer = signed
    kind = "signature" if suffix == ".sig" else "attestation"
    tag = signature_tag(digest, suffix)
    # truncated blob pushed under its own digest, descriptor keeps the original size
    rewrite_layer(client, repo, tag, lambda d, b: ({**d, "digest": sha256_digest(b[:-20])}, b[:-20]))
    r = verify(client, repo, digest, signer, predicate_types=[PTYPE] if kind == "attestation" else ())
    assert "truncated layer: the blob is" in reasons(r, kind)
    assert classes(r, kind) == {"invalid"}
    # descriptor re-hashed for the truncated bytes: the content itself no longer verifies
    rewrite_layer(client, repo, tag, lambda d, b: rehashed(d, b[: len(b) // 2]))
    r2 = verify(client, repo, digest, signer, predicate_types=[PTYPE] if kind == "attestation" else ())
    assert reasons(r2, kind) and classes(r2, kind) == {"invalid"}
    # the layer blob deleted from the repository (distribution: storage.delete.enabled)
    layer_digest = client.get_manifest(repo, tag).json["layers"][0]["digest"]
    client.request("DELETE", f"/v2/{repo}/blobs/{layer_digest}", ok=(202,))
    # a later invocation (a new client: one client keeps the blobs it already read by digest)
    later = RegistryClient(client.registry, insecure=True)
    r3 = verify(later, repo, digest, signer, predicate_types=[PTYPE] if kind == "attestation" else ())
    assert "is missing from the registry" in reasons(r3, kind) and classes(r3, kind) == {"invalid"}


def test_garbage_manifest_layers_do_not_crash(client: RegistryClient, signed: tuple[str, str, KeyPairSigner]) -> None:
    repo, digest, signer = signed
    tag = signature_tag(digest, ".sig")
    manifest = client.get_manifest(repo, tag).json
    config = manifest["config"]
    weird = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": config,
        "layers": [{"mediaType": "text/plain", "digest": config["digest"], "size": config["size"]}],
    }
    client.put_manifest(repo, tag, json.dumps(weird).encode(), OCI_MANIFEST)
    r = verify(client, repo, digest, signer)
    assert "layer media type 'text/plain'" in reasons(r, "signature") and classes(r, "signature") == {"invalid"}
