"""Sigstore bundles as OCI 1.1 referrers: the format cosign 3 writes by default (and cosign 2.x with
``--new-bundle-format``), on the key-pair path: write them, list them, verify them with public keys.

Formats (checked against real cosign 2.5 ``cosign attest --new-bundle-format --key`` on distribution
2.8.2, which has no referrers API):

- A referrer manifest (OCI image manifest) with ``artifactType``
  ``application/vnd.dev.sigstore.bundle.v0.3+json``, the empty config
  (``application/vnd.oci.empty.v1+json``, ``{}``), one layer holding the bundle JSON, ``subject`` =
  the image manifest's descriptor, annotations ``dev.sigstore.bundle.content`` (``dsse-envelope``),
  ``dev.sigstore.bundle.predicateType`` and ``org.opencontainers.image.created``
  (cosign ``specs/BUNDLE_SPEC.md``, https://github.com/sigstore/cosign/blob/main/specs/BUNDLE_SPEC.md).
- Registries without the referrers API get the ``sha256-<hex>`` fallback tag index (OCI distribution
  spec, https://github.com/opencontainers/distribution-spec/blob/main/spec.md#referrers-tag-schema).
  cosign 2.5 writes that index entry with ``artifactType`` ``application/vnd.oci.empty.v1+json`` (its
  config media type), so readers here accept both artifact types and then check the layer.
- A key-pair bundle (Sigstore bundle v0.3,
  https://github.com/sigstore/protobuf-specs/blob/main/protos/sigstore_bundle.proto):
  ``{"mediaType": ..., "verificationMaterial": {"publicKey": {"hint": base64(sha256(DER
  SubjectPublicKeyInfo))}}, "dsseEnvelope": {"payload", "payloadType", "signatures": [{"sig"}]}}``.
  No certificate and no transparency-log entry (cosign ``--tlog-upload=false``; its verifier then
  needs ``--insecure-ignore-tlog``). The ``hint`` is not signed: like the legacy layer's
  ``dev.builder-project/signer`` annotation it only words a failure, never trusts.
- A cosign 3 image *signature* bundle is the same DSSE shape whose statement has predicate type
  ``https://sigstore.dev/cosign/sign/v1``: reported as a signature, not an attestation.

The DSSE envelope is checked exactly like a legacy ``.att`` layer
(``builder.signing.layer_check.check_attestation_layer``: signature over PAE before any content is
trusted, statement type, subject digest, predicate type).

Errors: registry errors from ``builder.registry``; verification never raises for bad content.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from builder.errors import NotFoundError
from builder.predicates import COSIGN_SIGN_V1
from builder.registry import Descriptor, fallback_tag
from builder.registry.manifest import load_json
from builder.signing.dsse import IN_TOTO_PAYLOAD_TYPE, make_statement, pae
from builder.signing.layer import (
    DSSE_MEDIA_TYPE,
    OCI_MANIFEST,
    PREDICATE_TYPE_ANNOTATION,
    SIGNATURE_ANNOTATION,
    SIGNER_HINT_ANNOTATION,
    fetch_layer_blob,
    refuse_excess,
    sha256_digest,
)
from builder.signing.layer_check import check_attestation_layer
from builder.signing.report import Kind, VerifiedItem
from builder.signing.signer import signer_public_key
from builder.signing.verifiers import KEYLESS_NOT_CHECKED

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from builder.registry import RegistryClient
    from builder.signing.layer import WriteResult
    from builder.signing.signer import Signer
    from builder.signing.verifiers import LayerVerifier

BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY_CONFIG = b"{}"
BUNDLE_CONTENT_ANNOTATION = "dev.sigstore.bundle.content"
BUNDLE_PREDICATE_ANNOTATION = "dev.sigstore.bundle.predicateType"
CREATED_ANNOTATION = "org.opencontainers.image.created"
#: Artifact types a bundle referrer is listed under: its own, and cosign 2.5's fallback-index entry.
BUNDLE_LISTING_TYPES = (BUNDLE_MEDIA_TYPE, EMPTY_MEDIA_TYPE)


class ReferrerWriteDocument(TypedDict):
    """A Sigstore bundle referrer in ``--json``: the ``repository``, the ``subject`` digest, the
    referrer's ``manifest_digest``, the ``bundle_digest``, its ``predicate_type`` and the
    referrers fallback index written (``fallback_index``; None when the registry has the OCI
    referrers API: https://github.com/opencontainers/distribution-spec/blob/main/spec.md#listing-referrers)."""

    repository: str
    subject: str
    manifest_digest: str
    bundle_digest: str
    predicate_type: str
    fallback_index: str | None


@dataclasses.dataclass(frozen=True)
class ReferrerWrite:
    """A Sigstore bundle pushed as a referrer: its manifest digest, the bundle blob digest, the
    predicate type, and the fallback index digest (None when the registry has the referrers API)."""

    repository: str
    subject: str
    manifest_digest: str
    bundle_digest: str
    predicate_type: str
    fallback_index: str | None

    def to_json(self) -> ReferrerWriteDocument:
        return {
            "repository": self.repository,
            "subject": self.subject,
            "manifest_digest": self.manifest_digest,
            "bundle_digest": self.bundle_digest,
            "predicate_type": self.predicate_type,
            "fallback_index": self.fallback_index,
        }


# ---------------------------------------------------------------------------------------------
# writing


def key_hint(fingerprint: str) -> str:
    """``sha256:<hex>`` key fingerprint -> the bundle's ``publicKey.hint`` (base64 of the digest bytes,
    as cosign writes it)."""
    return base64.b64encode(bytes.fromhex(fingerprint.removeprefix("sha256:"))).decode()


def hint_fingerprint(hint: str) -> str | None:
    """A bundle's ``publicKey.hint`` -> ``sha256:<hex>`` when it is a base64 SHA-256, else None."""
    try:
        raw = base64.b64decode(hint, validate=True)
    except ValueError:
        return None
    return "sha256:" + raw.hex() if len(raw) == 32 else None


def key_bundle(statement: bytes, signature: bytes, fingerprint: str) -> bytes:
    """The Sigstore bundle v0.3 JSON of a key-pair DSSE signature over ``statement`` (in-toto JSON)."""
    doc = {
        "mediaType": BUNDLE_MEDIA_TYPE,
        "verificationMaterial": {"publicKey": {"hint": key_hint(fingerprint)}},
        "dsseEnvelope": {
            "payload": base64.b64encode(statement).decode(),
            "payloadType": IN_TOTO_PAYLOAD_TYPE,
            "signatures": [{"sig": base64.b64encode(signature).decode()}],
        },
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def push_referrer(
    client: RegistryClient,
    repository: str,
    subject: Descriptor,
    bundle: bytes,
    *,
    predicate_type: str,
    lock_dir: Path,
    created: dt.datetime | None = None,
) -> ReferrerWrite:
    """Push ``bundle`` (Sigstore bundle JSON) as an OCI 1.1 referrer of ``subject`` (the image
    manifest's descriptor) and, when the registry has no referrers API (no ``OCI-Subject`` answer to
    the PUT), add it to the ``sha256-<hex>`` fallback index (entry ``artifactType`` = the bundle media
    type) under a file lock in ``lock_dir``. Pushing the same bytes again is harmless (same digest).
    Raises registry errors."""
    bundle_digest = _put_blob(client, repository, bundle)
    config_digest = _put_blob(client, repository, EMPTY_CONFIG)
    when = (created or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    annotations = {
        BUNDLE_CONTENT_ANNOTATION: "dsse-envelope",
        BUNDLE_PREDICATE_ANNOTATION: predicate_type,
        CREATED_ANNOTATION: when,
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": BUNDLE_MEDIA_TYPE,
        "config": {"mediaType": EMPTY_MEDIA_TYPE, "digest": config_digest, "size": len(EMPTY_CONFIG)},
        "layers": [{"mediaType": BUNDLE_MEDIA_TYPE, "digest": bundle_digest, "size": len(bundle)}],
        "subject": {"mediaType": subject.media_type, "digest": subject.digest, "size": subject.size},
        "annotations": annotations,
    }
    raw = json.dumps(manifest, separators=(",", ":")).encode()
    digest = sha256_digest(raw)
    resp = client.request(
        "PUT",
        f"/v2/{repository}/manifests/{digest}",
        ref=f"{repository}@{digest}",
        ok=(201, 200),
        data=raw,
        headers={"Content-Type": OCI_MANIFEST},
    )
    index_digest: str | None = None
    if not resp.headers.get("OCI-Subject"):
        descriptor = Descriptor(
            media_type=OCI_MANIFEST,
            digest=digest,
            size=len(raw),
            artifact_type=BUNDLE_MEDIA_TYPE,
            annotations=tuple(sorted(annotations.items())),
        )
        index_digest = client.add_referrer_to_fallback_index(repository, subject.digest, descriptor, lock_dir=lock_dir)
    return ReferrerWrite(repository, subject.digest, digest, bundle_digest, predicate_type, index_digest)


def attest_bundle(
    client: RegistryClient,
    repository: str,
    digest: str,
    predicate_type: str,
    predicate: Mapping[str, Any],
    signer: Signer,
    *,
    lock_dir: Path,
    statement: bytes | None = None,
) -> ReferrerWrite:
    """Sign an in-toto v1 statement about ``<registry>/<repository>@digest`` with a key pair and push
    it as a Sigstore bundle referrer of the image (what ``cosign attest --new-bundle-format --key``
    writes; ``cosign verify-attestation --new-bundle-format --key K --insecure-ignore-tlog`` accepts
    it). ``statement``: the statement bytes already signed into the legacy ``.att`` layer, so both
    formats carry the same statement. Raises registry errors (NotFoundError when the digest is gone)."""
    body = statement or make_statement(f"{client.registry}/{repository}", digest, predicate_type, predicate)
    subject = client.get_manifest(repository, digest).descriptor()
    existing = _same_key_bundle(client, repository, digest, signer, body)
    if existing is not None:
        return ReferrerWrite(repository, digest, existing[0], existing[1], predicate_type, None)
    signature = signer.sign(pae(IN_TOTO_PAYLOAD_TYPE, body))
    bundle = key_bundle(body, signature, signer.fingerprint)
    return push_referrer(client, repository, subject, bundle, predicate_type=predicate_type, lock_dir=lock_dir)


def attest_both(
    client: RegistryClient,
    repository: str,
    digest: str,
    predicate_type: str,
    predicate: Mapping[str, Any],
    signer: Signer,
    *,
    lock_dir: Path,
    bundle: bool,
) -> tuple[WriteResult, ReferrerWrite | None]:
    """An attestation as every command that writes one with a key writes it: the legacy ``.att``
    layer (``builder.signing.attest.attest_image``, cosign 2 readers) and, with ``bundle``
    (``--bundle``), the same signed statement as a Sigstore bundle referrer (:func:`attest_bundle`,
    cosign 3). Returns (legacy write, referrer or None). Raises SigningError / registry errors."""
    from builder.signing.attest import attest_image, prepare_attestation  # writers only: readers never load it

    prepared = prepare_attestation(client.registry, repository, digest, predicate_type, predicate, signer)
    write = attest_image(
        client, repository, digest, predicate_type, predicate, signer, lock_dir=lock_dir, prepared=prepared
    )
    if not bundle:
        return write, None
    referrer = attest_bundle(
        client, repository, digest, predicate_type, predicate, signer, lock_dir=lock_dir, statement=prepared.statement
    )
    return write, referrer


def _same_key_bundle(
    client: RegistryClient, repository: str, digest: str, signer: Signer, statement: bytes
) -> tuple[str, str] | None:
    """(referrer digest, bundle digest) of a bundle referrer that already holds ``statement`` signed
    by ``signer``'s key (ECDSA signatures are randomized: the bytes differ, the content does not)."""
    key = signer_public_key(signer)
    for desc in bundle_referrers(client, repository, digest):
        read = referrer_bundle(client, repository, digest, desc)
        if read.blob is None or not is_key_bundle(read.blob):
            continue
        try:
            env = load_json(read.blob)["dsseEnvelope"]
            if base64.b64decode(env["payload"]) != statement:
                continue
            sigs = [base64.b64decode(s["sig"]) for s in env["signatures"]]
        except (ValueError, KeyError, TypeError):
            continue
        if any(key.verify(pae(IN_TOTO_PAYLOAD_TYPE, statement), sig) for sig in sigs):
            return desc.digest, sha256_digest(read.blob)
    return None


def _put_blob(client: RegistryClient, repository: str, data: bytes) -> str:
    digest = sha256_digest(data)
    if client.blob_exists(repository, digest):
        return digest
    return client.put_blob(repository, data, digest)


# ---------------------------------------------------------------------------------------------
# reading


def bundle_referrers(client: RegistryClient, repository: str, digest: str) -> list[Descriptor]:
    """The referrers of ``digest`` that may be Sigstore bundles (referrers API, else the fallback
    index): artifact type the bundle media type, or the empty type cosign 2.5 writes into the
    fallback index. Whether one really holds a bundle is checked when it is read
    (:func:`referrer_bundle`). Raises registry errors."""
    return [d for d in client.referrers(repository, digest) if d.artifact_type in BUNDLE_LISTING_TYPES]


@dataclasses.dataclass(frozen=True)
class ReferrerBundle:
    """A bundle referrer as read: the bundle ``blob`` (None when unreadable, with ``why``) and the
    referrer manifest's ``dev.sigstore.bundle.predicateType`` (or the index entry's)."""

    blob: bytes | None
    why: str
    predicate_type: str | None


def referrer_bundle(client: RegistryClient, repository: str, digest: str, desc: Descriptor) -> ReferrerBundle:
    """The bundle blob of the referrer ``desc`` of ``digest``, or why not: its manifest missing or
    not matching its digest, another subject, not exactly one bundle layer, the blob missing or not
    matching its descriptor. Raises registry errors (other than 404)."""
    listed = desc.annotation_map.get(BUNDLE_PREDICATE_ANNOTATION)
    try:
        manifest = client.get_manifest(repository, desc.digest)
    except NotFoundError:
        return ReferrerBundle(None, f"referrer manifest {desc.digest} listed in the index is missing", listed)
    if manifest.digest != desc.digest:
        return ReferrerBundle(None, "referrer manifest does not match its digest", listed)
    annotations = manifest.json.get("annotations")
    ptype = annotations.get(BUNDLE_PREDICATE_ANNOTATION) if isinstance(annotations, dict) else None
    ptype = str(ptype) if ptype else listed
    subject = manifest.subject
    if subject is None or subject.digest != digest:
        why = f"referrer's subject is {subject.digest if subject else 'missing'}, not {digest}"
        return ReferrerBundle(None, why, ptype)
    layers = [d for d in manifest.layers if d.media_type == BUNDLE_MEDIA_TYPE]
    if len(layers) != 1:
        return ReferrerBundle(None, f"expected one {BUNDLE_MEDIA_TYPE} layer, found {len(layers)}", ptype)
    blob, why = fetch_layer_blob(client, repository, layers[0].to_json())
    return ReferrerBundle(blob, why, ptype)


def _public_key_material(doc: object) -> dict[str, Any] | None:
    """``verificationMaterial.publicKey`` of a parsed bundle when it is an object, else None."""
    material = doc.get("verificationMaterial") if isinstance(doc, dict) else None
    key = material.get("publicKey") if isinstance(material, dict) else None
    return key if isinstance(key, dict) else None


def is_key_bundle(blob: bytes) -> bool:
    """True when ``blob`` is a bundle whose verification material is a public key (not a certificate)."""
    try:
        doc = load_json(blob)
    except ValueError:
        return False
    return _public_key_material(doc) is not None


def check_key_bundle(
    blob: bytes,
    digest: str,
    verifiers: Sequence[LayerVerifier],
    *,
    where: str,
    referrer_digest: str,
    annotated_type: str | None,
) -> VerifiedItem:
    """The verdict on one key-pair Sigstore bundle about ``digest`` (pure): its DSSE envelope is
    checked as a legacy ``.att`` layer is (``check_attestation_layer``); a statement of predicate
    type ``https://sigstore.dev/cosign/sign/v1`` is a signature. ``where``: the fallback tag and
    referrer shown as the item's ``tag``; ``annotated_type``: the referrer's
    ``dev.sigstore.bundle.predicateType`` (compared with the signed statement's). Never raises."""
    try:
        doc = load_json(blob)
        envelope = doc["dsseEnvelope"]
        hint = str((_public_key_material(doc) or {}).get("hint", ""))
        sigs = envelope["signatures"]
        first = str(sigs[0]["sig"])
    except (ValueError, KeyError, TypeError, IndexError):
        kind: Kind = "attestation" if annotated_type != COSIGN_SIGN_V1 else "signature"
        reason = "the Sigstore bundle has no DSSE envelope with a signature (a message-signature bundle, or edited)"
        return VerifiedItem(kind, False, reason, where, referrer_digest, predicate_type=annotated_type)
    env_bytes = json.dumps(envelope, separators=(",", ":")).encode()
    if annotated_type is None:  # the referrer names none: compare the statement with itself
        annotated_type = _unsigned_predicate_type(envelope)
    annotations = {SIGNATURE_ANNOTATION: first, PREDICATE_TYPE_ANNOTATION: annotated_type or ""}
    claimed = hint_fingerprint(hint)
    if claimed:
        annotations[SIGNER_HINT_ANNOTATION] = claimed
    descriptor = {
        "mediaType": DSSE_MEDIA_TYPE,
        "digest": sha256_digest(env_bytes),
        "size": len(env_bytes),
        "annotations": annotations,
    }
    item = check_attestation_layer(descriptor, env_bytes, digest, verifiers, tag=where)
    item = dataclasses.replace(item, layer_digest=referrer_digest)
    if item.predicate_type == COSIGN_SIGN_V1:
        return dataclasses.replace(item, kind="signature", predicate_type=None, statement=None)
    return item


def _unsigned_predicate_type(envelope: Mapping[str, Any]) -> str | None:
    try:
        ptype = load_json(base64.b64decode(str(envelope["payload"])))["predicateType"]
    except (ValueError, KeyError, TypeError):
        return None
    return ptype if isinstance(ptype, str) else None


def listed_bundles(
    client: RegistryClient, repository: str, digest: str, referrers: Sequence[Descriptor]
) -> list[Descriptor]:
    """The Sigstore bundle referrers among ``referrers`` of ``repository@digest``; RegistryError
    (exit 7) when there are more than builder reads (``builder.signing.layer.refuse_excess``)."""
    bundles = [d for d in referrers if d.artifact_type in BUNDLE_LISTING_TYPES]
    refuse_excess(len(bundles), f"{client.registry}/{repository}: the referrers of {digest}", "bundle referrers")
    return bundles


def key_bundle_items(
    client: RegistryClient,
    repository: str,
    digest: str,
    verifiers: Sequence[LayerVerifier],
    *,
    descriptors: Sequence[Descriptor] | None = None,
    report_keyless: bool = True,
) -> list[VerifiedItem]:
    """Every Sigstore bundle referrer of ``repository@digest`` made with a key pair, verified with
    ``verifiers`` (``descriptors``: the referrers already listed, else listed here). A referrer whose
    bundle cannot be read is an item with the reason. Keyless bundles (a certificate) are verified by
    ``builder.signing.keyless.verify``; here, with ``report_keyless``, each is an ``untrusted`` item
    (as a keyless legacy layer is to a key verifier). Raises registry errors."""
    listed = bundle_referrers(client, repository, digest) if descriptors is None else descriptors
    bundles = listed_bundles(client, repository, digest, listed)
    items: list[VerifiedItem] = []
    for desc in bundles:
        where = f"{fallback_tag(digest)} -> {desc.digest[:19]}"
        read = referrer_bundle(client, repository, digest, desc)
        kind: Kind = "signature" if read.predicate_type == COSIGN_SIGN_V1 else "attestation"
        ptype = None if kind == "signature" else read.predicate_type
        if read.blob is None:
            if desc.artifact_type == EMPTY_MEDIA_TYPE and read.why.startswith("expected one"):
                continue  # an empty-config artifact that is not a bundle: not ours to judge
            items.append(VerifiedItem(kind, False, read.why, where, desc.digest, predicate_type=ptype))
            continue
        if not is_key_bundle(read.blob):
            if report_keyless:
                items.append(
                    VerifiedItem(
                        kind,
                        False,
                        KEYLESS_NOT_CHECKED,
                        where,
                        desc.digest,
                        predicate_type=ptype,
                        untrusted=True,
                        keyless=True,
                    )
                )
            continue
        items.append(
            check_key_bundle(
                read.blob,
                digest,
                verifiers,
                where=where,
                referrer_digest=desc.digest,
                annotated_type=read.predicate_type,
            )
        )
    return items
