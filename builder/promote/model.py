"""The promotion's values: the ``promotion/v1`` record, plans, applied promotions, batch outcomes,
status rows and history entries; where a stage keeps a variant and what is promoted
(``Location``, ``Target``) and the clock (``utcnow``) are ``builder.promote.location``'s, named here too.

All frozen; ``to_json()`` gives the ``--json`` document shapes (docs/promotion.md), declared in
``builder.promote.documents`` (imported here for type checking only: no TypedDict is created when
a command starts).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from builder.policy import parse_time

if TYPE_CHECKING:
    from builder.error_documents import ErrorBody
    from builder.errors import BuilderError
    from builder.policy import Decision, FleetEvidence
    from builder.promote.changes import PlanChanges
    from builder.promote.documents import (
        AppliedDocument,
        CopyCountsDocument,
        OutcomeDocument,
        PlanDocument,
        PromotionPredicate,
        PromotionRecordDocument,
        StageAfterDocument,
        StageHistoryDocument,
        StatusRowDocument,
    )
    from builder.promote.location import Location, Target
    from builder.registry import CopyStats, Manifest, RegistryClient

FleetChecker = Callable[["RegistryClient", str, str, str], "list[FleetEvidence]"]
"""(client, repository, digest, fleet file) -> one verdict per cluster of the fleet."""


class Unset(enum.Enum):
    """The type of ``UNSET``: an argument not given (distinct from ``None``, which is a value)."""

    UNSET = "unset"


UNSET = Unset.UNSET

ExpectPrevious = str | Unset | None
"""What a stage must still hold for an apply: a digest, ``None`` (empty), or ``UNSET`` (whatever
the plan saw)."""


def parse_expect_previous(text: str | None) -> ExpectPrevious:
    """``--expect-previous`` text: not given -> ``UNSET``; ``none`` -> ``None`` (the stage must be
    empty); else the digest itself."""
    if text is None:
        return UNSET
    return None if text == "none" else text


def fmt_time(t: dt.datetime) -> str:
    """RFC 3339 UTC with microseconds (records written in one second stay ordered)."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def short_age(seconds: float | None) -> str:
    """``seconds`` in the largest whole unit: ``3d``, ``5h``, ``12m``, ``40s``; ``-`` for None."""
    if seconds is None:
        return "-"
    s = int(seconds)
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s // n}{unit}"
    return f"{s}s"


def short_signer(signer: str | None) -> str:
    """A signer for people: a key fingerprint as ``SHA256:`` + 12 hex digits and ``…``
    (``builder.signing.keys.short_fingerprint``); a keyless identity as is."""
    from builder.signing.fingerprints import short_fingerprint

    if not signer:
        return "unknown signer"
    return short_fingerprint(signer)


@dataclasses.dataclass(frozen=True)
class PromotionRecord:
    """What a ``promotion/v1`` predicate says (docs/promotion.md). ``reference``: the stage pointer
    ``registry/repository:tag``; ``previous``: the digest the stage held before (None: first);
    ``action``: ``promote`` | ``rollback``; ``time``: RFC 3339. Read back: ``signer`` and
    ``layer`` (its .att layer digest)."""

    action: str
    variant: str
    stage: str
    from_stage: str
    reference: str
    digest: str
    previous: str | None
    allowed: bool
    reasons: tuple[str, ...]
    policy: str
    promoter: str
    promoter_name: str | None
    time: str
    ticket: str | None = None
    signer: str | None = None
    layer: str | None = None

    @property
    def when(self) -> dt.datetime:
        t = parse_time(self.time)
        return t if t is not None else dt.datetime.min.replace(tzinfo=dt.UTC)

    def predicate(self) -> PromotionPredicate:
        """The ``promotion/v1`` predicate (JSON object) this record is written as."""
        return {
            "action": self.action,
            "variant": self.variant,
            "stage": self.stage,
            "fromStage": self.from_stage,
            "reference": self.reference,
            "digest": self.digest,
            "previous": self.previous,
            "decision": {"allowed": self.allowed, "reasons": list(self.reasons), "policy": self.policy},
            "promoter": {"fingerprint": self.promoter, "name": self.promoter_name},
            "time": self.time,
            "ticket": self.ticket,
        }

    @classmethod
    def from_predicate(
        cls, p: Mapping[str, Any], *, signer: str | None = None, layer: str | None = None
    ) -> PromotionRecord | None:
        """Parse a predicate; None when a required field is missing or mistyped."""
        decision = p.get("decision") or {}
        promoter = p.get("promoter") or {}
        prev = p.get("previous")
        keys = ("action", "variant", "stage", "fromStage", "reference", "digest", "time")
        fields = tuple(p.get(k) for k in keys)
        if not isinstance(decision, Mapping) or not isinstance(promoter, Mapping):
            return None
        if not all(isinstance(x, str) for x in fields) or not (prev is None or isinstance(prev, str)):
            return None
        name = promoter.get("name")
        ticket = p.get("ticket")
        return cls(
            action=p["action"],
            variant=p["variant"],
            stage=p["stage"],
            from_stage=p["fromStage"],
            reference=p["reference"],
            digest=p["digest"],
            previous=prev,
            allowed=bool(decision.get("allowed")),
            reasons=_reason_texts(decision.get("reasons")),
            policy=str(decision.get("policy") or ""),
            promoter=str(promoter.get("fingerprint") or ""),
            promoter_name=name if isinstance(name, str) else None,
            time=p["time"],
            ticket=ticket if isinstance(ticket, str) else None,
            signer=signer,
            layer=layer,
        )

    def to_json(self) -> PromotionRecordDocument:
        return {
            "action": self.action,
            "variant": self.variant,
            "stage": self.stage,
            "from_stage": self.from_stage,
            "reference": self.reference,
            "digest": self.digest,
            "previous": self.previous,
            "allowed": self.allowed,
            "reasons": list(self.reasons),
            "policy": self.policy,
            "promoter": self.promoter,
            "promoter_name": self.promoter_name,
            "time": self.time,
            "ticket": self.ticket,
            "signer": self.signer,
            "layer": self.layer,
        }


