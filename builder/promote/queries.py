"""Read-only questions about stages, answered from the registry alone (so they work on a fresh
machine): ``status`` (variant x stage) and ``stage_histories`` (each stage's record chain);
``resolve`` is ``builder.promote.resolution``.

Errors: NotFoundError (8) for unknown stages or names; registry errors (5-7) propagate.
``status`` and ``history`` read every row (stage) they can: a row that cannot be read carries
its ``error`` and the command exits with the first row's code after printing every row; an
unreachable registry (RegistryUnavailableError, 5) stops them at once.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from builder.errors import (
    BuilderError,
    RegistryUnavailableError,
)
from builder.promote.evidence import PlaceRead, read_place
from builder.promote.listing import TagLists
from builder.promote.model import StageHistory, StatusRow
from builder.promote.pool import Once
from builder.promote.records import chain, pointer_trust
from builder.promote.targets import resolve_targets, scope_of
from builder.promote.verdict_cache import VerdictCache
from builder.signing.layer import ATT_SUFFIX

if TYPE_CHECKING:
    from collections.abc import Sequence

    from builder.error_documents import ErrorBody
    from builder.promote.context import PromotionContext
    from builder.promote.documents import HistoryDocument, StatusDocument
    from builder.promote.location import Location, Target


def check_stages(ctx: PromotionContext, stages: Sequence[str]) -> None:
    """NotFoundError (exit 8, naming the stages the policy defines) for any unknown stage."""
    for s in stages:
        ctx.policy.stage(s)


STATUS_WORKERS = 32
"""Rows ``status`` reads at once (each a pointer ``HEAD``, then its ``.sig``/``.att`` reads and
layer checks on the shared pool). Wall time is CPU on both sides (builder's and the registry's):
with more requests waiting, each process handles several per wake-up. 1,000 variants cold on a
loaded 2-core machine with the registry on it, medians of 6 interleaved rounds: 16 rows 5.89 s
(builder CPU 2.17 s, registry 4.15 s), 32 rows 5.41 s (2.01 s, 3.80 s), 48 rows 4.98 s (1.90 s,
3.53 s); the connection pool keeps up to ``builder.registry.transport.POOL_MAXSIZE`` (128)."""


def status(
    ctx: PromotionContext,
    targets: Sequence[Target],
    stages: Sequence[str] | None = None,
    *,
    workers: int = STATUS_WORKERS,
) -> list[StatusRow]:
    """Variant x stage: the digest each pointer names, since when (its trusted record), who moved
    it, and the evidence on it (verified signatures, verified attestation types). A pointer that
    cannot be read becomes a row with its ``error`` (the other rows are still read); when no row
    can be read, the first row's error is raised instead (one error, not a table of them); an
    unreachable registry raises RegistryUnavailableError (exit 5) at once. The evidence of one
    digest in one repository is verified once, however many stages hold it; with
    ``ctx.cache_dir``, layers verified by an earlier run with the same keys are not read or
    checked again (``builder.promote.verdict_cache``: keyed by content, never by tag; the
    pointers and ``.sig``/``.att`` manifests are read every time)."""
    names = list(stages or ctx.policy.stage_names)
    now = ctx.now()
    errors: dict[tuple[str, str], BuilderError] = {}
    pairs = [(t, s) for t in targets for s in names]
    locs = [ctx.stage_location(t, s) for t, s in pairs]
    for registry in dict.fromkeys(loc.registry for loc in locs):
        ctx.client(registry)  # made before the workers share it: the injected factory need not be thread-safe
    # a repository with several rows: its tags listed once, so pointers, .sig/.att and fallback
    # referrers indexes that are not there are never asked for one by one
    listed = TagLists(ctx, locs)
    reports: Once[tuple[str, str, str], PlaceRead] = Once()
    verdicts = VerdictCache.of(ctx)

    def evidence(loc: Location, digest: str) -> PlaceRead:
        # .sig, .att and bundle referrers of the digest, read and verified once per repository (the
        # pointer just resolved to it there: no existence check); the .att read also gives the records
        def read() -> PlaceRead:
            got = read_place(
                ctx, loc, digest, check_present=False, approvals=False, listed=listed.tags(loc), verdicts=verdicts
            )
            assert got is not None  # only None when check_present
            return got

        return reports.get((loc.registry, loc.repository, digest), read)

    def one(row: tuple[tuple[Target, str], Location]) -> StatusRow:
        (t, stage), loc = row
        client = ctx.client(loc.registry)
        try:
            digest = (
                None if listed.absent(loc, loc.pointer_tag) else client.try_resolve(loc.repository, loc.pointer_tag)
            )
            if digest is None:
                return StatusRow(t.variant, stage, str(loc), None, None, None, None, None)
            report = evidence(loc, digest)
            trust = pointer_trust(ctx, loc, stage, digest, att=report.manifests.get(ATT_SUFFIX), verdicts=verdicts)
            rec = trust.record
        except RegistryUnavailableError:  # no row can be read: one error, not a table of them
            raise
        except BuilderError as exc:  # shown in the row (the other rows are still worth printing), then exit non-zero
            errors[(t.variant, stage)] = exc
            return StatusRow(t.variant, stage, str(loc), None, None, None, None, None, error=exc.to_json())
        sigs = sum(1 for i in report.items if i.kind == "signature" and i.ok)
        types = tuple(sorted({i.predicate_type or "" for i in report.items if i.kind == "attestation" and i.ok}))
        if rec is None or not trust.trusted:
            note = trust.note(ctx.promoter_names(stage), short=True)
            return StatusRow(t.variant, stage, str(loc), digest, None, None, None, None, sigs, types, note=note)
        age = (now - rec.when).total_seconds()
        who = ctx.promoter_label(rec)
        return StatusRow(t.variant, stage, str(loc), digest, rec.time, age, rec.action, who, sigs, types)

    try:
        if len(pairs) <= 1 or workers <= 1:
            rows = [one(r) for r in zip(pairs, locs, strict=True)]
        else:
            with ThreadPoolExecutor(max_workers=min(workers, len(pairs))) as pool:
                rows = list(pool.map(one, zip(pairs, locs, strict=True)))
    finally:
        verdicts.flush()  # what this run verified, for the next one (also when the registry went away)
    if rows and len(errors) == len(rows):
        raise errors[(rows[0].variant, rows[0].stage)]
    return rows


def stage_histories(
    ctx: PromotionContext, target: Target, stages: Sequence[str] = (), *, limit: int = 50
) -> list[StageHistory]:
    """For each of ``stages`` (default: every stage of the policy) the pointer's record chain,
    newest first (``records.chain``: every cycle, each move its own record), each record labelled
    with who signed it; a pointer no trusted record explains, or one moved back to a digest a newer
    record replaced, gets a ``note`` saying why, as ``status`` does; a chain that breaks before the
    first promotion gets a ``gap`` naming the digest where it breaks. NotFoundError for an
    unknown stage (before any registry read); a stage that cannot be read gets its ``error`` (the
    other stages are still read; when none can be read, the first stage's error is raised);
    RegistryUnavailableError (5) when the registry cannot be reached."""
    check_stages(ctx, stages)
    verdicts = VerdictCache.of(ctx)  # the records' layers verified before are not read again
    try:
        out, errors = _histories(ctx, target, stages, limit, verdicts)
    finally:
        verdicts.flush()
    if out and len(errors) == len(out):
        raise errors[0]
    return out


def _histories(
    ctx: PromotionContext, target: Target, stages: Sequence[str], limit: int, verdicts: VerdictCache
) -> tuple[list[StageHistory], list[BuilderError]]:
    out: list[StageHistory] = []
    errors: list[BuilderError] = []
    for s in stages or ctx.policy.stage_names:
        loc = ctx.stage_location(target, s)
        try:
            digest = ctx.client(loc.registry).try_resolve(loc.repository, loc.pointer_tag)
            if digest is None:
                out.append(StageHistory(s, None))  # never promoted (not an error)
                continue
            # the pointer read once: the chain starts from it, and its trust reuses the chain's first read
            found = chain(ctx, target, s, limit=limit, digest=digest, verdicts=verdicts)
            trust = pointer_trust(ctx, loc, s, digest, on=found.head)
            recs = found.records
            labelled = tuple((r, ctx.promoter_label(r)) for r in recs)
            if recs:
                note = "; ".join(x for x in (trust.note(ctx.promoter_names(s), short=True), *found.forks) if x) or None
                gap = (
                    f"the chain breaks at {found.gap[:19]}…: no trusted record put it into {s} before "
                    f"{recs[-1].time} (records missing or signed by keys this policy does not list)"
                    if found.gap
                    else None
                )
                out.append(StageHistory(s, str(loc), labelled, recs[0].digest, note, gap=gap))
                continue
        except RegistryUnavailableError:
            raise
        except BuilderError as exc:  # shown for this stage, then exit non-zero
            errors.append(exc)
            out.append(StageHistory(s, str(loc), error=exc.to_json()))
            continue
        out.append(StageHistory(s, str(loc), (), trust.digest, trust.note(ctx.promoter_names(s), short=True)))
    return out, errors


def first_error(errors: Sequence[ErrorBody | None]) -> ErrorBody | None:
    """The first of ``errors`` that is not None (the one whose exit code a command exits with)."""
    return next((e for e in errors if e is not None), None)


# ---------------------------------------------------------------------------------------------
# The commands: names as the user gave them -> one result each


@dataclasses.dataclass(frozen=True)
class StatusReport:
    """``builder status``: every row (variant x stage); ``selected``: the variants were chosen
    with ``--select`` (else every variant of the matrices, and those in no stage are summed up
    instead of listed)."""

    rows: tuple[StatusRow, ...]
    selected: bool = False

    @property
    def error(self) -> ErrorBody | None:
        """The first row's error (its ``exit_code`` is the command's); None when every row was read."""
        return first_error([r.error for r in self.rows])

    @property
    def unpromoted(self) -> tuple[str, ...]:
        """Variants no stage holds (and whose rows were all read), in order."""
        held = {r.variant for r in self.rows if r.digest or r.error}
        return tuple(dict.fromkeys(r.variant for r in self.rows if r.variant not in held))

    @property
    def shown(self) -> tuple[StatusRow, ...]:
        """The rows for people: all of them with ``--select``, else those of variants some stage holds."""
        if self.selected:
            return self.rows
        hidden = set(self.unpromoted)
        return tuple(r for r in self.rows if r.variant not in hidden)

    def to_json(self) -> StatusDocument:
        return {"rows": [r.to_json() for r in self.rows]}


def status_report(ctx: PromotionContext, globs: Sequence[str] = (), stages: Sequence[str] = ()) -> StatusReport:
    """``builder status``: the variants ``globs`` select (default: all) x ``stages`` (default:
    every stage). NotFoundError (8) for a glob that selects nothing or an unknown stage."""
    targets = resolve_targets(scope_of(ctx), (), globs or ("*",))
    check_stages(ctx, stages)
    return StatusReport(tuple(status(ctx, targets, list(stages) or None)), selected=bool(globs))


@dataclasses.dataclass(frozen=True)
class VariantHistory:
    """``builder history``: the ``variant`` as named and each stage's history."""

    variant: str
    stages: tuple[StageHistory, ...]

    @property
    def error(self) -> ErrorBody | None:
        """The first stage's error (its ``exit_code`` is the command's); None when every stage was read."""
        return first_error([h.error for h in self.stages])

    def to_json(self) -> HistoryDocument:
        return {"variant": self.variant, "stages": [h.to_json() for h in self.stages]}


def variant_history(
    ctx: PromotionContext, variant: str, stages: Sequence[str] = (), *, limit: int = 50
) -> VariantHistory:
    """``builder history VARIANT``: :func:`stage_histories` of the variant id or reference
    ``variant``, at most ``limit`` records per stage. NotFoundError for unknown names or stages."""
    [target] = resolve_targets(scope_of(ctx), (variant,))
    return VariantHistory(variant, tuple(stage_histories(ctx, target, stages, limit=limit)))
