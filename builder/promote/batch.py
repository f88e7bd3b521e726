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
from builder.models import SummaryRow
from builder.promote.apply import batch_error, promote_many, rollback
from builder.promote.model import UNSET, Applied, ExpectPrevious, Outcome, PromoteDocument
from builder.promote.targets import resolve_targets, scope_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    from builder.promote.context import PromotionContext


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
    return Batch(stage, confirm, tuple(outcomes), batch_error(ctx, stage, outcomes))


def rollback_variant(ctx: PromotionContext, variant: str, stage: str) -> Applied:
    """``builder rollback STAGE VARIANT``: point ``stage`` back at the previous digest of
    ``variant`` (a variant id or image reference). Raises what ``rollback`` raises."""
    [target] = resolve_targets(scope_of(ctx), (variant,))
    return rollback(ctx, target, stage)
