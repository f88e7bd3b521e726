"""``builder fleet audit``: the digests in every stage re-evaluated against the current fleet files.

Thin Click layer over :mod:`builder.promote.audit` (docs/fleets.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from builder.cli._common import (
    app_context,
    console,
    docker_config_option,
    emit,
    fleet_option,
    json_option,
    trust_option,
)
from builder.cli._common import policy_option as _policy_option

if TYPE_CHECKING:
    from builder.promote.audit import FleetAudit


@click.group()
def fleet() -> None:
    """Fleets: the clusters images run on (fleets/*.yaml, docs/fleets.md)."""


@fleet.command()
@fleet_option("Audit against this fleet (default: every fleet in fleets_dir) where a stage names none.")
@click.option(
    "--gate",
    "gated",
    multiple=True,
    metavar="STAGE",
    help="A stage whose digests must still run on its clusters (repeatable; default: the last stage, prod).",
)
@_policy_option
@trust_option
@docker_config_option
@json_option
def audit(fleet: Path | None, gated: tuple[str, ...], policy_file: Path | None, trust_root: Path | None) -> None:
    """Re-check every digest in every stage against the current fleet files.

    Each stage's clusters are those of the fleet files its policy `fleet` rules
    name (else --fleet, else every fleets/*.yaml). Lists what no longer runs
    where; exit 11 when a digest of a gated stage (default: the last, prod) is
    blocked on a cluster it serves.

    \b
    builder fleet audit                      after editing fleets/*.yaml
    builder fleet audit --gate staging --gate prod --json
    """
    from builder.promote.audit import audit_fleets

    app = app_context().app
    defaults = [str(fleet)] if fleet else [str(p) for p in sorted(app.config.fleets_dir.glob("*.y*ml"))]
    ctx = app.promotion(policy_file, None, need_signer=False, trust_root=trust_root)
    result = audit_fleets(ctx, default_fleets=defaults, gated=gated)
    failure = result.failure()
    if failure is None or not app_context().json_output:  # --json: one document (the error carries it)
        emit(result.to_json(), lambda: _print_audit(result), report=result)
    else:
        from builder.cli.github import report_result

        report_result(result)
    if failure is not None:
        raise failure
    if result.error is not None:
        if not app_context().json_output:
            console().print(f"error: {len(result.errors)} stage row(s) could not be read", style="red")
        raise click.exceptions.Exit(result.error["exit_code"])


def _print_audit(result: FleetAudit) -> None:
    """A line per stage and blocked digest x cluster; then how many verdicts were judged."""
    c = console()
    if not result.rows:
        c.print("no stage holds a digest: nothing to audit", markup=False)
        return
    for r in result.blocked:
        mark = "BLOCKED" if r.gated else "blocked"
        c.print(f"{mark} {r.stage} {r.variant} on {r.cluster} ({Path(r.fleet).name})", markup=False, highlight=False)
        c.print(f"  {r.reference}", markup=False, highlight=False, soft_wrap=True)
        c.print(f"  {r.reason}", markup=False, highlight=False)
    digests = len({(r.stage, r.reference) for r in result.rows})
    c.print(
        f"{len(result.rows)} verdict(s) on {digests} stage digest(s); {len(result.blocked)} blocked "
        f"(gated stages: {', '.join(result.gated_stages)})",
        markup=False,
        highlight=False,
    )
