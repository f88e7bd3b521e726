"""Verify the keyless material of an image digest offline: legacy layers and Sigstore bundle referrers.

sigstore-python's ``Verifier(trusted_root=...)`` runs offline: certificate chain to the pinned Fulcio
roots at the log's integrated time, embedded SCT against the pinned CT keys, Rekor inclusion proof +
signed checkpoint + SET, signature over the content, and the identity policy
(``builder.signing.keyless.identity``). Items come back as ``builder.signing.report.VerifiedItem``
inside a ``VerificationReport``.

Errors: ``ConfigError`` (2) for bad identity policies; registry errors from ``builder.registry``.
Verification never raises for bad content: reasons go into the items.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from builder.predicates import COSIGN_SIGN_V1
from builder.registry import Descriptor, fallback_tag
from builder.registry.manifest import load_json
from builder.signing.bundles import (
    EMPTY_MEDIA_TYPE,
    ReferrerBundle,
    bundle_referrers,
    check_key_bundle,
    is_key_bundle,
    referrer_bundle,
)
from builder.signing.dsse import envelope_holds, pae
from builder.signing.keyless.bundle import (
    SIGSTORE_BUNDLE_ANNOTATION,
    bundle_doc,
    rfc3339,
    tlog_entry,
)
from builder.signing.keyless.identity import (
    CertificatePolicy,
    IdentityPolicy,
    cert_identities,
    signer_text,
)
from builder.signing.keyless.set_layer import verify_set_layer
from builder.signing.layer import (
    ATT_SUFFIX,
    BUNDLE_ANNOTATION,
    CERTIFICATE_ANNOTATION,
    SIG_SUFFIX,
    SIGNATURE_ANNOTATION,
    read_layers,
)
from builder.signing.report import Kind, VerificationReport, VerifiedItem
from builder.signing.verifiers import KeyVerifier, LayerCheck, LayerVerifier
from builder.signing.verify import confirm_digest, unmet_requirements, verify_layer

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from sigstore.models import TrustedRoot

    from builder.registry import RegistryClient
    from builder.signing.keys import PublicKey


@dataclasses.dataclass(frozen=True)
class _Outcome:
    ok: bool
    reason: str
    signer: str | None
    time: str | None
    payload_type: str | None = None
    payload: bytes | None = None


def _verify_bundle(
    bundle_json: str, trusted_root: TrustedRoot, policies: Sequence[IdentityPolicy], *, artifact: bytes | None
) -> _Outcome:
    """sigstore-python's Verifier over one bundle: ``artifact`` for a message-signature bundle, None for DSSE."""
    from sigstore.errors import Error as SigstoreError
    from sigstore.models import Bundle
    from sigstore.verify import Verifier

    try:
        bundle = Bundle.from_json(bundle_json)
    except (SigstoreError, ValueError, KeyError, TypeError) as exc:  # InvalidBundle, JSON and schema errors
        return _Outcome(False, f"the Sigstore bundle does not parse: {exc}", None, None)
    idents, issuer = cert_identities(bundle.signing_certificate)
    signer = signer_text(idents, issuer)
    entry = tlog_entry(bundle_doc(bundle))
    when = rfc3339(int(entry["integratedTime"])) if entry.get("integratedTime") else None
    policy = CertificatePolicy(policies)
    try:
        verifier = Verifier(trusted_root=trusted_root)
        if artifact is not None:
            if bundle._dsse_envelope is not None:
                return _Outcome(False, "expected a message-signature bundle, found a DSSE bundle", signer, when)
            verifier.verify_artifact(artifact, bundle, policy)
            return _Outcome(True, "", signer, when)
        payload_type, payload = verifier.verify_dsse(bundle, policy)
    except (SigstoreError, ValueError) as exc:
        return _Outcome(False, f"Sigstore verification failed: {exc}", signer, when)
    return _Outcome(True, "", signer, when, payload_type, payload)


