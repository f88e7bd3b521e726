"""Keyless signing for real, offline: sigstore-python's real Signer/Verifier against the loopback Sigstore
test instance (tests/sigstore_instance), the real registry, and real cosign 2.5 as the independent verifier
(with ``SIGSTORE_ROOT_FILE`` / ``SIGSTORE_REKOR_PUBLIC_KEY`` / ``SIGSTORE_CT_LOG_PUBLIC_KEY_FILE`` or
``--trusted-root``; never ``--insecure-ignore-tlog``).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from builder.predicates import COSIGN_SIGN_V1, SLSA_PROVENANCE_V1
from builder.registry import OCI_INDEX, OCI_MANIFEST, RegistryClient, fallback_tag, sha256_digest
from builder.signing.keyless.bundle import BUNDLE_MEDIA_TYPE, SIGSTORE_BUNDLE_ANNOTATION
from builder.signing.keyless.identity import (
    ANY_IDENTITY,
    GITHUB_ACTIONS_ISSUER,
    IdentityPolicy,
    github_workflow_identity,
    parse_signer,
)
from builder.signing.keyless.trust import ambient_identity_token, identity_token, load_trust_config, load_trusted_root
from builder.signing.keyless.verify import verify_keyless
from builder.signing.keyless.write import (
    KeylessWrite,
    keyless_attest_image,
    keyless_sign_and_attest_build,
    keyless_sign_image,
)
from builder.signing.keys import generate_key_pair, load_public_keys, load_signer
from builder.signing.layer import ATT_SUFFIX, SIG_SUFFIX, signature_tag
from builder.signing.sign import sign_image
from tests.conftest import Cli, require_tool
from tests.integration.test_sign import SignCli, push_tiny_image
from tests.sigstore_instance import SigstoreTestInstance, TrustFiles, write_trust_files

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from builder.signing.report import VerificationReport

pytestmark = pytest.mark.integration

WORKFLOW_REF = "builder-org/builder/.github/workflows/build.yml@refs/heads/main"
IDENTITY = f"https://github.com/{WORKFLOW_REF}"
PREDICATE = {"buildDefinition": {"buildType": "https://builder-project.github.io/build/v1"}, "runDetails": {}}


@dataclass
class Sigstore:
    instance: SigstoreTestInstance
    trust: TrustFiles

    @property
    def issuer(self) -> str:
        return self.instance.issuer_url

    def workflow_token(self, ref: str = WORKFLOW_REF) -> object:
        return identity_token(self.instance.token(job_workflow_ref=ref))

    def policy(self, identity: str = IDENTITY, issuer: str | None = None) -> IdentityPolicy:
        return IdentityPolicy(identity=identity, issuer=issuer or self.issuer)


@pytest.fixture(scope="module")
def sigstore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sigstore]:
    with SigstoreTestInstance() as inst:
        yield Sigstore(inst, write_trust_files(inst, tmp_path_factory.mktemp("sigstore-trust")))


@dataclass
class Image:
    client: RegistryClient
    repository: str
    digest: str

    @property
    def ref(self) -> str:
        return f"{self.client.registry}/{self.repository}@{self.digest}"


@pytest.fixture
def image(registry_address: str, unique_repo: str) -> Image:
    client = RegistryClient(registry_address, insecure=True)
    return Image(client, unique_repo, push_tiny_image(client, unique_repo, "v1", os.urandom(16)))


def _sign_and_attest(sigstore: Sigstore, image: Image, lock_dir: Path, **kw: object) -> None:
    tc = load_trust_config(sigstore.trust.trust_config)
    token = sigstore.workflow_token()
    keyless_sign_image(
        image.client, image.repository, image.digest, identity_token=token, trust_config=tc, lock_dir=lock_dir, **kw
    )
    keyless_attest_image(
        image.client,
        image.repository,
        image.digest,
        predicate_type=SLSA_PROVENANCE_V1,
        predicate=PREDICATE,
        identity_token=token,
        trust_config=tc,
        lock_dir=lock_dir,
        **kw,
    )


def _verify(
    sigstore: Sigstore, image: Image, policies: list[IdentityPolicy], trust: Path | None = None
) -> VerificationReport:
    return verify_keyless(
        image.client,
        image.repository,
        image.digest,
        trusted_root=load_trusted_root(trust or sigstore.trust.trusted_root),
        identities=policies,
        predicate_types=[SLSA_PROVENANCE_V1],
    )


def _cosign(cosign_bin: str, sigstore: Sigstore, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **sigstore.trust.cosign_env()}
    return subprocess.run(
        [cosign_bin, *args, "--allow-http-registry", "--allow-insecure-registry"],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )


def _identity_flags(sigstore: Sigstore, identity: str = IDENTITY, issuer: str | None = None) -> list[str]:
    return ["--certificate-identity", identity, "--certificate-oidc-issuer", issuer or sigstore.issuer]


# ----------------------------------------------------------------------------------------------------
# sign + attest, verified by this project


def test_keyless_sign_and_attest_verified_by_builder(sigstore: Sigstore, image: Image, tmp_path: Path) -> None:
    _sign_and_attest(sigstore, image, tmp_path / "locks")
    report = _verify(sigstore, image, [sigstore.policy()])
    assert report.ok, report.to_json()
    kinds = sorted((i.kind, i.tag.endswith((".sig", ".att"))) for i in report.items)
    # legacy .sig + .att layers, and two bundle referrers (sign/v1 + provenance)
    assert kinds == [("attestation", False), ("attestation", True), ("signature", False), ("signature", True)]
    for item in report.items:
        assert item.ok and item.signer == f"{IDENTITY} (issuer {sigstore.issuer})"
        assert item.time is not None and item.time.endswith("Z")
    att = next(i for i in report.items if i.kind == "attestation")
    assert att.predicate == PREDICATE
    # both forms went through the test instance's real protocols: 1 certificate per signer session
    assert ("POST", "/api/v2/signingCert") in sigstore.instance.requests
    assert ("POST", "/api/v1/log/entries") in sigstore.instance.requests


def test_legacy_layers_carry_cosign_annotations(sigstore: Sigstore, image: Image, tmp_path: Path) -> None:
    _sign_and_attest(sigstore, image, tmp_path / "locks")
    sig = image.client.get_manifest(image.repository, signature_tag(image.digest, SIG_SUFFIX))
    (layer,) = sig.layers
    ann = layer.annotation_map
    assert layer.media_type == "application/vnd.dev.cosign.simplesigning.v1+json"
    assert ann["dev.sigstore.cosign/certificate"].startswith("-----BEGIN CERTIFICATE-----")
    assert ann["dev.sigstore.cosign/chain"].count("BEGIN CERTIFICATE") == 2
    legacy = json.loads(ann["dev.sigstore.cosign/bundle"])
    assert set(legacy) == {"SignedEntryTimestamp", "Payload"}
    assert set(legacy["Payload"]) == {"body", "integratedTime", "logIndex", "logID"}
    body = json.loads(base64.b64decode(legacy["Payload"]["body"]))
    assert body["kind"] == "hashedrekord"
    att = image.client.get_manifest(image.repository, signature_tag(image.digest, ATT_SUFFIX))
    (att_layer,) = att.layers
    blob = image.client.get_blob(image.repository, att_layer.digest)
    att_body = json.loads(
        base64.b64decode(json.loads(att_layer.annotation_map["dev.sigstore.cosign/bundle"])["Payload"]["body"])
    )
    # the layer bytes are the DSSE envelope exactly as logged: their SHA-256 is the entry's envelopeHash
    assert att_body["kind"] == "dsse"
    assert att_body["spec"]["envelopeHash"]["value"] == sha256_digest(blob).split(":")[1]
    assert att_layer.annotation_map["predicateType"] == SLSA_PROVENANCE_V1


def test_ambient_github_actions_token(
    sigstore: Sigstore, image: Image, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GitHub Actions path: sigstore.oidc.detect_credential() asks the runner's token endpoint
    (served by the test instance) and the certificate carries the workflow identity and GitHub's issuer."""
    for k, v in sigstore.instance.github_actions_env(WORKFLOW_REF).items():
        monkeypatch.setenv(k, v)
    token = ambient_identity_token()
    tc = load_trust_config(sigstore.trust.trust_config)
    w = keyless_sign_image(
        image.client, image.repository, image.digest, identity_token=token, trust_config=tc, lock_dir=tmp_path
    )
    assert w.identity == IDENTITY and w.issuer == GITHUB_ACTIONS_ISSUER
    gh = github_workflow_identity("builder-org/builder", "build.yml", "refs/heads/main")
    report = verify_keyless(
        image.client,
        image.repository,
        image.digest,
        trusted_root=load_trusted_root(sigstore.trust.trust_config),
        identities=[gh],
    )
    assert report.ok, report.to_json()


