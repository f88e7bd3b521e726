"""Verify the signatures and attestations of an image digest (key pairs, or any ``LayerVerifier``).

``verify_image`` reads the ``.sig`` and ``.att`` manifests (``builder.signing.layer``), checks each
layer (``builder.signing.layer_check``) and the requirements, and returns a
``builder.signing.report.VerificationReport``. ``read_attestations`` is what policies and device
checks call to get each attestation's statement, predicate type, signer and verdict.

Never raises for bad content; registry errors (unreachable, auth; ``builder.registry``) propagate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from builder.errors import NotFoundError
from builder.signing.layer import ATT_SUFFIX, SIG_SUFFIX, fetch_blob, read_layers
from builder.signing.layer_check import check_attestation_layer, check_signature_layer
from builder.signing.report import VerificationReport, VerifiedAttestation, VerifiedItem, describe_failures
from builder.signing.verifiers import LayerVerifier, verifiers_for

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from builder.registry import RegistryClient
    from builder.signing.keys import PublicKey


def verify_layer(
    client: RegistryClient,
    repository: str,
    digest: str,
    descriptor: Mapping[str, Any],
    verifiers: Sequence[LayerVerifier],
    *,
    tag: str,
) -> VerifiedItem:
    """Fetch the blob of one layer of the ``.sig`` or ``.att`` manifest ``tag`` and check it:
    ``check_signature_layer``, or ``check_attestation_layer`` for an ``.att`` tag."""
    blob = fetch_blob(client, repository, descriptor, subject=None if tag.endswith(ATT_SUFFIX) else digest)
    if tag.endswith(ATT_SUFFIX):
        return check_attestation_layer(descriptor, blob, digest, verifiers, tag=tag)
    return check_signature_layer(descriptor, blob, digest, verifiers, tag=tag)


def confirm_digest(client: RegistryClient, repository: str, digest: str, tag: str | None) -> list[str]:
    """Problems with the reference itself: the digest must still resolve, and a tag given together
    with a digest must still point at it (else the image was replaced under the same tag)."""
    problems: list[str] = []
    try:
        current = client.resolve(repository, digest)
    except NotFoundError:
        return [f"digest {digest} no longer resolves in {client.registry}/{repository}"]
    if current != digest:
        problems.append(f"registry answered {current} for {digest}")
    if tag is not None:
        try:
            at_tag = client.resolve(repository, tag)
        except NotFoundError:
            problems.append(f"tag {tag} no longer exists in {client.registry}/{repository}")
        else:
            if at_tag != digest:
                problems.append(
                    f"image replaced under the same tag: {tag} now points at {at_tag}, not the expected {digest}"
                )
    return problems


def verify_image(
    client: RegistryClient,
    repository: str,
    digest: str,
    *,
    keys: Sequence[PublicKey] = (),
    predicate_types: Sequence[str] = (),
    verifiers: Sequence[LayerVerifier] = (),
    require_signature: bool = True,
    tag: str | None = None,
    reference: str | None = None,
) -> VerificationReport:
    """Verify every signature (``.sig``) and attestation (``.att``) of ``repository@digest``, and
    every Sigstore bundle referrer made with a key pair (cosign 3's default format;
    ``builder.signing.bundles``).

    ``keys``: trusted public keys (cosign ``--key``); ``verifiers``: more LayerVerifiers
    (keyless). Requirements: the digest resolves (and ``tag``, when given, still points at it);
    at least one valid signature when ``require_signature``; for each of ``predicate_types``
    at least one valid attestation of that type. Failed items that are not needed are reported
    but do not fail the report (cosign semantics: another signer's layers are allowed).
    Never raises for bad content; registry errors (unreachable, auth) propagate.
    """
    ref = reference or f"{client.registry}/{repository}@{digest}"
    problems = confirm_digest(client, repository, digest, tag)
    vs = verifiers_for(keys, verifiers)
    if not vs:
        problems.append("no public key or identity given to verify with")
    items: list[VerifiedItem] = []
    sig_tag, sig_layers = read_layers(client, repository, digest, SIG_SUFFIX)
    for d in sig_layers:
        items.append(verify_layer(client, repository, digest, d, vs, tag=sig_tag))
    att_tag, att_layers = read_layers(client, repository, digest, ATT_SUFFIX)
    for d in att_layers:
        items.append(verify_layer(client, repository, digest, d, vs, tag=att_tag))
    from builder.signing.bundles import key_bundle_items  # not at import: verify_layer's callers never need it

    items.extend(key_bundle_items(client, repository, digest, vs))
    problems += unmet_requirements(
        items,
        digest,
        require_signature,
        predicate_types,
        looked_in=f"no {SIG_SUFFIX} tag, no Sigstore bundle referrer",
    )
    return VerificationReport(ref, repository, digest, tuple(items), tuple(problems), tuple(predicate_types), tag)


def unmet_requirements(
    items: Sequence[VerifiedItem],
    digest: str,
    require_signature: bool,
    predicate_types: Sequence[str],
    *,
    looked_in: str,
) -> list[str]:
    """The problems of a verification's requirements (key-pair or keyless): a valid signature when
    ``require_signature``; a valid attestation of each of ``predicate_types``. ``looked_in``: where
    signatures were looked for, said when none exist."""
    problems: list[str] = []
    if require_signature:
        sigs = [i for i in items if i.kind == "signature"]
        if not sigs:
            problems.append(f"no signatures found for {digest} ({looked_in})")
        elif not any(i.ok for i in sigs):
            problems.append(f"none of the {len(sigs)} signature(s) is valid: {describe_failures(sigs)}")
    for ptype in predicate_types:
        atts = [i for i in items if i.kind == "attestation"]
        if not any(i.ok and i.predicate_type == ptype for i in atts):
            word = {"ok": "valid", "untrusted": "by a signer not given", "invalid": "invalid"}
            found = sorted({f"{i.predicate_type} ({word[i.classification]})" for i in atts})
            problems.append(
                f"no valid attestation of type {ptype}" + (f"; found: {', '.join(found)}" if found else "; none found")
            )
    return problems


def read_attestations(
    client: RegistryClient,
    repository: str,
    digest: str,
    *,
    keys: Sequence[PublicKey] = (),
    verifiers: Sequence[LayerVerifier] = (),
    predicate_type: str | None = None,
) -> list[VerifiedAttestation]:
    """Every attestation of ``repository@digest`` with its verdict: the ``.att`` layers in manifest
    order, then the key-pair Sigstore bundle referrers (``builder.signing.bundles``).

    Each item: ``statement`` (parsed, when the envelope could be read), ``predicate_type``,
    ``predicate``, ``signer`` (key fingerprint / identity), ``verified`` (= ``ok``), ``reason``,
    ``time``. ``predicate_type`` filters (by the signed type, or the annotation when unreadable).
    Policies must use only items with ``verified`` True (fail closed). [] when there are none.
    Registry errors propagate.
    """
    vs = verifiers_for(keys, verifiers)
    tag, layers = read_layers(client, repository, digest, ATT_SUFFIX)
    out = [verify_layer(client, repository, digest, d, vs, tag=tag) for d in layers]
    from builder.signing.bundles import key_bundle_items

    out += [i for i in key_bundle_items(client, repository, digest, vs) if i.kind == "attestation"]
    if predicate_type is not None:
        out = [i for i in out if i.predicate_type == predicate_type]
    return out
