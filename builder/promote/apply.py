"""Applying promotions and rollbacks: copy, signed ``promotion/v1`` record, tag move, ledger row.

The distribution protocol has no conditional PUT, so a stage tag moves only under a per-stage
file lock (``<state_dir>/locks``), after re-reading it (it must still name the digest the plan
saw), after checking the previous-digest chain (the digest it names must carry a trusted
``promotion/v1`` record), and it is re-read after the write: any difference raises
``PromotionConflictError`` naming both digests. The promotion record is written *before* the
tag moves, so a process killed at any point leaves the tag on the old or the new digest and
re-running completes the promotion (the ledger row is appended when missing).

Errors: ``PolicyDeniedError`` (31), ``PromotionConflictError`` (32), ``NotFoundError`` (8),
``SigningKeyError`` (16), registry errors (5-7), ``LedgerError`` (33). Rollbacks: ``rollback.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from builder import labels, process
from builder.errors import (
    BuilderError,
    PolicyDeniedError,
    PromotionConflictError,
    SigningKeyError,
)
from builder.ledger import LedgerRecord
from builder.predicates import PROMOTION_V1
from builder.promote.listing import TagLists
from builder.promote.model import (
    UNSET,
    Applied,
    CopyCounts,
    ExpectPrevious,
    Outcome,
    Plan,
    PromotionRecord,
    StageAfter,
    Unset,
    fmt_time,
)
from builder.promote.plan import plan_promotion, promoter_problem, source_digest
from builder.promote.pool import Task, Uploads, parallel
from builder.promote.records import pointer_trust, records_on
from builder.promote.transfer import copy_evidence, copy_manifest, put_shared_config
from builder.registry import CopyStats, put_manifest_repairing
from builder.signing.attest import attest_image, prepare_attestation
from builder.signing.layer import (
    ATT_SUFFIX,
    SIG_SUFFIX,
    SIGNATURE_CONFIG_DIGEST,
    HeldRead,
    known_blobs,
    signature_lock,
    signature_tag,
)
from builder.signing.sign import sign_image

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from builder.policy import Decision, RuleResult
    from builder.promote.context import PromotionContext
    from builder.promote.location import Location, Target
    from builder.promote.plan import Source
    from builder.signing.signer import Signer

EARLY_RECORD_MAX_AGE_S = 2.0
"""A promotion record signed before taking the stage lock is used only this soon after."""


def require_signer(ctx: PromotionContext) -> Signer:
    """The context's signer. SigningKeyError when there is none."""
    if ctx.signer is None:
        raise SigningKeyError(
            "applying a promotion needs a signing key for its promotion/v1 record",
            hint="pass --key FILE (default: builder.toml `key`)",
        )
    return ctx.signer


def _require_promoter(ctx: PromotionContext, plan: Plan, signer: Signer) -> None:
    """SigningKeyError (16) when ``signer`` is no promoter of the policy; a plan the policy denied
    too is still appended to the ledger as ``denied`` first (the audit trail keeps the attempt)."""
    why = promoter_problem(ctx)
    if why is not None:
        if not plan.decision.allowed:
            _record_denied(ctx, plan, signer)
        raise SigningKeyError(
            why, hint="sign with a promoter key (--key) or add its public key to the policy's promoter key set"
        )


def ledger_row(rec: PromotionRecord, decision: Decision) -> LedgerRecord:
    """The audit ledger row of a promotion record (``denied`` when the decision did not allow it)."""
    who = rec.promoter + (f" {rec.promoter_name}" if rec.promoter_name else "")
    return LedgerRecord(
        time=rec.time,
        action=rec.action if rec.allowed else "denied",
        variant=rec.variant,
        stage=rec.stage,
        from_stage=rec.from_stage,
        reference=rec.reference,
        digest=rec.digest,
        previous=rec.previous,
        allowed=rec.allowed,
        decision=json.dumps(decision.to_json(), sort_keys=True),
        who=who,
        ticket=rec.ticket,
        attestation=rec.layer,
    )