def test_ambient_token_missing_is_a_signing_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from builder.errors import SigningError

    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.delenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", raising=False)
    with pytest.raises(SigningError, match="OIDC"):
        ambient_identity_token()


# ----------------------------------------------------------------------------------------------------
# verified by real cosign


def test_cosign_verifies_legacy_signature_and_attestation(
    sigstore: Sigstore, image: Image, tmp_path: Path, cosign_bin: str
) -> None:
    _sign_and_attest(sigstore, image, tmp_path / "locks", formats=("legacy",))
    r = _cosign(cosign_bin, sigstore, "verify", *_identity_flags(sigstore), image.ref)
    assert r.returncode == 0, r.stderr
    assert "transparency log was verified offline" in r.stderr
    assert "verified using trusted certificate authority certificates" in r.stderr
    r = _cosign(
        cosign_bin, sigstore, "verify-attestation", "--type", SLSA_PROVENANCE_V1, *_identity_flags(sigstore), image.ref
    )
    assert r.returncode == 0, r.stderr
    payload = json.loads(base64.b64decode(json.loads(r.stdout.splitlines()[0])["payload"]))
    assert payload["subject"][0]["digest"]["sha256"] == image.digest.split(":")[1]


def test_cosign_verifies_bundle_referrers(sigstore: Sigstore, image: Image, tmp_path: Path, cosign_bin: str) -> None:
    """Only bundle referrers exist (no .sig/.att tags): cosign 2.5 finds them through the fallback index."""
    _sign_and_attest(sigstore, image, tmp_path / "locks", formats=("bundle",))
    assert image.client.try_get_manifest(image.repository, signature_tag(image.digest, SIG_SUFFIX)) is None
    trusted_root = str(sigstore.trust.trusted_root)
    for ptype in (SLSA_PROVENANCE_V1, COSIGN_SIGN_V1):
        r = _cosign(
            cosign_bin,
            sigstore,
            "verify-attestation",
            "--new-bundle-format",
            "--trusted-root",
            trusted_root,
            "--type",
            ptype,
            *_identity_flags(sigstore),
            image.ref,
        )
        assert r.returncode == 0, (ptype, r.stderr)
        statement = json.loads(base64.b64decode(json.loads(r.stdout.splitlines()[0])["payload"]))
        assert statement["predicateType"] == ptype
    report = _verify(sigstore, image, [sigstore.policy()])
    assert report.ok, report.to_json()


