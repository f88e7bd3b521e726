"""Keyless (Sigstore) signatures and attestations on image digests, and their verification.

Signing uses sigstore-python 4.x: an ephemeral P-256 key, a Fulcio certificate bound to an OIDC
identity token, a Rekor v1 entry. Every keyless write produces two forms
(``/work/shared/docs/signing-formats.md``, cosign ``specs/SIGNATURE_SPEC.md`` / ``BUNDLE_SPEC.md``):

1. **Legacy** cosign layers, appended (read-modify-write under a file lock, ``builder.sign.append_layer``)
   to ``sha256-<hex>.sig`` / ``.att``: a signature is a simple-signing payload signed as a ``hashedrekord``
   entry; an attestation is the DSSE envelope bytes exactly as submitted to Rekor (a ``dsse`` entry whose
   ``envelopeHash`` is their SHA-256). Annotations: ``dev.cosignproject.cosign/signature`` (base64, empty
   for attestations), ``dev.sigstore.cosign/certificate`` (leaf PEM), ``dev.sigstore.cosign/chain``
   (intermediates + root PEM, from the trusted root), ``dev.sigstore.cosign/bundle`` (``{"SignedEntryTimestamp",
   "Payload": {"body","integratedTime","logIndex","logID"}}`` from the Rekor v1 entry), plus
   ``dev.builder-project/sigstore-bundle``: the full Sigstore bundle v0.3 of that layer (it carries the
   inclusion proof and checkpoint, so the layer verifies offline with sigstore-python's ``Verifier``;
   cosign ignores unknown annotations).
2. A **Sigstore bundle v0.3** (DSSE: an in-toto Statement v1 whose subject is the image digest; predicate
   ``https://sigstore.dev/cosign/sign/v1`` for a signature, as ``cosign sign --new-bundle-format`` does) as an
   OCI 1.1 referrer: ``artifactType application/vnd.dev.sigstore.bundle.v0.3+json``, empty config, one layer,
   annotations ``dev.sigstore.bundle.content`` / ``dev.sigstore.bundle.predicateType``, ``subject`` = image.
   When the registry has no referrers API (no ``OCI-Subject`` answer to the PUT), the ``sha256-<hex>``
   fallback index is maintained with the bundle artifact type in its entries
   (``RegistryClient.add_referrer_to_fallback_index``), under a file lock.

Rekor v1 is pinned (``ClientTrustConfig.force_tlog_version = 1``): v2 entries carry no signed entry
timestamp, and the legacy bundle annotation needs one.

Verification (:func:`verify_keyless`, :class:`KeylessLayerVerifier`) runs sigstore-python's
``Verifier(trusted_root=...)`` offline: certificate chain to the pinned Fulcio roots at the log's
integrated time, embedded SCT against the pinned CT keys, Rekor inclusion proof + signed checkpoint +
SET, signature over the content, and the identity policy (exact values or regular expressions, full
match, for the SAN and the OIDC issuer). Items come back as ``builder.sign.VerifiedItem`` inside a
``builder.sign.VerificationReport``.

Errors: ``SigningError`` (17) when the token, Fulcio or Rekor refuse or the trust configuration is
unusable; ``ConfigError`` (2) for unreadable trust files or bad patterns; registry errors from
``builder.registry``. Verification never raises for bad content: reasons go into the items.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidSignature

from builder.errors import ConfigError, SigningError
from builder.predicates import COSIGN_SIGN_V1
from builder.sign import (
    ATT_SUFFIX,
    BUNDLE_ANNOTATION,
    CERTIFICATE_ANNOTATION,
    CHAIN_ANNOTATION,
    DSSE_MEDIA_TYPE,
    PREDICATE_TYPE_ANNOTATION,
    SIG_SUFFIX,
    SIGNATURE_ANNOTATION,
    SIMPLESIGNING_MEDIA_TYPE,
    LayerCheck,
    SignatureLayer,
    VerificationReport,
    VerifiedItem,
    WriteResult,
    append_layer,
    confirm_digest,
    read_layers,
    simple_signing_payload,
    unmet_requirements,
    verifiers_for,
    verify_layer,
)

if TYPE_CHECKING:
    from cryptography.x509 import Certificate
    from sigstore.models import Bundle, ClientTrustConfig, TrustedRoot
    from sigstore.oidc import IdentityToken

    from builder.keys import PublicKey
    from builder.registry import Descriptor, RegistryClient

BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY_CONFIG = b"{}"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
BUNDLE_CONTENT_ANNOTATION = "dev.sigstore.bundle.content"
BUNDLE_PREDICATE_ANNOTATION = "dev.sigstore.bundle.predicateType"
CREATED_ANNOTATION = "org.opencontainers.image.created"
#: The full Sigstore bundle of a legacy layer (this project's addition; cosign ignores it).
SIGSTORE_BUNDLE_ANNOTATION = "dev.builder-project/sigstore-bundle"
#: Output forms of keyless writes: cosign legacy tags and Sigstore bundle referrers.
FORMATS = ("legacy", "bundle")

#: OIDC issuer of GitHub Actions ID tokens.
GITHUB_ACTIONS_ISSUER = "https://token.actions.githubusercontent.com"
#: OIDs of the Fulcio issuer extensions (sigstore/fulcio docs/oid-info.md): v1 raw string, v2 DER UTF8String.
OID_ISSUER_V1 = "1.3.6.1.4.1.57264.1.1"
OID_ISSUER_V2 = "1.3.6.1.4.1.57264.1.8"

__all__ = [
    "ANY_IDENTITY",
    "BUNDLE_MEDIA_TYPE",
    "GITHUB_ACTIONS_ISSUER",
    "IdentityPolicy",
    "KeylessLayerVerifier",
    "KeylessWrite",
    "ReferrerWrite",
    "ambient_identity_token",
    "github_workflow_identity",
    "identity_token",
    "keyless_attest_image",
    "keyless_sign_and_attest_build",
    "keyless_sign_image",
    "load_trust_config",
    "load_trusted_root",
    "parse_signer",
    "policies_from_options",
    "signer_text",
    "verify_keyless",
]


# ---------------------------------------------------------------------------------------------
# identity policies


@dataclasses.dataclass(frozen=True)
class IdentityPolicy:
    """Who may have signed: the certificate's SAN (email or URI) and OIDC issuer.

    ``identity`` / ``issuer``: exact values; ``identity_regexp`` / ``issuer_regexp``: Python regular
    expressions that must match the whole value (``re.fullmatch``). Each side needs one of the two
    (cosign's ``--certificate-identity[-regexp]`` / ``--certificate-oidc-issuer[-regexp]``).
    Raises ConfigError from :meth:`validate` when a side is missing or a pattern does not compile.
    """

    identity: str | None = None
    issuer: str | None = None
    identity_regexp: str | None = None
    issuer_regexp: str | None = None

    def validate(self) -> IdentityPolicy:
        if not (self.identity or self.identity_regexp):
            raise ConfigError(
                "an identity policy needs --identity or --identity-regexp",
                hint="e.g. --identity https://github.com/ORG/REPO/.github/workflows/build.yml@refs/heads/main",
            )
        if not (self.issuer or self.issuer_regexp):
            raise ConfigError(
                f"identity policy {self.describe()} has no issuer",
                hint=f"add --issuer (GitHub Actions: {GITHUB_ACTIONS_ISSUER})",
            )
        for pattern in (self.identity_regexp, self.issuer_regexp):
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ConfigError(f"invalid regular expression {pattern!r}: {exc}") from exc
        return self

    def describe(self) -> str:
        ident = self.identity or f"~/{self.identity_regexp}/"
        iss = self.issuer or (f"~/{self.issuer_regexp}/" if self.issuer_regexp else "?")
        return f"{ident} (issuer {iss})"

    def matches(self, identities: Sequence[str], issuer: str | None) -> bool:
        if issuer is None:
            return False
        if self.issuer is not None and issuer != self.issuer:
            return False
        if self.issuer_regexp is not None and not re.fullmatch(self.issuer_regexp, issuer):
            return False
        for ident in identities:
            if self.identity is not None and ident != self.identity:
                continue
            if self.identity_regexp is not None and not re.fullmatch(self.identity_regexp, ident):
                continue
            return True
        return False


#: Accepts any identity from any issuer: for gathering evidence whose identities a promotion policy judges later
#: (the cryptographic checks against the trusted root still apply).
ANY_IDENTITY = IdentityPolicy(identity_regexp=r".*", issuer_regexp=r".*")

_SIGNER_RE = re.compile(r"^(?P<subject>.*) \(issuer (?P<issuer>[^()]*)\)$")


def signer_text(identities: Sequence[str], issuer: str | None) -> str:
    """How keyless signers appear in ``VerifiedItem.signer``: ``"<SAN> (issuer <issuer>)"``."""
    return f"{identities[0] if identities else '(no SAN)'} (issuer {issuer or 'missing'})"


def parse_signer(signer: str | None) -> tuple[str, str] | None:
    """``(issuer, subject)`` of a keyless ``VerifiedItem.signer`` (the shape ``builder.policy`` matches);
    None for key fingerprints and unknown shapes."""
    if not signer or signer.startswith("sha256:"):
        return None
    m = _SIGNER_RE.match(signer)
    return (m.group("issuer"), m.group("subject")) if m else None


def policies_from_options(
    identities: Sequence[str], identity_regexps: Sequence[str], issuer: str | None, issuer_regexp: str | None
) -> list[IdentityPolicy]:
    """``--identity`` / ``--identity-regexp`` (repeatable) with one ``--issuer`` or ``--issuer-regexp``:
    one policy per identity; any may match. Raises ConfigError (validated)."""
    out = [IdentityPolicy(identity=i, issuer=issuer, issuer_regexp=issuer_regexp) for i in identities]
    out += [IdentityPolicy(identity_regexp=r, issuer=issuer, issuer_regexp=issuer_regexp) for r in identity_regexps]
    return [p.validate() for p in out]


def github_workflow_identity(repository: str, workflow: str, ref: str = "refs/heads/main") -> IdentityPolicy:
    """Policy for a GitHub Actions workflow file on a ref: SAN
    ``https://github.com/<ORG/REPO>/.github/workflows/<workflow>@<ref>``, issuer GitHub's (Fulcio's
    mapping of ``job_workflow_ref``)."""
    return IdentityPolicy(
        identity=f"https://github.com/{repository}/.github/workflows/{workflow}@{ref}", issuer=GITHUB_ACTIONS_ISSUER
    )


def cert_identities(cert: Certificate) -> tuple[list[str], str | None]:
    """(SAN emails + URIs, OIDC issuer) of a Fulcio certificate (issuer v2 extension, else v1)."""
    from cryptography import x509

    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        idents = [*san.get_values_for_type(x509.RFC822Name), *san.get_values_for_type(x509.UniformResourceIdentifier)]
    except x509.ExtensionNotFound:
        idents = []
    issuer: str | None = None
    for oid, der in ((OID_ISSUER_V2, True), (OID_ISSUER_V1, False)):
        try:
            ext = cert.extensions.get_extension_for_oid(x509.ObjectIdentifier(oid)).value
        except x509.ExtensionNotFound:
            continue
        raw = ext.value if isinstance(ext, x509.UnrecognizedExtension) else b""
        issuer = _der_utf8(raw) if der else raw.decode(errors="replace")
        if issuer:
            break
    return idents, issuer


def _der_utf8(raw: bytes) -> str | None:
    """Value of a DER UTF8String (tag 0x0c), short or long form length."""
    if len(raw) < 2 or raw[0] != 0x0C:
        return None
    n = raw[1]
    start = 2
    if n & 0x80:
        k = n & 0x7F
        n = int.from_bytes(raw[2 : 2 + k], "big")
        start = 2 + k
    return raw[start : start + n].decode(errors="replace")


class _Policy:
    """A sigstore-python ``VerificationPolicy``: any of ``policies`` must match the certificate."""

    def __init__(self, policies: Sequence[IdentityPolicy]) -> None:
        self.policies = tuple(policies)
        self.seen: tuple[list[str], str | None] = ([], None)

    def verify(self, cert: Certificate) -> None:
        from sigstore.errors import VerificationError as SigstoreVerificationError

        idents, issuer = cert_identities(cert)
        self.seen = (idents, issuer)
        if any(p.matches(idents, issuer) for p in self.policies):
            return
        allowed = "; ".join(p.describe() for p in self.policies) or "none given"
        raise SigstoreVerificationError(
            f"signed by {', '.join(idents) or '(no SAN)'} (issuer {issuer or 'missing'}), "
            f"which no allowed identity matches: {allowed}"
        )


# ---------------------------------------------------------------------------------------------
# trust configuration and tokens


def load_trust_config(path: Path | None, *, offline: bool = False) -> ClientTrustConfig:
    """The Sigstore instance to sign with, Rekor v1 pinned.

    ``path``: a client trust config JSON (``application/vnd.dev.sigstore.clienttrustconfig.v0.1+json``:
    trusted root + signing config) for a private instance; None: the public-good instance from
    Sigstore's TUF repository (``offline=True`` uses the cached/bundled copy). Raises ConfigError
    (unreadable/invalid file) or SigningError (no Rekor v1 log in the signing config).
    """
    from sigstore.models import ClientTrustConfig

    try:
        if path is None:
            tc = ClientTrustConfig.production(offline=offline)
        else:
            tc = ClientTrustConfig.from_json(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read the trust config {path}: {exc}") from exc
    except Exception as exc:  # sigstore raises ValueError/pydantic/TUF errors
        raise ConfigError(
            f"invalid Sigstore trust config {path or '(public-good TUF)'}: {exc}",
            hint="give a client trust config JSON (mediaType application/vnd.dev.sigstore.clienttrustconfig.v0.1+json)",
        ) from exc
    tc.force_tlog_version = 1
    try:
        tc.signing_config.get_tlogs()
    except Exception as exc:
        raise SigningError(
            f"the trust config {path or '(public-good)'} names no usable Rekor v1 log: {exc}",
            hint="the legacy cosign bundle annotation needs a Rekor v1 entry (signed entry timestamp)",
        ) from exc
    return tc


def load_trusted_root(path: Path | None, *, offline: bool = True) -> TrustedRoot:
    """The pinned trusted root for verification: a ``trusted_root.json`` or a client trust config
    file (its ``trustedRoot`` is used); None: the public-good root (offline: cached/bundled copy).
    Raises ConfigError when unreadable or invalid."""
    from sigstore.models import ClientTrustConfig, TrustedRoot

    try:
        if path is None:
            return ClientTrustConfig.production(offline=offline).trusted_root
        text = Path(path).read_text()
        media_type = str(json.loads(text).get("mediaType", ""))
        if "clienttrustconfig" in media_type:
            return ClientTrustConfig.from_json(text).trusted_root
        return TrustedRoot.from_file(str(path))
    except OSError as exc:
        raise ConfigError(f"cannot read the trusted root {path}: {exc}") from exc
    except Exception as exc:
        raise ConfigError(
            f"invalid Sigstore trusted root {path or '(public-good TUF)'}: {exc}",
            hint="give a trusted_root.json (mediaType application/vnd.dev.sigstore.trustedroot+json;version=0.1)",
        ) from exc


def identity_token(raw: str) -> IdentityToken:
    """An explicit OIDC identity token (JWT). Raises SigningError when malformed or expired."""
    from sigstore.oidc import IdentityError, IdentityToken

    try:
        return IdentityToken(raw.strip())
    except IdentityError as exc:
        raise SigningError(f"the OIDC identity token is not usable: {exc}", hint="get a fresh token") from exc


def ambient_identity_token() -> IdentityToken:
    """The ambient OIDC token (GitHub Actions with ``permissions: id-token: write``, and the other
    environments ``id.detect_credential`` knows), audience ``sigstore``. The CLI decides to call this;
    it reads the CI environment through sigstore-python. Raises SigningError when none is found."""
    from sigstore.oidc import IdentityError, detect_credential

    try:
        raw = detect_credential()
    except IdentityError as exc:
        raise SigningError(f"detecting the ambient OIDC token failed: {exc}") from exc
    if not raw:
        raise SigningError(
            "no ambient OIDC identity token found",
            hint="in GitHub Actions grant `permissions: id-token: write`; elsewhere pass --oidc-token",
        )
    return identity_token(raw)


# ---------------------------------------------------------------------------------------------
# signing


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

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class KeylessWrite:
    """What one keyless sign/attest wrote: the legacy layer write, the bundle referrer, the signer's
    identity and issuer, and the Rekor log indexes used (legacy, bundle)."""

    legacy: WriteResult | None
    referrer: ReferrerWrite | None
    identity: str
    issuer: str | None
    log_indexes: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "legacy": self.legacy.to_json() if self.legacy else None,
            "referrer": self.referrer.to_json() if self.referrer else None,
            "identity": self.identity,
            "issuer": self.issuer,
            "log_indexes": list(self.log_indexes),
        }


def _statement(subject_name: str, digest: str, predicate_type: str, predicate: Mapping[str, Any]) -> Any:
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


def _bundle_doc(bundle: Bundle) -> dict[str, Any]:
    doc = json.loads(bundle.to_json())
    assert isinstance(doc, dict)
    return doc


def _tlog(doc: Mapping[str, Any]) -> dict[str, Any]:
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
    entry = _tlog(_bundle_doc(bundle))
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
    from cryptography.hazmat.primitives.serialization import Encoding
    from cryptography.x509 import load_der_x509_certificate

    for ca in trusted_root._inner.certificate_authorities:
        certs = [load_der_x509_certificate(c.raw_bytes) for c in ca.cert_chain.certificates]
        if not certs or certs[0].subject != leaf.issuer:
            continue
        try:
            leaf.verify_directly_issued_by(certs[0])
        except (ValueError, TypeError, InvalidSignature):
            continue
        return "".join(c.public_bytes(Encoding.PEM).decode() for c in certs)
    return ""


def _cert_annotations(trust_config: ClientTrustConfig, bundle: Bundle) -> dict[str, str]:
    from cryptography.hazmat.primitives.serialization import Encoding

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
    entry = _tlog(_bundle_doc(bundle))
    body = json.loads(base64.b64decode(entry["canonicalizedBody"]))
    expected = str(body.get("spec", {}).get("envelopeHash", {}).get("value", ""))
    candidates: list[bytes] = []
    env = bundle._dsse_envelope
    if env is not None:
        candidates.append(env.to_json().encode())
    d = _bundle_doc(bundle).get("dsseEnvelope") or {}
    candidates.append(json.dumps(d, separators=(",", ":")).encode())
    for raw in candidates:
        if hashlib.sha256(raw).hexdigest() == expected:
            return raw
    raise SigningError(
        "cannot reproduce the DSSE envelope bytes that were logged in Rekor (envelopeHash mismatch)",
        hint="this sigstore-python version serializes envelopes differently; report it",
    )


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
) -> tuple[KeylessWrite, KeylessWrite]:
    """The build step's keyless counterpart of ``builder.sign.sign_and_attest_build``: sign ``digest`` and
    attach ``provenance`` (SLSA provenance v1 by default) in one signer session (one Fulcio certificate,
    three Rekor entries). Returns (signature write, attestation write)."""
    from builder.predicates import SLSA_PROVENANCE_V1

    sig, (att,) = _write(
        client,
        repository,
        digest,
        identity_token,
        trust_config,
        lock_dir,
        FORMATS,
        True,
        None,
        [(predicate_type or SLSA_PROVENANCE_V1, provenance)],
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
    wanted = _check_formats(formats)
    subject = f"{client.registry}/{repository}"
    image = client.get_manifest(repository, digest).descriptor()
    payload = simple_signing_payload(subject, digest, annotations)
    work: list[tuple[str, Any]] = []
    if sign and "legacy" in wanted:
        work.append(("artifact", payload))
    if sign and "bundle" in wanted:
        work.append(("dsse", _statement(subject, digest, COSIGN_SIGN_V1, {})))
    work += [("dsse", _statement(subject, digest, pt, pred)) for pt, pred in attestations]
    bundles = _sign(trust_config, identity_token, work)
    idents, issuer = cert_identities(bundles[0].signing_certificate)
    who = idents[0] if idents else "(unknown)"
    n_sig = len(work) - len(attestations)
    sig_write: KeylessWrite | None = None
    if sign:
        legacy: WriteResult | None = None
        ref: ReferrerWrite | None = None
        for (kind, _), bundle in zip(work[:n_sig], bundles[:n_sig], strict=True):
            if kind == "artifact":
                sig_doc = _bundle_doc(bundle).get("messageSignature") or {}
                annotations_ = {
                    SIGNATURE_ANNOTATION: str(sig_doc.get("signature", "")),
                    **_cert_annotations(trust_config, bundle),
                }
                layer = SignatureLayer(SIMPLESIGNING_MEDIA_TYPE, payload, annotations_)
                legacy = append_layer(client, repository, digest, SIG_SUFFIX, layer, lock_dir=lock_dir, signer=who)
            else:
                ref = push_bundle_referrer(
                    client, repository, image, bundle, predicate_type=COSIGN_SIGN_V1, lock_dir=lock_dir
                )
        sig_write = KeylessWrite(legacy, ref, who, issuer, tuple(_log_index(b) for b in bundles[:n_sig]))
    att_writes: list[KeylessWrite] = []
    for (pt, _), bundle in zip(attestations, bundles[n_sig:], strict=True):
        att_legacy = None
        att_ref = None
        if "legacy" in wanted:
            att_legacy = _append_attestation(client, repository, digest, bundle, pt, trust_config, lock_dir, who)
        if "bundle" in wanted:
            att_ref = push_bundle_referrer(client, repository, image, bundle, predicate_type=pt, lock_dir=lock_dir)
        att_writes.append(KeylessWrite(att_legacy, att_ref, who, issuer, (_log_index(bundle),)))
    return sig_write, att_writes


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
            **_cert_annotations(trust_config, bundle),
        },
    )
    return append_layer(client, repository, digest, ATT_SUFFIX, layer, lock_dir=lock_dir, signer=who)


def _check_formats(formats: Sequence[str]) -> set[str]:
    wanted = set(formats)
    unknown = wanted - set(FORMATS)
    if unknown or not wanted:
        raise ConfigError(
            f"unknown or empty keyless output formats {sorted(unknown) or '[]'}",
            hint="choose any of: legacy (cosign .sig/.att tags), bundle (Sigstore bundle referrer)",
        )
    return wanted


def _log_index(bundle: Bundle) -> int:
    return int(_tlog(_bundle_doc(bundle))["logIndex"])


def push_bundle_referrer(
    client: RegistryClient,
    repository: str,
    subject: Any,
    bundle: Bundle,
    *,
    predicate_type: str,
    lock_dir: Path,
    created: dt.datetime | None = None,
) -> ReferrerWrite:
    """Push ``bundle`` as an OCI 1.1 referrer of ``subject`` (a ``builder.registry.Descriptor`` of the
    image manifest) and, when the registry has no referrers API, add it to the ``sha256-<hex>`` fallback
    index (entry ``artifactType`` = the bundle media type) under a file lock in ``lock_dir``.
    Layout as cosign 2.5 ``--new-bundle-format`` writes it (signing-formats.md)."""
    from filelock import FileLock

    from builder.registry import Descriptor, fallback_tag

    blob = bundle.to_json().encode()
    bundle_digest = _put_blob(client, repository, blob)
    config_digest = _put_blob(client, repository, EMPTY_CONFIG)
    when = (created or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": BUNDLE_MEDIA_TYPE,
        "config": {"mediaType": EMPTY_MEDIA_TYPE, "digest": config_digest, "size": len(EMPTY_CONFIG)},
        "layers": [{"mediaType": BUNDLE_MEDIA_TYPE, "digest": bundle_digest, "size": len(blob)}],
        "subject": {"mediaType": subject.media_type, "digest": subject.digest, "size": subject.size},
        "annotations": {
            BUNDLE_CONTENT_ANNOTATION: "dsse-envelope",
            BUNDLE_PREDICATE_ANNOTATION: predicate_type,
            CREATED_ANNOTATION: when,
        },
    }
    raw = json.dumps(manifest, separators=(",", ":")).encode()
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
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
            annotations=tuple(sorted(manifest["annotations"].items())),  # type: ignore[attr-defined]
        )
        tag = fallback_tag(subject.digest)
        lock_dir.mkdir(parents=True, exist_ok=True)
        key = hashlib.sha256(f"{client.registry}/{repository}:{tag}".encode()).hexdigest()[:32]
        with FileLock(str(lock_dir / f"referrers-{key}.lock"), timeout=60):
            index_digest = client.add_referrer_to_fallback_index(repository, subject.digest, descriptor)
    return ReferrerWrite(repository, subject.digest, digest, bundle_digest, predicate_type, index_digest)


def _put_blob(client: RegistryClient, repository: str, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if client.blob_exists(repository, digest):
        return digest
    return client.put_blob(repository, data, digest)


# ---------------------------------------------------------------------------------------------
# verification


def _rfc3339(epoch: int) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    except Exception as exc:
        return _Outcome(False, f"the Sigstore bundle does not parse: {exc}", None, None)
    idents, issuer = cert_identities(bundle.signing_certificate)
    signer = signer_text(idents, issuer)
    entry = _tlog(_bundle_doc(bundle))
    when = _rfc3339(int(entry["integratedTime"])) if entry.get("integratedTime") else None
    policy = _Policy(policies)
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
    """A ``builder.sign.LayerVerifier`` for keyless legacy layers (those with a certificate annotation).

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
            pae = _pae(out.payload_type, out.payload)
            if data not in (pae, out.payload) and not _same_envelope(data, out.payload_type, out.payload):
                return LayerCheck(
                    False,
                    signer=out.signer,
                    time=out.time,
                    reason="the layer's DSSE envelope is not the one logged in Rekor (edited after signing)",
                )
            logged = {str(x.get("sig", "")) for x in (json.loads(full).get("dsseEnvelope") or {}).get("signatures", [])}
            if signature and base64.b64encode(signature).decode() not in logged:
                return LayerCheck(
                    False,
                    signer=out.signer,
                    time=out.time,
                    reason="the layer's DSSE signature is not the one logged in Rekor (replaced)",
                )
        return LayerCheck(True, signer=out.signer, time=out.time)


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
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding
    from sigstore._internal.sct import verify_sct
    from sigstore._internal.trust import KeyringPurpose
    from sigstore._utils import KeyID
    from sigstore.errors import Error as SigstoreError

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
        doc = json.loads(legacy)
        set_sig = base64.b64decode(doc["SignedEntryTimestamp"])
        p = doc["Payload"]
        body_b64, integrated, log_id, log_index = (
            str(p["body"]),
            int(p["integratedTime"]),
            str(p["logID"]),
            int(p["logIndex"]),
        )
        body = json.loads(base64.b64decode(body_b64))
    except (ValueError, KeyError, TypeError) as exc:
        return fail(f"annotation {BUNDLE_ANNOTATION} does not parse ({exc})", signer)
    when_dt = dt.datetime.fromtimestamp(integrated, dt.UTC)
    when = _rfc3339(integrated)
    set_payload: dict[str, str | int] = {
        "body": body_b64,
        "integratedTime": integrated,
        "logID": log_id,
        "logIndex": log_index,
    }
    import rfc8785

    try:
        trusted_root.rekor_keyring(KeyringPurpose.VERIFY).verify(
            key_id=KeyID(bytes.fromhex(log_id)), signature=set_sig, data=rfc8785.dumps(set_payload)
        )
    except (SigstoreError, ValueError) as exc:
        return fail(f"the signed entry timestamp does not verify with the pinned Rekor keys: {exc}", signer, when)
    try:
        chain = _chain_at(cert, trusted_root, annotations.get(CHAIN_ANNOTATION, ""), when_dt)
        verify_sct(cert, chain, trusted_root.ct_keyring(KeyringPurpose.VERIFY))
    except (SigstoreError, ValueError) as exc:
        return fail(f"certificate not trusted: {exc}", signer, when)
    try:
        ku = cert.extensions.get_extension_for_class(x509.KeyUsage).value
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound as exc:
        return fail(f"certificate lacks {exc.oid.dotted_string}", signer, when)
    if not ku.digital_signature or x509.oid.ExtendedKeyUsageOID.CODE_SIGNING not in eku:
        return fail("certificate is not for code signing", signer, when)
    try:
        _Policy(policies).verify(cert)
    except SigstoreError as exc:
        return fail(str(exc), signer, when)
    key = cert.public_key()
    if not isinstance(key, ec.EllipticCurvePublicKey):
        return fail("only ECDSA certificates are supported", signer, when)
    try:
        key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return fail(
            "the signature does not verify with the certificate's key: content edited after signing", signer, when
        )
    cert_b64 = base64.b64encode(cert.public_bytes(Encoding.PEM)).decode()
    problem = _body_matches(body, data, signature, cert, cert_b64)
    if problem:
        return fail(problem, signer, when)
    return LayerCheck(True, signer=signer, time=when)