def _reason_texts(value: object) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        return tuple(str(r) for r in value)
    return ()


@dataclasses.dataclass(frozen=True)
class PointerTrust:
    """What a stage pointer names and whether a trusted record says so. ``digest``: what the tag
    names (None: no tag); ``record``: the latest trusted ``promotion/v1`` record that put it there;
    ``foreign``: who signed the other promotion records on it (they do not count)."""

    pointer: Location
    digest: str | None
    record: PromotionRecord | None
    foreign: tuple[str, ...] = ()
    # a trusted record newer than ``record`` that moved the pointer away from ``digest`` (the
    # digest was replaced there later and no signed rollback returned it): a re-tag back
    superseded: PromotionRecord | None = None
    # where this machine keeps ``superseded`` when only it remembers that move (the registry no longer
    # shows its record: builder.promote.newest_seen); None: the registry shows it
    seen_file: str | None = None

    @property
    def trusted(self) -> bool:
        """No tag, or a trusted record says the tag names this digest and no newer record moved
        the stage away from it (monotonic: the pointer's record is the newest of the chain)."""
        return self.digest is None or (self.record is not None and self.superseded is None)

    def note(self, promoters: Sequence[str] = (), *, short: bool = False) -> str:
        """Why the pointer is not trusted (empty when it is): the plan's ``chain`` row, ``resolve``
        and ``rollback`` name the pointer and the full digest; ``short`` (``status`` and
        ``history``, which show the pointer already) the short digest."""
        if self.trusted or self.digest is None:
            return ""
        who = f" ({', '.join(promoters)})" if promoters else ""
        what = f"untrusted: names {self.digest[:19]}…" if short else f"{self.pointer} names {self.digest}"
        if self.record is not None and self.superseded is not None:
            later = self.superseded
            return (
                f"{what}, which a newer record moved the stage away from ({later.action} to "
                f"{later.digest[:19]}… at {later.time}): no signed rollback record returns it, the tag "
                f"was moved back outside builder (chain: {self.digest[:19]}… {self.record.time} -> "
                f"{later.digest[:19]}… {later.time} -> pointer back on {self.digest[:19]}…)"
                + (
                    f"; that move is remembered by this machine ({self.seen_file}), the registry no longer "
                    "shows its record (an older .att manifest put back?); if the registry was restored on "
                    "purpose, check `builder history` and delete that file"
                    if self.seen_file
                    else ""
                )
            )
        text = f"{what} but no promotion record by a trusted promoter{who} says so: "
        if self.foreign:
            return text + "promotion record(s) there are signed by " + "; ".join(self.foreign)
        return text + "it carries no promotion record for this pointer (moved outside builder?)"