def reason_lines(decision: Decision) -> tuple[str, ...]:
    """Every leaf rule of ``decision`` as ``pass|FAIL <rule>: <reason>`` (kept in the record)."""
    out: list[str] = []

    def walk(r: RuleResult) -> None:
        if not r.children:
            out.append(f"{'pass' if r.passed else 'FAIL'} {r.rule}: {r.reason}")
        for c in r.children:
            walk(c)

    for r in decision.reasons:
        walk(r)
    return tuple(out)


def new_record(
    ctx: PromotionContext, plan: Plan, signer: Signer, action: str, digest: str, previous: str | None
) -> PromotionRecord:
    """The record ``signer`` is about to write for ``plan`` (time: now)."""
    return PromotionRecord(
        action=action,
        variant=plan.target.variant,
        stage=plan.stage,
        from_stage=plan.from_stage,
        reference=str(plan.destination),
        digest=digest,
        previous=previous,
        allowed=plan.decision.allowed,
        reasons=reason_lines(plan.decision),
        policy=str(ctx.policy.path),
        promoter=signer.fingerprint,
        promoter_name=ctx.name_of(signer.fingerprint),
        time=fmt_time(ctx.now()),
        ticket=plan.ticket,
    )


def conflict(loc: Location, expected: str | None, found: str | None, when: str) -> PromotionConflictError:
    """The error for a pointer that named ``found`` where ``expected`` was required."""
    return PromotionConflictError(
        f"{loc} changed {when}: expected {expected or 'no tag'}, found {found or 'no tag'}; nothing was overwritten",
        expected=expected,
        found=found,
        pointer=str(loc),
    )


def _record_denied(ctx: PromotionContext, plan: Plan, signer: Signer) -> None:
    """Append the denied plan to the ledger (``denied``), when it names a digest and there is one."""
    if plan.digest is not None and ctx.ledger is not None:
        denied = new_record(ctx, plan, signer, "promote", plan.digest, plan.previous)
        ctx.ledger.append(ledger_row(denied, plan.decision))


def _deny(ctx: PromotionContext, plan: Plan, signer: Signer) -> PolicyDeniedError:
    _record_denied(ctx, plan, signer)
    failed = plan.decision.failed()
    return PolicyDeniedError(
        f"promotion of {plan.target.variant} to {plan.stage} denied: "
        + "; ".join(f"{r.rule}: {r.reason}" for r in failed),
        hint=soak_hint(ctx, [plan.decision])
        if plan.trusted
        else ctx.untrusted_hint(plan.stage, plan.target.variant, foreign=bool(plan.untrusted_signers)),
        reasons=[r.to_json() for r in failed],
        decision=plan.decision.to_json(),
    )


def soak_hint(ctx: PromotionContext, decisions: Sequence[Decision]) -> str | None:
    """The hint for denials where only time is missing (every failed rule a ``soak``,
    ``Decision.allowed_at``): when the promotion will be allowed; None otherwise (the default
    hint: provide the missing evidence)."""
    from builder.policy.durations import format_duration

    times = [d.allowed_at() for d in decisions]
    if not times or any(t is None for t in times):
        return None
    when = max(t for t in times if t is not None)
    left = format_duration(max(when - ctx.now(), dt.timedelta(0)))
    return (
        f"only soak time is left: allowed from {when:%Y-%m-%dT%H:%M:%SZ} (in {left}); "
        "retry the same promotion then (no other evidence is missing)"
    )


@dataclasses.dataclass(frozen=True)
class Held:
    """What ``promote_many`` holds while it plans and applies one promotion: the stage lock, and
    within one repository the digest's ``.att`` lock with the read of that ``.att`` made under it
    (``att``; None: that lock is not held). ``release`` lets that ``.att`` lock go (idempotent):
    ``mark_replaced`` calls it, once the record is written, before it takes the replaced digest's
    ``.att`` lock, so no writer holds two ``.att`` locks: two promotions crossing (dev A -> B while
    staging B -> A) never wait for each other."""

    att: HeldRead | None = None
    release: Callable[[], object] | None = None

    def let_go(self) -> None:
        """Release the ``.att`` lock (nothing when it is not held or already released)."""
        if self.release is not None:
            self.release()


