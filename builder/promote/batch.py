"""``builder promote`` and ``builder rollback`` as one call each: the names the user gave (variant
ids, ``--select`` globs, image references) -> targets (:mod:`builder.promote.targets`) -> one
outcome per target, and the one error the batch exits with.

Errors: ConfigError (2) when nothing is named; NotFoundError (8) for unknown names; the batch's
failure (:func:`builder.promote.apply.batch_error`) is in :class:`Batch`, raised by
:meth:`Batch.raise_for_failure`; ``rollback_variant`` raises what ``rollback`` raises.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from builder.errors import BuilderError, ConfigError
from builder.promote.apply import batch_error, promote_many
from builder.promote.model import UNSET, Applied, ExpectPrevious, Outcome, Plan
from builder.promote.targets import resolve_targets, scope_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    from builder.models import SummaryRow
    from builder.promote.context import PromotionContext
    from builder.promote.documents import PromoteDocument, RollbackDocument


COMPARE_WORKERS = 4
"""Targets whose images the dry run compares with their stage's at once (memory stays bounded)."""


@dataclasses.dataclass(frozen=True)
class Batch:
    """One ``builder promote``: the ``stage``, whether it was applied (``confirm``), one outcome
    per target in order, and the error the command exits with (``failure``; None: every target
    was promoted or would be allowed)."""

    stage: str
    confirm: bool
    outcomes: tuple[Outcome, ...]
    failure: BuilderError | None = None

    @property
    def would_apply(self) -> bool:
        """A dry run with at least one target the policy would allow (``--confirm`` would apply it)."""
        return not self.confirm and any(o.plan is not None and o.plan.decision.allowed for o in self.outcomes)

    def to_json(self) -> PromoteDocument:
        return {"stage": self.stage, "confirm": self.confirm, "results": [o.to_json() for o in self.outcomes]}

    def summary_rows(self) -> tuple[SummaryRow, ...]:
        """One row per target: variant, the digest promoted or planned (empty: none was found),
        what happened (``promoted``, ``would promote``, ``denied``, ``error``) and the stage."""
        from builder.models import SummaryRow  # the run summary's and GitHub's rows (builder.models decodes variants)

        def digest(o: Outcome) -> str:
            if o.applied is not None:
                return o.applied.record.digest
            return (o.plan.digest if o.plan is not None else o.target.digest) or ""

        return tuple(SummaryRow(o.target.variant, digest(o), o.verb, self.stage) for o in self.outcomes)

    def raise_for_failure(self) -> None:
        """Raise ``failure`` (PromotionConflictError 32, PolicyDeniedError 31, or the first other
        error, each with every result under ``details['results']``); nothing when None."""
        if self.failure is not None:
            raise self.failure


def promote_names(
    ctx: PromotionContext,
    names: Sequence[str],
    globs: Sequence[str] = (),
    *,
    stage: str,
    variant_id: str | None = None,
    ticket: str | None = None,
    confirm: bool = False,
    expect_previous: ExpectPrevious = UNSET,
    workers: int = 16,
) -> Batch:
    """Plan (and with ``confirm`` apply) ``stage`` for every variant id or reference in ``names``
    and every variant the ``globs`` select (``variant_id``: the variant of references whose tag
    does not tell it), ``workers`` targets in parallel. Raises ConfigError (2) when neither names
    nor globs are given, NotFoundError (8) / UnknownVariantError (2) for names; per-target errors
    are in the batch."""
    if not names and not globs:
        raise ConfigError("name a VARIANT or REFERENCE, or pass --select GLOB", hint="see `builder promote --help`")
    targets = resolve_targets(scope_of(ctx), names, globs, variant_id)
    outcomes = promote_many(
        ctx, targets, stage, ticket=ticket, confirm=confirm, expect_previous=expect_previous, workers=workers
    )
    if not confirm:  # what an approver must see: only in the dry run (a person reads it)
        from concurrent.futures import ThreadPoolExecutor

        # a few images at a time: each inspection streams its layers with bounded memory (~50 MiB)
        with ThreadPoolExecutor(max_workers=COMPARE_WORKERS, thread_name_prefix="compare") as pool:
            outcomes = list(pool.map(lambda o: with_changes(ctx, o), outcomes))
    return Batch(stage, confirm, tuple(outcomes), batch_error(ctx, stage, outcomes))


def with_changes(ctx: PromotionContext, outcome: Outcome) -> Outcome:
    """``outcome`` (planned, not applied) with the promoted image compared to the digest the stage
    holds (:func:`builder.promote.changes.stage_changes`; the stage's fleet files judged for both);
    unchanged when nothing was planned. Raises nothing but an interrupt."""
    from builder.image.layers import LayerCache
    from builder.promote.changes import ImageAt, PlanChanges, stage_changes

    plan = outcome.plan
    if plan is None or outcome.error is not None:
        return outcome
    if plan.digest is None:
        return dataclasses.replace(outcome, changes=PlanChanges(plan.previous, note="nothing to promote"))
    src, dst = plan.source, plan.destination
    held = ImageAt(ctx.client(dst.registry), dst.repository, plan.previous) if plan.previous else None
    changes = stage_changes(
        ImageAt(ctx.client(src.registry), src.repository, plan.digest),
        held,
        cache=LayerCache(ctx.cache_dir / "layers") if ctx.cache_dir is not None else None,
        fleets=ctx.policy.fleets(plan.stage),
        fleet_checker=ctx.fleet_checker,
    )
    return dataclasses.replace(outcome, changes=changes)


@dataclasses.dataclass(frozen=True)
class RollbackResult:
    """One ``builder rollback``: the ``plan`` (``previous``: the digest the stage holds, ``digest``:
    the one it returns to) and, with ``--confirm``, what was ``applied`` (None: a dry run)."""

    plan: Plan
    applied: Applied | None = None

    def to_json(self) -> RollbackDocument:
        if self.applied is not None:
            return self.applied.to_json()
        return {**self.plan.to_json(), "applied": False}

    def text(self) -> str:
        """The result for people (one line, plus the dry-run note)."""
        p = self.plan
        to = p.destination.pinned(p.digest or "")
        if self.applied is None:
            return (
                f"would roll back {p.target.variant} in {p.stage}: {p.previous} -> {to}\n"
                "dry run: add --confirm to apply"
            )
        return f"rolled back {p.target.variant} in {p.stage}: {p.previous} -> {to}"


def rollback_variant(
    ctx: PromotionContext,
    variant: str,
    stage: str,
    *,
    to: str | None = None,
    ticket: str | None = None,
    confirm: bool = False,
) -> RollbackResult:
    """``builder rollback VARIANT --stage STAGE [--to DIGEST]``: plan (and with ``confirm`` apply) pointing
    ``stage`` back at a digest of its history for ``variant`` (a variant id or image reference).
    Raises what ``plan_rollback`` / ``apply_rollback`` raise."""
    from builder.promote.rollback import apply_rollback, plan_rollback  # not on promote's start-up (#19)

    [target] = resolve_targets(scope_of(ctx), (variant,))
    plan = plan_rollback(ctx, target, stage, to=to, ticket=ticket)
    return RollbackResult(plan, apply_rollback(ctx, plan) if confirm else None)
