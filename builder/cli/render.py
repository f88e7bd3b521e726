"""``builder render`` (write/check committed Dockerfiles) and ``builder lock`` (hashed dependency locks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from builder.cli._common import (
    PathParam,
    app_context,
    console,
    emit,
    json_option,
    matrix_option,
    select_option,
)
from builder.cli.terminal import counted

if TYPE_CHECKING:
    from pathlib import Path


@click.command()
@matrix_option
@select_option
@click.option(
    "--out",
    "out_dir",
    type=PathParam(file_okay=False),
    default=None,
    help="Output directory (default: render_dir of builder.toml, `rendered/`).",
)
@click.option("--check", is_flag=True, help="Write nothing; exit 12 with a diff when committed renders are stale.")
@json_option
def render(matrices: tuple[Path, ...], globs: tuple[str, ...], out_dir: Path | None, check: bool) -> None:
    """Render every variant's Dockerfile into <render_dir>/<matrix>/<variant>.Dockerfile.

    Committed renders hold no machine-local digest, so `--check` gives the same answer on any
    machine. Renders of variants no longer in a matrix are removed (not with --select).
    """
    from builder.variants import render_project

    outcome = render_project(app_context().config, matrices, globs, out_dir=out_dir, check=check)
    report = outcome.report

    def human() -> None:
        verb = "checked" if check else "rendered"
        console().print(
            f"{verb} {counted(len(outcome.rendered), 'variant')} into {report.out_dir}: {len(report.changed)} changed, "
            f"{len(report.added)} added, {len(report.removed)} removed, {report.unchanged} unchanged"
        )
        if outcome.unbuildable:
            left = counted(outcome.unbuildable, "variant")
            console().print(f"[yellow]{left} not buildable yet (unpinned base or missing lock)[/]")

    emit(outcome.to_json(), human)


@click.command()
@matrix_option
@select_option
@click.option("--upgrade", is_flag=True, help="Re-resolve locks that are up to date (newest allowed versions).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Seconds per resolution (more than 0).",
)
@json_option
def lock(matrices: tuple[Path, ...], globs: tuple[str, ...], upgrade: bool, timeout: float) -> None:
    """Resolve each variant's Python packages to exact versions with hashes (uv pip compile)
    into locks/<variant>.txt. Variants whose index is unreachable here are reported `unresolved`
    (builds refuse them until a lock is committed).
    """
    import os

    from builder.variants import lock_project

    results = lock_project(app_context().config, matrices, globs, environ=os.environ, upgrade=upgrade, timeout=timeout)

    def human() -> None:
        colors = {"written": "green", "up-to-date": "green", "not-needed": "dim", "unresolved": "yellow"}
        for r in results:
            line = f"[{colors[r.status]}]{r.status:>11}[/]  {r.variant_id}"
            if r.error:
                from rich.markup import escape

                line += f"  [dim]{escape(r.error.splitlines()[-1][:100])}[/]"
            console().print(line, highlight=False)

    emit([r.to_json() for r in results], human)
