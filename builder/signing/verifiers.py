"""Layer verifiers: who may have made a signature, and the verdict on one signature.

A verifier checks one signature over ``data`` (simple-signing payload, or DSSE PAE bytes) and
answers a ``LayerCheck``. ``KeyVerifier`` checks public keys (cosign ``--key`` semantics,
https://docs.sigstore.dev/cosign/verifying/verify/); ``builder.signing.keyless`` adds a keyless
verifier with the same protocol. Pure: no I/O, never raises for bad content.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Protocol

from builder.signing.fingerprints import short_fingerprint
from builder.signing.layer import CERTIFICATE_ANNOTATION, SIGNER_HINT_ANNOTATION

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from builder.signing.keys import PublicKey

#: How ``builder.signing.keyless`` words a certificate (chain, SCT and log entry verified) whose identity
#: matches none of the given --identity/--issuer policies: an untrusted signer, not tampering.
IDENTITY_MISMATCH = "which no allowed identity matches"

#: How a keyless signature (a Fulcio certificate, legacy layer or Sigstore bundle) reads when only keys
#: were given: no key can check it, only an identity policy can (``builder verify --identity/--issuer``,
#: a policy's keyless ``issuer``/``subject`` entry; docs/keyless.md).
#: The other way round: a key-pair signature when only identities were given (``--identity``/``--issuer``).
KEY_NOT_CHECKED = "key-pair signature (no certificate): no identity verifies it, its public key (--key) does"

KEYLESS_NOT_CHECKED = (
    "keyless Sigstore signature (a Fulcio certificate, no key): no key verifies it, an allowed identity "
    "(issuer and subject) does"
)


@dataclasses.dataclass(frozen=True)
class LayerCheck:
    """A verifier's answer for one signature: ``ok``; ``signer`` (fingerprint or identity);
    ``reason`` (why not, empty when ok); ``time`` (RFC 3339, when known: keyless integrated time);
    ``untrusted``: not ok, but a well-formed signature by a key or identity that was not given
    (cosign semantics: other signers are allowed; not a sign of tampering)."""

    ok: bool
    signer: str | None = None
    reason: str = ""
    time: str | None = None
    untrusted: bool = False


class LayerVerifier(Protocol):
    """Checks one signature over ``data`` (simple-signing payload, or DSSE PAE bytes).

    Returns None when the layer is not for this kind of verifier (e.g. a keyless layer and a
    key verifier), else a LayerCheck.
    """

    def check(self, data: bytes, signature: bytes, annotations: Mapping[str, str]) -> LayerCheck | None: ...


@dataclasses.dataclass(frozen=True)
class KeyVerifier:
    """Verifies ECDSA P-256 signatures against any of ``keys`` (cosign ``--key`` semantics).

    A signature that verifies with none of them: ``invalid`` (not untrusted) when the layer's
    ``dev.builder-project/signer`` annotation names one of ``keys`` (that key's own layer, edited);
    otherwise ``untrusted`` (another signer, or a layer naming none, as cosign writes it), with the
    claimed fingerprint as ``signer``, unverified. The caller still checks the layer is well formed
    (payload parses, names the digest, blob matches its descriptor): anything malformed is invalid.
    With no ``keys`` (only identities given): a keyless layer is not its business (None), a key-pair
    one is ``untrusted`` (:data:`KEY_NOT_CHECKED`), so it is listed, never counted, never "missing"."""

    keys: tuple[PublicKey, ...]

    def check(self, data: bytes, signature: bytes, annotations: Mapping[str, str]) -> LayerCheck | None:
        if not self.keys:
            if annotations.get(CERTIFICATE_ANNOTATION):
                return None
            claimed = annotations.get(SIGNER_HINT_ANNOTATION) or None
            return LayerCheck(False, signer=claimed, reason=KEY_NOT_CHECKED, untrusted=True)
        for key in self.keys:
            if key.verify(data, signature):
                return LayerCheck(True, signer=key.fingerprint)
        given = ", ".join(short_fingerprint(k.fingerprint) for k in self.keys)
        if annotations.get(CERTIFICATE_ANNOTATION):
            return LayerCheck(False, reason=KEYLESS_NOT_CHECKED, untrusted=True)
        hint = annotations.get(SIGNER_HINT_ANNOTATION, "")
        if hint and any(k.fingerprint == hint for k in self.keys):
            return LayerCheck(
                False,
                signer=hint,
                reason=f"signature does not match the key it names: payload or signature edited "
                f"(the layer names key {short_fingerprint(hint)}, which was given)",
            )
        # Not verifiable with what was given: a signer we were not told about (allowed, never
        # counted). The claim is the unsigned signer annotation: shown, never trusted.
        claim = (
            f"the layer claims {short_fingerprint(hint)} (unverified: that annotation is not signed)"
            if hint
            else "the layer names no signer, as cosign writes it (another key's signature, or a payload edited "
            "after signing: the two cannot be told apart without that key)"
        )
        return LayerCheck(
            False,
            signer=hint or None,
            reason=f"wrong key? none of the given keys ({given}) verifies this signature; {claim}",
            untrusted=True,
        )


def verifiers_for(keys: Iterable[PublicKey], extra: Iterable[LayerVerifier] = ()) -> tuple[LayerVerifier, ...]:
    """Key verifier for ``keys`` (if any) followed by ``extra`` verifiers (e.g. keyless)."""
    ks = tuple(keys)
    out: list[LayerVerifier] = [KeyVerifier(ks)] if ks else []
    out.extend(extra)
    return tuple(out)


def run_verifiers(
    verifiers: Sequence[LayerVerifier], data: bytes, signature: bytes, annotations: Mapping[str, str]
) -> LayerCheck:
    """First ok answer of ``verifiers``; else the first failure that is not merely "untrusted"
    (a verifier that found something wrong knows more than one that does not know the signer);
    else the first failure; else 'no verifier applies'."""
    failures: list[LayerCheck] = []
    for v in verifiers:
        res = v.check(data, signature, annotations)
        if res is None:
            continue
        if res.ok:
            return res
        if not res.untrusted and IDENTITY_MISMATCH in res.reason:
            res = dataclasses.replace(res, untrusted=True)  # keyless: a trusted chain, another identity
        failures.append(res)
    if failures:
        return next((f for f in failures if not f.untrusted), failures[0])
    return LayerCheck(False, reason="no key or identity given that applies to this signature")
