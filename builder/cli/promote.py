"""Promotion commands: ``policy validate``, ``approve``, ``promote``, ``rollback``, ``status``,
``history``, ``resolve``. Options, one call into ``builder.promote`` / ``builder.policy``, ``emit()``.
Every command that reads a registry takes ``--docker-config`` (credentials as the Docker CLI finds
them). Reference: docs/promotion.md and docs/policies.md."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from builder.cli._common import (
    app_context,
    console,
    docker_config_option,
    emit,
    file_option,
    fleet_option,
    json_option,
    key_option,
    policy_option,
    select_option,
    stage_option,
)

if TYPE_CHECKING:
    from builder.config import Config
    from builder.policy import Policy
    from builder.promote import PromotionContext, Target

trust_option = file_option(
    "--trust-root",
    help="Sigstore trusted_root.json for keyless identities in the policy (default: public-good, offline copy).",
)


def _load_policy(cfg: Config, given: Path | None) -> Policy:
    from builder.promote.context import load_stage_policy

    return load_stage_policy(cfg, given)


def _targets(
    ctx: PromotionContext, names: tuple[str, ...], globs: tuple[str, ...], variant_id: str | None
) -> list[Target]:
    from builder.promote import TargetScope, UnknownVariantError, resolve_targets
    from builder.promote.targets import matrix_variants

    cfg = app_context().config
    scope = TargetScope(
        variants=lambda: matrix_variants(cfg.matrices_dir),
        matrices_dir=cfg.matrices_dir,
        registry=cfg.registry,
        stage_names=ctx.policy.stage_names,
        clients=ctx.clients,
    )
    try:
        return resolve_targets(scope, names, globs, variant_id)
    except UnknownVariantError as exc:
        raise click.UsageError(str(exc)) from exc


# --------------------------------------------------------------------------------------------- policy


@click.group()
def policy() -> None:
    """Promotion policies (policies/*.yaml): validate them."""


@policy.command("validate")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, path_type=Path))
@json_option
def policy_validate(files: tuple[Path, ...]) -> None:
    """List every problem of the policy files (default: every policies/*.yaml) with its location."""
    from builder.errors import PolicyError
    from builder.policy import check_policy
    from builder.promote.context import policy_variables

    cfg = app_context().config
    paths = list(files) or sorted([*cfg.policies_dir.glob("*.yaml"), *cfg.policies_dir.glob("*.yml")])
    if not paths:
        raise PolicyError(f"no policy files in {cfg.policies_dir}", hint="write policies/default.yaml")
    results: list[dict[str, Any]] = []
    errors = 0
    for p in paths:
        pol, problems = check_policy(p, policy_variables(cfg))
        n_err = sum(1 for x in problems if x.severity == "error")
        errors += n_err
        results.append(
            {
                "file": str(p),
                "valid": pol is not None and n_err == 0,
                "stages": list(pol.stage_names) if pol else [],
                "problems": [
                    {"location": x.location, "path": x.path, "message": x.message, "severity": x.severity}
                    for x in problems
                ],
            }
        )

    def human() -> None:
        for r in results:
            mark = "[green]valid[/]" if r["valid"] else "[red]invalid[/]"
            console().print(f"{mark} {r['file']}" + (f" (stages: {' -> '.join(r['stages'])})" if r["stages"] else ""))
            for x in r["problems"]:
                color = "yellow" if x["severity"] == "warning" else "red"
                console().print(f"  [{color}]{x['severity']}[/] {x['location']}: {x['path']}: {x['message']}")

    if errors:
        human()
        raise PolicyError(f"{errors} problem(s) in {len(paths)} policy file(s)", files=results)
    emit({"files": results}, human)


# --------------------------------------------------------------------------------------------- approve


@click.command()
@click.argument("reference")
@stage_option("The stage this approval is for (one stage only).", required=True)
@file_option("--key", "key_file", required=True, help="The approver's signing key.")
@click.option("--ticket", default=None, help="Change ticket the approval refers to.")
@click.option("--comment", default=None, help="Free text kept in the approval.")
@click.option("--name", default=None, help="Approver name recorded with the key fingerprint.")
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
    policy_file: Path | None,
) -> None:
    """Record a signed approval/v1 of REFERENCE's digest for STAGE (valid for that digest and stage only).

    Warns (stderr; `warnings` in --json) when the policy would never count it: the key is not a
    listed approver of the stage, or the ticket does not match the stage's change_ticket pattern.
    """
    from builder.promote.approve import approve_reference

    app = app_context().app
    cfg = app.config
    outcome = approve_reference(
        reference,
        stage,
        app.signer(key_file),
        policy=_load_policy(cfg, policy_file),
        clients=app.client,
        default_registry=cfg.registry,
        lock_dir=cfg.state_dir / "locks",
        key_label=str(key_file),
        name=name,
        ticket=ticket,
        comment=comment,
    )
    for w in outcome.warnings:  # on stderr with --json too (stdout stays one JSON document)
        console().print(f"warning: {w}", style="yellow", markup=False)
    emit(
        outcome.to_json(),
        lambda: console().print(
            f"approved {outcome.approval.reference} for {stage} as {outcome.who}"
            + ("" if outcome.approval.write.appended else " (already approved)"),
            markup=False,
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
    default=None,
    help="Digest the stage must still hold (compare-and-swap with a reviewed plan); 'none' = empty.",
)
@click.option("--workers", type=int, default=16, show_default=True, help="Variants promoted in parallel.")
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
    expect_previous: str | None,
    workers: int,
    policy_file: Path | None,
    key: Path | None,
    trust_root: Path | None,
) -> None:
    """Plan (default) or apply (--confirm) promoting VARIANT(s) or REFERENCE(s) into a stage.

    Moves the digest (tag PUT, cross-repository mount or copy of missing blobs), never rebuilds.
    Exit 31 when policy denies any, 32 on a concurrent change.
    """
    from builder.promote import batch_error, promote_many
    from builder.promote.model import parse_expect_previous

    if not names and not globs:
        raise click.UsageError("name a VARIANT or REFERENCE, or pass --select GLOB")
    ctx = app_context().app.promotion(policy_file, key, need_signer=confirm, trust_root=trust_root)
    try:
        targets = _targets(ctx, names, globs, variant_id)
        outcomes = promote_many(
            ctx,
            targets,
            stage,
            ticket=ticket,
            confirm=confirm,
            expect_previous=parse_expect_previous(expect_previous),
            workers=workers,
        )
    finally:
        if ctx.ledger is not None:
            ctx.ledger.close()
    failure = batch_error(ctx, stage, outcomes)

    def human() -> None:
        from builder.errors import PolicyDeniedError

        con = console()
        for o in outcomes:
            p = o.plan
            if p is None:
                con.print(f"[red]error[/] {o.target.variant}: {o.error.message if o.error else ''}")
                continue
            verb = "promoted" if o.applied else ("would promote" if p.decision.allowed else "denied")
            color = "green" if o.ok else "red"
            con.print(
                f"[{color}]{verb}[/] {p.target.variant}: {p.source} ({p.digest or '-'}) -> {p.destination}"
                f" (now {p.previous or 'empty'})"
            )
            for r in p.decision.reasons:
                for line in r.lines(1):
                    con.print(line, markup=False)
            if o.applied is not None:
                a = o.applied
                extra = " (completed an interrupted promotion)" if a.completed else ""
                con.print(
                    f"  applied in {a.seconds * 1000:.0f} ms{extra}: {a.plan.destination.pinned(a.record.digest)}"
                )
            elif o.error is not None and not isinstance(o.error, PolicyDeniedError):
                con.print(f"  [red]{o.error.kind}[/]: {o.error.message}")
        if not confirm and any(o.plan is not None and o.plan.decision.allowed for o in outcomes):
            con.print("[dim]dry run: add --confirm to apply[/]")

    if failure is not None:
        human()
        raise failure
    emit({"stage": stage, "confirm": confirm, "results": [o.to_json() for o in outcomes]}, human)


# --------------------------------------------------------------------------------------------- rollback


@click.command()
@click.argument("stage")
@click.argument("variant")
@policy_option
@key_option
@trust_option
@docker_config_option
@json_option
def rollback(
    stage: str,
    variant: str,
    policy_file: Path | None,
    key: Path | None,
    trust_root: Path | None,
) -> None:
    """Point STAGE back at VARIANT's previous digest (from the registry's promotion records)."""
    from builder.promote import rollback as core

    ctx = app_context().app.promotion(policy_file, key, need_signer=True, trust_root=trust_root)
    try:
        [target] = _targets(ctx, (variant,), (), None)
        applied = core(ctx, target, stage)
    finally:
        if ctx.ledger is not None:
            ctx.ledger.close()
    emit(
        applied.to_json(),
        f"rolled back {variant} in {stage}: {applied.plan.previous} -> "
        f"{applied.plan.destination.pinned(applied.record.digest)}",
    )


# --------------------------------------------------------------------------------------------- status


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s // n}{unit}"
    return f"{s}s"


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
    from builder.promote import status as core
    from builder.promote.queries import check_stages

    ctx = app_context().app.promotion(policy_file, None, need_signer=False, trust_root=trust_root)
    targets = _targets(ctx, (), globs or ("*",), None)
    check_stages(ctx, stages)
    rows = core(ctx, targets, list(stages) or None)

    def human() -> None:
        from rich.markup import escape
        from rich.table import Table

        table = Table(show_lines=False)
        for col in ("variant", "stage", "digest", "age", "by", "sigs", "attestations"):
            table.add_column(col)
        held = {r.variant for r in rows if r.digest}
        hidden = {r.variant for r in rows} - held
        for r in rows:
            if r.variant in hidden and not globs:
                continue
            short = [t.rsplit("/", 2)[-2] if "/" in t else t for t in r.attestations]
            table.add_row(
                r.variant,
                r.stage,
                (r.digest or "-")[:19],
                _age(r.age_seconds),
                r.promoter or "-",
                str(r.signatures),
                "; ".join(x for x in (", ".join(short), f"[yellow]{escape(r.note)}[/]" if r.note else "") if x),
            )
        console().print(table)
        if hidden and not globs:
            console().print(
                f"[dim]{len(hidden)} variant(s) of the matrices are in no stage yet (listed with --select '*' "
                "or --json)[/]"
            )

    emit({"rows": [r.to_json() for r in rows]}, human)


# --------------------------------------------------------------------------------------------- history


@click.command()
@click.argument("variant")
@stage_option("Only these stages (default: every stage)", multiple=True)
@click.option("--limit", type=int, default=50, show_default=True)
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
    from builder.promote import stage_histories

    ctx = app_context().app.promotion(policy_file, None, need_signer=False, trust_root=trust_root)
    [target] = _targets(ctx, (variant,), (), None)
    out = stage_histories(ctx, target, stages, limit=limit)

    def human() -> None:
        con = console()
        for h in out:
            con.print(f"[bold]{h.stage}[/] {h.pointer or '(never promoted)'}")
            if h.note:
                con.print(f"  {h.note}", style="yellow", markup=False)
            if h.records:
                con.print(f"  {'time':<27}  {'action':<8} {'digest':<19}  {'previous':<19}  by", style="dim")
            for r, by in h.records:
                con.print(
                    f"  {r.time:<27}  {r.action:<8} {r.digest[:19]}  {(r.previous or '-')[:19]:<19}"
                    f"  {by}" + (f"  ticket {r.ticket}" if r.ticket else ""),
                    markup=False,
                )

    emit({"variant": variant, "stages": [h.to_json() for h in out]}, human)


# --------------------------------------------------------------------------------------------- resolve


@click.command()
@click.argument("variant")
@stage_option("The stage whose digest to print.", required=True)
@click.option("--cluster", default=None, help="Refuse (exit 11) when the digest cannot run on this cluster.")
@fleet_option(
    "Fleet naming the cluster (default: the fleet of the stage's policy `fleet` rule; "
    "required when the stage has none)."
)
@click.option("--no-verify", is_flag=True, help="Do not require a trusted promotion record on the digest.")
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
    """Print VARIANT's validated repo@sha256:... in STAGE on stdout (never an older digest)."""
    from builder.promote import resolve as core

    ctx = app_context().app.promotion(policy_file, None, need_signer=False, trust_root=trust_root)
    [target] = _targets(ctx, (variant,), (), None)
    pinned = core(ctx, target, stage, cluster=cluster, fleet=str(fleet) if fleet else None, verify=not no_verify)
    if app_context().json_output:
        emit({"variant": variant, "stage": stage, "cluster": cluster, "reference": pinned})
    else:
        sys.stdout.write(pinned + "\n")
