"""``builder fleet audit``: every digest in every stage re-evaluated against the current fleet files.

When a cluster's driver is upgraded or downgraded, or a GPU model is added, the digests already in
stages were judged against the old fleet. The audit reads what each stage holds (the stage pointers
``builder status`` reads), and asks the same fleet checker the policy's ``fleet`` rule uses
(:func:`builder.promote.fleets.check_fleet`, through ``builder.compat``) about every cluster the stage
serves: the clusters of the fleet files the stage's ``fleet`` rules name, else of every fleet file
given (``builder.toml`` ``fleets_dir``). Only clusters of the image's vendor count (a CPU image: all).

The answer lists what would stop running where; its ``failure()`` is IncompatibleError (exit 11)
naming each digest of a *gated* stage (default: the policy's last stage, prod) that is ``blocked``
on a cluster it serves. A stage row that could not be read is reported and exits with its error.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from typing_extensions import TypedDict

from builder.error_documents import ErrorBody
from builder.errors import IncompatibleError
from builder.models import SummaryRow
from builder.promote.queries import first_error, status_report
from builder.registry import parse_reference

if TYPE_CHECKING:
    from collections.abc import Sequence

    from builder.policy import FleetEvidence
    from builder.promote.context import PromotionContext
    from builder.promote.model import FleetChecker


class AuditRowDocument(TypedDict):
    """One digest x cluster: the ``stage`` and ``variant`` holding the ``reference``
    (``registry/repository@sha256:...``), the ``fleet`` file and ``cluster``, the ``verdict`` (``ok``,
    ``minor-version-compat``, ``forward-compat``, ``blocked``) and why; ``gated``: a blocked verdict here
    fails the audit."""

    stage: str
    variant: str
    reference: str
    fleet: str
    cluster: str
    verdict: str
    reason: str
    gated: bool


class FleetAuditDocument(TypedDict):
    """``builder fleet audit --json``: the gated stages, every applicable digest x cluster verdict, the
    ``blocked`` subset and the rows that could not be read (``errors``: each an error body with where)."""

    gated_stages: list[str]
    rows: list[AuditRowDocument]
    blocked: list[AuditRowDocument]
    errors: list[ErrorBody]


@dataclasses.dataclass(frozen=True)
class AuditRow:
    """One digest x cluster verdict (see :class:`AuditRowDocument`)."""

    stage: str
    variant: str
    reference: str
    fleet: str
    cluster: str
    verdict: str
    reason: str
    gated: bool

    def to_json(self) -> AuditRowDocument:
        return {
            "stage": self.stage,
            "variant": self.variant,
            "reference": self.reference,
            "fleet": self.fleet,
            "cluster": self.cluster,
            "verdict": self.verdict,
            "reason": self.reason,
            "gated": self.gated,
        }


@dataclasses.dataclass(frozen=True)
class FleetAudit:
    """The audit: every verdict, the gated stages, and the stage rows that could not be read."""

    gated_stages: tuple[str, ...]
    rows: tuple[AuditRow, ...]
    errors: tuple[ErrorBody, ...] = ()

    @property
    def blocked(self) -> tuple[AuditRow, ...]:
        return tuple(r for r in self.rows if r.verdict == "blocked")

    def summary_rows(self) -> tuple[SummaryRow, ...]:
        """One row per blocked digest x cluster: the variant, the digest, ``blocked on CLUSTER``, the stage."""
        return tuple(
            SummaryRow(r.variant, r.reference.rsplit("@", 1)[-1], f"blocked on {r.cluster}", r.stage)
            for r in self.blocked
        )

    def to_json(self) -> FleetAuditDocument:
        return {
            "gated_stages": list(self.gated_stages),
            "rows": [r.to_json() for r in self.rows],
            "blocked": [r.to_json() for r in self.blocked],
            "errors": list(self.errors),
        }

    @property
    def error(self) -> ErrorBody | None:
        """The first stage row that could not be read (its ``exit_code`` is the command's), else None."""
        return first_error(list(self.errors))

    def failure(self) -> IncompatibleError | None:
        """IncompatibleError (11) naming every gated digest and the clusters it no longer runs on, else None."""
        gated = [r for r in self.blocked if r.gated]
        if gated:
            by_ref: dict[tuple[str, str], list[str]] = {}
            for r in gated:
                by_ref.setdefault((r.stage, r.reference), []).append(r.cluster)
            named = "; ".join(f"{stage} {ref} on {', '.join(cs)}" for (stage, ref), cs in by_ref.items())
            return IncompatibleError(
                f"{len(by_ref)} digest(s) no longer run on clusters they serve: {named}"[:1500],
                hint="promote a variant built for the cluster's driver (`builder resolve VARIANT STAGE --cluster "
                "NAME` finds the newest that runs there), or restore the cluster's driver",
                blocked=[r.to_json() for r in gated],
                audit=self.to_json(),
            )
        return None


def audit_fleets(
    ctx: PromotionContext,
    *,
    default_fleets: Sequence[str],
    gated: Sequence[str] = (),
    checker: FleetChecker | None = None,
) -> FleetAudit:
    """Audit every digest in every stage of ``ctx.policy`` (see the module docstring). ``default_fleets``:
    fleet files (paths) for stages whose rules name none; ``gated``: the stages whose blocked digests fail
    the audit (default: the last stage). ``checker``: the fleet checker (default: ``ctx.fleet_checker``, else
    :func:`builder.promote.fleets.check_fleet`). Raises registry errors for an unreachable registry;
    ConfigError / NotFoundError for an invalid or missing fleet file."""
    from builder.promote.fleets import check_fleet

    check = checker or ctx.fleet_checker or check_fleet
    stages = ctx.policy.stage_names
    gate = tuple(gated) or stages[-1:]
    for s in gate:
        ctx.policy.stage(s)  # NotFoundError naming the stages
    report = status_report(ctx)
    rows: list[AuditRow] = []
    errors: list[ErrorBody] = []
    verdicts: dict[tuple[str, str], list[FleetEvidence]] = {}  # (reference, fleet) -> verdicts, asked once
    for row in report.rows:
        if row.error is not None:
            errors.append(row.error)
            continue
        if row.digest is None:
            continue
        ref = parse_reference(row.pointer.rsplit(":", 1)[0], ctx.registry)
        reference = f"{ref.registry}/{ref.repository}@{row.digest}"
        for fleet in ctx.policy.fleets(row.stage) or tuple(default_fleets):
            key = (reference, fleet)
            if key not in verdicts:
                verdicts[key] = check(ctx.client(ref.registry), ref.repository, row.digest, fleet)
            rows.extend(
                AuditRow(row.stage, row.variant, reference, fleet, e.cluster, e.verdict, e.reason, row.stage in gate)
                for e in verdicts[key]
                if e.applies
            )
    return FleetAudit(gate, tuple(rows), tuple(errors))


__all__ = ["AuditRow", "AuditRowDocument", "FleetAudit", "FleetAuditDocument", "audit_fleets"]