def test_cosign_refuses_wrong_identity_and_issuer(
    sigstore: Sigstore, image: Image, tmp_path: Path, cosign_bin: str
) -> None:
    _sign_and_attest(sigstore, image, tmp_path / "locks")
    wrong_id = IDENTITY.replace("refs/heads/main", "refs/heads/evil")
    r = _cosign(cosign_bin, sigstore, "verify", *_identity_flags(sigstore, identity=wrong_id), image.ref)
    assert r.returncode != 0 and "none of the expected identities matched" in r.stderr
    r = _cosign(
        cosign_bin, sigstore, "verify", *_identity_flags(sigstore, issuer="https://accounts.google.com"), image.ref
    )
    assert r.returncode != 0
    r = _cosign(
        cosign_bin,
        sigstore,
        "verify-attestation",
        "--new-bundle-format",
        "--trusted-root",
        str(sigstore.trust.trusted_root),
        "--type",
        SLSA_PROVENANCE_V1,
        *_identity_flags(sigstore, identity=wrong_id),
        image.ref,
    )
    assert r.returncode != 0


# ----------------------------------------------------------------------------------------------------
# the referrers fallback index


def test_fallback_index_lists_bundles_with_artifact_type(sigstore: Sigstore, image: Image, tmp_path: Path) -> None:
    _sign_and_attest(sigstore, image, tmp_path / "locks")
    _sign_and_attest(sigstore, image, tmp_path / "locks")  # a second signer session appends, keeps the first
    index = image.client.get_manifest(image.repository, fallback_tag(image.digest))
    assert index.media_type == OCI_INDEX
    entries = index.json["manifests"]
    assert len(entries) == 4
    assert [e["digest"] for e in entries] == sorted(e["digest"] for e in entries)
    for e in entries:
        assert e["artifactType"] == BUNDLE_MEDIA_TYPE and e["mediaType"] == OCI_MANIFEST
        referrer = image.client.get_manifest(image.repository, e["digest"])
        assert referrer.json["subject"]["digest"] == image.digest
        assert referrer.json["config"] == {
            "mediaType": "application/vnd.oci.empty.v1+json",
            "size": 2,
            "digest": sha256_digest(b"{}"),
        }
        assert referrer.json["annotations"]["dev.sigstore.bundle.content"] == "dsse-envelope"
    ptypes = sorted(e["annotations"]["dev.sigstore.bundle.predicateType"] for e in entries)
    assert ptypes == sorted([COSIGN_SIGN_V1, COSIGN_SIGN_V1, SLSA_PROVENANCE_V1, SLSA_PROVENANCE_V1])
    # a referrers-aware reader (our client, OCI distribution-spec 1.1 rules: API 404 -> fallback tag)
    assert {d.digest for d in image.client.referrers(image.repository, image.digest, BUNDLE_MEDIA_TYPE)} == {
        e["digest"] for e in entries
    }