def apply_promotion(
    ctx: PromotionContext, plan: Plan, *, expect_previous: ExpectPrevious = UNSET, held: Held | None = None
) -> Applied:
    """Apply an allowed plan: copy, write the signed record, move the tag, re-read, ledger row.
    Into another repository or registry the copy is also signed for its destination identity
    (``<registry>/<repository>``, index and platform manifests) by the promoter key, before the tag
    moves (``builder.signing.sign.sign_image``; docs/promotion.md).

    ``expect_previous``: the digest the stage must still hold (default: what the plan saw; pass
    the digest from a reviewed plan to turn the apply into a compare-and-swap). A denied plan is
    recorded in the ledger (``denied``) and raises PolicyDeniedError. PromotionConflictError when
    the pointer moved, the chain forks (the digest it names has no trusted record) or another
    writer moved it during the write.

    ``held``: the caller holds the stage lock and made ``plan`` under it (``promote_many``): the
    plan's pointer read is the read under the lock, and its trust of that pointer stands (a plan
    that found it untrusted is denied); ``held.att``: the record is appended to the ``.att`` as read
    under its lock, which the caller holds too."""
    t0 = time.perf_counter()
    signer = require_signer(ctx)
    _require_promoter(ctx, plan, signer)  # first: the plan's `promoter` row would otherwise read as a policy denial
    if plan.digest is None or not plan.decision.allowed:
        raise _deny(ctx, plan, signer)
    digest = plan.digest
    dst = plan.destination
    dc = ctx.client(dst.registry)
    expected = plan.previous if isinstance(expect_previous, Unset) else expect_previous
    stats = CopyStats()
    # A new record is written only when the stage still holds `expected` (checked under the lock
    # below), so it can be signed now and its blobs (the DSSE layer, and the config of a fresh
    # one-layer .att) uploaded while the lock is taken and the pointer re-read. Blobs are
    # content-addressed and inert until a manifest names them: if the promotion stops here (a
    # conflict, an interrupted run's record reused), nothing refers to them.
    early = new_record(ctx, plan, signer, "promote", digest, expected)
    prepared = prepare_attestation(dc.registry, dst.repository, digest, PROMOTION_V1, early.predicate(), signer)
    known = _known_in_destination(plan)
    uploading = _early_uploads(ctx, plan, prepared.layer.blob, known) if expected != digest else []
    with contextlib.nullcontext() if held is not None else ctx.lock(dst):
        current = plan.previous if held is not None else dc.try_resolve(dst.repository, dst.pointer_tag)
        # current == digest: an interrupted run of this promotion (tag moved, ledger row missing)
        # or a concurrent promotion of the same digest: completed below if a record says so
        # an explicit --expect-previous is a compare-and-swap even when the stage already holds the digest
        allowed_now = (expected,) if not isinstance(expect_previous, Unset) else (digest, expected)
        if current not in allowed_now:
            raise conflict(dst, expected, current, "since the plan was made")
        # checked again under the lock even when the plan found a trusted record (never trust a plan
        # made before the lock): the digest it names must carry the newest record of the stage's chain
        if current is not None and current != digest and held is None:
            trust = pointer_trust(ctx, dst, plan.stage, current)
            if not trust.trusted:
                raise PromotionConflictError(
                    f"{dst} names {current}, which has no trusted promotion record, or a newer record moved the "
                    "stage away from it: the tag was moved outside builder or the previous-digest chain forks; "
                    "refusing to build on it"
                    + (f" ({trust.note(ctx.promoter_names(plan.stage))})" if trust.superseded else ""),
                    found=current,
                    pointer=str(dst),
                    hint=ctx.untrusted_hint(plan.stage, plan.target.variant),
                )
        if current == digest:
            return _complete(ctx, plan, t0, held)
        src = plan.source
        manifest = plan.manifest if plan.manifest is not None and plan.manifest.digest == digest else None
        if manifest is None:
            manifest = ctx.client(src.registry).get_manifest(src.repository, digest)

        def write_record(att: HeldRead | None) -> PromotionRecord:
            # never reuse a record an interrupted run left (its time is when that run signed it, not
            # when the digest entered the stage: soak and age count from the record): sign anew.
            # A record signed long before the lock was ours (another promotion held it) would carry a
            # stale time (history orders records by time): sign a fresh one then
            stale = time.perf_counter() - t0 > EARLY_RECORD_MAX_AGE_S
            if early.previous != current or not uploading or stale:
                rec = new_record(ctx, plan, signer, "promote", digest, current)
                write = attest_image(
                    dc,
                    dst.repository,
                    digest,
                    PROMOTION_V1,
                    rec.predicate(),
                    signer,
                    lock_dir=ctx.lock_dir,
                    held=att,
                )
                return dataclasses.replace(rec, signer=signer.fingerprint, layer=write.layer_digest)
            write = attest_image(
                dc,
                dst.repository,
                digest,
                PROMOTION_V1,
                early.predicate(),
                signer,
                lock_dir=ctx.lock_dir,
                prepared=prepared,
                uploaded=Uploads(uploading, known),  # waited for only when the .att manifest is about to name them
                held=att,
            )
            return dataclasses.replace(early, signer=signer.fingerprint, layer=write.layer_digest)

        # the image, its evidence and our record are independent writes: do them at once; the tag
        # moves only after all three are in the registry
        evidence_stats = CopyStats()
        written: list[PromotionRecord] = []

        def sign_copy(sig: HeldRead | None) -> None:
            # containers/image (podman, CRI-O) checks the signature's docker-reference against the
            # repository it pulls from: sign the copy (index and platform manifests) for its new
            # identity with the promoter key, before the tag makes it visible (kpromo does the same).
            # Its signed payload names the promotion role: it never counts as a build signature
            # (builder.labels.SIGNATURE_ROLE; docs/signing.md), even when one key serves both roles
            role = {labels.SIGNATURE_ROLE: labels.PROMOTION_ROLE}
            sign_image(
                dc, dst.repository, digest, signer, lock_dir=ctx.lock_dir, annotations=role, manifest=manifest, held=sig
            )

        def evidence_and_record() -> None:
            if src.name == dst.name:
                written.append(write_record(held.att if held is not None else None))
                return
            # the copied .att and our record, the copied .sig and our signature of the copy: each pair
            # one read-modify-write of its tag in the destination when none is there yet (else the
            # copy merged first, then ours appended): the two writers of one tag never race
            copy_evidence(
                ctx,
                src,
                dst,
                digest,
                evidence_stats,
                known=plan.evidence_manifests,
                then={ATT_SUFFIX: lambda att: written.append(write_record(att)), SIG_SUFFIX: sign_copy},
            )

        jobs: list[Callable[[], None]] = [evidence_and_record]
        if src.name != dst.name:
            # the manifest itself is stored by the tag's PUT below (copy_manifest's tagged_later)
            jobs.append(
                lambda: copy_manifest(ctx, src, dst, manifest, stats, known_absent=not plan.present, tagged_later=True)
            )
        parallel(jobs)
        rec = written[0]
        again = dc.try_resolve(dst.repository, dst.pointer_tag)
        if again != current:
            raise conflict(dst, current, again, "while the promotion was being written")
        shared_swap(ctx, dst, current, digest)  # the cross-machine compare-and-swap, before the tag moves
        # MANIFEST_BLOB_UNKNOWN here (a mount that did not stick) is repaired from the source
        put_manifest_repairing(
            ctx.client(src.registry), src.repository, dc, dst.repository, dst.pointer_tag, manifest, stats
        )
        after = dc.resolve(dst.repository, dst.pointer_tag)
        if after != digest:
            raise conflict(dst, digest, after, "right after our write (another writer without the lock)")
        mark_replaced(ctx, dst, rec, signer, fresh=True, holding=held)  # our record is written: lets its lock go
        seq = ctx.ledger.append(ledger_row(rec, plan.decision)).seq if ctx.ledger is not None else None
    return Applied(plan, rec, time.perf_counter() - t0, False, CopyCounts.of(stats, evidence_stats), seq)