@dataclasses.dataclass(frozen=True)
class KeylessLayerVerifier:
    """A ``builder.signing.verifiers.LayerVerifier`` for keyless legacy layers (those with a certificate annotation).

    It verifies the layer's full Sigstore bundle (``dev.builder-project/sigstore-bundle``) with
    sigstore-python's Verifier against ``trusted_root`` and ``policies``, and checks that the bundle is the
    one the cosign annotations describe (same certificate, same Rekor body as the ``bundle`` annotation,
    same signature) and covers ``data`` (simple-signing payload; for attestations the DSSE envelope, its
    PAE or its payload). Layers written by cosign itself carry only the SET, no inclusion proof: they are
    reported as not verifiable offline."""

    trusted_root: TrustedRoot
    policies: tuple[IdentityPolicy, ...]

    def check(self, data: bytes, signature: bytes, annotations: Mapping[str, str]) -> LayerCheck | None:
        cert_pem = annotations.get(CERTIFICATE_ANNOTATION)
        if not cert_pem:
            return None
        if not self.policies:
            return LayerCheck(False, reason="keyless signature, but no --identity/--issuer given to check it against")
        full = annotations.get(SIGSTORE_BUNDLE_ANNOTATION)
        if not full:
            # written by cosign (or another client): only the signed entry timestamp, no inclusion proof
            return verify_set_layer(data, signature, annotations, self.trusted_root, self.policies)
        problem = _annotations_match(full, annotations, cert_pem)
        if problem:
            return LayerCheck(False, reason=problem)
        is_dsse = '"dsseEnvelope"' in full
        out = _verify_bundle(full, self.trusted_root, self.policies, artifact=None if is_dsse else data)
        if not out.ok:
            return LayerCheck(False, signer=out.signer, reason=out.reason, time=out.time)
        if is_dsse:
            assert out.payload_type is not None and out.payload is not None
            signed = pae(out.payload_type, out.payload)
            if data not in (signed, out.payload) and not envelope_holds(data, out.payload_type, out.payload):
                return LayerCheck(
                    False,
                    signer=out.signer,
                    time=out.time,
                    reason="the layer's DSSE envelope is not the one logged in Rekor (edited after signing)",
                )
            logged = {str(x.get("sig", "")) for x in (load_json(full).get("dsseEnvelope") or {}).get("signatures", [])}
            if signature and base64.b64encode(signature).decode() not in logged:
                return LayerCheck(
                    False,
                    signer=out.signer,
                    time=out.time,
                    reason="the layer's DSSE signature is not the one logged in Rekor (replaced)",
                )
        return LayerCheck(True, signer=out.signer, time=out.time)


def _annotations_match(full: str, annotations: Mapping[str, str], cert_pem: str) -> str:
    """'' when the full bundle agrees with the cosign annotations, else the reason."""

    try:
        doc = load_json(full)
        vm = doc["verificationMaterial"]
        cert_der = base64.b64decode(vm["certificate"]["rawBytes"])
        entry = vm["tlogEntries"][0]
        ann_cert = x509.load_pem_x509_certificate(cert_pem.encode()).public_bytes(Encoding.DER)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        return f"the layer's Sigstore bundle or certificate annotation does not parse: {exc}"
    if cert_der != ann_cert:
        return "the certificate annotation is not the bundle's signing certificate (annotation replaced)"
    legacy = annotations.get(BUNDLE_ANNOTATION)
    if legacy:
        try:
            body = load_json(legacy)["Payload"]["body"]
        except (ValueError, KeyError, TypeError):
            return f"annotation {BUNDLE_ANNOTATION} does not parse"
        if body != entry.get("canonicalizedBody"):
            return f"annotation {BUNDLE_ANNOTATION} names another Rekor entry than the layer's bundle"
    sig = annotations.get(SIGNATURE_ANNOTATION, "")
    ms = doc.get("messageSignature")
    if sig and isinstance(ms, dict) and ms.get("signature") != sig:
        return f"annotation {SIGNATURE_ANNOTATION} is not the signature in the layer's bundle (replaced)"
    return ""


def _referrer_items(
    client: RegistryClient,
    repository: str,
    digest: str,
    trusted_root: TrustedRoot,
    policies: Sequence[IdentityPolicy],
    key_verifiers: Sequence[LayerVerifier],
) -> list[VerifiedItem]:
    """Verify every Sigstore bundle referrer of ``digest`` (referrers API or fallback index):
    keyless bundles here, key-pair bundles with ``key_verifiers`` (``builder.signing.bundles``)."""
    out: list[VerifiedItem] = []
    for desc in bundle_referrers(client, repository, digest):
        read = referrer_bundle(client, repository, digest, desc)
        if read.blob is None and desc.artifact_type == EMPTY_MEDIA_TYPE and read.why.startswith("expected one"):
            continue  # an empty-config artifact that is not a bundle
        if read.blob is not None and is_key_bundle(read.blob):
            if key_verifiers:
                where = f"{fallback_tag(digest)} -> {desc.digest[:19]}"
                ptype = read.predicate_type
                out.append(
                    check_key_bundle(
                        read.blob, digest, key_verifiers, where=where, referrer_digest=desc.digest, annotated_type=ptype
                    )
                )
            continue
        out.append(_verify_referrer(digest, desc, read, trusted_root, policies))
    return out


