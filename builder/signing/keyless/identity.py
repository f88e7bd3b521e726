"""Keyless signer identities: policies over a Fulcio certificate's SAN and OIDC issuer.

Fulcio certificate extensions: https://github.com/sigstore/fulcio/blob/main/docs/oid-info.md.
Pure (sigstore-python is imported only inside ``CertificatePolicy.verify``).

Errors: ``ConfigError`` (2) from ``IdentityPolicy.validate`` / ``policies_from_options``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from cryptography import x509

from builder.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cryptography.x509 import Certificate

#: OIDC issuer of GitHub Actions ID tokens.
GITHUB_ACTIONS_ISSUER = "https://token.actions.githubusercontent.com"
#: OIDs of the Fulcio issuer extensions (sigstore/fulcio docs/oid-info.md): v1 raw string, v2 DER UTF8String.
OID_ISSUER_V1 = "1.3.6.1.4.1.57264.1.1"
OID_ISSUER_V2 = "1.3.6.1.4.1.57264.1.8"


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
        issuer = der_utf8(raw) if der else raw.decode(errors="replace")
        if issuer:
            break
    return idents, issuer


def der_utf8(raw: bytes) -> str | None:
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


class CertificatePolicy:
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