def _early_uploads(ctx: PromotionContext, plan: Plan, layer: bytes, known: frozenset[str]) -> list[Task[str]]:
    """The record's blob, uploading now, and the ``.sig``/``.att`` config (one blob for every such
    manifest, ``SIGNATURE_CONFIG``) when no manifest the plan read in the destination names it and
    this run saw no ``.att`` there (else the read under the signature lock shows whether it is)."""
    dc = ctx.client(plan.destination.registry)
    tasks = [Task(functools.partial(dc.put_blob, plan.destination.repository, layer))]
    if _att_absent(plan) and SIGNATURE_CONFIG_DIGEST not in known:
        sig = plan.evidence_manifests.get(SIG_SUFFIX) if plan.evidence_manifests is not None else None
        tasks.append(Task(functools.partial(put_shared_config, ctx, plan.source, plan.destination, sig)))
    return tasks


def _known_in_destination(plan: Plan) -> frozenset[str]:
    """Blobs the destination repository holds by what the plan read there: the config and layers
    of the ``.sig``/``.att`` manifests of the source when it is the destination (a manifest is
    stored only with every blob it names)."""
    known = plan.evidence_manifests
    if known is None or plan.source.name != plan.destination.name:
        return frozenset()
    return known_blobs(*(m.json for m in known.values() if m is not None))


