"""``builder ledger verify``: the audit ledger's hash chain and its agreement with the registry.
Options, one call into ``builder.promote.ledger_check``, ``emit()``. Reference: docs/promotion.md
(The audit ledger), docs/commands.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from builder.cli._common import app_context, console, docker_config_option, emit, json_option, policy_option

if TYPE_CHECKING:
    from pathlib import Path

    from builder.promote.ledger_check import LedgerReport


@click.group()
def ledger() -> None:
    """The local audit ledger of promotions (builder.toml `ledger`)."""


@ledger.command()
@policy_option
@docker_config_option
@json_option
def verify(policy_file: Path | None) -> None:
    """Check the ledger's hash chain and that the registry still holds each row's signed record.

    Every applied promotion and rollback in the ledger names the promotion/v1 record it wrote;
    that record must still be in the registry, verify, and be signed by a key the policy trusts.
    Exit 33 when a row was edited or removed, or the registry does not confirm a row.

    \b
    Examples:
      builder ledger verify            # builder.toml's ledger
      builder ledger verify --policy policies/default.yaml --json
    """
    from builder.promote.ledger_check import existing_ledger, verify_ledger

    app = app_context().app
    ctx = app.promotion(policy_file, None, need_signer=False)
    path = app.config.ledger_path
    report = verify_ledger(ctx, existing_ledger(path), str(path))
    report.raise_for_problems()  # exit 33, every problem in the error (one document with --json)
    emit(report.to_json(), lambda: _print(report))


def _print(report: LedgerReport) -> None:
    console().print(
        f"ledger {report.ledger}: {report.rows} row(s), hash chain intact, "
        f"{report.checked} record(s) confirmed by the registry",
        markup=False,
    )
