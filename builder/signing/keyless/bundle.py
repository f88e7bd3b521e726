"""Sigstore bundles as registry evidence: cosign's legacy layer annotations and OCI 1.1 referrers.

Sources: cosign ``specs/BUNDLE_SPEC.md`` and ``pkg/cosign/bundle/rekor.go``
(https://github.com/sigstore/cosign/tree/main/specs), the Sigstore bundle v0.3
(https://github.com/sigstore/protobuf-specs/blob/main/protos/sigstore_bundle.proto), OCI distribution
1.1 referrers and their fallback tag
(https://github.com/opencontainers/distribution-spec/blob/main/spec.md#listing-referrers).

A bundle referrer: ``artifactType application/vnd.dev.sigstore.bundle.v0.3+json``, empty config, one
layer, annotations ``dev.sigstore.bundle.content`` / ``dev.sigstore.bundle.predicateType``,
``subject`` = image, as ``cosign sign --new-bundle-format`` writes it. When the registry has no
referrers API (no ``OCI-Subject`` answer to the PUT), the ``sha256-<hex>`` fallback index is
maintained (``RegistryClient.add_referrer_to_fallback_index``) under a file lock.

Errors: ``SigningError`` (17) for bundles without the expected transparency-log entry; registry errors.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
from typing import TYPE_CHECKING, Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import Encoding

from builder.errors import SigningError
from builder.signing.bundles import (
    BUNDLE_MEDIA_TYPE,
    BUNDLE_PREDICATE_ANNOTATION,
    ReferrerWrite,
    ReferrerWriteDocument,
    push_referrer,
)
from builder.signing.layer import (
    BUNDLE_ANNOTATION,
    CERTIFICATE_ANNOTATION,
    CHAIN_ANNOTATION,
)

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from cryptography.x509 import Certificate
    from sigstore.models import Bundle, ClientTrustConfig, TrustedRoot

    from builder.registry import Descriptor, RegistryClient

#: The full Sigstore bundle of a legacy layer (this project's addition; cosign ignores it).
SIGSTORE_BUNDLE_ANNOTATION = "dev.builder-project/sigstore-bundle"
__all__ = [  # the referrer format is shared with the key-pair path (builder.signing.bundles)
    "BUNDLE_MEDIA_TYPE",
    "BUNDLE_PREDICATE_ANNOTATION",
    "SIGSTORE_BUNDLE_ANNOTATION",
    "ReferrerWrite",
    "ReferrerWriteDocument",
    "push_bundle_referrer",
]


def bundle_doc(bundle: Bundle) -> dict[str, Any]:
    doc = json.loads(bundle.to_json())
    assert isinstance(doc, dict)
    return doc


def tlog_entry(doc: Mapping[str, Any]) -> dict[str, Any]:
    entries = doc.get("verificationMaterial", {}).get("tlogEntries") or []
    if len(entries) != 1:
        raise SigningError(f"expected one transparency log entry in the bundle, got {len(entries)}")
    entry = entries[0]
    assert isinstance(entry, dict)
    return entry


def legacy_bundle_annotation(bundle: Bundle) -> str:
    """cosign's ``dev.sigstore.cosign/bundle`` value from a Rekor v1 entry: ``{"SignedEntryTimestamp":
    b64, "Payload": {"body": b64, "integratedTime": int, "logIndex": int, "logID": hex}}``
    (cosign pkg/cosign/bundle/rekor.go). Raises SigningError when the entry has no SET (Rekor v2)."""
    entry = tlog_entry(bundle_doc(bundle))
    promise = (entry.get("inclusionPromise") or {}).get("signedEntryTimestamp")
    if not promise or not entry.get("integratedTime"):
        raise SigningError(
            "the Rekor entry has no signed entry timestamp (a Rekor v2 log?)",
            hint="use a trust config whose signing config lists a Rekor v1 log",
        )
    payload = {
        "body": entry["canonicalizedBody"],
        "integratedTime": int(entry["integratedTime"]),
        "logIndex": int(entry["logIndex"]),
        "logID": base64.b64decode(entry["logId"]["keyId"]).hex(),
    }
    return json.dumps({"SignedEntryTimestamp": promise, "Payload": payload}, separators=(",", ":"))


def _chain_pem(trusted_root: TrustedRoot, leaf: Certificate) -> str:
    """Intermediates + root PEM for ``leaf`` from the trusted root's certificate authorities: the chain whose
    first certificate actually issued ``leaf`` (signature checked; names repeat across rotated CAs)."""
    for ca in trusted_root._inner.certificate_authorities:
        certs = [x509.load_der_x509_certificate(c.raw_bytes) for c in ca.cert_chain.certificates]
        if not certs or certs[0].subject != leaf.issuer:
            continue
        try:
            leaf.verify_directly_issued_by(certs[0])
        except (ValueError, TypeError, InvalidSignature):
            continue
        return "".join(c.public_bytes(Encoding.PEM).decode() for c in certs)
    return ""


def cert_annotations(trust_config: ClientTrustConfig, bundle: Bundle) -> dict[str, str]:

    leaf = bundle.signing_certificate
    return {
        CERTIFICATE_ANNOTATION: leaf.public_bytes(Encoding.PEM).decode(),
        CHAIN_ANNOTATION: _chain_pem(trust_config.trusted_root, leaf),
        BUNDLE_ANNOTATION: legacy_bundle_annotation(bundle),
        SIGSTORE_BUNDLE_ANNOTATION: bundle.to_json(),
    }


def submitted_envelope(bundle: Bundle) -> bytes:
    """The DSSE envelope JSON exactly as it was submitted to Rekor: the bytes whose SHA-256 is the
    ``dsse`` entry's ``envelopeHash`` (checked; SigningError when no serialization matches)."""
    entry = tlog_entry(bundle_doc(bundle))
    body = json.loads(base64.b64decode(entry["canonicalizedBody"]))
    expected = str(body.get("spec", {}).get("envelopeHash", {}).get("value", ""))
    candidates: list[bytes] = []
    env = bundle._dsse_envelope
    if env is not None:
        candidates.append(env.to_json().encode())
    d = bundle_doc(bundle).get("dsseEnvelope") or {}
    candidates.append(json.dumps(d, separators=(",", ":")).encode())
    for raw in candidates:
        if hashlib.sha256(raw).hexdigest() == expected:
            return raw
    raise SigningError(
        "cannot reproduce the DSSE envelope bytes that were logged in Rekor (envelopeHash mismatch)",
        hint="this sigstore-python version serializes envelopes differently; report it",
    )


def log_index(bundle: Bundle) -> int:
    return int(tlog_entry(bundle_doc(bundle))["logIndex"])


def push_bundle_referrer(
    client: RegistryClient,
    repository: str,
    subject: Descriptor,
    bundle: Bundle,
    *,
    predicate_type: str,
    lock_dir: Path,
    created: dt.datetime | None = None,
) -> ReferrerWrite:
    """Push ``bundle`` as an OCI 1.1 referrer of ``subject`` (the image manifest's descriptor), with
    the fallback index when the registry has no referrers API (``builder.signing.bundles.push_referrer``:
    the layout cosign 2.5 ``--new-bundle-format`` writes, cosign ``specs/BUNDLE_SPEC.md``,
    https://github.com/sigstore/cosign/blob/main/specs/BUNDLE_SPEC.md)."""
    return push_referrer(
        client,
        repository,
        subject,
        bundle.to_json().encode(),
        predicate_type=predicate_type,
        lock_dir=lock_dir,
        created=created,
    )


# ---------------------------------------------------------------------------------------------
# verification


def rfc3339(epoch: int) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
