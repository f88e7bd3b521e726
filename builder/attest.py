"""in-toto attestations in DSSE envelopes, stored as cosign's legacy ``sha256-<hex>.att`` layers.

Formats (binding): ``/work/shared/docs/signing-formats.md`` (from sigstore/cosign
``specs/ATTESTATION_SPEC.md``, in-toto Statement v1, DSSE protocol):

- Statement (written, compact JSON): ``{"_type":"https://in-toto.io/Statement/v1","subject":
  [{"name":"<registry>/<repo>","digest":{"sha256":"<hex>"}}],"predicateType":"<uri>",
  "predicate":{...}}``. Read: v1 and v0.1 (what cosign 2.x ``attest`` writes).
- DSSE envelope: ``{"payloadType":"application/vnd.in-toto+json","payload":"<b64 statement>",
  "signatures":[{"keyid":"","sig":"<b64 DER ECDSA>"}]}``; the signature is over
  PAE = ``"DSSEv1" SP len(type) SP type SP len(body) SP body`` (decimal ASCII lengths).
- Layer: media type ``application/vnd.dsse.envelope.v1+json``, annotations
  ``dev.cosignproject.cosign/signature: ""`` and ``predicateType: <uri>``; appended to the
  ``.att`` manifest with the same read-modify-write as signatures (``builder.sign.append_layer``).

Consumers: ``read_attestations`` is what policies (helper G) and device checks (helper F) call to
get each attestation's statement, predicate type, signer and verdict.

Errors: ``SigningError`` (17) on write problems; registry errors propagate. Verification never
raises for bad content: each item carries the reason.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.keys import PublicKey
from builder.predicates import STATEMENT_V01, STATEMENT_V1
from builder.sign import (
    ATT_SUFFIX,
    DSSE_MEDIA_TYPE,
    PREDICATE_TYPE_ANNOTATION,
    SIGNATURE_ANNOTATION,
    LayerVerifier,
    SignatureLayer,
    Signer,
    VerifiedItem,
    WriteResult,
    _b64,
    _layer_annotations,
    append_layer,
    blob_problem,
    fetch_layer_blob,
    read_layers,
    run_verifiers,
    verifiers_for,
    verify_layer,
)

if TYPE_CHECKING:
    from builder.registry import RegistryClient

__all__ = [
    "IN_TOTO_PAYLOAD_TYPE",
    "PreparedAttestation",
    "VerifiedAttestation",
    "attest_image",
    "check_attestation_layer",
    "dsse_envelope",
    "make_statement",
    "pae",
    "predicate_time",
    "prepare_attestation",
    "read_attestations",
]

IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPES = (STATEMENT_V1, STATEMENT_V01)

#: The same value type as the report items; ``verified`` is an alias of ``ok``.
VerifiedAttestation = VerifiedItem


def make_statement(subject_name: str, digest: str, predicate_type: str, predicate: Mapping[str, Any]) -> bytes:
    """in-toto Statement v1 for one subject (``subject_name`` = ``registry/repo``), compact JSON bytes."""
    algo, _, hexpart = digest.partition(":")
    if algo != "sha256":
        raise ValueError(f"not a sha256 digest: {digest!r}")
    doc = {
        "_type": STATEMENT_V1,
        "subject": [{"name": subject_name, "digest": {"sha256": hexpart}}],
        "predicateType": predicate_type,
        "predicate": dict(predicate),
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE pre-authentication encoding: ``DSSEv1 <len type> <type> <len body> <body>``."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


def dsse_envelope(
    statement: bytes, signature: bytes, keyid: str = "", payload_type: str = IN_TOTO_PAYLOAD_TYPE
) -> bytes:
    """DSSE envelope JSON bytes (the layer blob) holding ``statement`` and one signature."""
    doc = {
        "payloadType": payload_type,
        "payload": base64.b64encode(statement).decode(),
        "signatures": [{"keyid": keyid, "sig": base64.b64encode(signature).decode()}],
    }
    return json.dumps(doc, separators=(",", ":")).encode()


@dataclasses.dataclass(frozen=True)
class PreparedAttestation:
    """A signed in-toto statement ready to be appended to ``.att``: the statement bytes and the
    layer (DSSE envelope blob + annotations) that ``attest_image`` writes."""

    predicate_type: str
    statement: bytes
    layer: SignatureLayer


def prepare_attestation(
    registry: str, repository: str, digest: str, predicate_type: str, predicate: Mapping[str, Any], signer: Signer
) -> PreparedAttestation:
    """Sign the statement about ``registry/repository@digest`` without writing anything (so a
    caller can upload the layer blob early and pass the result to ``attest_image``)."""
    statement = make_statement(f"{registry}/{repository}", digest, predicate_type, predicate)
    signature = signer.sign(pae(IN_TOTO_PAYLOAD_TYPE, statement))
    envelope = dsse_envelope(statement, signature)
    annotations = {
        SIGNATURE_ANNOTATION: "",
        PREDICATE_TYPE_ANNOTATION: predicate_type,
        **_layer_annotations(signer, pae(IN_TOTO_PAYLOAD_TYPE, statement), signature),
    }
    return PreparedAttestation(predicate_type, statement, SignatureLayer(DSSE_MEDIA_TYPE, envelope, annotations))


def attest_image(
    client: RegistryClient,
    repository: str,
    digest: str,
    predicate_type: str,
    predicate: Mapping[str, Any],
    signer: Signer,
    *,
    lock_dir: Path,
    prepared: PreparedAttestation | None = None,
    uploaded: Collection[str] = (),
) -> WriteResult:
    """Sign an in-toto v1 statement about ``repository@digest`` and append it to ``sha256-<hex>.att``.

    The subject name is ``<registry>/<repository>``. An attestation with the same statement
    already signed by the same key pair is not written twice (``appended=False``).
    ``prepared``: the statement already signed by ``prepare_attestation`` (same arguments);
    ``uploaded``: blob digests already in the repository (see ``append_layer``).
    Raises SigningError / registry errors.
    """
    if prepared is None:
        prepared = prepare_attestation(client.registry, repository, digest, predicate_type, predicate, signer)
    elif prepared.predicate_type != predicate_type:
        raise ValueError(f"prepared attestation is {prepared.predicate_type}, not {predicate_type}")
    statement, layer = prepared.statement, prepared.layer
    equivalent = (
        _same_statement(client, repository, signer, statement, predicate_type) if signer.kind == "key" else None
    )
    result = append_layer(
        client,
        repository,
        digest,
        ATT_SUFFIX,
        layer,
        lock_dir=lock_dir,
        signer=signer.fingerprint,
        equivalent=equivalent,
        uploaded=uploaded,
    )
    return dataclasses.replace(result, predicate_type=predicate_type)


def _same_statement(
    client: RegistryClient, repository: str, signer: Signer, statement: bytes, predicate_type: str
) -> Callable[[dict[str, Any]], bool]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pub = serialization.load_pem_public_key(signer.public_key_pem.encode())
    assert isinstance(pub, ec.EllipticCurvePublicKey)
    key = PublicKey(pub)

    def equivalent(descriptor: dict[str, Any]) -> bool:
        ann = descriptor.get("annotations") or {}
        if descriptor.get("mediaType") != DSSE_MEDIA_TYPE or ann.get(PREDICATE_TYPE_ANNOTATION) != predicate_type:
            return False
        blob, _ = fetch_layer_blob(client, repository, descriptor)
        if blob is None:
            return False
        try:
            env = json.loads(blob)
            if base64.b64decode(env["payload"]) != statement:
                return False
            return any(
                key.verify(pae(env["payloadType"], statement), base64.b64decode(s["sig"])) for s in env["signatures"]
            )
        except (ValueError, KeyError, TypeError):
            return False

    return equivalent


# ---------------------------------------------------------------------------------------------
# verification

_TIME_KEYS = ("timestamp", "time", "finishedOn", "finishedAt", "approvedAt", "promotedAt", "createdAt", "startedOn")


def predicate_time(predicate: Any) -> str | None:
    """A timestamp the predicate states (RFC 3339 text), if any: top-level ``timestamp``/``time``/
    ``finishedOn``/``approvedAt``/``promotedAt``/``createdAt``/``startedOn``, SLSA v1
    ``runDetails.metadata.finishedOn``/``startedOn``, SLSA v0.2 ``metadata.buildFinishedOn``."""
    if not isinstance(predicate, dict):
        return None
    for k in _TIME_KEYS:
        v = predicate.get(k)
        if isinstance(v, str) and v:
            return v
    run = predicate.get("runDetails")
    meta = run.get("metadata") if isinstance(run, dict) else predicate.get("metadata")
    if isinstance(meta, dict):
        for k in ("finishedOn", "startedOn", "buildFinishedOn", "buildStartedOn"):
            v = meta.get(k)
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

    media_type = descriptor.get("mediaType")
    if media_type != DSSE_MEDIA_TYPE:
        return fail(f"layer media type {media_type!r} is not {DSSE_MEDIA_TYPE}")
    if SIGNATURE_ANNOTATION not in annotations:
        return fail(f"annotation {SIGNATURE_ANNOTATION} is missing (stripped)")
    if annotated_type is None:
        return fail(f"annotation {PREDICATE_TYPE_ANNOTATION} is missing (stripped)")
    why = blob_problem(descriptor, blob)
    if why or blob is None:
        return fail(why)
    try:
        env = json.loads(blob)
        payload_type = env["payloadType"]
        payload = base64.b64decode(env["payload"], validate=True)
        sigs = env["signatures"]
        if not isinstance(payload_type, str) or not isinstance(sigs, list) or not sigs:
            raise TypeError("no signatures")
    except (ValueError, KeyError, TypeError) as exc:
        return fail(f"layer blob is not a DSSE envelope ({type(exc).__name__}): truncated or edited")
    if payload_type != IN_TOTO_PAYLOAD_TYPE:
        return fail(f"DSSE payload type is {payload_type!r}, not {IN_TOTO_PAYLOAD_TYPE}")
    signed = pae(payload_type, payload)
    check = None
    for entry in sigs:
        sig = _b64(str(entry.get("sig", ""))) if isinstance(entry, dict) else None
        if not sig:
            continue
        res = run_verifiers(verifiers, signed, sig, annotations)
        if res.ok:
            check = res
            break
        check = check or res
    if check is None:
        return fail("DSSE envelope has no usable signature")
    if not check.ok and not check.untrusted:
        return fail(check.reason, check.signer)
    try:
        statement = json.loads(payload)
        if not isinstance(statement, dict):
            raise TypeError("statement is not an object")
    except (ValueError, TypeError):
        return fail("signed payload is not a JSON in-toto statement", check.signer)
    shown = statement if check.ok else None  # a statement by a signer not given is never handed out
    stype = statement.get("_type")
    ptype = statement.get("predicateType")
    ptype_s = ptype if isinstance(ptype, str) else None
    if stype not in STATEMENT_TYPES:
        return fail(f"statement type {stype!r} is not in-toto Statement v1 or v0.1", check.signer, shown, ptype_s)
    hexpart = digest.partition(":")[2]
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
    if hexpart not in subject_digests:
        other = ", ".join(f"sha256:{d}" for d in subject_digests if isinstance(d, str)) or "none"
        return fail(f"attestation is for another digest ({other}), not {digest}", check.signer, shown, ptype_s)
    if ptype_s is None:
        return fail("statement has no predicateType", check.signer, shown)
    if annotated_type != ptype_s:
        return fail(
            f"predicateType annotation ({annotated_type}) differs from the signed statement's ({ptype_s})",
            check.signer,
            shown,
            ptype_s,
        )
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


def read_attestations(
    client: RegistryClient,
    repository: str,
    digest: str,
    *,
    keys: Sequence[PublicKey] = (),
    verifiers: Sequence[LayerVerifier] = (),
    predicate_type: str | None = None,
) -> list[VerifiedAttestation]:
    """Every attestation of ``repository@digest`` with its verdict, in manifest order.

    Each item: ``statement`` (parsed, when the envelope could be read), ``predicate_type``,
    ``predicate``, ``signer`` (key fingerprint / identity), ``verified`` (= ``ok``), ``reason``,
    ``time``. ``predicate_type`` filters (by the signed type, or the annotation when unreadable).
    Policies must use only items with ``verified`` True (fail closed). [] when no ``.att`` exists.
    Registry errors propagate.
    """
    vs = verifiers_for(keys, verifiers)
    tag, layers = read_layers(client, repository, digest, ATT_SUFFIX)
    out = [verify_layer(client, repository, digest, d, vs, tag=tag) for d in layers]
    if predicate_type is not None:
        out = [i for i in out if i.predicate_type == predicate_type]
    return out


def statement_digest(statement: bytes) -> str:
    """``sha256:<hex>`` of statement bytes (for logs and ledger records)."""
    return "sha256:" + hashlib.sha256(statement).hexdigest()
