"""Verification results: one ``VerifiedItem`` per signature or attestation, and the ``VerificationReport``.

Classification (cosign semantics, https://docs.sigstore.dev/cosign/verifying/verify/: other
signers' layers are allowed): ``ok`` (valid, by a given key or identity), ``untrusted`` (well formed,
by a signer not given: never counted) or ``invalid`` (tampered or broken).

Errors: ``VerificationError`` (18) from ``VerificationReport.raise_for_failure``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from typing_extensions import TypedDict

from builder.errors import VerificationError
from builder.signing.fingerprints import short_fingerprint
from builder.signing.verifiers import IDENTITY_MISMATCH

Kind = Literal["signature", "attestation"]
Classification = Literal["ok", "untrusted", "invalid"]
Diagnosis = Literal["", "reference", "tampered", "not-signed", "wrong-key", "missing"]


class VerifiedItemDocument(TypedDict):
    """One signature or attestation in ``--json`` (:class:`VerifiedItem`): ``statement`` is the
    in-toto statement as signed (free-form: its predicate is whatever the attester wrote; None
    when unread or untrusted), ``classification`` the verdict, ``keyless`` true for a Sigstore
    certificate signature (checked only by ``--identity``/``--issuer``, never by a key), ``role``
    ``promotion`` for a promotion signature (written when a promotion copied the digest into
    another repository; never a build signature), else None."""

    kind: Kind
    ok: bool
    reason: str
    tag: str
    layer_digest: str
    signer: str | None
    predicate_type: str | None
    time: str | None
    statement: dict[str, Any] | None
    untrusted: bool
    classification: Classification
    keyless: bool
    role: str | None


class VerifyDocument(TypedDict):
    """``builder verify --json`` (on success; a failed verification prints the error document with
    the same facts under ``details``): the ``reference`` as given, its ``repository``, the
    ``digest`` checked and the ``tag`` given with it, ``ok``, the unmet requirements
    (``problems``), the predicate types required, every item, the one-word ``diagnosis``
    (empty when ok) and the signers not given that items claim (``other_signers``)."""

    reference: str
    repository: str
    digest: str
    tag: str | None
    ok: bool
    problems: list[str]
    required_predicate_types: list[str]
    items: list[VerifiedItemDocument]
    diagnosis: Diagnosis
    other_signers: list[str]


@dataclasses.dataclass(frozen=True)
class VerifiedItem:
    """One signature or attestation layer and the verdict on it.

    ``kind``: ``signature`` | ``attestation``; ``ok``; ``reason`` (why it failed, "" when ok);
    ``signer``: key fingerprint or keyless identity (when known, also for failures that name a
    key); ``predicate_type`` and ``statement`` (attestations whose envelope could be read);
    ``time``: RFC 3339 when known (predicate timestamps, keyless integrated time; None for
    key-pair signatures, which carry no time); ``tag`` and ``layer_digest`` locate the layer;
    ``untrusted``: not ok, but a well-formed signature (for this digest) by a key or identity that
    was not given; ``signer`` then is the fingerprint the layer's ``dev.builder-project/signer``
    annotation claims (unverified: the annotation is not signed; None for cosign-written layers,
    which name no key) or the keyless identity. Such items never count, and never carry a
    ``statement`` (unverified content). ``keyless``: a Sigstore certificate signature (legacy
    layer or bundle), which only an identity policy (``--identity``/``--issuer``) can check.
    ``role``: for an ok signature, why builder wrote it as its signed payload states
    (``builder.labels.SIGNATURE_ROLE``): ``promotion`` for the signature a promotion writes for
    the copy's new identity (a promotion signature: never a build signature); None for an image
    signature.
    """

    kind: Kind
    ok: bool
    reason: str
    tag: str
    layer_digest: str
    signer: str | None = None
    predicate_type: str | None = None
    time: str | None = None
    statement: Mapping[str, Any] | None = None
    untrusted: bool = False
    keyless: bool = False
    role: str | None = None

    def __post_init__(self) -> None:
        if not self.ok and not self.untrusted and IDENTITY_MISMATCH in self.reason:
            object.__setattr__(self, "untrusted", True)  # keyless items built outside check_*_layer

    @property
    def verified(self) -> bool:
        return self.ok

    @property
    def is_promotion(self) -> bool:
        """A verified signature a promotion wrote (signed payload names the promotion role)."""
        from builder.labels import PROMOTION_ROLE

        return self.ok and self.kind == "signature" and self.role == PROMOTION_ROLE

    @property
    def is_bundle(self) -> bool:
        """True for a Sigstore bundle referrer (cosign 3's format): its ``tag`` reads
        ``sha256-<hex> -> <referrer digest>`` (``builder.signing.bundles``), a legacy layer's is the
        ``.sig``/``.att`` tag."""
        return " -> " in self.tag

    @property
    def classification(self) -> Classification:
        """``ok`` (valid, by a given key/identity), ``untrusted`` (valid-looking, by a signer not
        given: allowed, never counted) or ``invalid`` (tampered or broken)."""
        return "ok" if self.ok else "untrusted" if self.untrusted else "invalid"

    @property
    def predicate(self) -> Mapping[str, Any] | None:
        if self.statement is None:
            return None
        p = self.statement.get("predicate")
        return p if isinstance(p, dict) else None

    def to_json(self) -> VerifiedItemDocument:
        return {
            "kind": self.kind,
            "ok": self.ok,
            "reason": self.reason,
            "tag": self.tag,
            "layer_digest": self.layer_digest,
            "signer": self.signer,
            "predicate_type": self.predicate_type,
            "time": self.time,
            "statement": dict(self.statement) if self.statement is not None else None,
            "untrusted": self.untrusted,
            "classification": self.classification,
            "keyless": self.keyless,
            "role": self.role,
        }


@dataclasses.dataclass(frozen=True)
class VerificationReport:
    """Result of ``verify_image``: the reference asked for, the digest checked, every item, and
    ``problems`` (unmet requirements, each a sentence). ``ok`` when there are no problems."""

    reference: str
    repository: str
    digest: str
    items: tuple[VerifiedItem, ...]
    problems: tuple[str, ...]
    required_predicate_types: tuple[str, ...] = ()
    tag: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def other_signers(self) -> tuple[str, ...]:
        """Fingerprints / identities that ``untrusted`` items (signers not given) claim, in first-seen
        order: key fingerprints come from the unsigned signer annotation and are unverified;
        cosign-written layers name none and are not listed."""
        return tuple(dict.fromkeys(i.signer for i in self.items if i.untrusted and i.signer))

    @property
    def diagnosis(self) -> Diagnosis:
        """Why the report is not ok, in one word: ``""`` (ok), ``reference`` (the digest no longer
        resolves, or the tag moved), ``tampered`` (an invalid item), ``not-signed`` (nothing
        found), ``wrong-key`` (only signers that were not given), ``missing`` (otherwise: e.g. a
        required attestation type is absent)."""
        if self.ok:
            return ""
        if any(p.startswith(("digest ", "image replaced", "tag ", "registry answered")) for p in self.problems):
            return "reference"
        if any(i.classification == "invalid" for i in self.items):
            return "tampered"
        if not self.items:
            return "not-signed"
        if any(i.untrusted for i in self.items) and not any(i.ok for i in self.items):
            return "wrong-key"
        return "missing"

    @property
    def missing_predicate_types(self) -> tuple[str, ...]:
        """The ``required_predicate_types`` that no valid attestation has (in the order asked)."""
        valid = {i.predicate_type for i in self.items if i.ok and i.kind == "attestation"}
        return tuple(t for t in self.required_predicate_types if t not in valid)

    def missing_hint(self) -> str:
        """What to do when only required attestation types are missing (diagnosis ``missing``): the
        types missing, whether the signature is valid, and the types that are there (valid ones,
        then those by signers not given) - so "the type is absent" never reads as "the image is bad"."""
        missing = self.missing_predicate_types
        signed = any(i.ok and i.kind == "signature" for i in self.items)
        valid = sorted({i.predicate_type for i in self.items if i.ok and i.kind == "attestation" and i.predicate_type})
        others = sorted(
            {i.predicate_type for i in self.items if i.untrusted and i.kind == "attestation" and i.predicate_type}
            - set(valid)
        )
        head = "the signature is valid; " if signed else ""
        if not missing:
            return head + "a required item is missing: see the problems above"
        there = ", ".join(valid) or "none"
        return (
            f"{head}no attestation of type {', '.join(missing)} by the keys given. Valid attestation types "
            f"here: {there}"
            + (f"; by signers not given: {', '.join(others)}" if others else "")
            + ". Require one of those, or attest it (`builder attest REF --predicate-type TYPE ...`)"
        )

    def to_json(self) -> VerifyDocument:
        return {
            "reference": self.reference,
            "repository": self.repository,
            "digest": self.digest,
            "tag": self.tag,
            "ok": self.ok,
            "problems": list(self.problems),
            "required_predicate_types": list(self.required_predicate_types),
            "items": [i.to_json() for i in self.items],
            "diagnosis": self.diagnosis,
            "other_signers": list(self.other_signers),
        }

    def raise_for_failure(self) -> None:
        """Raise VerificationError (exit 18) naming every problem when ``ok`` is False; the hint
        follows ``diagnosis`` (wrong key given / not signed / tampered)."""
        if self.ok:
            return
        others = ", ".join([*(short_fingerprint(s) for s in self.other_signers), *unnamed_signers(self.items)])
        hint = {
            "wrong-key": f"the digest is signed, but only by keys or identities you did not pass (claimed: {others}): "
            "pass the matching public key (--key) or identity (--identity/--issuer); do not use it until one you "
            "trust verifies",
            "not-signed": "nothing has signed this digest: sign it (`builder sign REF --key KEY`), or check the "
            "reference (a rebuilt image has a new digest)",
            "missing": self.missing_hint() if self.diagnosis == "missing" else "",
        }.get(self.diagnosis)
        raise VerificationError(
            f"{self.reference} ({self.digest}) did not verify: " + "; ".join(self.problems),
            hint=hint,
            items=[i.to_json() for i in self.items],
            problems=list(self.problems),
            digest=self.digest,
            diagnosis=self.diagnosis,
            other_signers=list(self.other_signers),
            missing_predicate_types=list(self.missing_predicate_types),
        )


def unnamed_signers(items: Sequence[VerifiedItem]) -> list[str]:
    """The untrusted ``items`` that name no signer, counted by what they are: ``"N keyless
    certificate(s) (give --identity/--issuer)"`` (Sigstore certificate signatures, which no key
    checks) and ``"N unnamed key(s)"`` (key signatures whose layer names no key, as cosign writes
    them); [] when there are none."""
    unnamed = [i for i in items if i.untrusted and not i.ok and not i.signer]
    keyless = sum(1 for i in unnamed if i.keyless)
    out = [f"{keyless} keyless certificate(s) (give --identity/--issuer)"] if keyless else []
    if len(unnamed) > keyless:
        out.append(f"{len(unnamed) - keyless} unnamed key(s)")
    return out


#: The same value type as the report items; ``verified`` is an alias of ``ok``.
VerifiedAttestation = VerifiedItem


def describe_failures(items: Sequence[VerifiedItem]) -> str:
    """One phrase for items that are not ok, so "wrong key given" reads differently from
    "tampered": ``2 by keys or identities not given (claimed: sha256:ab12..., 1 unnamed key(s)), 1 invalid
    (tampered or broken)``; the claimed fingerprints are the layers' unsigned signer annotations."""
    untrusted = [i for i in items if not i.ok and i.untrusted]
    invalid = [i for i in items if not i.ok and not i.untrusted]
    parts: list[str] = []
    if untrusted:
        who = sorted({short_fingerprint(i.signer) for i in untrusted if i.signer}) + unnamed_signers(untrusted)
        parts.append(f"{len(untrusted)} by keys or identities not given (claimed: {', '.join(who)})")
    if invalid:
        parts.append(f"{len(invalid)} invalid (tampered or broken)")
    return ", ".join(parts) or "none"


# ---------------------------------------------------------------------------------------------
# Labels for people (``builder verify``'s table and summary)

def check_result(predicate: Mapping[str, Any] | None) -> str | None:
    """The ``result`` a device-check predicate states: ``passed``/``failed``/... (a mapping's
    ``status``/``outcome``; a boolean ``passed``), ``unknown`` when it states none, None for no
    predicate (docs/checks.md)."""
    if predicate is None:
        return None
    raw = predicate.get("result")
    if isinstance(raw, Mapping):
        raw = raw.get("status", raw.get("outcome"))
    if isinstance(raw, str) and raw:
        return raw
    passed = predicate.get("passed")
    if isinstance(passed, bool):
        return "passed" if passed else "failed"
    return "unknown"


def signer_label(signer: str | None, names: Mapping[str, str]) -> str:
    """``KEYFILE (sha256:<12 hex>)`` for a key given on the command line (``names``: fingerprint
    -> key file), the short fingerprint alone for another key, the identity for keyless
    signers, ``-`` when unknown."""
    if not signer:
        return "-"
    if names.get(signer):
        return f"{names[signer]} ({short_fingerprint(signer)})"
    return short_fingerprint(signer)
