"""``builder matrix``: list (and so validate) the variants of the matrices."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from builder.cli._common import (
    app_context,
    changed_since_option,
    console,
    emit,
    json_option,
    matrix_option,
    select_option,
    shard_option,
)
from builder.cli.terminal import counted

if TYPE_CHECKING:
    from pathlib import Path


@click.group()
def matrix() -> None:
    """List and validate the variants of the matrices (matrices/*.yaml)."""


@matrix.command("list")
@matrix_option
@select_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "github"]),
    default="table",
    show_default=True,
    help='github: a GitHub Actions strategy.matrix ({"include": [...]}) on stdout.',
)
@shard_option
@changed_since_option
@json_option
def list_(
    matrices: tuple[Path, ...], globs: tuple[str, ...], fmt: str, shard: str | None, changed_since: str | None
) -> None:
    """Expand the matrices into variants (validating every cell) and list them.

    \b
    Examples:
      builder matrix list
      builder matrix list --select 'torch2.11-cu128-*' --json
      builder matrix list --format github --shard 1/4
      builder matrix list --format github --changed-since origin/main
    """
    from builder.selection import Selection
    from builder.variants import select_variants

    chosen = select_variants(app_context().config, matrices, Selection.from_options(globs, shard, changed_since))
    variants, loaded = chosen.variants, chosen.matrices
    if fmt == "github":
        sys.stdout.write(json.dumps(chosen.github_matrix(), separators=(",", ":")) + "\n")
        _warn(chosen.problems)
        return
    if fmt == "json":
        app_context().json_output = True

    def human() -> None:
        from rich.markup import escape

        from builder.cli.tables import Column, fitted_table

        columns = [
            Column("variant", whole=True),
            Column("accelerator", 2),  # the id names accelerator, framework, python and os: they go first
            Column("framework", 2),
            Column("python", 3),
            Column("os", 3),
            Column("platform", 1),
            Column("base", 1, whole=True),
        ]
        rows = []
        for v in variants:
            acc = v.accelerator.kind + (f" {v.accelerator.version}" if v.accelerator.version else "")
            base = escape(v.base.reference) + ("" if v.base.digest else " [yellow](unpinned)[/]")
            fw = f"{v.framework.name} {v.framework.version}"
            rows.append([escape(v.id), escape(acc), escape(fw), v.python, escape(v.os), v.platform, base])
        console().print(fitted_table(columns, rows, console().width, boxed=False))
        console().print(f"{counted(len(variants), 'variant')} from {counted(len(loaded), 'matrix', 'matrices')}")

    emit(chosen.to_json(), human)
    _warn(chosen.problems)


def _warn(problems: tuple[str, ...]) -> None:
    """Each problem as a ``warning:`` line on stderr (every format: the commands that use a
    named policy or fleet file refuse it with exit 8)."""
    if not problems:
        return
    from rich.markup import escape

    for problem in problems:
        console().print(f"[yellow]warning:[/] {escape(problem)}", highlight=False)
