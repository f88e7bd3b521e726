"""``builder resolve``: the validated ``repo@sha256:...`` of a variant in a stage. Options, one call
into :func:`builder.promote.resolve_variant`, the answer on stdout. A module of its own (not with the
other promotion commands of ``builder.cli.promote``): it is the command scripts run before every
deploy, so it imports only what it uses (start-up, issue 19). Reference: docs/promotion.md."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from builder.cli._common import (
    app_context,
    docker_config_option,
    emit,
    fleet_option,
    json_option,
    policy_option,
    stage_option,
    trust_option,
)

if TYPE_CHECKING:
    from pathlib import Path

NO_VERIFY_WARNING = "warning: --no-verify: no trusted promotion record was checked (tag taken as is)"
"""What ``resolve --no-verify`` says on stderr (one line, under 80 columns): the check it skipped."""


@click.command()
@click.argument("variant")
@stage_option("The stage whose digest to print.", required=True)
@click.option("--cluster", default=None, help="Refuse (exit 11) when the digest cannot run on this cluster.")
@fleet_option(
    "Fleet naming the cluster (default: the stage's policy `fleet` rule files, then every fleet "
    "in fleets/, as check --cluster looks)."
)
@click.option(
    "--no-verify",
    is_flag=True,
    help="Do not require a trusted promotion record on the digest (stderr warns; --json: verified false).",
)
@policy_option
@trust_option
@docker_config_option
@json_option
def resolve(
    variant: str,
    stage: str,
    cluster: str | None,
    fleet: Path | None,
    no_verify: bool,
    policy_file: Path | None,
    trust_root: Path | None,
) -> None:
    """Print VARIANT's validated repo@sha256:... in STAGE on stdout (never an older digest).

    With --cluster, VARIANT may be a glob: of the matching variants that run on
    the cluster, the one promoted to STAGE most recently (e.g. 'jax0.7-*' picks
    the cu126 build for a cluster whose driver is too old for cu128).
    """
    from builder.promote import resolve_variant

    app = app_context().app
    ctx = app.promotion(policy_file, None, need_signer=False, trust_root=trust_root)
    if cluster is not None and fleet is None:  # found as `check --cluster` finds it
        from builder.promote.fleets import cluster_fleet_file

        fleet = cluster_fleet_file(ctx.policy, stage, cluster, app.config.fleets_dir)
    resolved = resolve_variant(ctx, variant, stage, cluster=cluster, fleet=fleet, verify=not no_verify)
    if not resolved.verified:  # plain write: rich is not imported on this path (start-up budget)
        sys.stderr.write(NO_VERIFY_WARNING + "\n")
    if app_context().json_output:
        emit(resolved.to_json(), report=resolved)
    else:
        sys.stdout.write(resolved.reference + "\n")
        from builder.cli.github import report_result

        report_result(resolved)