def test_oras_discover_reads_the_fallback_index(sigstore: Sigstore, image: Image, tmp_path: Path) -> None:
    """An independent referrers-aware client. oras is optional (scripts/setup does not install it): the
    mandatory check is test_fallback_index_lists_bundles_with_artifact_type (our client, OCI rules)."""
    oras = require_tool("oras")
    _sign_and_attest(sigstore, image, tmp_path / "locks", formats=("bundle",))
    r = subprocess.run(
        [
            oras,
            "discover",
            "--plain-http",
            "--distribution-spec",
            "v1.1-referrers-tag",
            "--format",
            "json",
            "--artifact-type",
            BUNDLE_MEDIA_TYPE,
            image.ref,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    found = doc.get("manifests") or doc.get("referrers") or []
    assert len(found) == 2
    assert {m["artifactType"] for m in found} == {BUNDLE_MEDIA_TYPE}
    index = image.client.get_manifest(image.repository, fallback_tag(image.digest))
    assert {m["digest"] for m in found} == {e["digest"] for e in index.json["manifests"]}


# ----------------------------------------------------------------------------------------------------
# refusals with reasons


def test_wrong_identity_or_issuer_refused_with_reasons(sigstore: Sigstore, image: Image, tmp_path: Path) -> None:
    _sign_and_attest(sigstore, image, tmp_path / "locks")
    other = IDENTITY.replace("build.yml", "release.yml")
    report = _verify(sigstore, image, [sigstore.policy(identity=other)])
    assert not report.ok
    assert all(not i.ok for i in report.items)
    for item in report.items:
        assert "which no allowed identity matches" in item.reason and IDENTITY in item.reason
        assert item.classification == "untrusted"  # a trusted certificate for another identity: not tampering
    assert report.diagnosis == "wrong-key"
    report = _verify(sigstore, image, [sigstore.policy(issuer="https://token.actions.githubusercontent.com")])
    assert not report.ok
    assert all(f"issuer {sigstore.issuer}" in i.reason for i in report.items)
    assert any("none of the" in p for p in report.problems)


def test_identity_patterns_workflow_on_branch(sigstore: Sigstore, image: Image, tmp_path: Path) -> None:
    _sign_and_attest(sigstore, image, tmp_path / "locks")
    on_branch = IdentityPolicy(
        identity_regexp=r"https://github\.com/builder-org/builder/\.github/workflows/build\.yml@refs/heads/.+",
        issuer=sigstore.issuer,
    )
    assert _verify(sigstore, image, [on_branch]).ok
    only_tags = IdentityPolicy(
        identity_regexp=r"https://github\.com/builder-org/builder/\.github/workflows/build\.yml@refs/tags/v.*",
        issuer_regexp=r"http://127\.0\.0\.1:\d+/oidc",
    )
    report = _verify(sigstore, image, [only_tags])
    assert not report.ok and all("refs/tags" in i.reason for i in report.items)
    # any of several policies may match
    assert _verify(sigstore, image, [only_tags, on_branch]).ok


def test_untrusted_instance_refused(sigstore: Sigstore, image: Image, tmp_path: Path) -> None:
    """Material from the test instance does not verify against another instance's pinned root."""
    _sign_and_attest(sigstore, image, tmp_path / "locks")
    with SigstoreTestInstance() as other:
        other_trust = write_trust_files(other, tmp_path / "other")
        report = _verify(sigstore, image, [sigstore.policy()], trust=other_trust.trusted_root)
    assert not report.ok
    for item in report.items:
        assert not item.ok and "Sigstore verification failed" in item.reason


def _rewrite_layer(image: Image, suffix: str, edit_blob: object = None, edit_annotations: object = None) -> None:
    """Replace the single layer of the .sig/.att manifest by an edited copy (what an attacker with
    registry write access can do)."""
    tag = signature_tag(image.digest, suffix)
    m = image.client.get_manifest(image.repository, tag).json
    layer = m["layers"][0]
    blob = image.client.get_blob(image.repository, layer["digest"])
    if callable(edit_blob):
        blob = edit_blob(blob)
        image.client.put_blob(image.repository, blob)
        layer["digest"], layer["size"] = sha256_digest(blob), len(blob)
    if callable(edit_annotations):
        edit_annotations(layer["annotations"])
    raw = json.dumps(m).encode()
    image.client.put_manifest(image.repository, tag, raw, OCI_MANIFEST)


def test_tampered_legacy_signature_refused(sigstore: Sigstore, image: Image, tmp_path: Path, cosign_bin: str) -> None:
    _sign_and_attest(sigstore, image, tmp_path / "locks", formats=("legacy",))
    _rewrite_layer(image, SIG_SUFFIX, edit_blob=lambda b: b.replace(b'"optional":null', b'"optional":{"x":"y"}'))
    report = _verify(sigstore, image, [sigstore.policy()])
    sig = next(i for i in report.items if i.kind == "signature")
    assert not sig.ok and "Sigstore verification failed" in sig.reason
    assert not report.ok
    r = _cosign(cosign_bin, sigstore, "verify", *_identity_flags(sigstore), image.ref)
    assert r.returncode != 0


def test_replaced_certificate_annotation_refused(sigstore: Sigstore, image: Image, tmp_path: Path) -> None:
    _sign_and_attest(sigstore, image, tmp_path / "locks", formats=("legacy",))
    # a certificate for another identity from the same (trusted) CA
    other_dir = tmp_path / "other"
    other_image = Image(
        image.client, image.repository + "x", push_tiny_image(image.client, image.repository + "x", "v1", b"other")
    )
    tc = load_trust_config(sigstore.trust.trust_config)
    keyless_sign_image(
        other_image.client,
        other_image.repository,
        other_image.digest,
        identity_token=identity_token(sigstore.instance.token(email="a@example.com")),
        trust_config=tc,
        lock_dir=other_dir,
        formats=("legacy",),
    )
    other_sig = image.client.get_manifest(other_image.repository, signature_tag(other_image.digest, SIG_SUFFIX))
    other_cert = other_sig.layers[0].annotation_map["dev.sigstore.cosign/certificate"]

    def swap(ann: dict[str, str]) -> None:
        ann["dev.sigstore.cosign/certificate"] = other_cert

    _rewrite_layer(image, SIG_SUFFIX, edit_annotations=swap)
    report = _verify(sigstore, image, [sigstore.policy(), sigstore.policy(identity="a@example.com")])
    sig = next(i for i in report.items if i.kind == "signature")
    assert not sig.ok and "certificate annotation is not the bundle's signing certificate" in sig.reason


def test_tampered_attestation_refused(sigstore: Sigstore, image: Image, tmp_path: Path, cosign_bin: str) -> None:
    _sign_and_attest(sigstore, image, tmp_path / "locks", formats=("legacy",))

    def edit(blob: bytes) -> bytes:
        env = json.loads(blob)
        st = json.loads(base64.b64decode(env["payload"]))
        st["predicate"]["runDetails"] = {"builder": {"id": "https://evil.example"}}
        env["payload"] = base64.b64encode(json.dumps(st).encode()).decode()
        return json.dumps(env).encode()

    _rewrite_layer(image, ATT_SUFFIX, edit_blob=edit)
    report = _verify(sigstore, image, [sigstore.policy()])
    att = next(i for i in report.items if i.kind == "attestation")
    assert not att.ok and att.reason
    assert any(f"no valid attestation of type {SLSA_PROVENANCE_V1}" in p for p in report.problems)
    r = _cosign(
        cosign_bin, sigstore, "verify-attestation", "--type", SLSA_PROVENANCE_V1, *_identity_flags(sigstore), image.ref
    )
    assert r.returncode != 0


def test_tampered_bundle_referrer_refused(sigstore: Sigstore, image: Image, tmp_path: Path) -> None:
    _sign_and_attest(sigstore, image, tmp_path / "locks", formats=("bundle",))
    index = image.client.get_manifest(image.repository, fallback_tag(image.digest))
    entry = next(
        e
        for e in index.json["manifests"]
        if e["annotations"]["dev.sigstore.bundle.predicateType"] == SLSA_PROVENANCE_V1
    )
    referrer = image.client.get_manifest(image.repository, entry["digest"]).json
    bundle = json.loads(image.client.get_blob(image.repository, referrer["layers"][0]["digest"]))
    st = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    st["predicate"]["runDetails"] = {"edited": True}
    bundle["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(st).encode()).decode()
    blob = json.dumps(bundle).encode()
    image.client.put_blob(image.repository, blob)
    referrer["layers"][0].update(digest=sha256_digest(blob), size=len(blob))
    raw = json.dumps(referrer).encode()
    new_digest = image.client.put_manifest(image.repository, sha256_digest(raw), raw, OCI_MANIFEST)
    doc = index.json
    for e in doc["manifests"]:
        if e["digest"] == entry["digest"]:
            e.update(digest=new_digest, size=len(raw))
    image.client.put_manifest(image.repository, fallback_tag(image.digest), json.dumps(doc).encode(), OCI_INDEX)
    report = _verify(sigstore, image, [sigstore.policy()])
    att = next(i for i in report.items if i.kind == "attestation")
    assert not att.ok and "Sigstore verification failed" in att.reason
    assert not report.ok


# ----------------------------------------------------------------------------------------------------
# the CLI


def test_cli_keyless_sign_attest_verify(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, sigstore: Sigstore, image: Image, tmp_path: Path
) -> None:
    run_cli = SignCli(cli, monkeypatch)
    token = sigstore.instance.token(job_workflow_ref=WORKFLOW_REF)
    predicate = tmp_path / "provenance.json"
    predicate.write_text(json.dumps(PREDICATE))
    registry = image.client.registry
    tc = str(sigstore.trust.trust_config)
    r = run_cli(
        ["--json", "sign", image.ref, "--keyless", "--trust-config", tc], tmp_path, registry, BUILDER_OIDC_TOKEN=token
    )
    assert r.code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["identity"] == IDENTITY and out["legacy"]["appended"] and out["referrer"]["fallback_index"]
    r = run_cli(
        [
            "attest",
            image.ref,
            "--keyless",
            "--oidc-token",
            token,
            "--trust-config",
            tc,
            "--predicate-type",
            SLSA_PROVENANCE_V1,
            "--predicate",
            str(predicate),
        ],
        tmp_path,
        registry,
    )
    assert r.code == 0, r.stderr
    assert "attested keylessly" in r.stderr
    verify = [
        "verify",
        image.ref,
        "--issuer",
        sigstore.issuer,
        "--trust-config",
        str(sigstore.trust.trusted_root),
        "--attestation",
        SLSA_PROVENANCE_V1,
    ]
    r = run_cli(["--json", *verify, "--identity", IDENTITY], tmp_path, registry)
    assert r.code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["ok"] and len(report["items"]) == 4
    r = run_cli(
        [*verify, "--identity-regexp", r"https://github\.com/builder-org/builder/.*@refs/heads/main"],
        tmp_path,
        registry,
    )
    assert r.code == 0 and "VERIFIED" in r.stderr, r.stderr
    r = run_cli(["--json", *verify, "--identity", IDENTITY + "-other"], tmp_path, registry)
    assert r.code == 18
    err = json.loads(r.stdout)["error"]
    reasons = [i["reason"] for i in err["details"]["items"]]
    assert reasons and all("which no allowed identity matches" in x for x in reasons)
    assert err["details"]["diagnosis"] == "wrong-key"
    assert any(IDENTITY in s for s in err["details"]["other_signers"])
    assert {i["classification"] for i in err["details"]["items"]} == {"untrusted"}
    r = run_cli([*verify, "--identity", IDENTITY + "-other"], tmp_path, registry)
    assert r.code == 18 and "wrong key given?" in r.stderr and "INVALID" not in r.stderr, r.stderr


def test_concurrent_keyless_writers_keep_every_entry(sigstore: Sigstore, image: Image, tmp_path: Path) -> None:
    """Four signers at once on one digest: every .sig layer and every fallback-index entry survives
    (read-modify-write under the file locks, re-read after each write)."""
    from concurrent.futures import ThreadPoolExecutor

    tc = load_trust_config(sigstore.trust.trust_config)

    def one(n: int) -> KeylessWrite:
        token = identity_token(sigstore.instance.token(email=f"signer{n}@example.com"))
        return keyless_sign_image(
            image.client,
            image.repository,
            image.digest,
            identity_token=token,
            trust_config=tc,
            lock_dir=tmp_path / "locks",
        )

    with ThreadPoolExecutor(4) as pool:
        writes = list(pool.map(one, range(4)))
    sig = image.client.get_manifest(image.repository, signature_tag(image.digest, SIG_SUFFIX))
    assert len(sig.layers) == 4
    index = image.client.get_manifest(image.repository, fallback_tag(image.digest))
    assert {e["digest"] for e in index.json["manifests"]} == {w.referrer.manifest_digest for w in writes if w.referrer}
    policies = [sigstore.policy(identity=f"signer{n}@example.com") for n in range(4)]
    report = verify_keyless(
        image.client,
        image.repository,
        image.digest,
        trusted_root=load_trusted_root(sigstore.trust.trusted_root),
        identities=policies,
    )
    assert report.ok and len(report.items) == 8 and all(i.ok for i in report.items)


def test_build_step_and_evidence_for_policies(sigstore: Sigstore, image: Image, tmp_path: Path) -> None:
    """What the build step and promotion use: sign + provenance in one call; then gather evidence with
    ANY_IDENTITY (crypto still checked against the pinned root) and read (issuer, subject) per item."""
    tc = load_trust_config(sigstore.trust.trust_config)
    sig, att = keyless_sign_and_attest_build(
        image.client,
        image.repository,
        image.digest,
        PREDICATE,
        identity_token=sigstore.workflow_token(),
        trust_config=tc,
        lock_dir=tmp_path,
    )
    assert sig.legacy is not None and att.referrer is not None
    report = verify_keyless(
        image.client,
        image.repository,
        image.digest,
        trusted_root=load_trusted_root(sigstore.trust.trusted_root),
        identities=[ANY_IDENTITY],
        predicate_types=[SLSA_PROVENANCE_V1],
    )
    assert report.ok
    assert {parse_signer(i.signer) for i in report.items} == {(sigstore.issuer, IDENTITY)}


# ----------------------------------------------------------------------------------------------------
# the other direction: what real cosign signs keylessly (against the test instance), this project verifies


def _cosign_keyless(cosign_bin: str, sigstore: Sigstore, image: Image, tmp_path: Path, token: str) -> None:
    flags = [
        "--yes",
        "--fulcio-url",
        sigstore.instance.url,
        "--rekor-url",
        sigstore.instance.url,
        "--identity-token",
        token,
    ]
    r = _cosign(cosign_bin, sigstore, "sign", *flags, image.ref)
    assert r.returncode == 0, r.stderr
    assert "Successfully verified SCT" in r.stderr  # cosign checked the test Fulcio's embedded SCT
    predicate = tmp_path / "predicate.json"
    predicate.write_text(json.dumps(PREDICATE))
    r = _cosign(
        cosign_bin, sigstore, "attest", *flags, "--type", SLSA_PROVENANCE_V1, "--predicate", str(predicate), image.ref
    )
    assert r.returncode == 0, r.stderr


def test_builder_verifies_cosign_keyless_signatures(
    sigstore: Sigstore, image: Image, tmp_path: Path, cosign_bin: str
) -> None:
    """cosign 2.5 `sign`/`attest` keyless (Fulcio v1 API, Rekor hashedrekord + dsse entries) against the test
    instance; builder verifies the layers offline from cosign's SET bundle annotation."""
    _cosign_keyless(cosign_bin, sigstore, image, tmp_path, sigstore.instance.token(email="dev@example.com"))
    r = _cosign(cosign_bin, sigstore, "verify", *_identity_flags(sigstore, identity="dev@example.com"), image.ref)
    assert r.returncode == 0, r.stderr
    report = _verify(sigstore, image, [sigstore.policy(identity="dev@example.com")])
    assert report.ok, report.to_json()
    assert sorted(i.kind for i in report.items) == ["attestation", "signature"]
    att = next(i for i in report.items if i.kind == "attestation")
    assert att.statement is not None and att.statement["_type"] == "https://in-toto.io/Statement/v0.1"
    wrong = _verify(sigstore, image, [sigstore.policy(identity="mallory@example.com")])
    assert not wrong.ok and all("which no allowed identity matches" in i.reason for i in wrong.items)
    with SigstoreTestInstance() as other:
        foreign = write_trust_files(other, tmp_path / "other")
        report = _verify(sigstore, image, [sigstore.policy(identity="dev@example.com")], trust=foreign.trusted_root)
    assert not report.ok and all("signed entry timestamp does not verify" in i.reason for i in report.items)


def test_set_path_checks_the_log_entry(sigstore: Sigstore, image: Image, tmp_path: Path) -> None:
    """Without this project's full-bundle annotation a layer is checked like cosign does (SET); a forged
    log index breaks the SET, and a payload edit breaks the signature."""
    _sign_and_attest(sigstore, image, tmp_path / "locks", formats=("legacy",))
    _rewrite_layer(image, SIG_SUFFIX, edit_annotations=lambda a: a.pop(SIGSTORE_BUNDLE_ANNOTATION))
    _rewrite_layer(image, ATT_SUFFIX, edit_annotations=lambda a: a.pop(SIGSTORE_BUNDLE_ANNOTATION))
    report = _verify(sigstore, image, [sigstore.policy()])
    assert report.ok, report.to_json()

    def forge(ann: dict[str, str]) -> None:
        legacy = json.loads(ann["dev.sigstore.cosign/bundle"])
        legacy["Payload"]["logIndex"] += 1
        ann["dev.sigstore.cosign/bundle"] = json.dumps(legacy)

    _rewrite_layer(image, SIG_SUFFIX, edit_annotations=forge)
    report = _verify(sigstore, image, [sigstore.policy()])
    sig = next(i for i in report.items if i.kind == "signature")
    assert not sig.ok and "signed entry timestamp does not verify" in sig.reason

    def edit(blob: bytes) -> bytes:
        env = json.loads(blob)
        st = json.loads(base64.b64decode(env["payload"]))
        st["predicate"]["runDetails"] = {"edited": True}
        env["payload"] = base64.b64encode(json.dumps(st).encode()).decode()
        return json.dumps(env).encode()

    _rewrite_layer(image, ATT_SUFFIX, edit_blob=edit)
    report = _verify(sigstore, image, [sigstore.policy()])
    att = next(i for i in report.items if i.kind == "attestation")
    assert not att.ok and "does not verify with the certificate's key" in att.reason


def test_key_pair_and_keyless_signers_on_one_digest(sigstore: Sigstore, image: Image, tmp_path: Path) -> None:
    """A key-pair signature (builder.signing.sign) and keyless material coexist in the same .sig manifest; verify with
    a key and an identity checks both kinds; with only the identity, the key-pair layer is not counted."""
    _, pub, fingerprint = generate_key_pair(tmp_path / "keys", None)
    signer = load_signer(tmp_path / "keys" / "builder.key", None)
    sign_image(image.client, image.repository, image.digest, signer, lock_dir=tmp_path / "locks")
    _sign_and_attest(sigstore, image, tmp_path / "locks")
    sig_manifest = image.client.get_manifest(image.repository, signature_tag(image.digest, SIG_SUFFIX))
    assert len(sig_manifest.layers) == 2  # the key-pair layer was kept by the keyless append
    report = verify_keyless(
        image.client,
        image.repository,
        image.digest,
        trusted_root=load_trusted_root(sigstore.trust.trusted_root),
        identities=[sigstore.policy()],
        keys=load_public_keys([pub]),
    )
    assert report.ok, report.to_json()
    assert {i.signer for i in report.items if i.kind == "signature"} == {
        fingerprint,
        f"{IDENTITY} (issuer {sigstore.issuer})",
    }
    only_identity = _verify(sigstore, image, [sigstore.policy()])
    assert only_identity.ok and fingerprint not in {i.signer for i in only_identity.items if i.ok}
    [key_item] = [i for i in only_identity.items if i.signer == fingerprint]  # listed, never counted
    assert key_item.untrusted and "its public key (--key) does" in key_item.reason


def test_replaced_dsse_signature_in_att_layer_refused(sigstore: Sigstore, image: Image, tmp_path: Path) -> None:
    """Same statement, another signature in the .att envelope: not the envelope that was logged."""
    _sign_and_attest(sigstore, image, tmp_path / "locks", formats=("legacy",))

    def resign(blob: bytes) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        env = json.loads(blob)
        payload = base64.b64decode(env["payload"])
        pae = b"DSSEv1 %d %s %d %s" % (len(env["payloadType"]), env["payloadType"].encode(), len(payload), payload)
        sig = ec.generate_private_key(ec.SECP256R1()).sign(pae, ec.ECDSA(hashes.SHA256()))
        env["signatures"] = [{"keyid": "", "sig": base64.b64encode(sig).decode()}]
        return json.dumps(env).encode()

    _rewrite_layer(image, ATT_SUFFIX, edit_blob=resign)
    report = _verify(sigstore, image, [sigstore.policy()])
    att = next(i for i in report.items if i.kind == "attestation")
    assert not att.ok and "not the one logged in Rekor" in att.reason


def test_keyless_signature_of_an_index_covers_each_platform(
    sigstore: Sigstore, registry_address: str, unique_repo: str, tmp_path: Path
) -> None:
    """containers/image verifies the platform manifest it pulls: a keyless signature of an index
    signs each platform manifest too (legacy layers, one signer session), each verifying offline."""
    from tests.integration.test_sigstore_bundles import push_index

    client = RegistryClient(registry_address, insecure=True)
    index = Image(client, unique_repo, push_index(client, unique_repo, "v1", os.urandom(8).hex()))
    tc = load_trust_config(sigstore.trust.trust_config)
    token = sigstore.workflow_token()
    keyless_sign_image(
        client, unique_repo, index.digest, identity_token=token, trust_config=tc, lock_dir=tmp_path / "locks"
    )
    children = [d.digest for d in client.get_manifest(unique_repo, index.digest).manifests]
    assert len(children) == 2
    for digest in (index.digest, *children):
        report = verify_keyless(
            client,
            unique_repo,
            digest,
            trusted_root=load_trusted_root(sigstore.trust.trusted_root),
            identities=[sigstore.policy()],
        )
        assert report.ok, (digest, report.to_json())
        assert any(i.ok and i.tag.endswith(".sig") for i in report.items)


def test_key_only_verify_names_keyless_signatures_as_such(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, sigstore: Sigstore, image: Image, tmp_path: Path
) -> None:
    """Keyless legacy layers and keyless bundle referrers checked with only ``--key``: each item says
    what it is (a Sigstore certificate signature: give --identity/--issuer), in the table, the
    summary, the error hint and ``--json`` (``keyless``), never "key not named in the layer"."""
    _sign_and_attest(sigstore, image, tmp_path / "locks")
    _, pub, _ = generate_key_pair(tmp_path / "keys", None)
    run_cli = SignCli(cli, monkeypatch)
    registry = image.client.registry
    r = run_cli(["--json", "verify", image.ref, "--key", str(pub)], tmp_path, registry)
    assert r.code == 18, r.stderr
    details = json.loads(r.stdout)["error"]["details"]
    items = details["items"]
    assert {i["tag"].endswith((SIG_SUFFIX, ATT_SUFFIX)) for i in items} == {True, False}  # legacy and bundles
    assert all(i["keyless"] and i["classification"] == "untrusted" for i in items), items
    assert all("keyless Sigstore signature" in i["reason"] and "identity" in i["reason"] for i in items), items
    assert details["diagnosis"] == "wrong-key"
    human = run_cli(["verify", image.ref, "--key", str(pub)], tmp_path, registry, COLUMNS="80")
    assert human.code == 18
    text = " ".join(human.stderr.split())
    assert "key not named" not in text and "unnamed key" not in text, human.stderr
    assert "keyless certificate" in text and "give --identity/--issuer" in text, human.stderr
    assert "4 keyless certificate(s)" in text, human.stderr  # the hint counts them by kind

    # signed by the key too: verified, and the keyless items are named as such under "also present"
    sign_image(
        image.client,
        image.repository,
        image.digest,
        load_signer(tmp_path / "keys" / "builder.key", None),
        lock_dir=tmp_path / "locks",
    )
    ok = run_cli(["verify", image.ref, "--key", str(pub)], tmp_path, registry, COLUMNS="80")
    assert ok.code == 0, ok.stderr
    also = " ".join(ok.stderr.split())
    assert "VERIFIED" in also and "4 keyless certificate(s) (give --identity/--issuer)" in also, ok.stderr


def test_identity_only_verify_of_a_key_signed_image_says_who_signed(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, image: Image, tmp_path: Path
) -> None:
    """Verified with only --identity/--issuer, an image signed with a key pair (legacy layer and
    bundle) is not "not signed at all": each signature is listed as untrusted with the key it
    claims, the diagnosis is wrong-key and the hint names --key."""
    from builder.signing.bundles import attest_bundle

    _, pub, fingerprint = generate_key_pair(tmp_path / "keys", None)
    signer = load_signer(tmp_path / "keys" / "builder.key", None)
    sign_image(image.client, image.repository, image.digest, signer, lock_dir=tmp_path / "locks")
    attest_bundle(image.client, image.repository, image.digest, COSIGN_SIGN_V1, {}, signer, lock_dir=tmp_path)
    run_cli = SignCli(cli, monkeypatch)
    args = ["verify", image.ref, "--identity", IDENTITY, "--issuer", "https://issuer.example"]
    r = run_cli(["--json", *args], tmp_path, image.client.registry)
    assert r.code == 18, r.stderr
    err = json.loads(r.stdout)["error"]
    items = err["details"]["items"]
    assert len(items) == 2 and all(i["classification"] == "untrusted" and not i["keyless"] for i in items), items
    assert all(i["signer"] == fingerprint and "(--key)" in i["reason"] for i in items), items
    assert err["details"]["diagnosis"] == "wrong-key" and "--key" in err["hint"]
    assert "no signatures found" not in err["message"]
    human = run_cli(args, tmp_path, image.client.registry, COLUMNS="80")
    assert human.code == 18 and "claims SHA256:" in human.stderr and "not signed at all" not in human.stderr
    ok = run_cli([*args, "--key", str(pub)], tmp_path, image.client.registry)
    assert ok.code == 0, ok.stderr  # with its key it verifies
