"""What a policy decides on: evidence about one digest (gathered by ``builder.promote``) and the
context of one decision. Frozen values only; nothing here reads a registry or judges anything.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import datetime as dt
    from collections.abc import Iterator, Mapping


@dataclasses.dataclass(frozen=True)
class SignatureEvidence:
    """One signature found on the digest. ``signer``: key fingerprint ``sha256:<hex>`` (key mode) or
    ``None``; ``identity``: ``(issuer, subject)`` for keyless; ``verified``: the signature checked
    against a known key and names this digest; ``reason``: why not, when not verified;
    ``untrusted``: well formed, but by a key or identity the policy does not list; ``role``: why
    builder wrote it, as its signed payload states (``builder.labels.SIGNATURE_ROLE``):
    ``promotion`` for the signature a promotion writes for the copy's new identity, which says
    "promoted here", never "built by us"; None for an image signature."""

    signer: str | None
    verified: bool
    reason: str = ""
    identity: tuple[str, str] | None = None
    untrusted: bool = False
    role: str | None = None


@dataclasses.dataclass(frozen=True)
class AttestationEvidence:
    """One in-toto attestation found on the digest (already DSSE-verified by ``builder.signing.verify``).

    ``predicate`` is the decoded predicate (a JSON object); ``subject_digests`` the statement's
    subject digests (``sha256:<hex>``); ``signer``/``identity``/``verified``/``reason``/``untrusted``
    as for ``SignatureEvidence``. In-toto statement: https://github.com/in-toto/attestation/tree/main/spec/v1"""

    predicate_type: str
    predicate: Mapping[str, Any]
    signer: str | None
    verified: bool
    reason: str = ""
    identity: tuple[str, str] | None = None
    subject_digests: tuple[str, ...] = ()
    untrusted: bool = False


@dataclasses.dataclass(frozen=True)
class FleetEvidence:
    """Compatibility of the digest with one cluster of a fleet file (computed outside the policy,
    by the fleet checker ``builder.promote`` is given).

    ``fleet``: the fleet file as the policy names it (resolved path); ``verdict``: ``ok`` |
    ``minor-version-compat`` | ``forward-compat`` | ``blocked`` | ``error``; ``applies``: the
    cluster's vendor is the one the image is built for (CPU images: every cluster)."""

    fleet: str
    cluster: str
    verdict: str
    reason: str = ""
    applies: bool = True


@dataclasses.dataclass(frozen=True)
class Evidence:
    """Everything a policy may look at for one promotion of ``digest`` into ``stage``.

    ``repository``: ``registry/repository`` the evidence was read from; ``problems``: evidence that
    could not be read (e.g. the ``.att`` manifest was unreadable); ``fleet``: per-cluster verdicts
    for every fleet the stage's rules name (missing = deny); ``ticket``: the change ticket given;
    ``baseline_digest`` / ``baseline``: what the target stage holds and its attestations."""

    repository: str
    digest: str
    stage: str
    signatures: tuple[SignatureEvidence, ...] = ()
    attestations: tuple[AttestationEvidence, ...] = ()
    fleet: tuple[FleetEvidence, ...] = ()
    ticket: str | None = None
    problems: tuple[str, ...] = ()
    #: the digest the target stage holds now (None: empty) and its attestations, read only when a rule
    #: compares with it (``benchmark: {against: stage}``)
    baseline_digest: str | None = None
    baseline: tuple[AttestationEvidence, ...] = ()

    def verified_attestations(self, predicate_type: str) -> Iterator[AttestationEvidence]:
        """Verified attestations of ``predicate_type`` whose subject names this digest."""
        for a in self.attestations:
            if a.predicate_type == predicate_type and a.verified and self.digest in a.subject_digests:
                yield a


@dataclasses.dataclass(frozen=True)
class Context:
    """What rules see: the stage, the stage it takes digests from (``BUILD_STAGE`` for builds),
    the time of the decision (aware datetime), the evidence, and ``names``: key fingerprint ->
    the name the policy gives it (approver or key set; ``builder.policy.signers.key_names``),
    for the reasons people read."""

    stage: str
    from_stage: str
    now: dt.datetime
    evidence: Evidence
    names: Mapping[str, str] = dataclasses.field(default_factory=dict)
