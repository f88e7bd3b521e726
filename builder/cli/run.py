"""``builder run``: the whole pipeline for selected variants (``builder.pipeline``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from builder.cli._common import (
    allow_unpinned_option,
    app_context,
    buildx_builder_option,
    bundle_option,
    console,
    default_source_date_epoch,
    docker_config_option,
    emit,
    file_option,
    fleet_option,
    json_option,
    matrix_option,
    policy_option,
    select_option,
    workers_option,
)
from builder.cli.progress import BuildSteps, progress_option

if TYPE_CHECKING:
    from rich.console import Console

    from builder.cli.progress import Mode
    from builder.config import Config
    from builder.pipeline import RunReport


@click.command()
@matrix_option
@select_option
@click.option(
    "--to",
    "to_stage",
    default=None,
    metavar="STAGE",
    help="Promote up to this stage, where policy allows (default: the policy's first stage only).",
)
@click.option("--change", "ticket", default=None, help="Change ticket for stages that require one.")
@fleet_option("Also give each image's static verdict for every cluster of this fleet (e.g. demo).")
@policy_option
@file_option(
    "--check-key",
    help="Key that signs device-check results (default: builder.toml `check_key`).",
)
@click.option("--no-check", is_flag=True, help="Skip device checks (stages that require them will deny).")
@bundle_option("the provenance and each check result", ".sig/.att tags are")
@workers_option
@buildx_builder_option
@allow_unpinned_option
@progress_option
@docker_config_option
@json_option
def run(
    matrices: tuple[Path, ...],
    globs: tuple[str, ...],
    to_stage: str | None,
    ticket: str | None,
    fleet: Path | None,
    policy_file: Path | None,
    check_key: Path | None,
    no_check: bool,
    bundle: bool,
    workers: int | None,
    buildx_builder: str | None,
    allow_unpinned: bool,
    progress_mode: Mode,
) -> None:
    """Render, build, sign, check and promote: the whole pipeline for the selected variants.

    \b
    1. build and push what changed (content tags are write-once; nothing else
       is rebuilt), sign each digest and attach its SLSA provenance (key
       generated on first use);
    2. run the device checks on this host in fresh containers and attach the
       signed device-check/v1 result (a passing result already attached is
       reused);
    3. promote into the policy's first stage, and on into later stages up to
       --to where policy allows; a denial shows each failed rule.
    Re-running with nothing changed does registry look-ups only.

    \b
    Examples:
      builder run --matrix matrices/demo.yaml --to prod --fleet fleets/demo.yaml
      builder run --matrix matrices/demo.yaml --to staging --json
      builder run --select 'torch*' --builder gpu-fleet   a remote BuildKit

    Exit codes: 0 done (denials are reported, not errors); 14 a build failed; 13 unpinned base or lock;
    8 unknown stage; 2 unknown --builder; 3/5 engine/registry down.
    """
    from builder.pipeline import RunRequest
    from builder.selection import Selection

    app = app_context()
    cfg = app.config
    con = console()
    request = RunRequest(
        matrices=matrices,
        selection=Selection(globs=globs),
        to_stage=to_stage,
        ticket=ticket,
        fleet=fleet,
        policy_file=policy_file,
        check_key=check_key,
        check=not no_check,
        workers=workers,
        builder=buildx_builder,
        allow_unpinned=allow_unpinned,
        source_date_epoch=default_source_date_epoch(cfg),
        bundle=bundle,
    )

    def key_generated(path: Path, role: str) -> None:
        note = "" if app.app.key_password else " (unencrypted: set BUILDER_KEY_PASSWORD to encrypt keys)"
        con.print(f"generated the {role} key {path}{note}")

    steps = BuildSteps("quiet" if app.json_output else progress_mode, con.rich)

    def progress(variant: str, event: str, detail: str) -> None:
        if event.startswith("build:") and not steps.event(variant, event, detail):
            return
        if app.json_output and not event.endswith(("failed", "denied", "error")):
            return
        print_event(con.rich, variant, event, detail)

    with steps:
        report = app.app.run_pipeline(request, on_progress=progress, on_key=key_generated)
    if not report.ok and not app.json_output:
        _summary(report, cfg)
    if not report.ok:  # the step summary lists the failures too (the error below ends the command)
        from builder.cli.github import report_result

        report_result(report)
    report.raise_for_failures()
    emit(report.to_json(), lambda: _summary(report, cfg, check_key or cfg.check_key_path), report=report)


def print_event(con: Console, variant: str, event: str, detail: str) -> None:
    """One live progress line: ``EVENT VARIANT  detail``. A build's ``failed`` detail (its whole
    reason, which the command's error repeats at the end) is cut to the line, ``… (in full
    below)``: the reason is read once, in full, and the line fits the terminal."""
    import textwrap

    from rich.markup import escape

    color = "red" if event.endswith(("failed", "denied", "error")) else "green"
    if event.endswith(("building", ":check", "up-to-date")) or event == "check":
        color = "cyan"
    if event == "failed":
        room = max(20, con.width - 18 - len(variant) - 3)
        short = textwrap.shorten(detail, room, placeholder=" … (in full below)")
        detail = "reason in full below" if short.startswith("…") else short  # a first word longer than the line
    con.print(f"[{color}]{event:>18}[/] {variant}  [dim]{escape(detail)}[/]", highlight=False)


def _summary(report: RunReport, cfg: Config, check_key: Path | None = None) -> None:
    from rich.markup import escape

    from builder.cli.tables import Column, fitted_table
    from builder.predicates import DEVICE_CHECK_V1

    con = console()
    columns = [
        Column("variant", whole=True),
        Column("digest", 0, whole=True),
        Column("build", 1),
        Column("check", 2),
        Column("static (fleet)", 4),
        Column("stage", 1),
        Column("policy", 3),
    ]
    rows: list[list[str]] = []
    for v in report.variants:
        c = v.check
        check = "-"
        if c is not None:
            check = {"passed": "[green]passed[/]", "reused": "[green]passed (earlier)[/]"}.get(
                c.status, f"[red]{c.status}[/]" if c.status == "failed" else c.status
            )
            if c.diagnosis:  # no "at fault" when no layer was named (never a Python None)
                check += f"\n{escape(c.diagnosis)}" + (f" (at fault: {escape(c.at_fault)})" if c.at_fault else "")
        static = "-"
        if c is not None and c.static_verdict:
            static = c.static_verdict + "".join(f"\n{name}: {verdict}" for name, verdict in c.static_clusters)
        # the stages' verdicts only: their reasons are sentences, printed under the table at full width
        # (in a cell they were squeezed into the variant column at 80 columns)
        policy = ", ".join(f"{d.stage} {d.status}" for d in v.blocked)
        built = v.built.status != "failed"  # a failed build's digest (a foreign push, say) is not its image
        rows.append(
            [
                escape(v.variant_id),
                (v.built.digest or "-")[:19] if built else "-",
                v.built.status,
                check,
                escape(static),
                v.reached or "-",
                escape(policy) or ("[green]allowed[/]" if v.stages else "-"),  # a verdict only where judged
            ]
        )
    con.print(fitted_table(columns, rows, con.width, title=f"builder run ({report.seconds:.1f} s)", show_lines=True))
    _details(report)
    ok = [v for v in report.variants if v.built.digest and v.built.status != "failed"]
    if not ok:
        return
    pub = cfg.key_path.with_suffix(".pub")
    con.print("\n[bold]Pull and verify[/] (any machine that can reach the registry):")
    for v in ok:
        ref = v.built.pinned
        con.print(f"  docker pull {ref}", soft_wrap=True)
        con.print(f"  cosign verify --key {pub} --insecure-ignore-tlog {ref}", soft_wrap=True)
        if check_key is not None and v.check is not None and v.check.status in ("passed", "reused", "failed"):
            passed = v.check.status != "failed"
            cue = cfg.root / "docs" / "examples" / "device-check-passed.cue"
            con.print(
                f"  cosign verify-attestation --key {check_key.with_suffix('.pub')} --insecure-ignore-tlog "
                f"--type {DEVICE_CHECK_V1} "
                + (f"--policy {cue} {ref}" if passed and cue.exists() else f"{ref}   # signed result: failed"),
                soft_wrap=True,
            )
    con.print(f"  builder status --select '{escape(ok[0].variant_id)}'    # which digest each stage holds")
    if any(s.stage == "prod" and s.status == "denied" for v in report.variants for s in v.stages):
        con.print("\n" + approval_hint(cfg), soft_wrap=True)


def _details(report: RunReport) -> None:
    """Under the summary table, per variant: what its declared checks (the matrix's smoke tests and
    benchmark) did, one line each, and each blocked stage's reasons, at the console's full width."""
    from builder.cli.terminal import fold

    con = console()
    for v in report.variants:
        lines: list[tuple[str, str]] = []  # (indent, text)
        c = v.check
        if c is not None and c.evidence:
            lines += [("  ", e) for e in c.evidence]
        elif c is not None and c.status == "reused":
            lines.append(("  ", "checks passed earlier: their signed results were reused (nothing re-ran)"))
        for d in v.blocked:
            lines.append(("  ", f"{d.stage} {d.status}:"))
            lines += [("    - ", r) for r in d.short_reasons]
        if lines:
            con.print(f"\n{v.variant_id}", markup=False, highlight=False, style="bold")
            for indent, text in lines:  # folded at spaces, continuation lines indented (ids never split)
                pad = " " * (len(indent) - len(indent.lstrip()))  # "    - reason": the dash leads, text hangs
                con.print(fold(indent.lstrip() + text, con.width, indent=pad), markup=False, soft_wrap=True)


def approval_hint(cfg: Config, cwd: Path | None = None) -> str:
    """What to run when prod denied for want of approvals: approver key pairs generated where the
    shipped policies look for them (:meth:`Config.approver_key_dir`, under the configured
    ``state_dir``), shown relative to ``cwd`` (default: the working directory) when under it."""
    here = cwd or Path.cwd()

    def shown(path: Path) -> str:
        return str(path.relative_to(here)) if path.is_relative_to(here) else str(path)

    alice = cfg.approver_key_dir("alice")
    return (
        f"prod needs approvals: `builder keys generate --no-password --output-dir {shown(alice)}`"
        f" (and {shown(cfg.approver_key_dir('bob'))}),"
        f" then `builder approve REF --stage prod --key {shown(alice / 'builder.key')}`;"
        " the full reasons are in `builder promote VARIANT --to prod` and `--json`."
    )
