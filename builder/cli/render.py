"""``builder render`` (write/check committed Dockerfiles) and ``builder lock`` (hashed dependency locks)."""

from __future__ import annotations

from pathlib import Path

import click

from builder.cli._common import (
    app_context,
    console,
    emit,
    json_option,
    matrix_option,
    select_option,
)


@click.command()
@matrix_option
@select_option
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Output directory (default: render_dir of builder.toml, `rendered/`).",
)
@click.option("--check", is_flag=True, help="Write nothing; exit 12 with a diff when committed renders are stale.")
@json_option
def render(matrices: tuple[Path, ...], globs: tuple[str, ...], out_dir: str | None, check: bool) -> None:
    """Render every variant's Dockerfile into <render_dir>/<matrix>/<variant>/Dockerfile.

    Committed renders hold no machine-local digest, so `--check` gives the same answer on any
    machine. Renders of variants no longer in a matrix are removed (not with --select).
    """
    from builder import render as rcore
    from builder.selection import Selection
    from builder.variants import select_renders

    cfg = app_context().config
    rendered = select_renders(cfg, matrices, Selection(globs=globs))
    out = Path(out_dir) if out_dir else cfg.render_dir
    prune = not globs
    every = not matrices and not globs
    if check:
        report = rcore.check_renders(out, rendered, prune=prune, every_matrix=every)
    else:
        report = rcore.write_renders(out, rendered, prune=prune, every_matrix=every)
    payload = {
        **report.to_json(),
        "variants": [
            {
                "id": r.variant.id,
                "content_tag": r.content_tag,
                "content_hash": r.content_hash,
                "unpinned": list(r.unpinned),
            }
            for r in rendered
        ],
    }

    def human() -> None:
        verb = "checked" if check else "rendered"
        console().print(
            f"{verb} {len(rendered)} variants into {out}: {len(report.changed)} changed, "
            f"{len(report.added)} added, {len(report.removed)} removed, {report.unchanged} unchanged"
        )
        unpinned = sum(1 for r in rendered if r.unpinned)
        if unpinned:
            console().print(f"[yellow]{unpinned} variants are not buildable yet (unpinned base or missing lock)[/]")

    emit(payload, human)


@click.command()
@matrix_option
@select_option
@click.option("--upgrade", is_flag=True, help="Re-resolve locks that are up to date (newest allowed versions).")
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds per resolution.")
@json_option
def lock(matrices: tuple[Path, ...], globs: tuple[str, ...], upgrade: bool, timeout: float) -> None:
    """Resolve each variant's Python packages to exact versions with hashes (uv pip compile)
    into locks/<variant>.txt. Variants whose index is unreachable here are reported `unresolved`
    (builds refuse them until a lock is committed).
    """
    import os
    import shutil
    import sys

    from builder import locks
    from builder.selection import Selection
    from builder.variants import select_variants

    cfg = app_context().config
    variants = select_variants(cfg, matrices, Selection(globs=globs)).variants
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    env = dict(os.environ)
    env.setdefault("UV_HTTP_TIMEOUT", "15")
    results = locks.lock_variants(
        variants, cfg.locks_dir, uv=uv, env=env, upgrade=upgrade, timeout=timeout
    )
    payload = [
        {"id": r.variant_id, "status": r.status, "path": r.path, "seconds": round(r.seconds, 2), "error": r.error}
        for r in results
    ]

    def human() -> None:
        colors = {"written": "green", "up-to-date": "green", "not-needed": "dim", "unresolved": "yellow"}
        for r in results:
            line = f"[{colors[r.status]}]{r.status:>11}[/]  {r.variant_id}"
            if r.error:
                from rich.markup import escape

                line += f"  [dim]{escape(r.error.splitlines()[-1][:100])}[/]"
            console().print(line, highlight=False)

    emit(payload, human)