def _att_absent(plan: Plan) -> bool:
    """Whether the plan saw no ``.att`` of the digest where the record goes: the same repository's
    (read with the evidence), or, into a repository that does not hold the digest yet, the source's
    (copied there first)."""
    known = plan.evidence_manifests
    if known is None:
        return False
    same = plan.source.name == plan.destination.name
    return (same or not plan.present) and ATT_SUFFIX in known and known[ATT_SUFFIX] is None


def shared_swap(ctx: PromotionContext, dst: Location, expected: str | None, new: str) -> None:
    """With ``promotion_remote`` (``ctx.pointer_refs``): move the pointer's shared git ref from
    ``expected`` to ``new`` before the tag moves (PromotionConflictError when another machine moved
    it first, ``builder.promote.gitref``). Nothing in registry-only mode."""
    if ctx.pointer_refs is not None:
        ctx.pointer_refs.swap(str(dst), expected, new)


def mark_replaced(
    ctx: PromotionContext,
    dst: Location,
    rec: PromotionRecord,
    signer: Signer,
    *,
    fresh: bool = False,
    holding: Held | None = None,
) -> bool:
    """After the tag moved from ``rec.previous`` to ``rec.digest``: write the successor record (the
    same predicate, signed on the replaced digest) so that a later re-tag back to the replaced
    digest is seen as such (``records.pointer_trust``). Written after the move, so a failed tag
    write never marks the digest the stage still holds; a run killed in between leaves it to the
    re-run (``_complete``). Nothing when the stage was empty or the record is already there.
    ``fresh``: ``rec`` was signed by this run (no successor record of it can exist yet): the
    replaced digest's records are not read to look for one. ``holding``: the caller's held
    ``.att`` lock of ``rec.digest``, let go first (``Held.release``): the replaced digest's
    ``.att`` lock is never taken while another is held (lock order: stage, then one signature).
    A ``fresh`` record's move away from ``rec.previous`` is remembered by this machine (``ctx.seen``:
    :mod:`builder.promote.newest_seen`). Returns whether it wrote the successor record."""
    if holding is not None:
        holding.let_go()
    if fresh:
        ctx.seen.offer(rec)  # the move this run just made
    if rec.previous is None:
        return False
    if not fresh:
        on = records_on(ctx, dst, rec.previous, rec.stage)
        if any(s.digest == rec.digest and s.time == rec.time for s in on.successors):
            return False
    attest_image(
        ctx.client(dst.registry),
        dst.repository,
        rec.previous,
        PROMOTION_V1,
        rec.predicate(),
        signer,
        lock_dir=ctx.lock_dir,
        lock_timeout=ctx.lock_timeout,
    )
    return True


def _complete(ctx: PromotionContext, plan: Plan, t0: float, held: Held | None = None) -> Applied:
    """The stage already names the plan's digest: finish what an interrupted run of this promotion
    left (the replaced digest's successor record, the ledger row). ``Applied.completed`` says
    whether anything was written; False: the promotion was whole already (the stage simply holds
    it). PromotionConflictError when no trusted record says the stage holds it."""
    digest = plan.digest or ""
    trust = pointer_trust(ctx, plan.destination, plan.stage, digest)
    rec = trust.record
    if rec is None or not trust.trusted:
        raise PromotionConflictError(
            f"{plan.destination} already names {digest} but no trusted promotion record says so "
            "(or a newer record moved the stage away from it): the tag was moved outside builder",
            found=digest,
            pointer=str(plan.destination),
        )
    marked = ctx.signer is not None and mark_replaced(ctx, plan.destination, rec, ctx.signer, holding=held)
    seq = None
    if ctx.ledger is not None and rec.layer and not ctx.ledger.has_attestation(rec.layer):
        seq = ctx.ledger.append(ledger_row(rec, plan.decision)).seq
    return Applied(plan, rec, time.perf_counter() - t0, marked or seq is not None, CopyCounts(), seq)


