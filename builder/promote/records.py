"""Promotion records in the registry: the signed ``promotion/v1`` attestations on a digest, which of
them count (verified, signed by a promoter or a listed roll-backer of the stage, naming this
digest and pointer), whether a stage pointer is trusted, and the history chain through the
records' ``previous`` digests.

Reads only the registry, so every query works on a fresh machine. Errors: registry errors
(exit 5-7) propagate; NotFoundError for an unknown stage or a pointer that does not exist.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from builder.errors import NotFoundError
from builder.predicates import PROMOTION_V1
from builder.promote.evidence import keyless_identity
from builder.promote.model import UNSET, PointerTrust, PromotionRecord, Unset, short_signer
from builder.promote.pool import map_parallel
from builder.registry.reference import canonical_reference
from builder.signing.layer import ATT_SUFFIX, PREDICATE_TYPE_ANNOTATION, evidence_layers, signature_tag
from builder.signing.verifiers import verifiers_for
from builder.signing.verify import verify_layer

if TYPE_CHECKING:
    import datetime as dt

    from builder.promote.context import PromotionContext
    from builder.promote.location import Location, Target
    from builder.promote.verdict_cache import VerdictCache
    from builder.registry import Manifest


@dataclasses.dataclass(frozen=True)
class RecordsOn:
    """The ``promotion/v1`` layers on one digest for one stage pointer. ``records``: trusted
    records that put the digest into the pointer, oldest first; ``successors``: trusted records of
    the moves that later replaced the digest there (written on the replaced digest after each tag
    move, same predicate: ``previous`` is this digest, ``digest`` the one that replaced it), oldest
    first; ``foreign``: who signed the layers that do not count (text, deduplicated)."""

    records: tuple[PromotionRecord, ...]
    successors: tuple[PromotionRecord, ...] = ()
    foreign: tuple[str, ...] = ()


def read_records(ctx: PromotionContext, loc: Location, digest: str, stage: str) -> list[PromotionRecord]:
    """Trusted ``promotion/v1`` records on ``digest`` in ``loc``'s repository for ``loc`` (the
    stage pointer): verified, signed by a promoter (or a listed roll-backer), naming this digest
    and pointer. Oldest first."""
    return list(records_on(ctx, loc, digest, stage).records)


def records_on(
    ctx: PromotionContext,
    loc: Location,
    digest: str,
    stage: str,
    *,
    att: Manifest | Unset | None = UNSET,
    verdicts: VerdictCache | None = None,
) -> RecordsOn:
    """Every ``promotion/v1`` layer on ``digest`` for the pointer ``loc``, sorted into the records
    that put it there, the successor records of the moves that replaced it, and, for every other
    layer, who signed it (as text: ``sha256:…`` with the key set it belongs to, or what the layer
    claims): the records that do not count, for the note on an untrusted pointer. ``att``: the
    digest's ``.att`` manifest in ``loc``'s repository as this run already read it (None: absent),
    not read again; its layers are verified here all the same (``verdicts``: answered from this
    cache when verified before with the same trust, ``builder.promote.verdict_cache``)."""
    signers = ctx.record_signers(stage)
    client = ctx.client(loc.registry)
    tag = signature_tag(digest, ATT_SUFFIX)
    if isinstance(att, Unset):
        att = client.try_get_manifest(loc.repository, tag)
    # only layers announcing promotion/v1 are verified (the signed statement must say so too:
    # check_attestation_layer rejects an annotation that differs from the signed type)
    layers = [
        d
        for d in evidence_layers(att.json if att is not None else None, f"{loc.registry}/{loc.repository}:{tag}")
        if (d.get("annotations") or {}).get(PREDICATE_TYPE_ANNOTATION) == PROMOTION_V1
    ]
    verifiers = verifiers_for(ctx.keys, ctx.verifiers)
    check = verdicts.verify_layer if verdicts is not None else verify_layer
    items = map_parallel(lambda d: check(client, loc.repository, digest, d, verifiers, tag=tag), layers)
    out: list[PromotionRecord] = []
    successors: list[PromotionRecord] = []
    foreign: list[str] = []
    for it in items:
        ident = keyless_identity(it.signer)
        if not it.ok:
            if it.untrusted:
                claim = f"{short_signer(it.signer)} (claimed, unverified)" if it.signer else "an unnamed key"
                foreign.append(f"{claim}, a key this policy does not list")
            else:
                foreign.append(f"{short_signer(it.signer)} (does not verify: {it.reason})")
            continue
        rec = (
            PromotionRecord.from_predicate(it.predicate, signer=it.signer, layer=it.layer_digest)
            if it.predicate
            else None
        )
        # one registry under two spellings (localhost:5000 / 127.0.0.1:5000) is one pointer
        if rec is None or rec.stage != stage or canonical_reference(rec.reference) != canonical_reference(str(loc)):
            continue
        successor = rec.digest != digest and rec.previous == digest
        if rec.digest != digest and not successor:
            continue
        if not any(s.match(it.signer, ident) for s in signers):
            sets = [s.name for s in ctx.policy.keysets if s.match(it.signer, ident)]
            named = ctx.name_of(it.signer or "")
            where = f"key set {', '.join(sets)}" if sets else (f"approver {named}" if named else "listed")
            foreign.append(f"{short_signer(it.signer)} ({where}, not a promoter of {stage})")
            continue
        (successors if successor else out).append(rec)
    out.sort(key=lambda r: r.when)
    successors.sort(key=lambda r: r.when)
    return RecordsOn(tuple(out), tuple(successors), tuple(dict.fromkeys(foreign)))


def pointer_trust(
    ctx: PromotionContext,
    loc: Location,
    stage: str,
    digest: str | Unset | None = UNSET,
    *,
    att: Manifest | Unset | None = UNSET,
    on: RecordsOn | None = None,
    verdicts: VerdictCache | None = None,
) -> PointerTrust:
    """Read the pointer ``loc`` (unless ``digest``, what it names, is given) and its records
    (``att``: the digest's ``.att`` manifest as already read, see :func:`records_on`; ``on``: the
    records on ``digest`` as already read and sorted, e.g. ``Chain.head``; ``verdicts``: see
    :func:`records_on`).
    The pointer is trusted only when the newest trusted record about its digest is one that put
    the digest there: a successor record newer than that (the stage moved on, and no signed
    rollback came back), or such a move away this machine saw (``ctx.seen``,
    :meth:`builder.promote.newest_seen.NewestSeen.moved_away`: a replayed ``.att``; then
    ``PointerTrust.seen_file`` names where it is kept), makes it a re-tag back
    (``PointerTrust.superseded``). Every trusted record read is remembered as a move away from its
    ``previous`` digest (:meth:`builder.promote.newest_seen.NewestSeen.offer`)."""
    if isinstance(digest, Unset):
        digest = ctx.client(loc.registry).try_resolve(loc.repository, loc.pointer_tag)
    if digest is None:
        return PointerTrust(loc, None, None)
    if on is None:
        on = records_on(ctx, loc, digest, stage, att=att, verdicts=verdicts)
    rec = on.records[-1] if on.records else None
    later = [s for s in on.successors if rec is not None and s.when > rec.when]
    superseded = later[-1] if later else None
    seen_file = None
    if rec is not None:
        for moved in on.successors:  # moves away from this digest, remembered should they vanish
            ctx.seen.offer(moved)
        if superseded is None:  # what the registry shows may be a replay: a move away seen here says so
            superseded = ctx.seen.moved_away(rec)
            if superseded is None:
                ctx.seen.offer(rec)
            else:
                seen_file = str(ctx.seen.path(rec.reference) or "this run's memory")
    return PointerTrust(loc, digest, rec, on.foreign, superseded, seen_file)


def current_record(
    ctx: PromotionContext, loc: Location, digest: str, stage: str, *, before: dt.datetime | None = None
) -> PromotionRecord | None:
    """The latest trusted record that put ``digest`` into the pointer (before ``before``)."""
    recs = [r for r in read_records(ctx, loc, digest, stage) if before is None or r.when < before]
    return recs[-1] if recs else None


@dataclasses.dataclass(frozen=True)
class Chain:
    """A stage pointer's chain of trusted records, newest first (cycles appear as they happened:
    every promotion and rollback has its own record). ``gap``: the digest where the chain breaks
    (a record's ``previous`` with no trusted record older than it; None: the chain reaches the
    first promotion, or ``limit`` records were read). ``forks``: the registry-only mode's
    after-the-fact detection of lost promotions (each replaced digest carries one successor record
    per move away from it, written after the tag moved). ``digest``: what the pointer named and
    ``head``: the records on it, as read for the chain (for :func:`pointer_trust` to reuse)."""

    pointer: Location
    records: tuple[PromotionRecord, ...]
    gap: str | None = None
    # every fork found: a digest moved away from twice from one entry into the stage (two
    # machines' promotions interleaved and one overwrote the other), as text naming both moves
    forks: tuple[str, ...] = ()
    digest: str | None = None
    head: RecordsOn | None = None


def _forks(on: RecordsOn, entry: PromotionRecord) -> str | None:
    """Two or more successor records of one entry of ``entry.digest`` (after it, before the next
    entry): the stage moved away from the digest twice, so one move was overwritten."""
    later = [r.when for r in on.records if r.when > entry.when]
    until = min(later) if later else None
    moves = {(s.digest, s.time): s for s in on.successors if s.when > entry.when and (until is None or s.when < until)}
    if len(moves) < 2:
        return None
    text = " and ".join(
        f"to {s.digest[:19]}… at {s.time} ({s.action})" for s in sorted(moves.values(), key=lambda r: r.when)
    )
    return (
        f"fork at {entry.digest[:19]}… (entered {entry.time}): the stage moved from it {text}; one of these "
        "promotions was overwritten by the other (concurrent writers without a shared lock)"
    )


def chain(
    ctx: PromotionContext,
    target: Target,
    stage: str,
    *,
    limit: int = 100,
    digest: str | None = None,
    verdicts: VerdictCache | None = None,
) -> Chain:
    """The stage pointer's chain of records, newest first, read from the registry alone: the record
    on the digest the tag names (``digest``: as the caller just read the tag; else read here), then
    the record on its ``previous`` digest older than it, ... (``verdicts``: see :func:`records_on`).
    Raises NotFoundError when the stage holds no digest for the variant."""
    loc = ctx.stage_location(target, stage)
    if digest is None:
        digest = ctx.client(loc.registry).try_resolve(loc.repository, loc.pointer_tag)
    if digest is None:
        raise NotFoundError(f"{loc} does not exist: {target.variant} was never promoted to {stage}")
    out: list[PromotionRecord] = []
    forks: list[str] = []
    before: dt.datetime | None = None
    cur: str | None = digest
    head: RecordsOn | None = None
    while cur is not None and len(out) < limit:
        on = records_on(ctx, loc, cur, stage, verdicts=verdicts)
        if head is None:
            head = on
        entries = [r for r in on.records if before is None or r.when < before]
        if not entries:
            return Chain(loc, tuple(out), cur if out else None, tuple(forks), digest, head)
        rec = entries[-1]
        fork = _forks(on, rec)
        if fork is not None:
            forks.append(fork)
        out.append(rec)
        before, cur = rec.when, rec.previous
    return Chain(loc, tuple(out), forks=tuple(forks), digest=digest, head=head)


def history(
    ctx: PromotionContext, target: Target, stage: str, *, limit: int = 100
) -> tuple[Location, list[PromotionRecord]]:
    """``chain`` as (pointer, records newest first). Raises NotFoundError when the stage holds no
    digest for the variant."""
    c = chain(ctx, target, stage, limit=limit)
    return c.pointer, list(c.records)
