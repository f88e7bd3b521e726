"""Promotion commands: ``policy validate``, ``approve``, ``promote``, ``rollback``, ``status``,
``history``, ``resolve``. Options, one call into ``builder.promote`` / ``builder.policy``, ``emit()``.
Every command that reads a registry takes ``--docker-config`` (credentials as the Docker CLI finds
them). Reference: docs/promotion.md and docs/policies.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from builder.cli._common import (
    DigestParam,
    PathParam,
    app_context,
    console,
    docker_config_option,
    emit,
    file_option,
    json_option,
    key_option,
    policy_option,
    select_option,
    stage_option,
    trust_option,
)

if TYPE_CHECKING:
    from pathlib import Path

    from builder.cli.tables import Column
    from builder.error_documents import ErrorBody
    from builder.errors import BuilderError
    from builder.promote import Batch, StatusReport, VariantHistory
    from builder.promote.changes import PlanChanges
    from builder.promote.model import ExpectPrevious, Outcome, Plan


def _expect_previous(_ctx: click.Context, _param: click.Parameter, value: str | None) -> ExpectPrevious:
    from builder.promote.model import parse_expect_previous

    return parse_expect_previous(value)


# --------------------------------------------------------------------------------------------- policy


@click.group()
def policy() -> None:
    """Promotion policies (policies/*.yaml): validate them."""


@policy.command("validate")
@click.argument("files", nargs=-1, type=PathParam(dir_okay=False))
@json_option
def policy_validate(files: tuple[Path, ...]) -> None:
    """List every problem of the policy files (default: every policies/*.yaml) with its location."""
    from builder.promote.context import validate_stage_policies

    result = validate_stage_policies(app_context().config, files)

    def human() -> None:
        for f in result.files:
            mark = ("valid", "green") if f.valid else ("invalid", "red")
            stages = f" (stages: {' -> '.join(f.stages)})" if f.stages else ""
            _say(f"{mark[0]} {f.file}{stages}", lead=mark)
            for p in f.problems:
                _say(f"  {p}", style="yellow" if p.severity == "warning" else "red")

    if result.errors:
        human()
    result.raise_for_problems()
    emit(result.to_json(), human)


# --------------------------------------------------------------------------------------------- approve


@click.command()
@click.argument("reference")
@stage_option("The stage this approval is for (one stage only).", required=True)
@file_option("--key", "key_file", required=True, help="The approver's signing key.")
@click.option("--ticket", default=None, help="Change ticket the approval refers to.")
@click.option("--comment", default=None, help="Free text kept in the approval.")
@click.option("--name", default=None, help="Approver name recorded with the key fingerprint.")
@click.option("--unlisted", is_flag=True, help="Record it even though the policy does not list the key as an approver.")
@click.option("--strict", is_flag=True, help="Refuse a tag: approve only REGISTRY/REPO@sha256:… digests.")
@policy_option
@docker_config_option
@json_option
def approve(
    reference: str,
    stage: str,
    key_file: Path,
    ticket: str | None,
    comment: str | None,
    name: str | None,
    unlisted: bool,
    strict: bool,
    policy_file: Path | None,
) -> None:
    """Record a signed approval/v1 of REFERENCE's digest for STAGE (valid for that digest and stage only).

    A key the policy does not list as an approver is refused (exit 16) unless --unlisted. A tag
    is resolved and the digest approved is printed (--strict refuses tags, exit 2). Warns
    (stderr; `warnings` in --json) when the policy would never count it: the key is not a listed
    approver of the stage, the ticket does not match the stage's change_ticket pattern, or the
    digest is a platform manifest of an indexed build (approve the index it names) or an
    attestation manifest.
    """
    from builder.promote.approve import approve_reference

    app = app_context().app
    outcome = approve_reference(
        app.promotion(policy_file),
        app.image_reference(reference),  # a variant id: its moving tag, as every command reads REF
        stage,
        app.signer(key_file),
        key_label=str(key_file),
        name=name,
        ticket=ticket,
        comment=comment,
        allow_unlisted=unlisted,
        strict=strict,
    )
    for w in outcome.warnings:  # on stderr with --json too (stdout stays one JSON document)
        _say(f"warning: {w}", lead=("warning:", "yellow"))
    for n in outcome.notes:
        _say(f"note: {n}")
    emit(
        outcome.to_json(),
        lambda: _say(
            f"approved {outcome.approval.reference} for {stage} as {outcome.who}"
            + ("" if outcome.approval.write.appended else " (already approved)")
        ),
    )


# --------------------------------------------------------------------------------------------- promote


@click.command()
@click.argument("names", nargs=-1)
@click.option("--to", "stage", required=True, help="Stage to promote into.")
@click.option("--change", "ticket", default=None, help="Change ticket (checked against the stage's pattern).")
@click.option("--confirm", is_flag=True, help="Apply. Without it only the plan is shown (dry run).")
@select_option
@click.option("--variant-id", default=None, help="Variant id of a REFERENCE whose tag does not tell it.")
@click.option(
    "--expect-previous",
    type=DigestParam("none"),
    default=None,
    callback=_expect_previous,
    help="Digest the stage must still hold (compare-and-swap with a reviewed plan); 'none' = empty.",
)
@click.option(
    "--workers", type=click.IntRange(1, 64), default=16, show_default=True, help="Variants promoted in parallel (1-64)."
)
@policy_option
@key_option
@trust_option
@docker_config_option
@json_option
def promote(
    names: tuple[str, ...],
    stage: str,
    ticket: str | None,
    confirm: bool,
    globs: tuple[str, ...],
    variant_id: str | None,
    expect_previous: ExpectPrevious,
    workers: int,
    policy_file: Path | None,
    key: Path | None,
    trust_root: Path | None,
) -> None:
    """Plan (default) or apply (--confirm) promoting VARIANT(s) or REFERENCE(s) into a stage.

    Moves the digest (tag PUT, cross-repository mount or copy of missing blobs), never rebuilds.
    The dry run also shows what changes against the digest the stage holds, as `builder diff`:
    stack, minimum driver, GPU targets gained/lost, clusters whose verdict changes, packages.
    Exit 31 when policy denies any, 32 on a concurrent change.
    """
    from builder.promote import promote_names

    app = app_context().app
    ctx = app.promotion(policy_file, key, need_signer=confirm, trust_root=trust_root)
    if not confirm and key is not None:  # the dry run checks the key --confirm would sign with
        import dataclasses

        ctx = dataclasses.replace(ctx, signer=app.signer(key))
    batch = promote_names(
        ctx,
        names,
        globs,
        stage=stage,
        variant_id=variant_id,
        ticket=ticket,
        confirm=confirm,
        expect_previous=expect_previous,
        workers=workers,
    )
    if batch.failure is not None:
        _print_batch(batch)
        from builder.cli.github import report_result  # the step summary lists the failures too

        report_result(batch)
    batch.raise_for_failure()
    emit(batch.to_json(), lambda: _print_batch(batch), report=batch)


def _say(text: str, *, hang: int = 2, lead: tuple[str, str] | None = None, style: str | None = None) -> None:
    """Print ``text`` (plain, leading spaces kept as the indent) folded at spaces to the console's
    width (:func:`builder.cli.terminal.fold`: references and digests are never split); ``lead``:
    (its first word, a style) printed in that style (``promoted`` in green); ``style``: the whole text's."""
    from builder.cli.plaintext import escape

    con = console()
    folded = text
    if len(text) > con.width:  # textwrap (fold) is imported only for a line that needs it
        from builder.cli.terminal import fold

        body = text.lstrip(" ")
        folded = fold(body, con.width, indent=" " * (len(text) - len(body)), hang=hang)
    if lead is not None and folded.startswith(lead[0]):
        word, style = lead
        con.print(f"[{style}]{escape(word)}[/]{escape(folded[len(word) :])}", highlight=False, soft_wrap=True)
        return
    con.print(folded, markup=False, highlight=False, soft_wrap=True, style=style)


def _say_reasons(p: Plan) -> None:
    for r in p.decision.reasons:
        for line in r.lines(1):  # "  [pass] rule: reason": continuation lines under the reason
            _say(line, hang=len("[pass] "))


def _print_batch(batch: Batch) -> None:
    from builder.errors import PolicyDeniedError

    for o in batch.outcomes:
        p = o.plan
        if p is None:
            if not _said_by_failure(batch, o.error):
                _say(f"error {o.target.variant}: {o.error.message if o.error else ''}", lead=("error", "red"))
            continue
        if _already_held(o):
            held_by = f"already in {p.stage} {p.target.variant}: {p.destination} holds {p.digest}"
            _say(held_by, lead=("already", "green"))
            _say(
                "  nothing written (no interrupted promotion to complete)"
                if o.applied is not None
                else "  --confirm would move nothing (it only completes a promotion an interrupted run left)"
            )
            _say_reasons(p)
            continue
        source = f"{p.target.given or p.source} (image {p.digest or '-'}) -> {p.destination}"
        held = "" if o.after is not None else f" ({'was' if o.applied is not None else 'now'} {p.previous or 'empty'})"
        _say(f"{o.verb} {p.target.variant}: {source}{held}", lead=(o.verb, "green" if o.ok else "red"))
        _say_reasons(p)
        if o.changes is not None:
            _print_changes(o.changes)
        if o.applied is not None:
            a = o.applied
            extra = " (completed an interrupted promotion)" if a.completed else ""
            _say(f"  applied in {a.seconds * 1000:.0f} ms{extra}: {a.plan.destination.pinned(a.record.digest)}")
        elif o.after is not None:
            _print_failed_apply(o, p, said=_said_by_failure(batch, o.error))
        elif (
            o.error is not None and not isinstance(o.error, PolicyDeniedError) and not _said_by_failure(batch, o.error)
        ):
            _say(f"  {o.error.kind}: {o.error.message}")
    if batch.would_apply and not all(_already_held(o) for o in batch.outcomes if o.plan and o.plan.decision.allowed):
        console().print("[dim]dry run: add --confirm to apply[/]")


#: a tag of cosign's scheme for what is attached to an image (``sha256-<hex>.sig`` its signatures,
#: ``.att`` its attestations): https://github.com/sigstore/cosign/blob/main/specs/SIGNATURE_SPEC.md
_ATTACHED_TAG = r"sha256-([0-9a-f]{64})\.(sig|att)\b"


def _print_failed_apply(o: Outcome, p: Plan, *, said: bool) -> None:
    """What a --confirm whose apply failed left: what failed, what the stage's pointer names now
    (read after the failure), and what each ``sha256-<hex>.att``/``.sig`` tag in the error is."""
    after = o.after
    error = o.error
    if after is None or error is None:
        return
    where = "the error below" if said else f"{error.kind}: {error.message}"
    was = p.previous or "nothing (empty)"
    resolve = f"builder resolve {p.target.variant} --stage {p.stage}"
    if after.unread is not None:
        state = f"{p.destination} could not be read after the failure ({after.unread}); `{resolve}` shows what it holds"
    elif after.digest == p.previous:
        still = f"still points at {p.previous}" if p.previous else "is still empty"
        state = f"{p.stage} {still} (read after the failure); re-run the command to try again"
    elif after.digest == p.digest:
        state = (
            f"{p.stage} now points at the image (read after the failure) but the promotion is not complete; "
            "re-run the command to complete it"
        )
    else:
        state = (
            f"{p.stage} now points at {after.digest or 'nothing (empty)'} (read after the failure), neither "
            f"what it held ({was}) nor the image: another writer moved it; see `builder history "
            f"{p.target.variant} --stage {p.stage}`"
        )
    _say(f"  not promoted: the apply failed ({where}); {state}")
    import re

    for hexdigest, kind in dict.fromkeys(re.findall(_ATTACHED_TAG, f"{error.message} {error.hint or ''}")):
        digest = f"sha256:{hexdigest}"
        of = "the image being promoted" if digest == p.digest else f"image {digest}"
        what = "signatures" if kind == "sig" else "attestations (signed promotion records, check results)"
        _say(f"  sha256-{hexdigest[:12]}….{kind} is the tag that holds the {what} of {of}")


def _said_by_failure(batch: Batch, error: BuilderError | None) -> bool:
    """Whether the error the command exits with (``batch.failure``, printed once by
    ``builder.cli.main``) already says ``error``: every target failed with that message (one
    target, or one cause for all, such as an undefined stage). Then no target line repeats it."""
    failure = batch.failure
    if failure is None or error is None or error.message != failure.message:
        return False
    return all(o.error is not None and o.error.message == failure.message for o in batch.outcomes)


def _already_held(o: Outcome) -> bool:
    """A plan the policy allows of a digest the stage already holds: a dry run (nothing to move), or
    a --confirm that wrote nothing (no interrupted promotion to complete)."""
    p = o.plan
    return (
        p is not None
        and (o.applied is None or not o.applied.completed)
        and o.error is None
        and p.decision.allowed
        and p.digest is not None
        and p.digest == p.previous
    )


def _print_changes(changes: PlanChanges) -> None:
    """The dry run's comparison with the stage's digest (``builder diff``'s lines, indented)."""
    from builder.cli.diff import diff_lines

    if changes.diff is None:
        _say(f"  changes: {changes.note}")
        return
    held = (changes.against or "")[:19]
    _say(f"  changes against what the stage holds ({held}…):")
    for text in diff_lines(changes.diff, "    "):
        _say(text)


# --------------------------------------------------------------------------------------------- rollback


def _rollback_target(words: tuple[str, ...], stage: str | None) -> tuple[str, str]:
    """(stage, variant) from ``VARIANT --stage STAGE`` or the positional ``STAGE VARIANT``."""
    if stage is not None and len(words) == 1:
        return stage, words[0]
    if stage is None and len(words) == 2:
        return words[0], words[1]
    got = " ".join(words) or "no variant"
    raise click.UsageError(
        f"give the variant and its stage: `builder rollback VARIANT --stage STAGE` (got {got}"
        + (f" --stage {stage})" if stage is not None else ")")
    )


@click.command()
@click.argument("words", nargs=-1, metavar="VARIANT --stage STAGE | STAGE VARIANT")
@stage_option("The stage to roll back (as resolve, history and report take it).")
@click.option(
    "--to",
    "to",
    type=DigestParam(),
    default=None,
    help="Digest of the stage's history to return to (default: what the current digest replaced "
    "when it was promoted; `builder history` lists them).",
)
@click.option("--ticket", default=None, help="Change ticket recorded with the rollback.")
@click.option("--confirm", is_flag=True, help="Apply. Without it only the plan is shown (dry run).")
@policy_option
@key_option
@trust_option
@docker_config_option
@json_option
def rollback(
    words: tuple[str, ...],
    stage: str | None,
    to: str | None,
    ticket: str | None,
    confirm: bool,
    policy_file: Path | None,
    key: Path | None,
    trust_root: Path | None,
) -> None:
    """Plan (default) or apply (--confirm) pointing STAGE back at a digest it held for VARIANT.

    The stage is `--stage STAGE` (as for resolve, history, report); the older `rollback STAGE
    VARIANT` form still works.

    The target is read from the registry's signed promotion records; the rollback is itself a
    signed record. --key must be allowed by the stage's `rollback.allowed`. Exit 31 when not
    allowed, 8 when there is nothing to roll back to, 18 for an untrusted pointer, 32 on a
    concurrent change.

    \b
    Examples:
      builder history VARIANT --stage prod            # digests prod held
      builder rollback VARIANT --stage prod --key K   # plan only
      builder rollback VARIANT --stage prod --to sha256:... \\
          --ticket CHG-1 --confirm --key K            # apply
    """
    from builder.promote import rollback_variant

    stage, variant = _rollback_target(words, stage)
    # the key is checked in the dry run too; only --confirm writes the ledger (a read-only state folder plans)
    ctx = app_context().app.promotion(policy_file, key, need_signer=True, trust_root=trust_root, ledger=confirm)
    result = rollback_variant(ctx, variant, stage, to=to, ticket=ticket, confirm=confirm)

    def human() -> None:
        for line in result.text().splitlines():
            _say(line)

    emit(result.to_json(), human)


# --------------------------------------------------------------------------------------------- status


@click.command()
@select_option
@stage_option("Only these stages", multiple=True)
@policy_option
@trust_option
@docker_config_option
@json_option
def status(
    globs: tuple[str, ...],
    stages: tuple[str, ...],
    policy_file: Path | None,
    trust_root: Path | None,
) -> None:
    """Which digest each stage holds for each variant, since when, and its evidence."""
    from builder.promote import status_report

    ctx = app_context().app.promotion(policy_file, None, need_signer=False, trust_root=trust_root)
    report = status_report(ctx, globs, stages)
    emit(report.to_json(), lambda: _print_status(report))
    _exit_for_unread(report.error, "row(s)", sum(1 for r in report.rows if r.error))


def _exit_for_unread(error: ErrorBody | None, what: str, count: int) -> None:
    """After every row was printed: exit with the first unread row's code (``error``), saying how
    many could not be read (with --json the document already printed says it, row by row)."""
    if error is None:
        return
    if not app_context().json_output:
        console().print(f"[bold red]error:[/] {count} {what} could not be read (first: exit {error['exit_code']})")
    raise click.exceptions.Exit(error["exit_code"])


def status_columns() -> list[Column]:
    """The columns of ``builder status``'s table, in order, with what each may give up to fit."""
    from builder.cli.tables import Column

    return [
        Column("variant", whole=True),
        Column("stage", 0),
        Column("digest", 0, whole=True),
        Column("age", 1),
        Column("by", 2),
        Column("sigs", 2),
        Column("attestations", 3),
    ]


def _print_status(report: StatusReport) -> None:
    from rich.markup import escape

    from builder.cli.tables import fitted_table

    columns = status_columns()
    rows = [
        [
            escape(r.variant),
            escape(r.stage),
            (r.digest or "-")[:19],
            escape(r.age),
            escape(r.promoter or "-"),
            str(r.signatures),
            "; ".join(x for x in (escape(", ".join(r.attestation_names)), note) if x),
        ]
        for r in report.shown
        for note in [
            f"[red]error: {escape(r.error['message'])}[/]"
            if r.error
            else (f"[yellow]{escape(r.note)}[/]" if r.note else "")
        ]
    ]
    console().print(fitted_table(columns, rows, console().width, show_lines=False))
    if report.unpromoted and not report.selected:
        console().print(
            f"[dim]{len(report.unpromoted)} variant(s) of the matrices are in no stage yet (listed with --select '*' "
            "or --json)[/]"
        )


# --------------------------------------------------------------------------------------------- history


@click.command()
@click.argument("variant")
@stage_option("Only these stages (default: every stage)", multiple=True)
@click.option(
    "--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Records read per stage (1 or more)."
)
@policy_option
@trust_option
@docker_config_option
@json_option
def history(
    variant: str,
    stages: tuple[str, ...],
    limit: int,
    policy_file: Path | None,
    trust_root: Path | None,
) -> None:
    """The promotion history of VARIANT per stage, newest first, read from the registry."""
    from builder.promote import variant_history

    ctx = app_context().app.promotion(policy_file, None, need_signer=False, trust_root=trust_root)
    result = variant_history(ctx, variant, stages, limit=limit)
    emit(result.to_json(), lambda: _print_history(result))
    _exit_for_unread(result.error, "stage(s)", sum(1 for h in result.stages if h.error))


def _print_history(result: VariantHistory) -> None:
    con = console()
    for h in result.stages:
        con.print(f"[bold]{h.stage}[/] {h.pointer or '(never promoted)'}")
        if h.error:
            _say(f"  error: {h.error['message']}", style="red")
        if h.note:
            _say(f"  {h.note}", style="yellow")
        if h.records:  # a fitted table (builder.cli.tables): at 80 columns what does not fit moves under the time
            from rich.markup import escape

            from builder.cli.tables import Column, fitted_table, to_seconds

            columns = [
                Column("time", whole=True),
                Column("action"),
                Column("digest", whole=True),
                Column("previous", 1, whole=True),
                Column("by", 1),
                Column("ticket", 2),
            ]
            rows = [
                [
                    escape(to_seconds(r.time)),
                    escape(r.action),
                    r.digest[:19],
                    (r.previous or "-")[:19],
                    escape(by),
                    escape(r.ticket or "-"),
                ]
                for r, by in h.records
            ]
            con.print(fitted_table(columns, rows, con.width - 2, boxed=False, indent=2))
        if h.gap:
            _say(f"  gap: {h.gap}", style="yellow")
