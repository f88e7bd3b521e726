"""Rollback as a planned, signed operation: ``builder rollback VARIANT --stage STAGE [--to DIGEST]``.

A rollback re-points a stage to a digest its history holds (``--to DIGEST``; default: the digest
the current one replaced when it was *promoted*, so a second rollback goes further back instead of
toggling between the last two digests). It is planned first (the dry run: nothing is written) and
applied with ``--confirm``: under the stage lock it writes a signed ``promotion/v1`` record with
``"action": "rollback"`` on the target digest (``previous``: the digest it replaced), moves the
tag, re-reads it, writes the successor record on the replaced digest (so a later re-tag back to it
is detected, ``records.pointer_trust``) and appends a ledger row. Only keys the stage's
``rollback.allowed`` lists may do it.

Errors: PolicyDeniedError (31: no rollback rule, key not allowed), NotFoundError (8: nothing to
roll back to, a digest not in the stage's history or deleted from the registry),
VerificationError (18: the pointer is not trusted), PromotionConflictError (32: the pointer moved
meanwhile), ConfigError (2: ``--to`` is not a digest), SigningKeyError (16: no key), registry
errors (5-7), LedgerError (33).
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from builder.errors import ConfigError, NotFoundError, PolicyDeniedError, VerificationError
from builder.policy import Decision, RuleResult
from builder.predicates import PROMOTION_V1
from builder.promote.apply import conflict, ledger_row, mark_replaced, new_record, require_signer, shared_swap
from builder.promote.model import Applied, CopyCounts, Plan, short_signer
from builder.promote.records import chain, pointer_trust
from builder.registry.reference import is_sha256_digest
from builder.signing.attest import attest_image

if TYPE_CHECKING:
    from builder.promote.context import PromotionContext
    from builder.promote.location import Location, Target
    from builder.promote.model import PointerTrust, PromotionRecord

"""A digest ``--to`` accepts (the sha256 digests the OCI image spec names:
https://github.com/opencontainers/image-spec/blob/main/descriptor.md#digests)."""

HISTORY_LIMIT = 200
"""How many records of a stage's chain a rollback reads to find its target."""


def plan_rollback(
    ctx: PromotionContext, target: Target, stage: str, *, to: str | None = None, ticket: str | None = None
) -> Plan:
    """The rollback of ``stage`` for ``target`` to ``to`` (a ``sha256:<hex>`` digest of the
    stage's history; None: the digest the current one replaced when it was promoted). Reads only
    the registry; writes nothing. Raises the module's errors (the signer must be allowed)."""
    # what the stage holds first: a stage that never held the variant has nothing to roll back,
    # whoever asks (saying the key may not roll it back sent people after the wrong problem)
    st = ctx.policy.stage(stage)  # an unknown stage is named first
    if to is not None and not is_sha256_digest(to):
        raise ConfigError(f"--to {to!r} is not a digest", hint="give a digest of the stage's history: sha256:<64 hex>")
    dst = ctx.stage_location(target, stage)
    current = ctx.client(dst.registry).try_resolve(dst.repository, dst.pointer_tag)
    if current is None:
        raise NotFoundError(
            f"nothing is in {stage}: {target.variant} was never promoted to {stage} ({dst} does not exist), "
            "so there is nothing to roll back",
            hint=f"`builder history {target.variant}` shows the stages it is in",
        )
    signer = require_signer(ctx)
    if st.rollback is None:
        raise PolicyDeniedError(
            f"stage {stage} has no rollback rule in {ctx.policy.path}: nobody may roll it back",
            hint="add `rollback: {allowed: [...]}` to the stage",
        )
    who = st.rollback.allows(signer.fingerprint)
    if who is None:
        raise PolicyDeniedError(
            f"key {short_signer(signer.fingerprint)} may not roll back {stage} (allowed: "
            f"{', '.join([a.name for a in st.rollback.approvers] + [s.name for s in st.rollback.keysets])})",
            hint=f"roll back with the key of someone the stage's rollback rule allows: `--key FILE` "
            f"({ctx.policy.path}, stage {stage})",
            reasons=[{"rule": "rollback", "passed": False, "location": st.rollback.location}],
        )
    trust = pointer_trust(ctx, dst, stage, current)
    if not trust.trusted:
        raise _untrusted(ctx, target, stage, dst, current, trust, "cannot tell where to roll back to")
    records = chain(ctx, target, stage, limit=HISTORY_LIMIT).records
    goal = (
        _default_target(ctx.stage_location(target, st.source), dst, target, stage, current, records)
        if to is None
        else to
    )
    _check_target(ctx, dst, target, stage, current, goal, records)
    decision = Decision(stage, goal, True, (RuleResult("rollback", True, f"allowed for {who}", st.rollback.location),))
    return Plan(target, stage, stage, dst, goal, dst, current, decision, ticket)


def _untrusted(
    ctx: PromotionContext, target: Target, stage: str, dst: Location, current: str, trust: PointerTrust, why: str
) -> VerificationError:
    """The integrity failure of a rollback whose pointer no trusted record explains: exit 18, as
    ``resolve`` of the same pointer (docs/exit-codes.md), the note saying why and who signed."""
    return VerificationError(
        f"{trust.note(ctx.promoter_names(stage))}: {why}",
        found=current,
        pointer=str(dst),
        foreign=list(trust.foreign),
        hint=ctx.untrusted_hint(stage, target.variant, foreign=bool(trust.foreign)),
    )


def _default_target(
    src: Location, dst: Location, target: Target, stage: str, current: str, records: tuple[PromotionRecord, ...]
) -> str:
    """The digest ``current`` replaced when it was promoted; NotFoundError (8) for a first
    promotion, whose hint names a promotion that would replace it: a digest of ``src`` (the
    previous stage's repository, where what it holds lives) promoted as ``target.variant``."""
    promoted = next((r for r in records if r.digest == current and r.action == "promote"), None)
    if promoted is None or promoted.previous is None:
        raise NotFoundError(
            f"nothing to roll back to: {current} was the first promotion of {target.variant} into {stage} "
            f"({dst} had no digest before it)",
            hint=f"to replace it, promote another digest explicitly: `builder promote "
            f"{src.name}@sha256:… --variant-id {target.variant} --to {stage} --confirm` (it must be what "
            f"{src} holds; the pointer stays {dst}), or "
            f"name a digest of the stage's history with `--to`; `builder history {target.variant} "
            f"--stage {stage}` shows the chain",
        )
    return promoted.previous


def _check_target(
    ctx: PromotionContext,
    dst: Location,
    target: Target,
    stage: str,
    current: str,
    goal: str,
    records: tuple[PromotionRecord, ...],
) -> None:
    if goal == current:
        raise NotFoundError(
            f"{dst} already names {goal}: nothing to roll back",
            hint=f"`builder history {target.variant} --stage {stage}` shows the digests it held before",
        )
    known = {r.digest for r in records} | {r.previous for r in records if r.previous}
    if goal not in known:
        raise NotFoundError(
            f"{goal} was never in {stage} for {target.variant} (not in the stage's record chain): "
            "a rollback only returns to a digest the stage held",
            hint=f"`builder history {target.variant} --stage {stage}` lists them; to bring a new digest "
            f"in, promote it (`builder promote … --to {stage}`)",
        )
    if ctx.client(dst.registry).try_resolve(dst.repository, goal) != goal:
        raise NotFoundError(
            f"previous digest {goal} is no longer in {dst.name} (deleted from the registry): cannot roll back to it",
            hint=f"promote a digest that still exists explicitly: `builder promote REF@sha256:… --variant-id "
            f"{target.variant} --to {stage}`",
        )


def apply_rollback(ctx: PromotionContext, plan: Plan) -> Applied:
    """Apply a planned rollback under the stage lock: the pointer must still name what the plan
    saw (else PromotionConflictError) and still be trusted; the signed rollback record, the tag
    move (re-read), the successor record on the replaced digest, the ledger row."""
    t0 = time.perf_counter()
    signer = require_signer(ctx)
    dst = plan.destination
    goal = plan.digest
    if goal is None or plan.previous is None:
        raise NotFoundError(f"nothing to roll back in {dst}")
    dc = ctx.client(dst.registry)
    with ctx.lock(dst):
        current = dc.try_resolve(dst.repository, dst.pointer_tag)
        if current != plan.previous:
            raise conflict(dst, plan.previous, current, "since the rollback was planned")
        trust = pointer_trust(ctx, dst, plan.stage, current)
        if not trust.trusted:  # the plan's check again, under the lock: the same error (18)
            raise _untrusted(ctx, plan.target, plan.stage, dst, current, trust, "refusing to roll back")
        new = new_record(ctx, plan, signer, "rollback", goal, current)
        write = attest_image(
            dc,
            dst.repository,
            goal,
            PROMOTION_V1,
            new.predicate(),
            signer,
            lock_dir=ctx.lock_dir,
            lock_timeout=ctx.lock_timeout,
        )
        new = dataclasses.replace(new, signer=signer.fingerprint, layer=write.layer_digest)
        again = dc.try_resolve(dst.repository, dst.pointer_tag)
        if again != current:
            raise conflict(dst, current, again, "while the rollback was being written")
        manifest = dc.get_manifest(dst.repository, goal)
        shared_swap(ctx, dst, current, goal)  # the cross-machine compare-and-swap, before the tag moves
        dc.put_manifest(dst.repository, dst.pointer_tag, manifest.raw, manifest.media_type)
        after = dc.resolve(dst.repository, dst.pointer_tag)
        if after != goal:
            raise conflict(dst, goal, after, "right after our write")
        mark_replaced(ctx, dst, new, signer, fresh=True)  # `new` was signed just above: no successor of it yet
        seq = ctx.ledger.append(ledger_row(new, plan.decision)).seq if ctx.ledger is not None else None
    return Applied(plan, new, time.perf_counter() - t0, False, CopyCounts(), seq)


def rollback(
    ctx: PromotionContext, target: Target, stage: str, *, to: str | None = None, ticket: str | None = None
) -> Applied:
    """Plan and apply the rollback of ``stage`` (``plan_rollback`` then ``apply_rollback``)."""
    return apply_rollback(ctx, plan_rollback(ctx, target, stage, to=to, ticket=ticket))
