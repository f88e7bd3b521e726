"""Attest image digests: signed in-toto statements in DSSE envelopes, as cosign's ``sha256-<hex>.att`` layers.

Formats: ``builder.signing.dsse`` (statement, PAE, envelope) and ``builder.signing.layer``
(cosign ``specs/ATTESTATION_SPEC.md``,
https://github.com/sigstore/cosign/blob/main/specs/ATTESTATION_SPEC.md). A layer has media type
``application/vnd.dsse.envelope.v1+json`` and annotations ``dev.cosignproject.cosign/signature: ""``
and ``predicateType: <uri>``; it is appended to the ``.att`` manifest with the same
read-modify-write as signatures (``builder.signing.layer.append_layer``). Reading and verifying
attestations: ``builder.signing.verify.read_attestations``.

Errors: ``SigningError`` (17) on write problems; registry errors propagate.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import TYPE_CHECKING, Any

from builder.registry.manifest import load_json
from builder.signing.dsse import IN_TOTO_PAYLOAD_TYPE, dsse_envelope, make_statement, pae
from builder.signing.layer import (
    ATT_SUFFIX,
    DSSE_MEDIA_TYPE,
    ENVELOPE_ANNOTATION,
    ENVELOPE_ANNOTATION_MAX,
    PREDICATE_TYPE_ANNOTATION,
    SIGNATURE_ANNOTATION,
    HeldRead,
    SignatureLayer,
    WriteResult,
    append_layer,
    fetch_layer_blob,
)
from builder.signing.signer import Signer, layer_annotations, signer_public_key

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping
    from pathlib import Path

    from builder.registry import RegistryClient


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
    caller can upload the layer blob early and pass the result to ``attest_image``). The layer
    carries the envelope's exact JSON text in ``ENVELOPE_ANNOTATION`` when it is at most
    ``ENVELOPE_ANNOTATION_MAX`` bytes: a reader whose bytes hash to the layer's digest needs no blob
    read (``builder.signing.layer.embedded_envelope``); the blob is written all the same."""
    statement = make_statement(f"{registry}/{repository}", digest, predicate_type, predicate)
    signature = signer.sign(pae(IN_TOTO_PAYLOAD_TYPE, statement))
    envelope = dsse_envelope(statement, signature)
    annotations = {
        SIGNATURE_ANNOTATION: "",
        PREDICATE_TYPE_ANNOTATION: predicate_type,
        **layer_annotations(signer, pae(IN_TOTO_PAYLOAD_TYPE, statement), signature),
    }
    if len(envelope) <= ENVELOPE_ANNOTATION_MAX:
        annotations[ENVELOPE_ANNOTATION] = envelope.decode()  # JSON text: ASCII (json.dumps escapes)
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
    suffix: str = ATT_SUFFIX,
    held: HeldRead | None = None,
    lock_timeout: float = 60.0,
) -> WriteResult:
    """Sign an in-toto v1 statement about ``repository@digest`` and append it to ``sha256-<hex>.att``
    (``suffix``: another tag of the same layout, e.g. an approver's own ``builder.signing.approvals.approval_suffix``).

    The subject name is ``<registry>/<repository>``. An attestation with the same statement
    already signed by the same key pair is not written twice (``appended=False``).
    ``prepared``: the statement already signed by ``prepare_attestation`` (same arguments);
    ``uploaded``: blob digests already in the repository; ``held``: the tag's lock is held by the
    caller, who read the manifest under it (see ``append_layer``); else its lock is waited for up to
    ``lock_timeout`` seconds. Raises SigningError / registry errors.
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
        suffix,
        layer,
        lock_dir=lock_dir,
        signer=signer.fingerprint,
        equivalent=equivalent,
        uploaded=uploaded,
        held=held,
        lock_timeout=lock_timeout,
    )
    return dataclasses.replace(result, predicate_type=predicate_type)


def _same_statement(
    client: RegistryClient, repository: str, signer: Signer, statement: bytes, predicate_type: str
) -> Callable[[dict[str, Any]], bool]:
    key = signer_public_key(signer)

    def equivalent(descriptor: dict[str, Any]) -> bool:
        ann = descriptor.get("annotations") or {}
        if descriptor.get("mediaType") != DSSE_MEDIA_TYPE or ann.get(PREDICATE_TYPE_ANNOTATION) != predicate_type:
            return False
        blob, _ = fetch_layer_blob(client, repository, descriptor)
        if blob is None:
            return False
        try:
            env = load_json(blob)
            if base64.b64decode(env["payload"]) != statement:
                return False
            return any(
                key.verify(pae(env["payloadType"], statement), base64.b64decode(s["sig"])) for s in env["signatures"]
            )
        except (ValueError, KeyError, TypeError):
            return False

    return equivalent
