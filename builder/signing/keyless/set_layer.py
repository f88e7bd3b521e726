"""Verify a keyless legacy layer written by cosign itself: only the signed entry timestamp (SET), no inclusion proof.

cosign's offline checks (``pkg/cosign/verify.go``, https://github.com/sigstore/cosign/blob/main/pkg/cosign/verify.go)
made with sigstore-python's trust-root keyrings and SCT code. Never raises for bad content: a
``LayerCheck`` says why.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import hashlib
from typing import TYPE_CHECKING, Any

import rfc8785
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.verification import Criticality, ExtensionPolicy, PolicyBuilder, Store, VerificationError

from builder.registry.manifest import load_json
from builder.signing.dsse import payload_of_pae
from builder.signing.keyless.bundle import (
    rfc3339,
)
from builder.signing.keyless.identity import (
    CertificatePolicy,
    IdentityPolicy,
    cert_identities,
    signer_text,
)
from builder.signing.layer import (
    BUNDLE_ANNOTATION,
    CERTIFICATE_ANNOTATION,
    CHAIN_ANNOTATION,
)
from builder.signing.verifiers import LayerCheck

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cryptography.x509 import Certificate
    from sigstore.models import TrustedRoot


def verify_set_layer(
    data: bytes,
    signature: bytes,
    annotations: Mapping[str, str],
    trusted_root: TrustedRoot,
    policies: Sequence[IdentityPolicy],
) -> LayerCheck:
    """Verify a keyless legacy layer that carries only cosign's ``bundle`` annotation (what ``cosign sign`` /
    ``cosign attest`` write): cosign's offline checks (pkg/cosign/verify.go), made with sigstore-python's
    trust-root keyrings and SCT code. The SET over ``{body,integratedTime,logID,logIndex}`` against the pinned
    Rekor keys; the certificate chain to the pinned Fulcio roots at the integrated time; the embedded SCT
    against the pinned CT keys; key usage / code-signing EKU; the identity policy; the signature over
    ``data`` (simple-signing payload, or DSSE PAE) by the certificate's key; and the Rekor body's agreement
    with the layer (``hashedrekord``: digest, signature, certificate; ``dsse``: payload hash, signature,
    verifier). There is no inclusion proof in this format, so none is checked (as cosign)."""

    def fail(reason: str, signer: str | None = None, when: str | None = None) -> LayerCheck:
        return LayerCheck(False, signer=signer, reason=reason, time=when)

    try:
        cert = x509.load_pem_x509_certificate(annotations[CERTIFICATE_ANNOTATION].encode())
    except (KeyError, ValueError) as exc:
        return fail(f"annotation {CERTIFICATE_ANNOTATION} is not a PEM certificate ({exc})")
    idents, issuer = cert_identities(cert)
    signer = signer_text(idents, issuer)
    legacy = annotations.get(BUNDLE_ANNOTATION)
    if not legacy:
        return fail(f"keyless layer without {BUNDLE_ANNOTATION}: no transparency-log evidence", signer)
    try:
        entry = _log_entry(legacy)
    except (ValueError, KeyError, TypeError) as exc:
        return fail(f"annotation {BUNDLE_ANNOTATION} does not parse ({exc})", signer)
    when = rfc3339(entry.integrated_time)
    when_dt = dt.datetime.fromtimestamp(entry.integrated_time, dt.UTC)
    problem = (
        _set_problem(entry, trusted_root)
        or _certificate_problem(cert, trusted_root, annotations.get(CHAIN_ANNOTATION, ""), when_dt, policies)
        or _signature_problem(cert, data, signature)
        or body_matches(entry.body, data, signature, cert)
    )
    if problem:
        return fail(problem, signer, when)
    return LayerCheck(True, signer=signer, time=when)


@dataclasses.dataclass(frozen=True)
class _LogEntry:
    """The Rekor entry in cosign's ``bundle`` annotation: the fields its signed entry timestamp
    covers (``body`` base64, ``integratedTime`` Unix seconds, ``logID`` hex, ``logIndex``), the
    SET itself and the decoded entry body."""

    body_b64: str
    integrated_time: int
    log_id: str
    log_index: int
    set_signature: bytes
    body: Mapping[str, Any]


def _log_entry(annotation: str) -> _LogEntry:
    """Parse cosign's ``bundle`` annotation (``{"SignedEntryTimestamp", "Payload": {...}}``).
    Raises ValueError, KeyError or TypeError when it does not have that shape."""
    doc = load_json(annotation)
    set_signature = base64.b64decode(doc["SignedEntryTimestamp"])
    p = doc["Payload"]
    body_b64, integrated, log_id, log_index = (
        str(p["body"]),
        int(p["integratedTime"]),
        str(p["logID"]),
        int(p["logIndex"]),
    )
    body = load_json(base64.b64decode(body_b64))
    if not isinstance(body, dict):
        raise TypeError("the entry body is not a JSON object")
    return _LogEntry(body_b64, integrated, log_id, log_index, set_signature, body)


def _set_problem(entry: _LogEntry, trusted_root: TrustedRoot) -> str:
    """Why the signed entry timestamp does not verify with the pinned Rekor keys ("" when it does):
    an ECDSA signature over the RFC 8785 JSON of ``{body, integratedTime, logID, logIndex}``."""
    from sigstore._internal.trust import KeyringPurpose
    from sigstore._utils import KeyID
    from sigstore.errors import Error as SigstoreError

    set_payload: dict[str, str | int] = {
        "body": entry.body_b64,
        "integratedTime": entry.integrated_time,
        "logID": entry.log_id,
        "logIndex": entry.log_index,
    }
    try:
        trusted_root.rekor_keyring(KeyringPurpose.VERIFY).verify(
            key_id=KeyID(bytes.fromhex(entry.log_id)), signature=entry.set_signature, data=rfc8785.dumps(set_payload)
        )
    except (SigstoreError, ValueError) as exc:
        return f"the signed entry timestamp does not verify with the pinned Rekor keys: {exc}"
    return ""


def _certificate_problem(
    cert: Certificate, trusted_root: TrustedRoot, chain_pem: str, when: dt.datetime, policies: Sequence[IdentityPolicy]
) -> str:
    """Why ``cert`` is not trusted for this signature ("" when it is): chain to a pinned Fulcio root
    at ``when``, embedded SCT against the pinned CT keys, key usage and code-signing EKU, the
    identity ``policies``."""
    from sigstore._internal.sct import verify_sct
    from sigstore._internal.trust import KeyringPurpose
    from sigstore.errors import Error as SigstoreError

    try:
        chain = _chain_at(cert, trusted_root, chain_pem, when)
        verify_sct(cert, chain, trusted_root.ct_keyring(KeyringPurpose.VERIFY))
    except (SigstoreError, ValueError) as exc:
        return f"certificate not trusted: {exc}"
    try:
        ku = cert.extensions.get_extension_for_class(x509.KeyUsage).value
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound as exc:
        return f"certificate lacks {exc.oid.dotted_string}"
    if not ku.digital_signature or x509.oid.ExtendedKeyUsageOID.CODE_SIGNING not in eku:
        return "certificate is not for code signing"
    try:
        CertificatePolicy(policies).verify(cert)
    except SigstoreError as exc:
        return str(exc)
    return ""


def _signature_problem(cert: Certificate, data: bytes, signature: bytes) -> str:
    """Why ``signature`` over ``data`` does not verify with the certificate's ECDSA key ("" when it does)."""
    key = cert.public_key()
    if not isinstance(key, ec.EllipticCurvePublicKey):
        return "only ECDSA certificates are supported"
    try:
        key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return "the signature does not verify with the certificate's key: content edited after signing"
    return ""