@dataclasses.dataclass(frozen=True)
class Plan:
    """A planned promotion: ``digest`` from ``source`` into ``destination`` (the stage pointer),
    which now holds ``previous``; ``decision`` says whether policy allows it and why."""

    target: Target
    stage: str
    from_stage: str
    source: Location
    digest: str | None
    destination: Location
    previous: str | None
    decision: Decision
    ticket: str | None = None
    present: bool = False  # the destination repository already holds the digest's manifest
    manifest: Manifest | None = dataclasses.field(default=None, repr=False)  # the source manifest, as stored
    # the source's .sig/.att manifests as the plan read them (None: absent), reused by the copy
    evidence_manifests: Mapping[str, Manifest | None] | None = dataclasses.field(default=None, repr=False)
    # a trusted promotion record says the pointer names `previous` (True when the pointer is empty);
    # False: moved outside builder or by a promoter this policy does not list (the plan then carries
    # a failing `chain` row, and `already` is False)
    trusted: bool = True
    untrusted_signers: tuple[str, ...] = ()  # who signed the promotion records that do not count

    @property
    def already(self) -> bool:
        """The stage already names this digest, and a trusted record says so (applying completes or
        records nothing new)."""
        return self.digest is not None and self.previous == self.digest and self.trusted

    def to_json(self) -> PlanDocument:
        return {
            "variant": self.target.variant,
            "stage": self.stage,
            "from_stage": self.from_stage,
            "source": self.target.given or str(self.source),  # the reference the user gave
            "digest": self.digest,
            "destination": str(self.destination),
            "previous": self.previous,
            "already": self.already,
            "trusted": self.trusted,
            "untrusted_signers": list(self.untrusted_signers),
            "ticket": self.ticket,
            "allowed": self.decision.allowed,
            "decision": self.decision.to_json(),
        }


@dataclasses.dataclass(frozen=True)
class CopyCounts:
    """What a promotion's copy did: blobs ``mounted`` (same registry), ``copied`` (``copied_bytes``
    bytes) or already ``present``; ``manifests`` written."""

    mounted: int = 0
    copied: int = 0
    copied_bytes: int = 0
    present: int = 0
    manifests: int = 0

    @classmethod
    def of(cls, *stats: CopyStats) -> CopyCounts:
        """The sum of registry copy accumulators."""
        return cls(
            mounted=sum(s.mounted for s in stats),
            copied=sum(s.copied for s in stats),
            copied_bytes=sum(s.copied_bytes for s in stats),
            present=sum(s.present for s in stats),
            manifests=sum(s.manifests for s in stats),
        )

    def to_json(self) -> CopyCountsDocument:
        return {
            "mounted": self.mounted,
            "copied": self.copied,
            "copied_bytes": self.copied_bytes,
            "present": self.present,
            "manifests": self.manifests,
        }


@dataclasses.dataclass(frozen=True)
class Applied:
    """A promotion or rollback that happened. ``completed``: a re-run finished an interrupted one
    (the tag already named the digest and a record or ledger row was missing; the stage holding
    the digest with nothing written is not completed: ``plan.previous == plan.digest``); ``copy``:
    what the copy did; ``seconds``: wall time."""

    plan: Plan
    record: PromotionRecord
    seconds: float
    completed: bool = False
    copy: CopyCounts | None = None
    ledger_seq: int | None = None

    def to_json(self) -> AppliedDocument:
        return {
            **self.plan.to_json(),
            "applied": True,
            "completed": self.completed,
            "record": self.record.to_json(),
            "seconds": round(self.seconds, 4),
            "copy": (self.copy or CopyCounts()).to_json(),
            "ledger_seq": self.ledger_seq,
            "pinned": self.plan.destination.pinned(self.record.digest),
        }