def _verify_referrer(
    digest: str,
    desc: Descriptor,
    read: ReferrerBundle,
    trusted_root: TrustedRoot,
    policies: Sequence[IdentityPolicy],
) -> VerifiedItem:
    """One keyless bundle referrer as read (manifest, subject, bundle blob checked by
    ``builder.signing.bundles.referrer_bundle``): Sigstore verification, statement subject."""

    where = f"{fallback_tag(digest)} -> {desc.digest[:19]}"
    ptype = read.predicate_type
    kind: Kind = "signature" if ptype == COSIGN_SIGN_V1 else "attestation"

    def fail(reason: str, signer: str | None = None, when: str | None = None) -> VerifiedItem:
        pt = None if kind == "signature" else ptype
        return VerifiedItem(
            kind, False, reason, where, desc.digest, signer=signer, predicate_type=pt, time=when, keyless=True
        )

    blob = read.blob
    if blob is None:
        return fail(read.why)
    out = _verify_bundle(blob.decode(errors="replace"), trusted_root, policies, artifact=None)
    if not out.ok or out.payload is None:
        return fail(out.reason or "the bundle has no DSSE payload", out.signer, out.time)
    try:
        statement = load_json(out.payload)
        subjects = statement.get("subject") or []
        stmt_ptype = str(statement.get("predicateType", ""))
    except (ValueError, AttributeError):
        return fail("the signed payload is not an in-toto statement", out.signer, out.time)
    alg, _, hexpart = digest.partition(":")
    if not any(isinstance(s, dict) and (s.get("digest") or {}).get(alg) == hexpart for s in subjects):
        return fail(f"the signed statement is for another digest, not {digest}", out.signer, out.time)
    if ptype and stmt_ptype != ptype:
        return fail(f"annotation says predicate type {ptype}, the signed statement says {stmt_ptype}", out.signer)
    kind = "signature" if stmt_ptype == COSIGN_SIGN_V1 else "attestation"  # what the signed statement says
    return VerifiedItem(
        kind,
        True,
        "",
        where,
        desc.digest,
        signer=out.signer,
        predicate_type=None if kind == "signature" else stmt_ptype,
        time=out.time,
        statement=statement if kind == "attestation" else None,
        keyless=True,
    )


def verify_keyless(
    client: RegistryClient,
    repository: str,
    digest: str,
    *,
    trusted_root: TrustedRoot,
    identities: Sequence[IdentityPolicy],
    predicate_types: Sequence[str] = (),
    require_signature: bool = True,
    tag: str | None = None,
    reference: str | None = None,
    keys: Sequence[PublicKey] = (),
) -> VerificationReport:
    """Verify the keyless material of ``repository@digest`` offline against ``trusted_root``.

    Checks every legacy ``.sig``/``.att`` layer that carries a certificate (via
    :class:`KeylessLayerVerifier`) and every Sigstore bundle referrer; each item says who signed
    (SAN + issuer), when (Rekor integrated time) and why a failed one failed. Requirements: the digest
    resolves (and ``tag`` still points at it); a valid signature when ``require_signature``; a valid
    attestation per ``predicate_types``. Key-pair layers and bundles (no certificate) are checked with
    ``keys`` (trusted public keys); without keys they are listed as ``untrusted`` (a key signed them,
    no identity can check them), never counted. Never raises for bad content; registry errors propagate.
    """
    policies = tuple(p.validate() for p in identities)
    ref = reference or f"{client.registry}/{repository}@{digest}"
    problems = confirm_digest(client, repository, digest, tag)
    if not policies and not keys:
        problems.append("no identity (or key) given to verify with")
    # a key verifier even without keys: key-pair layers are then listed as untrusted (KEY_NOT_CHECKED)
    key_verifiers = (KeyVerifier(tuple(keys)),)
    verifiers = (*key_verifiers, KeylessLayerVerifier(trusted_root, policies))
    items: list[VerifiedItem] = []
    sig_tag, sig_layers = read_layers(client, repository, digest, SIG_SUFFIX)
    for d in sig_layers:
        items.append(verify_layer(client, repository, digest, d, verifiers, tag=sig_tag))
    att_tag, att_layers = read_layers(client, repository, digest, ATT_SUFFIX)
    for d in att_layers:
        items.append(verify_layer(client, repository, digest, d, verifiers, tag=att_tag))
    items.extend(_referrer_items(client, repository, digest, trusted_root, policies, key_verifiers))
    problems += unmet_requirements(
        items, digest, require_signature, predicate_types, looked_in="legacy tag or bundle referrer"
    )
    return VerificationReport(ref, repository, digest, tuple(items), tuple(problems), tuple(predicate_types), tag)
