"""Keyless (Sigstore) signatures and attestations on image digests.

Signing uses sigstore-python 4.x: an ephemeral P-256 key, a Fulcio certificate bound to an OIDC
identity token, a Rekor v1 entry. Every keyless write produces two forms (cosign
``specs/SIGNATURE_SPEC.md`` / ``BUNDLE_SPEC.md``, https://github.com/sigstore/cosign/tree/main/specs):

1. **Legacy** cosign layers, appended (``builder.signing.layer.append_layer``) to ``sha256-<hex>.sig`` /
   ``.att``: a signature is a simple-signing payload signed as a ``hashedrekord`` entry; an attestation
   is the DSSE envelope bytes exactly as submitted to Rekor (a ``dsse`` entry whose ``envelopeHash`` is
   their SHA-256). Annotations: ``dev.cosignproject.cosign/signature`` (base64, empty for attestations),
   ``dev.sigstore.cosign/certificate`` (leaf PEM), ``dev.sigstore.cosign/chain`` (intermediates + root
   PEM, from the trusted root), ``dev.sigstore.cosign/bundle`` (from the Rekor v1 entry), plus
   ``dev.builder-project/sigstore-bundle``: the full Sigstore bundle v0.3 of that layer (inclusion proof
   and checkpoint, so the layer verifies offline; cosign ignores unknown annotations).
2. A **Sigstore bundle v0.3** (DSSE: an in-toto Statement v1 whose subject is the image digest; predicate
   ``https://sigstore.dev/cosign/sign/v1`` for a signature) as an OCI 1.1 referrer
   (``builder.signing.keyless.bundle.push_bundle_referrer``).

Errors: ``SigningError`` (17) when the token, Fulcio or Rekor refuse; ``ConfigError`` (2) for unknown
output formats; registry errors from ``builder.registry``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from builder.errors import ConfigError, SigningError
from builder.predicates import COSIGN_SIGN_V1, SLSA_PROVENANCE_V1
from builder.signing.keyless.bundle import (
    ReferrerWrite,
    ReferrerWriteDocument,
    bundle_doc,
    cert_annotations,
    log_index,
    push_bundle_referrer,
    submitted_envelope,
)
from builder.signing.keyless.identity import (
    cert_identities,
)
from builder.signing.layer import (
    ATT_SUFFIX,
    DSSE_MEDIA_TYPE,
    PREDICATE_TYPE_ANNOTATION,
    SIG_SUFFIX,
    SIGNATURE_ANNOTATION,
    SIMPLESIGNING_MEDIA_TYPE,
    SignatureLayer,
    WriteResult,
    WriteResultDocument,
    append_layer,
    simple_signing_payload,
)
from builder.signing.sign import platform_manifests

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from sigstore.dsse import Statement
    from sigstore.models import Bundle, ClientTrustConfig
    from sigstore.oidc import IdentityToken

    from builder.registry import RegistryClient

FORMATS = ("legacy", "bundle")


class KeylessWriteDocument(TypedDict):
    """A keyless signature or attestation in ``--json``: the ``legacy`` cosign layer write and the
    bundle ``referrer`` (None for a format not written), the certificate's ``identity`` and OIDC
    ``issuer``, and the Rekor ``log_indexes`` of the entries made."""

    legacy: WriteResultDocument | None
    referrer: ReferrerWriteDocument | None
    identity: str
    issuer: str | None
    log_indexes: list[int]


@dataclasses.dataclass(frozen=True)
class KeylessWrite:
    """What one keyless sign/attest wrote: the legacy layer write, the bundle referrer, the signer's
    identity and issuer, and the Rekor log indexes used (legacy, bundle)."""

    legacy: WriteResult | None
    referrer: ReferrerWrite | None
    identity: str
    issuer: str | None
    log_indexes: tuple[int, ...]

    def to_json(self) -> KeylessWriteDocument:
        return {
            "legacy": self.legacy.to_json() if self.legacy else None,
            "referrer": self.referrer.to_json() if self.referrer else None,
            "identity": self.identity,
            "issuer": self.issuer,
            "log_indexes": list(self.log_indexes),
        }


def _statement(subject_name: str, digest: str, predicate_type: str, predicate: Mapping[str, Any]) -> Statement:
    from sigstore import dsse

    alg, _, hexpart = digest.partition(":")
    return (
        dsse.StatementBuilder()
        .subjects([dsse.Subject(name=subject_name, digest={alg: hexpart})])  # type: ignore[arg-type]
        .predicate_type(predicate_type)
        .predicate(dict(predicate))
        .build()
    )


def _sign(trust_config: ClientTrustConfig, token: IdentityToken, work: Sequence[tuple[str, Any]]) -> list[Bundle]:
    """Run sigstore-python's Signer once (one certificate) over ``work``: ("artifact", bytes) or
    ("dsse", Statement). Maps sigstore errors to SigningError."""
    from sigstore.sign import SigningContext

    try:
        ctx = SigningContext.from_trust_config(trust_config)
        out: list[Bundle] = []
        with ctx.signer(token, cache=True) as signer:
            for kind, item in work:
                out.append(signer.sign_artifact(item) if kind == "artifact" else signer.sign_dsse(item))
        return out
    except SigningError:
        raise
    except Exception as exc:  # FulcioClientError, RekorClientError, ExpiredIdentity, VerificationError (SCT)
        raise SigningError(
            f"keyless signing failed ({type(exc).__name__}): {exc}",
            hint="check the OIDC token (audience sigstore, not expired) and that Fulcio and Rekor answer",
        ) from exc


def keyless_sign_image(
    client: RegistryClient,
    repository: str,
    digest: str,
    *,
    identity_token: IdentityToken,
    trust_config: ClientTrustConfig,
    lock_dir: Path,
    annotations: Mapping[str, str] | None = None,
    formats: Sequence[str] = FORMATS,
) -> KeylessWrite:
    """Keyless signature of ``repository@digest``: a legacy ``.sig`` layer (hashedrekord entry over the
    simple-signing payload, certificate/chain/bundle annotations) and a Sigstore bundle referrer
    (DSSE, predicate ``https://sigstore.dev/cosign/sign/v1``). One Fulcio certificate, two Rekor entries.
    ``annotations`` go into the payload's ``optional``. ``formats``: any of ``legacy`` and ``bundle``.
    Raises SigningError / registry errors (ConfigError for unknown formats)."""
    sig, _ = _write(client, repository, digest, identity_token, trust_config, lock_dir, formats, True, annotations, ())
    assert sig is not None
    return sig


def keyless_attest_image(
    client: RegistryClient,
    repository: str,
    digest: str,
    *,
    predicate_type: str,
    predicate: Mapping[str, Any],
    identity_token: IdentityToken,
    trust_config: ClientTrustConfig,
    lock_dir: Path,
    formats: Sequence[str] = FORMATS,
) -> KeylessWrite:
    """Keyless attestation: an in-toto Statement v1 (subject ``registry/repo`` + digest) signed as DSSE
    and logged as a Rekor ``dsse`` entry; written as a legacy ``.att`` layer (the envelope bytes as
    submitted, ``predicateType`` annotation) and/or as a bundle referrer (``formats``). One Rekor entry serves
    both. Raises SigningError / registry errors."""
    _, (att,) = _write(
        client,
        repository,
        digest,
        identity_token,
        trust_config,
        lock_dir,
        formats,
        False,
        None,
        [(predicate_type, predicate)],
    )
    return att


def keyless_sign_and_attest_build(
    client: RegistryClient,
    repository: str,
    digest: str,
    provenance: Mapping[str, Any],
    *,
    identity_token: IdentityToken,
    trust_config: ClientTrustConfig,
    lock_dir: Path,
    predicate_type: str | None = None,
    also: Sequence[tuple[str, Mapping[str, Any]]] = (),
) -> tuple[KeylessWrite, KeylessWrite]:
    """The build step's keyless counterpart of ``builder.signing.sign.sign_and_attest_build``: sign ``digest`` and
    attach ``provenance`` (SLSA provenance v1 by default) and each ``(predicate type, predicate)`` of
    ``also`` (the image's CycloneDX SBOM) in one signer session (one Fulcio certificate, one Rekor entry
    per signature and attestation). Returns (signature write, provenance write)."""

    sig, (att, *_) = _write(
        client,
        repository,
        digest,
        identity_token,
        trust_config,
        lock_dir,
        FORMATS,
        True,
        None,
        [(predicate_type or SLSA_PROVENANCE_V1, provenance), *also],
    )
    assert sig is not None
    return sig, att


def _write(
    client: RegistryClient,
    repository: str,
    digest: str,
    identity_token: IdentityToken,
    trust_config: ClientTrustConfig,
    lock_dir: Path,
    formats: Sequence[str],
    sign: bool,
    annotations: Mapping[str, str] | None,
    attestations: Sequence[tuple[str, Mapping[str, Any]]],
) -> tuple[KeylessWrite | None, list[KeylessWrite]]:
    """Sign everything asked for in one sigstore-python signer session, then write each output."""
    wanted = check_formats(formats)
    subject = f"{client.registry}/{repository}"
    image = client.get_manifest(repository, digest).descriptor()
    payload = simple_signing_payload(subject, digest, annotations)
    work: list[tuple[str, Any]] = []
    if sign and "legacy" in wanted:
        work.append(("artifact", payload))
    if sign and "bundle" in wanted:
        work.append(("dsse", _statement(subject, digest, COSIGN_SIGN_V1, {})))
    # containers/image verifies the platform manifest it pulls: sign each one too (legacy layers)
    children = platform_manifests(client, repository, digest) if sign and "legacy" in wanted else []
    child_payloads = [(c, simple_signing_payload(subject, c, annotations)) for c in children]
    work += [("artifact", p) for _, p in child_payloads]
    work += [("dsse", _statement(subject, digest, pt, pred)) for pt, pred in attestations]
    bundles = _sign(trust_config, identity_token, work)
    idents, issuer = cert_identities(bundles[0].signing_certificate)
    who = idents[0] if idents else "(unknown)"
    n_sig = len(work) - len(attestations) - len(child_payloads)
    for (child, child_payload), bundle in zip(child_payloads, bundles[n_sig : n_sig + len(children)], strict=True):
        _append_signature(client, repository, child, child_payload, bundle, trust_config, lock_dir, who)
    bundles = bundles[:n_sig] + bundles[n_sig + len(children) :]
    sig_write: KeylessWrite | None = None
    if sign:
        legacy: WriteResult | None = None
        ref: ReferrerWrite | None = None
        for (kind, _), bundle in zip(work[:n_sig], bundles[:n_sig], strict=True):
            if kind == "artifact":
                legacy = _append_signature(client, repository, digest, payload, bundle, trust_config, lock_dir, who)
            else:
                ref = push_bundle_referrer(
                    client, repository, image, bundle, predicate_type=COSIGN_SIGN_V1, lock_dir=lock_dir
                )
        sig_write = KeylessWrite(legacy, ref, who, issuer, tuple(log_index(b) for b in bundles[:n_sig]))
    att_writes: list[KeylessWrite] = []
    for (pt, _), bundle in zip(attestations, bundles[n_sig:], strict=True):
        att_legacy = None
        att_ref = None
        if "legacy" in wanted:
            att_legacy = _append_attestation(client, repository, digest, bundle, pt, trust_config, lock_dir, who)
        if "bundle" in wanted:
            att_ref = push_bundle_referrer(client, repository, image, bundle, predicate_type=pt, lock_dir=lock_dir)
        att_writes.append(KeylessWrite(att_legacy, att_ref, who, issuer, (log_index(bundle),)))
    return sig_write, att_writes


def _append_signature(
    client: RegistryClient,
    repository: str,
    digest: str,
    payload: bytes,
    bundle: Bundle,
    trust_config: ClientTrustConfig,
    lock_dir: Path,
    who: str,
) -> WriteResult:
    """The legacy ``.sig`` layer of a message-signature ``bundle`` over ``payload``, appended for ``digest``."""
    sig_doc = bundle_doc(bundle).get("messageSignature") or {}
    annotations = {SIGNATURE_ANNOTATION: str(sig_doc.get("signature", "")), **cert_annotations(trust_config, bundle)}
    layer = SignatureLayer(SIMPLESIGNING_MEDIA_TYPE, payload, annotations)
    return append_layer(client, repository, digest, SIG_SUFFIX, layer, lock_dir=lock_dir, signer=who)


def _append_attestation(
    client: RegistryClient,
    repository: str,
    digest: str,
    bundle: Bundle,
    predicate_type: str,
    trust_config: ClientTrustConfig,
    lock_dir: Path,
    who: str,
) -> WriteResult:
    envelope = submitted_envelope(bundle)
    layer = SignatureLayer(
        DSSE_MEDIA_TYPE,
        envelope,
        {
            SIGNATURE_ANNOTATION: "",
            PREDICATE_TYPE_ANNOTATION: predicate_type,
            **cert_annotations(trust_config, bundle),
        },
    )
    return append_layer(client, repository, digest, ATT_SUFFIX, layer, lock_dir=lock_dir, signer=who)


def check_formats(formats: Sequence[str]) -> set[str]:
    wanted = set(formats)
    unknown = wanted - set(FORMATS)
    if unknown or not wanted:
        raise ConfigError(
            f"unknown or empty keyless output formats {sorted(unknown) or '[]'}",
            hint="choose any of: legacy (cosign .sig/.att tags), bundle (Sigstore bundle referrer)",
        )
    return wanted