def stage_after(ctx: PromotionContext, plan: Plan) -> StageAfter:
    """What ``plan``'s stage pointer names now, read after its apply failed (one manifest HEAD),
    so the user is told what state the stage is in rather than left to guess; the read's own
    error (the registry may still be failing) is kept as ``unread``."""
    dst = plan.destination
    try:
        return StageAfter(ctx.client(dst.registry).try_resolve(dst.repository, dst.pointer_tag))
    except BuilderError as exc:
        return StageAfter(None, exc.message)


def promote_many(
    ctx: PromotionContext,
    targets: Sequence[Target],
    stage: str,
    *,
    ticket: str | None = None,
    confirm: bool = False,
    expect_previous: ExpectPrevious = UNSET,
    workers: int = 16,
) -> list[Outcome]:
    """Plan (and with ``confirm`` apply) ``stage`` for each target, one decision each, in parallel
    (``workers`` threads; registry clients are thread-safe). Errors are per target (``Outcome.error``).
    Interrupted (a signal): queued targets never start, running ones finish (each stage pointer
    is old or new), and the exception's ``left`` says how many were not promoted."""

    listed = _batch_listing(ctx, targets, stage)

    def one(t: Target) -> Outcome:
        plan = None
        try:
            if not confirm:
                return Outcome(t, plan_promotion(ctx, t, stage, ticket=ticket, listed=listed))
            # planned under the locks the apply needs: the plan's reads of the pointer and of the
            # record's .att are the reads under those locks (not made twice)
            with _planning_locks(ctx, t, stage, listed) as (source, view, release_att):
                plan = plan_promotion(ctx, t, stage, ticket=ticket, listed=view, source=source)
                held = Held(_att_read(ctx, plan) if release_att else None, release_att)
                return Outcome(t, plan, apply_promotion(ctx, plan, expect_previous=expect_previous, held=held))
        except BuilderError as exc:  # one target's failure is its outcome, the batch goes on
            failed_apply = plan is not None and plan.decision.allowed and not isinstance(exc, PolicyDeniedError)
            return Outcome(t, plan, None, exc, after=stage_after(ctx, plan) if failed_apply and plan else None)

    done: list[Outcome] = []
    try:
        if len(targets) <= 1 or workers <= 1:
            for t in targets:
                done.append(one(t))
            return done
        with ThreadPoolExecutor(max_workers=min(workers, len(targets))) as pool:
            futures = [pool.submit(one, t) for t in targets]
            try:
                return [f.result() for f in futures]
            except process.Interrupted:
                for f in futures:
                    f.cancel()
                raise
            finally:  # runs after every future settled or was cancelled (shutdown waits below)
                pool.shutdown(wait=True)
                done.extend(f.result() for f in futures if f.done() and not f.cancelled() and f.exception() is None)
    except process.Interrupted as exc:
        finished = sum(1 for o in done if o.error is None and (o.applied is not None or not confirm))
        exc.left.append(f"{len(targets) - finished} of {len(targets)} {'promotions' if confirm else 'plans'} not done")
        raise