def _chain_at(cert: Certificate, trusted_root: TrustedRoot, chain_pem: str, when: dt.datetime) -> list[Certificate]:
    """The verified chain (without the leaf) to a pinned Fulcio root at ``when`` (cryptography's X.509 path
    validation, Fulcio EKU rules as in sigstore-python's verifier). Raises ValueError when none."""
    from cryptography import x509
    from cryptography.x509.verification import Criticality, ExtensionPolicy, PolicyBuilder, Store

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
    except Exception as exc:  # VerificationError, UnsupportedGeneralNameType
        raise ValueError(f"no chain to a pinned Fulcio root at {when:%Y-%m-%dT%H:%M:%SZ}: {exc}") from exc


def _body_matches(body: Mapping[str, Any], data: bytes, signature: bytes, cert: Certificate, cert_b64: str) -> str:
    """'' when the Rekor entry body describes this layer (cosign's bundle checks), else the reason."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

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
        payload = _payload_of_pae(data)
        ph = spec.get("payloadHash") or {}
        if payload is None or ph.get("value") != hashlib.sha256(payload).hexdigest():
            return "the Rekor entry is for another DSSE payload (payloadHash differs)"
        sigs = spec.get("signatures") or []
        if not any(s.get("signature") == sig_b64 and same_cert(str(s.get("verifier", ""))) for s in sigs):
            return "the Rekor entry holds another signature or verifier than the layer"
        return ""
    return f"unsupported Rekor entry kind {kind!r} in {BUNDLE_ANNOTATION}"


def _payload_of_pae(pae: bytes) -> bytes | None:
    """The body of DSSE PAE bytes ``DSSEv1 <len> <type> <len> <body>``; None when not PAE."""
    m = re.match(rb"DSSEv1 (\d+) ", pae)
    if not m:
        return None
    tlen = int(m.group(1))
    rest = pae[m.end() + tlen :]
    m2 = re.match(rb" (\d+) ", rest)
    if not m2:
        return None
    body = rest[m2.end() :]
    return body if len(body) == int(m2.group(1)) else None


def _pae(payload_type: str, payload: bytes) -> bytes:
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def _same_envelope(data: bytes, payload_type: str, payload: bytes) -> bool:
    try:
        env = json.loads(data)
        return bool(env.get("payloadType") == payload_type and base64.b64decode(env.get("payload", "")) == payload)
    except (ValueError, TypeError, AttributeError):
        return False


def _annotations_match(full: str, annotations: Mapping[str, str], cert_pem: str) -> str:
    """'' when the full bundle agrees with the cosign annotations, else the reason."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    try:
        doc = json.loads(full)
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
            body = json.loads(legacy)["Payload"]["body"]
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
) -> list[VerifiedItem]:
    """Verify every Sigstore bundle referrer of ``digest`` (referrers API or fallback index)."""
    return [
        _verify_referrer(client, repository, digest, desc, trusted_root, policies)
        for desc in client.referrers(repository, digest, BUNDLE_MEDIA_TYPE)
    ]