@dataclasses.dataclass(frozen=True)
class StageAfter:
    """What a stage's pointer tag named when read right after a failed apply: ``digest`` (None:
    no tag, the stage is empty), or ``unread``: why it could not be read (the registry's
    error message), then nothing is known of it."""

    digest: str | None
    unread: str | None = None


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One target's result in a batch: a plan (dry run), an applied promotion, or an error.
    ``after``: for an allowed plan whose apply failed (``--confirm``), what the stage's pointer
    named when read after the failure (:class:`StageAfter`)."""

    target: Target
    plan: Plan | None = None
    applied: Applied | None = None
    error: BuilderError | None = None
    changes: PlanChanges | None = None  # the dry run's comparison with the stage's digest
    after: StageAfter | None = None

    @property
    def apply_failed(self) -> bool:
        """An allowed plan that --confirm tried to apply and that failed (not a policy denial)."""
        return self.after is not None

    @property
    def ok(self) -> bool:
        if self.error is not None:
            return False
        return self.applied is not None or (self.plan is not None and self.plan.decision.allowed)

    @property
    def verb(self) -> str:
        """What happened, for people: ``promoted``, ``not promoted`` (the apply failed),
        ``would promote`` (an allowed dry run), ``denied`` or ``error`` (no plan)."""
        if self.plan is None:
            return "error"
        if self.applied is not None:
            return "promoted"
        if self.apply_failed:
            return "not promoted"
        return "would promote" if self.plan.decision.allowed else "denied"

    def to_json(self) -> OutcomeDocument:
        if self.applied is not None:
            return self.applied.to_json()
        if self.plan is None:
            if self.error is None:
                raise ValueError(f"the outcome of {self.target.variant} has neither a plan nor an error")
            return {"variant": self.target.variant, "applied": False, "error": self.error.to_json()}
        if self.error is not None and self.after is not None:
            after: StageAfterDocument = {"digest": self.after.digest, "unread": self.after.unread}
            return {**self.plan.to_json(), "applied": False, "error": self.error.to_json(), "stage_after": after}
        if self.error is not None:
            return {**self.plan.to_json(), "applied": False, "error": self.error.to_json()}
        if self.changes is not None:
            return {**self.plan.to_json(), "applied": False, "changes": self.changes.to_json()}
        return {**self.plan.to_json(), "applied": False}


@dataclasses.dataclass(frozen=True)
class StatusRow:
    """One variant x stage of ``status``: the pointer, the digest it names (None: no tag), since
    when (``since``, RFC 3339; ``age_seconds``) and by whom (its trusted record), verified
    signatures and attestation types on the digest; ``note``: why it is untrusted; ``error``: why
    it could not be read (None: it was)."""

    variant: str
    stage: str
    pointer: str
    digest: str | None
    since: str | None
    age_seconds: float | None
    action: str | None
    promoter: str | None
    signatures: int = 0
    attestations: tuple[str, ...] = ()
    note: str = ""
    error: ErrorBody | None = None

    @property
    def age(self) -> str:
        """How long the pointer has named its digest, in the largest whole unit (``3d``, ``5h``,
        ``12m``, ``40s``); ``-`` when unknown."""
        return short_age(self.age_seconds)

    @property
    def trusted(self) -> bool | None:
        """True when a trusted promotion record explains the digest, False when the pointer names a
        digest none explains (``note`` says why), None when there is no pointer or it was not read."""
        if self.digest is None or self.error is not None:
            return None
        return not self.note

    @property
    def attestation_names(self) -> tuple[str, ...]:
        """The attestation types by the names people read (``device-check``, ``slsa-provenance``,
        ``cyclonedx-sbom``: :func:`builder.predicates.display_name`, as ``verify`` names them)."""
        from builder.predicates import display_name

        return tuple(display_name(t) for t in self.attestations)

    def to_json(self) -> StatusRowDocument:
        return {
            "variant": self.variant,
            "stage": self.stage,
            "pointer": self.pointer,
            "digest": self.digest,
            "since": self.since,
            "age_seconds": self.age_seconds,
            "action": self.action,
            "promoter": self.promoter,
            "signatures": self.signatures,
            "attestations": list(self.attestations),
            "note": self.note,
            "trusted": self.trusted,
            "error": self.error,
        }


@dataclasses.dataclass(frozen=True)
class StageHistory:
    """One stage of ``history``: its pointer (None: never promoted), the trusted records newest
    first with who signed each (``by``, for people), the digest the pointer names and, when no
    trusted record explains it, why (``note``); ``error``: why it could not be read (None: it was)."""

    stage: str
    pointer: str | None
    records: tuple[tuple[PromotionRecord, str], ...] = ()
    digest: str | None = None
    note: str | None = None
    error: ErrorBody | None = None
    gap: str | None = None  # where the chain breaks before the first promotion (None: it does not)

    def to_json(self) -> StageHistoryDocument:
        out: StageHistoryDocument = {
            "stage": self.stage,
            "pointer": self.pointer,
            "records": [{**r.to_json(), "by": by} for r, by in self.records],
        }
        if self.error is not None:
            out["error"] = self.error
            return out
        if self.pointer is None:
            return out
        out["digest"] = self.digest
        if not self.records or self.note:
            out["note"] = self.note
        if self.gap:
            out["gap"] = self.gap
        return out
