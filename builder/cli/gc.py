"""``builder gc``: delete what retention allows (dry run by default). Options, one call into
``builder.promote.gc``, ``emit()``. Reference: docs/promotion.md (Retention), docs/commands.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from builder.cli._common import (
    app_context,
    console,
    docker_config_option,
    emit,
    json_option,
    policy_option,
    select_option,
)

if TYPE_CHECKING:
    from pathlib import Path

    from builder.promote.gc import GcReport


@click.command()
@click.option("--confirm", is_flag=True, help="Delete. Without it only what would be deleted is shown (dry run).")
@select_option
@policy_option
@docker_config_option
@json_option
def gc(confirm: bool, globs: tuple[str, ...], policy_file: Path | None) -> None:
    """Delete pending tags of interrupted builds and old content tags no stage needs.

    Keeps every digest a stage holds, its promotion history names (rollback targets) or a kept
    tag names; ages and retention come from the policy's `retention:` (content_tags 30d,
    pending_tags 1h by default). Signatures, attestations and Sigstore bundle referrers of
    deleted digests go with them, and those of a deleted index's platform manifests unless a
    kept index shares that platform.
    """
    from builder.promote.gc import collect_garbage

    ctx = app_context().app.promotion(policy_file, None, need_signer=False)
    report = collect_garbage(ctx, globs, confirm=confirm)
    emit(report.to_json(), lambda: _print_report(report))


def _print_report(report: GcReport) -> None:
    from rich.markup import escape

    con = console()
    verb = "deleted" if report.confirm else "would delete"
    for repo in report.repositories:
        con.print(f"[bold]{escape(repo.repository)}[/]")
        for t in repo.tags:
            mark = f"[red]{verb}[/]" if t.delete else "[green]keep[/]"
            con.print(f"  {mark} {escape(t.tag)} ({t.kind}, {t.digest[:19]}): {escape(t.reason)}")
        if not repo.tags:
            con.print("  [dim]nothing to collect[/]")
    con.print(
        f"{verb} {report.deleted_tags} tag(s), {report.deleted_manifests} manifest(s); "
        f"{_size(report.reclaimable_bytes)} reclaimable by the registry's garbage collector",
        markup=False,
    )
    if not report.confirm and report.deleted_tags:
        con.print("[dim]dry run: add --confirm to delete[/]")


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