def _verify_referrer(
    client: RegistryClient,
    repository: str,
    digest: str,
    desc: Descriptor,
    trusted_root: TrustedRoot,
    policies: Sequence[IdentityPolicy],
) -> VerifiedItem:
    """One bundle referrer: manifest, subject, bundle blob, Sigstore verification, statement subject."""
    from builder.errors import NotFoundError
    from builder.registry import fallback_tag
    from builder.sign import fetch_layer_blob

    where = f"{fallback_tag(digest)} -> {desc.digest[:19]}"
    ptype = desc.annotation_map.get(BUNDLE_PREDICATE_ANNOTATION)
    kind = "signature" if ptype == COSIGN_SIGN_V1 else "attestation"

    def fail(reason: str, signer: str | None = None, when: str | None = None) -> VerifiedItem:
        pt = None if kind == "signature" else ptype
        return VerifiedItem(kind, False, reason, where, desc.digest, signer=signer, predicate_type=pt, time=when)

    try:
        manifest = client.get_manifest(repository, desc.digest)
    except NotFoundError:
        return fail(f"referrer manifest {desc.digest} listed in the index is missing")
    if manifest.digest != desc.digest:
        return fail("referrer manifest does not match its digest")
    subject = manifest.subject
    if subject is None or subject.digest != digest:
        return fail(f"referrer's subject is {subject.digest if subject else 'missing'}, not {digest}")
    layers = [d for d in manifest.layers if d.media_type == BUNDLE_MEDIA_TYPE]
    if len(layers) != 1:
        return fail(f"expected one {BUNDLE_MEDIA_TYPE} layer, found {len(layers)}")
    blob, why = fetch_layer_blob(client, repository, layers[0].to_json())
    if blob is None:
        return fail(why)
    out = _verify_bundle(blob.decode(errors="replace"), trusted_root, policies, artifact=None)
    if not out.ok or out.payload is None:
        return fail(out.reason or "the bundle has no DSSE payload", out.signer, out.time)
    try:
        statement = json.loads(out.payload)
        subjects = statement.get("subject") or []
        stmt_ptype = str(statement.get("predicateType", ""))
    except (ValueError, AttributeError):
        return fail("the signed payload is not an in-toto statement", out.signer, out.time)
    alg, _, hexpart = digest.partition(":")
    if not any(isinstance(s, dict) and (s.get("digest") or {}).get(alg) == hexpart for s in subjects):
        return fail(f"the signed statement is for another digest, not {digest}", out.signer, out.time)
    if ptype and stmt_ptype != ptype:
        return fail(f"annotation says predicate type {ptype}, the signed statement says {stmt_ptype}", out.signer)
    kind = "signature" if stmt_ptype == COSIGN_SIGN_V1 else "attestation"
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
    attestation per ``predicate_types``. Key-pair layers (no certificate) are checked too when ``keys``
    (trusted public keys) are given, else skipped. Never raises for bad content; registry errors propagate.
    """
    policies = tuple(p.validate() for p in identities)
    ref = reference or f"{client.registry}/{repository}@{digest}"
    problems = confirm_digest(client, repository, digest, tag)
    if not policies and not keys:
        problems.append("no identity (or key) given to verify with")
    verifiers = verifiers_for(keys, [KeylessLayerVerifier(trusted_root, policies)])

    def wanted(d: Mapping[str, Any]) -> bool:
        return bool(keys) or bool((d.get("annotations") or {}).get(CERTIFICATE_ANNOTATION))

    items: list[VerifiedItem] = []
    sig_tag, sig_layers = read_layers(client, repository, digest, SIG_SUFFIX)
    for d in sig_layers:
        if wanted(d):
            items.append(verify_layer(client, repository, digest, d, verifiers, tag=sig_tag))
    att_tag, att_layers = read_layers(client, repository, digest, ATT_SUFFIX)
    for d in att_layers:
        if wanted(d):
            items.append(verify_layer(client, repository, digest, d, verifiers, tag=att_tag))
    items.extend(_referrer_items(client, repository, digest, trusted_root, policies))
    problems += unmet_requirements(
        items, digest, require_signature, predicate_types, looked_in="legacy tag or bundle referrer"
    )
    return VerificationReport(ref, repository, digest, tuple(items), tuple(problems), tuple(predicate_types), tag)
