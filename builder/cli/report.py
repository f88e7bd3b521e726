"""``builder report VARIANT``: each stage's digests with their evidence, and a benchmark metric over
each stage's history as a terminal sparkline and an SVG chart (builder.promote.report)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from builder.cli._common import (
    PathParam,
    app_context,
    console,
    docker_config_option,
    emit,
    json_option,
    policy_option,
    stage_option,
)

if TYPE_CHECKING:
    from pathlib import Path

    from builder.promote.report import VariantReport


@click.command()
@click.argument("variant")
@stage_option("Only these stages (default: every stage)", multiple=True)
@click.option("--metric", help="Benchmark metric to chart (default: the first metric of the newest benchmark).")
@click.option(
    "--svg",
    "svg_file",
    type=PathParam(dir_okay=False),
    help="Write the chart here (default: <state_dir>/reports/<variant>.svg).",
)
@click.option("--no-svg", is_flag=True, help="Do not write the chart.")
@click.option(
    "--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Records read per stage (1 or more)."
)
@policy_option
@docker_config_option
@json_option
def report(
    variant: str,
    stages: tuple[str, ...],
    metric: str | None,
    svg_file: Path | None,
    no_svg: bool,
    limit: int,
    policy_file: Path | None,
) -> None:
    """The evidence of VARIANT's digests in each stage and its benchmark over each stage's history.

    \b
    For every digest a stage has held (its trusted promotion records,
    oldest first): the device check and tests results and the benchmark
    METRIC with the hardware class it was measured on, from the signed
    test-result/v1, benchmark/v1 and device-check/v1 attestations (keys of
    the policy). The series is drawn as a sparkline per stage and as an
    SVG line chart. Exit 5: registry unreachable; 8: unknown variant, stage
    or metric (the metrics the benchmarks have are named).

    \b
    Examples:
      builder report jax0.7-cpu-py3.11-debian12
      builder report REGISTRY/REPO:VARIANT --stage staging \\
          --metric matmul_f32_latency --svg perf.svg
    """
    import dataclasses
    import re

    from builder.outputs import write_output
    from builder.promote.report import variant_report

    app = app_context().app
    ctx = app.promotion(policy_file, None, need_signer=False)
    result = variant_report(ctx, variant, stages, metric=metric, limit=limit)
    if not no_svg:
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", variant)  # a reference has / and :
        path = svg_file or app.config.state_dir / "reports" / f"{name}.svg"
        write_output(path, result.svg(), "--svg")
        result = dataclasses.replace(result, svg_path=str(path))
    emit(result.to_json(), lambda: _print(result))


def _print(result: VariantReport) -> None:
    from rich.markup import escape

    from builder.promote.report import sparkline

    con = console()
    con.print(f"[bold]{escape(result.variant)}[/]")
    con.print(f"metric: {escape(result.metric or 'none (no benchmark/v1 found)')}")
    for s in result.stages:
        con.print(f"[bold]{escape(s.stage)}[/] {escape(s.digest or '(never promoted)')}")
        if s.error:
            con.print(f"  error: {s.error}", style="red", markup=False)
        values = [p.value for p in s.points]
        known = [v for v in values if v is not None]
        if known:
            unit = next((p.unit for p in s.points if p.unit), "")
            con.print(
                f"  {sparkline(values)}  last {known[-1]:g} {unit}, min {min(known):g}, max {max(known):g}"
                f" over {len(values)} digest(s)",
                markup=False,
            )
        if s.points and not any(p.time for p in s.points):
            con.print("  no trusted promotion record: only the digest the stage holds now", markup=False)
        for p in s.points[-5:]:
            bench = f"{p.value:g} {p.unit}" if p.value is not None else "-"
            con.print(  # 76 columns: minutes, 12 hex digits of the digest
                f"  {p.time[:16] or 'not recorded':<16}  {p.digest.removeprefix('sha256:')[:12]}"
                f"  check {p.device_check or '-':<6}  tests {p.tests or '-':<6}  {bench}",
                markup=False,
            )
    if not any(s.digest or s.points for s in result.stages):
        con.print(  # the report reads promoted digests only
            "no stage holds this variant yet: its evidence shows here once promoted\n"
            f"(builder promote {result.variant} --to {result.stages[0].stage if result.stages else 'dev'})",
            markup=False,
            highlight=False,
        )
    if result.svg_path:
        con.print(f"chart: {result.svg_path}", markup=False)