def _chain_at(cert: Certificate, trusted_root: TrustedRoot, chain_pem: str, when: dt.datetime) -> list[Certificate]:
    """The verified chain (without the leaf) to a pinned Fulcio root at ``when`` (cryptography's X.509 path
    validation, Fulcio EKU rules as in sigstore-python's verifier). Raises ValueError when none."""
    ca_policy = ExtensionPolicy.webpki_defaults_ca().may_be_present(
        x509.ExtendedKeyUsage, Criticality.NON_CRITICAL, None
    )
    ee_policy = ExtensionPolicy.webpki_defaults_ee().may_be_present(
        x509.ExtendedKeyUsage, Criticality.NON_CRITICAL, None
    )
    store = Store(trusted_root.get_fulcio_certs())
    verifier = (
        PolicyBuilder()
        .store(store)
        .time(when)
        .extension_policies(ca_policy=ca_policy, ee_policy=ee_policy)
        .build_client_verifier()
    )
    extra = x509.load_pem_x509_certificates(chain_pem.encode()) if chain_pem.strip() else []
    try:
        return list(verifier.verify(cert, extra).chain[1:])
    except (VerificationError, x509.UnsupportedGeneralNameType) as exc:
        raise ValueError(f"no chain to a pinned Fulcio root at {when:%Y-%m-%dT%H:%M:%SZ}: {exc}") from exc


def body_matches(body: Mapping[str, Any], data: bytes, signature: bytes, cert: Certificate) -> str:
    """'' when the Rekor entry body describes this layer (cosign's bundle checks), else the reason."""

    def same_cert(b64pem: str) -> bool:
        try:
            other = x509.load_pem_x509_certificate(base64.b64decode(b64pem))
        except ValueError:
            return False
        return other.public_bytes(Encoding.DER) == cert.public_bytes(Encoding.DER)

    kind = body.get("kind")
    spec = body.get("spec") or {}
    sig_b64 = base64.b64encode(signature).decode()
    if kind == "hashedrekord":
        h = (spec.get("data") or {}).get("hash") or {}
        if h.get("algorithm") != "sha256" or h.get("value") != hashlib.sha256(data).hexdigest():
            return "the Rekor entry is for other content (hashedrekord digest differs from the payload's)"
        if (spec.get("signature") or {}).get("content") != sig_b64:
            return "the Rekor entry holds another signature than the layer"
        if not same_cert(str(((spec.get("signature") or {}).get("publicKey") or {}).get("content", ""))):
            return "the Rekor entry names another certificate than the layer"
        return ""
    if kind == "dsse":
        payload = payload_of_pae(data)
        ph = spec.get("payloadHash") or {}
        if payload is None or ph.get("value") != hashlib.sha256(payload).hexdigest():
            return "the Rekor entry is for another DSSE payload (payloadHash differs)"
        sigs = spec.get("signatures") or []
        if not any(s.get("signature") == sig_b64 and same_cert(str(s.get("verifier", ""))) for s in sigs):
            return "the Rekor entry holds another signature or verifier than the layer"
        return ""
    return f"unsupported Rekor entry kind {kind!r} in {BUNDLE_ANNOTATION}"
