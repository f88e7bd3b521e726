"""``builder doctor``: is everything this tool talks to reachable?"""

from __future__ import annotations

import click

from builder.cli._common import app_context, console, docker_config_option, emit, json_option


@click.command()
@docker_config_option
@json_option
def doctor() -> None:
    """Check the container engine, buildx, the registry and cosign.

    Exits 3 when the engine is unavailable and 5 when the registry is, so scripts can tell them
    apart (docs/exit-codes.md). When the Docker config holds credentials for the registry, the
    registry must accept them (exit 6 naming the config otherwise); without credentials, a
    registry that asks for a login counts as answering.
    """
    from builder import doctor as core

    report = core.diagnose_environment(app_context().app.default_client)

    def human() -> None:
        for item in report.items:
            mark = "[green]ok[/]" if item.ok else "[red]FAIL[/]"
            from rich.markup import escape

            console().print(f"{mark:>14}  {item.name:<10} {escape(item.detail)}")

    if not report.ok:
        human()
        report.raise_first_failure()  # --json: the error document carries the whole report
    emit(report.to_json(), human)
