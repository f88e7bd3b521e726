"""The verdict on one ``.sig`` or ``.att`` layer from its descriptor and blob bytes (pure).

``check_signature_layer``: media type, signature annotation, blob integrity (digest, size),
signature, simple-signing payload type, signed digest. ``check_attestation_layer``: the same for a
DSSE envelope (signature over PAE), in-toto statement type, subject digest and predicate type
(formats: ``builder.signing.layer``, ``builder.signing.dsse``). Never raises for bad content:
the item's ``reason`` says what is wrong.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import TYPE_CHECKING, Any

from builder.labels import SIGNATURE_ROLE
from builder.registry.manifest import load_json
from builder.signing.dsse import IN_TOTO_PAYLOAD_TYPE, STATEMENT_TYPES, pae
from builder.signing.layer import (
    CERTIFICATE_ANNOTATION,
    DSSE_MEDIA_TYPE,
    PREDICATE_TYPE_ANNOTATION,
    SIGNATURE_ANNOTATION,
    SIMPLE_SIGNING_TYPE,
    SIMPLESIGNING_MEDIA_TYPE,
    blob_problem,
    decode_base64,
)
from builder.signing.report import VerifiedItem
from builder.signing.verifiers import LayerVerifier, run_verifiers

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from builder.signing.verifiers import LayerCheck


def check_signature_layer(
    descriptor: Mapping[str, Any],
    blob: bytes | None,
    digest: str,
    verifiers: Sequence[LayerVerifier],
    *,
    tag: str = "",
) -> VerifiedItem:
    """Verify one ``.sig`` layer from its descriptor and blob bytes (pure): media type, signature
    annotation, blob integrity (digest, size), signature, payload type, signed digest == ``digest``.
    Never raises for bad content: the reason says what is wrong."""
    item = _check_signature_layer(descriptor, blob, digest, verifiers, tag=tag)
    return _with_kind(item, descriptor)


def _check_signature_layer(
    descriptor: Mapping[str, Any],
    blob: bytes | None,
    digest: str,
    verifiers: Sequence[LayerVerifier],
    *,
    tag: str,
) -> VerifiedItem:
    layer_digest = str(descriptor.get("digest", ""))

    def fail(reason: str, signer: str | None = None) -> VerifiedItem:
        return VerifiedItem("signature", False, reason, tag, layer_digest, signer=signer)

    media_type = descriptor.get("mediaType")
    if media_type != SIMPLESIGNING_MEDIA_TYPE:
        return fail(f"layer media type {media_type!r} is not {SIMPLESIGNING_MEDIA_TYPE}")
    annotations = descriptor.get("annotations") or {}
    if not isinstance(annotations, dict) or SIGNATURE_ANNOTATION not in annotations:
        return fail(f"annotation {SIGNATURE_ANNOTATION} is missing (stripped): the layer carries no signature")
    signature = decode_base64(str(annotations[SIGNATURE_ANNOTATION]))
    if not signature:
        return fail(f"annotation {SIGNATURE_ANNOTATION} is empty or not base64")
    why = blob_problem(descriptor, blob)
    if why or blob is None:
        return fail(why)
    check = run_verifiers(verifiers, blob, signature, {str(k): str(v) for k, v in annotations.items()})
    if not check.ok and not check.untrusted:
        return fail(check.reason, check.signer)
    why = simple_signing_problem(blob, digest)
    if why:
        return fail(why, check.signer)
    if not check.ok:  # well-formed, for this digest, by a signer that was not given
        return VerifiedItem(
            "signature", False, check.reason, tag, layer_digest, signer=check.signer, time=check.time, untrusted=True
        )
    return VerifiedItem(
        "signature", True, "", tag, layer_digest, signer=check.signer, time=check.time, role=signed_role(blob)
    )


def signed_role(payload: bytes) -> str | None:
    """Why builder wrote a simple-signing ``payload``: the value of
    :data:`builder.labels.SIGNATURE_ROLE` in its signed ``optional`` map (``promotion`` for the
    signature a promotion writes for the copy's new identity), None for an image signature (no
    such key, as cosign and ``builder sign`` write them) or a payload that is not JSON. Only
    meaningful once the signature over ``payload`` verified (the map is signed with it; cosign
    ``specs/SIGNATURE_SPEC.md``: https://github.com/sigstore/cosign/blob/main/specs/SIGNATURE_SPEC.md)."""
    try:
        optional = load_json(payload).get("optional")
    except (ValueError, AttributeError):
        return None
    role = optional.get(SIGNATURE_ROLE) if isinstance(optional, dict) else None
    return str(role) if role not in (None, "") else None


def simple_signing_problem(payload: bytes, digest: str) -> str:
    """Why the signed ``payload`` is not a simple-signing document for ``digest`` ("" when it is):
    not the format, another payload type, another digest
    (https://github.com/containers/image/blob/main/docs/containers-signature.5.md)."""
    try:
        critical = load_json(payload)["critical"]
        signed_digest = critical["image"]["docker-manifest-digest"]
        payload_type = critical["type"]
    except (ValueError, KeyError, TypeError):
        return "signed payload is not a simple-signing document"
    if payload_type != SIMPLE_SIGNING_TYPE:
        return f"signed payload type is {payload_type!r}, not {SIMPLE_SIGNING_TYPE!r}"
    if signed_digest != digest:
        return f"signature is for another digest ({signed_digest}), not {digest}"
    return ""


_TIME_KEYS = ("timestamp", "time", "finishedOn", "finishedAt", "approvedAt", "promotedAt", "createdAt", "startedOn")


def predicate_time(predicate: object) -> str | None:
    """A timestamp the predicate states (RFC 3339 text), if any: top-level ``timestamp``/``time``/
    ``finishedOn``/``approvedAt``/``promotedAt``/``createdAt``/``startedOn`` (builder's
    ``approval/v1``: ``time``), SLSA v1 ``runDetails.metadata.finishedOn``/``startedOn``
    (https://slsa.dev/spec/v1.0/provenance), SLSA v0.2 ``metadata.buildFinishedOn``
    (https://slsa.dev/spec/v0.2/provenance), CycloneDX ``metadata.timestamp``
    (https://cyclonedx.org/docs/1.6/json/#metadata_timestamp), builder's ``device-check``,
    ``test-result`` and ``benchmark`` ``run.finished_at``/``started_at`` (docs/evidence.md)."""
    if not isinstance(predicate, dict):
        return None
    for k in _TIME_KEYS:
        v = predicate.get(k)
        if isinstance(v, str) and v:
            return v
    run = predicate.get("runDetails")
    meta = run.get("metadata") if isinstance(run, dict) else predicate.get("metadata")
    own = predicate.get("run")
    for place, keys in (
        (meta, ("finishedOn", "startedOn", "buildFinishedOn", "buildStartedOn", "timestamp")),
        (own, ("finished_at", "started_at")),
    ):
        if isinstance(place, dict):
            for k in keys:
                v = place.get(k)
                if isinstance(v, str) and v:
                    return v
    return None


def check_attestation_layer(
    descriptor: Mapping[str, Any],
    blob: bytes | None,
    digest: str,
    verifiers: Sequence[LayerVerifier],
    *,
    tag: str = "",
) -> VerifiedItem:
    """Verify one ``.att`` layer from its descriptor and blob bytes (pure): media type,
    annotations, blob integrity, DSSE envelope and signature (over PAE), statement type, subject
    digest, predicate type annotation. The signature is checked before the statement is
    trusted. Never raises for bad content."""
    item = _check_attestation_layer(descriptor, blob, digest, verifiers, tag=tag)
    return _with_kind(item, descriptor)


def _with_kind(item: VerifiedItem, descriptor: Mapping[str, Any]) -> VerifiedItem:
    """``item`` marked ``keyless`` when its layer carries a Sigstore certificate (cosign
    ``specs/SIGNATURE_SPEC.md``, ``dev.sigstore.cosign/certificate``): what the layer is, whoever checked it."""
    annotations = descriptor.get("annotations")
    if isinstance(annotations, dict) and annotations.get(CERTIFICATE_ANNOTATION):
        return dataclasses.replace(item, keyless=True)
    return item


def _check_attestation_layer(
    descriptor: Mapping[str, Any],
    blob: bytes | None,
    digest: str,
    verifiers: Sequence[LayerVerifier],
    *,
    tag: str,
) -> VerifiedItem:
    layer_digest = str(descriptor.get("digest", ""))
    raw_annotations = descriptor.get("annotations") or {}
    annotations = {str(k): str(v) for k, v in raw_annotations.items()} if isinstance(raw_annotations, dict) else {}
    annotated_type = annotations.get(PREDICATE_TYPE_ANNOTATION)

    def fail(
        reason: str, signer: str | None = None, statement: Mapping[str, Any] | None = None, ptype: str | None = None
    ) -> VerifiedItem:
        return VerifiedItem(
            "attestation",
            False,
            reason,
            tag,
            layer_digest,
            signer=signer,
            predicate_type=ptype or annotated_type,
            statement=statement,
        )

    why = _attestation_layer_problem(descriptor, blob, annotations)
    if why or blob is None:
        return fail(why)
    envelope = _in_toto_envelope(blob)
    if isinstance(envelope, str):
        return fail(envelope)
    check = _envelope_check(envelope, verifiers, annotations)
    if check is None:
        return fail("DSSE envelope has no usable signature")
    if not check.ok and not check.untrusted:
        return fail(check.reason, check.signer)
    try:
        statement = load_json(envelope.payload)
        if not isinstance(statement, dict):
            raise TypeError("statement is not an object")
    except (ValueError, TypeError):
        return fail("signed payload is not a JSON in-toto statement", check.signer)
    shown = statement if check.ok else None  # a statement by a signer not given is never handed out
    ptype = statement.get("predicateType")
    ptype_s = ptype if isinstance(ptype, str) else None
    why = _statement_problem(statement, digest, annotated_type)
    if why:
        return fail(why, check.signer, shown, ptype_s)
    when = check.time or predicate_time(statement.get("predicate"))
    if not check.ok:  # well-formed, for this digest, by a signer that was not given: no statement (unverified)
        return VerifiedItem(
            "attestation",
            False,
            check.reason,
            tag,
            layer_digest,
            signer=check.signer,
            predicate_type=ptype_s,
            time=check.time,
            untrusted=True,
        )
    return VerifiedItem(
        "attestation",
        True,
        "",
        tag,
        layer_digest,
        signer=check.signer,
        predicate_type=ptype_s,
        time=when,
        statement=statement,
    )


def _attestation_layer_problem(
    descriptor: Mapping[str, Any], blob: bytes | None, annotations: Mapping[str, str]
) -> str:
    """Why an ``.att`` layer is not one ("" when it is): media type, the signature and predicate
    type annotations, blob integrity."""
    media_type = descriptor.get("mediaType")
    if media_type != DSSE_MEDIA_TYPE:
        return f"layer media type {media_type!r} is not {DSSE_MEDIA_TYPE}"
    if SIGNATURE_ANNOTATION not in annotations:
        return f"annotation {SIGNATURE_ANNOTATION} is missing (stripped)"
    if PREDICATE_TYPE_ANNOTATION not in annotations:
        return f"annotation {PREDICATE_TYPE_ANNOTATION} is missing (stripped)"
    return blob_problem(descriptor, blob)


@dataclasses.dataclass(frozen=True)
class _Envelope:
    """A DSSE envelope of an in-toto statement: its payload bytes and its signature entries."""

    payload_type: str
    payload: bytes
    signatures: list[object]


def _in_toto_envelope(blob: bytes) -> _Envelope | str:
    """The DSSE envelope in ``blob``, or why it is not one carrying an in-toto statement
    (https://github.com/secure-systems-lab/dsse/blob/master/envelope.md)."""
    try:
        env = load_json(blob)
        payload_type = env["payloadType"]
        payload = base64.b64decode(env["payload"], validate=True)
        sigs = env["signatures"]
        if not isinstance(payload_type, str) or not isinstance(sigs, list) or not sigs:
            raise TypeError("no signatures")
    except (ValueError, KeyError, TypeError) as exc:
        return f"layer blob is not a DSSE envelope ({type(exc).__name__}): truncated or edited"
    if payload_type != IN_TOTO_PAYLOAD_TYPE:
        return f"DSSE payload type is {payload_type!r}, not {IN_TOTO_PAYLOAD_TYPE}"
    return _Envelope(payload_type, payload, sigs)


def _envelope_check(
    envelope: _Envelope, verifiers: Sequence[LayerVerifier], annotations: Mapping[str, str]
) -> LayerCheck | None:
    """The first signature of ``envelope`` that verifies (over PAE), else the first usable one's
    failure; None when no entry holds a signature."""
    signed = pae(envelope.payload_type, envelope.payload)
    check = None
    for entry in envelope.signatures:
        sig = decode_base64(str(entry.get("sig", ""))) if isinstance(entry, dict) else None
        if not sig:
            continue
        res = run_verifiers(verifiers, signed, sig, annotations)
        if res.ok:
            return res
        check = check or res
    return check


def _statement_problem(statement: Mapping[str, object], digest: str, annotated_type: str | None) -> str:
    """Why a signed in-toto ``statement`` does not attest ``digest`` with the annotated predicate
    type ("" when it does): statement type, subject digests, ``predicateType``."""
    stype = statement.get("_type")
    if stype not in STATEMENT_TYPES:
        return f"statement type {stype!r} is not in-toto Statement v1 or v0.1"
    subjects = statement.get("subject")
    subject_digests = (
        [
            s.get("digest", {}).get("sha256")
            for s in subjects
            if isinstance(s, dict) and isinstance(s.get("digest"), dict)
        ]
        if isinstance(subjects, list)
        else []
    )
    if digest.partition(":")[2] not in subject_digests:
        other = ", ".join(f"sha256:{d}" for d in subject_digests if isinstance(d, str)) or "none"
        return f"attestation is for another digest ({other}), not {digest}"
    ptype = statement.get("predicateType")
    if not isinstance(ptype, str):
        return "statement has no predicateType"
    if annotated_type != ptype:
        return f"predicateType annotation ({annotated_type}) differs from the signed statement's ({ptype})"
    return ""