@contextlib.contextmanager
def _planning_locks(
    ctx: PromotionContext, target: Target, stage: str, listed: TagLists | None
) -> Iterator[tuple[Source, TagLists | None, Callable[[], object] | None]]:
    """Hold the stage lock of ``target``'s pointer in ``stage`` and, when the record goes into the
    repository the digest comes from, the lock of the digest's ``.att`` (the order every writer
    takes them in: stage, then signature); yields the source as read (before the locks: what is
    promoted), the batch's listings made to read the pointer and that ``.att`` (listed before the
    locks, they cannot answer for them) and, when the ``.att`` lock is held, what releases it
    before the stage lock (``Held.release``; None: not held). Raises NotFoundError (unknown
    stage), SigningError (the ``.att`` lock timed out), registry errors."""
    st = ctx.policy.stage(stage)
    src, dst = ctx.stage_location(target, st.source), ctx.stage_location(target, stage)
    source = source_digest(ctx, target, st.source, src)
    digest = source[0]
    att_tag = signature_tag(digest, ATT_SUFFIX) if digest is not None and src.name == dst.name else None
    view = listed.reading(dst, dst.pointer_tag, *([att_tag] if att_tag else [])) if listed is not None else None
    with contextlib.ExitStack() as stack:
        stack.enter_context(ctx.lock(dst))
        att = stack.enter_context(contextlib.ExitStack())  # closed early by Held.release, or here
        if att_tag is not None:
            att.enter_context(_signature_lock(ctx, dst, att_tag))
        yield source, view, att.close if att_tag is not None else None


def _signature_lock(ctx: PromotionContext, loc: Location, tag: str) -> contextlib.AbstractContextManager[None]:
    """The lock every writer of ``tag`` (``.sig``/``.att``) in ``loc``'s repository takes
    (``builder.signing.layer.signature_lock``). SigningError on timeout."""
    return signature_lock(ctx.lock_dir, ctx.client(loc.registry).registry, loc.repository, tag, ctx.lock_timeout)


def _att_read(ctx: PromotionContext, plan: Plan) -> HeldRead:
    """The digest's ``.att`` in the destination as the plan read it under its lock (the plan's
    evidence read, None: absent), or read now (the plan's read failed; the lock is still held)."""
    known = plan.evidence_manifests
    if known is not None and ATT_SUFFIX in known:
        m = known[ATT_SUFFIX]
    else:
        dst = plan.destination
        m = ctx.client(dst.registry).try_get_manifest(dst.repository, signature_tag(plan.digest or "", ATT_SUFFIX))
    return HeldRead(m.json if m is not None else None)


def _batch_listing(ctx: PromotionContext, targets: Sequence[Target], stage: str) -> TagLists | None:
    """The tag listings a batch's plans share (each repository of two or more of its source and
    stage locations listed once); None for a single target or an unknown stage (each plan then
    reports that itself)."""
    if len(targets) < 2:
        return None
    try:
        source = ctx.policy.stage(stage).source
    except BuilderError:
        return None
    return TagLists(
        ctx, [loc for t in targets for loc in (ctx.stage_location(t, source), ctx.stage_location(t, stage))]
    )


def batch_error(ctx: PromotionContext, stage: str, outcomes: Sequence[Outcome]) -> BuilderError | None:
    """The one error a batch exits with (None: every target succeeded or would be allowed): a
    concurrent change (PromotionConflictError, 32) first, then any other error (its own class),
    then denials (PolicyDeniedError, 31, naming each denied target and its failed rules). Each
    carries every outcome's JSON under ``results``."""
    results = [o.to_json() for o in outcomes]
    conflicts = [o.error for o in outcomes if isinstance(o.error, PromotionConflictError)]
    if conflicts:
        return PromotionConflictError(conflicts[0].message, results=results, **conflicts[0].details)
    others = [o.error for o in outcomes if o.error is not None and not isinstance(o.error, PolicyDeniedError)]
    if others:
        return type(others[0])(others[0].message, hint=others[0].hint, results=results)
    denied = [o.plan for o in outcomes if o.plan is not None and not o.plan.decision.allowed]
    if not denied:
        return None
    untrusted = [p for p in denied if not p.trusted]
    return PolicyDeniedError(
        f"{len(denied)} of {len(outcomes)} promotion(s) to {stage} denied: "
        + "; ".join(
            f"{p.target.variant}: " + "; ".join(f"{r.rule}: {r.reason}" for r in p.decision.failed()) for p in denied
        ),
        hint=ctx.untrusted_hint(stage, untrusted[0].target.variant, foreign=bool(untrusted[0].untrusted_signers))
        if untrusted
        else soak_hint(ctx, [p.decision for p in denied]),
        results=results,
    )
