"""Promotion commands: ``policy validate``, ``approve``, ``promote``, ``rollback``, ``status``,
``history``, ``resolve``. Thin: parse, call ``builder.promote`` / ``builder.policy``, ``emit()``.
Reference: docs/promotion.md and docs/policies.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from builder.cli._common import (
    app_context,
    console,
    emit,
    file_option,
    json_option,
    key_option,
    policy_option,
    select_option,
)

if TYPE_CHECKING:
    from builder.config import Config
    from builder.policy import Policy
    from builder.promote import Environment, Target

_CONTENT_SUFFIX = re.compile(r"-[0-9a-f]{12}$")

trust_option = file_option(
    "--trust-root",
    help="Sigstore trusted_root.json for keyless identities in the policy (default: public-good, offline copy).",
)


def _variables(cfg: Config) -> dict[str, str]:
    return {"state_dir": str(cfg.state_dir), "root": str(cfg.root)}


def _policy_path(cfg: Config, given: Path | None) -> Path:
    return given if given is not None else cfg.policies_dir / "default.yaml"


def _load_policy(cfg: Config, given: Path | None) -> Policy:
    from builder.policy import load_policy

    return load_policy(_policy_path(cfg, given), _variables(cfg))


def _env(
    policy_file: Path | None, key_file: Path | None, *, need_signer: bool, trust_root: Path | None = None
) -> Environment:
    from builder.ledger import open_ledger
    from builder.promote import Environment, compat_fleet_checker

    cfg = app_context().config
    signer = None
    if need_signer:
        from builder.keys import load_signer

        signer = load_signer(key_file or cfg.key_path, cfg.key_password)
    policy = _load_policy(cfg, policy_file)
    verifiers: list[Any] = []
    if any(k.issuer for ks in policy.keysets for k in ks.keys) or any(a.key.issuer for a in policy.approvers):
        # keyless identities: verify the Sigstore material offline, let the policy judge identities
        from builder import keyless

        verifiers.append(keyless.KeylessLayerVerifier(keyless.load_trusted_root(trust_root), (keyless.ANY_IDENTITY,)))
    return Environment(
        policy=policy,
        verifiers=verifiers,
        registry=cfg.registry,
        insecure=cfg.is_insecure,
        lock_dir=cfg.state_dir / "locks",
        ledger=open_ledger(cfg.ledger_path) if need_signer else None,
        signer=signer,
        fleet_checker=compat_fleet_checker(),
    )


def _variants(cfg: Config) -> dict[str, tuple[str, str]]:
    """variant id -> (matrix repository, matrix name) from the matrices."""
    from builder.matrix import load_matrices, matrix_paths

    out: dict[str, tuple[str, str]] = {}
    for m in load_matrices(matrix_paths(cfg.matrices_dir)):
        for v in m.variants:
            out[v.id] = (v.repository, m.name)
    return out


def _targets(
    cfg: Config, policy: Policy, names: tuple[str, ...], select: tuple[str, ...], variant_id: str | None
) -> list[Target]:
    """Variant ids, globs (--select) or image references -> targets."""
    import fnmatch

    from builder.errors import NotFoundError
    from builder.promote import Target
    from builder.registry import parse_reference

    targets: list[Target] = []
    known: dict[str, tuple[str, str]] | None = None

    def variants() -> dict[str, tuple[str, str]]:
        nonlocal known
        if known is None:
            known = _variants(cfg)
        return known

    for pattern in select:
        hits = sorted(v for v in variants() if fnmatch.fnmatchcase(v, pattern))
        if not hits:
            raise NotFoundError(f"--select {pattern!r} matches no variant of the matrices in {cfg.matrices_dir}")
        targets.extend(Target(v, variants()[v][0], cfg.registry) for v in hits)
    for name in names:
        if "/" in name or "@" in name or ":" in name:
            ref = parse_reference(name, cfg.registry)
            vid = variant_id or _variant_from_tag(ref.tag, policy) or _variant_from_labels(cfg, ref)
            if vid is None:
                raise click.UsageError(f"cannot tell the variant of {name}: pass --variant-id ID")
            targets.append(
                Target(vid, ref.repository, ref.registry, tag=ref.tag if not ref.digest else None, digest=ref.digest)
            )
            continue
        if name not in variants():
            close = [v for v in variants() if name in v][:5]
            raise NotFoundError(
                f"variant {name!r} is not in the matrices ({cfg.matrices_dir})",
                hint=("did you mean: " + ", ".join(close)) if close else "`builder matrix list` shows the variants",
            )
        targets.append(Target(name, variants()[name][0], cfg.registry))
    seen: set[tuple[str, str, str | None, str | None]] = set()
    unique = []
    for t in targets:
        k = (t.variant, t.repository, t.tag, t.digest)
        if k not in seen:
            seen.add(k)
            unique.append(t)
    return unique


def _variant_from_tag(tag: str | None, policy: Policy) -> str | None:
    if not tag:
        return None
    if _CONTENT_SUFFIX.search(tag):
        return _CONTENT_SUFFIX.sub("", tag)
    for s in policy.stage_names:
        if tag.endswith("-" + s):
            return tag[: -len(s) - 1]
    return tag


def _variant_from_labels(cfg: Config, ref: Any) -> str | None:
    """The ``io.builder.variant`` label `builder render` writes into every image, if present."""
    from builder.errors import BuilderError
    from builder.registry import client_for, image_config

    try:
        config = image_config(client_for(ref.registry, insecure=cfg.is_insecure), ref.repository, ref.ref)
    except BuilderError:
        return None
    label = ((config.get("config") or {}).get("Labels") or {}).get("io.builder.variant")
    return str(label) if label else None


def _stage_fleet(policy: Policy, stage: str, cluster: str) -> str:
    """The fleet file for ``resolve --cluster`` without ``--fleet``: the ``file`` of the stage's
    policy ``fleet`` rule (of several, the first that names ``cluster``). Never a guess: a stage
    without a fleet rule is a ConfigError asking for ``--fleet FILE``; NotFoundError when no fleet
    file of the stage names the cluster; NotFoundError for an unknown stage."""
    from builder.compat.fleets import load_fleet
    from builder.errors import ConfigError, NotFoundError

    files = policy.fleets(stage)
    if not files:
        raise ConfigError(
            f"--cluster {cluster} needs a fleet file: stage {stage} in {policy.path} has no `fleet` rule "
            "to take it from",
            hint="pass --fleet FILE (e.g. --fleet fleets/demo.yaml), or add a `fleet: {file: ...}` rule to the stage",
        )
    if len(files) == 1:
        return files[0]  # builder.promote.resolve names the file when the cluster is not in it
    for f in files:
        if load_fleet(Path(f)).cluster(cluster) is not None:
            return f
    raise NotFoundError(
        f"cluster {cluster!r} is in none of the fleet files of stage {stage}: {', '.join(files)}",
        hint="check the cluster name, or pass --fleet FILE",
    )


def _one_target(cfg: Config, policy: Policy, variant: str) -> Target:
    targets = _targets(cfg, policy, (variant,), (), None)
    return targets[0]


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

    cfg = app_context().config
    paths = list(files) or sorted([*cfg.policies_dir.glob("*.yaml"), *cfg.policies_dir.glob("*.yml")])
    if not paths:
        raise PolicyError(f"no policy files in {cfg.policies_dir}", hint="write policies/default.yaml")
    results: list[dict[str, Any]] = []
    errors = 0
    for p in paths:
        pol, problems = check_policy(p, _variables(cfg))
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
@click.option("--stage", required=True, help="The stage this approval is for (one stage only).")
@file_option("--key", "key_file", required=True, help="The approver's signing key.")
@click.option("--ticket", default=None, help="Change ticket the approval refers to.")
@click.option("--comment", default=None, help="Free text kept in the approval.")
@click.option("--name", default=None, help="Approver name recorded with the key fingerprint.")
@policy_option
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
    from builder.approvals import approve as core
    from builder.approvals import check_approver
    from builder.errors import SigningKeyError
    from builder.keys import load_signer
    from builder.registry import client_for, parse_reference

    cfg = app_context().config
    pol = _load_policy(cfg, policy_file)
    pol.stage(stage)  # NotFoundError for a stage the policy does not know
    signer = load_signer(key_file, cfg.key_password)
    check = check_approver(pol, stage, signer.fingerprint, ticket)
    claimed = next((a for a in pol.approvers if a.name == name), None) if name else None
    if claimed is not None and claimed.key.fingerprint != signer.fingerprint:
        raise SigningKeyError(
            f"--name {name}: {key_file} ({signer.fingerprint[:19]}…) is not {name}'s key in {pol.path} "
            f"({(claimed.key.fingerprint or 'unusable')[:19]}…)",
            hint=f"sign with {name}'s key, or drop --name",
        )
    warnings = list(check.warnings)
    if check.name is not None and name is not None and name != check.name:
        warnings.append(f"--name {name} ignored: the policy lists this key as {check.name}")
    recorded = check.name or name
    ref = parse_reference(reference, cfg.registry)
    client = client_for(ref.registry, insecure=cfg.is_insecure)
    digest = ref.digest or client.resolve(ref.repository, ref.ref)
    result = core(
        client,
        ref.repository,
        digest,
        stage,
        signer,
        lock_dir=cfg.state_dir / "locks",
        name=recorded,
        ticket=ticket,
        comment=comment,
    )
    # the listed name only when the key is that approver's; else the fingerprint (and the claim)
    short = signer.fingerprint[:19] + "…"
    who = check.name or (f"{short} (unlisted key, calls itself {name!r})" if name else f"{short} (unlisted key)")

    for w in warnings:  # on stderr with --json too (stdout stays one JSON document)
        console().print(f"warning: {w}", style="yellow", markup=False)
    emit(
        {**result.to_json(), "approver": check.name, "warnings": warnings},
        lambda: console().print(
            f"approved {result.reference} for {stage} as {who}"
            + ("" if result.write.appended else " (already approved)"),
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
    from builder.errors import PolicyDeniedError, PromotionConflictError
    from builder.promote import _UNSET, promote_many

    if not names and not globs:
        raise click.UsageError("name a VARIANT or REFERENCE, or pass --select GLOB")
    env = _env(policy_file, key, need_signer=confirm, trust_root=trust_root)
    cfg = app_context().config
    targets = _targets(cfg, env.policy, names, globs, variant_id)
    expect: Any = _UNSET if expect_previous is None else (None if expect_previous == "none" else expect_previous)
    outcomes = promote_many(
        env, targets, stage, ticket=ticket, confirm=confirm, expect_previous=expect, workers=workers
    )
    if env.ledger is not None:
        env.ledger.close()
    payload = {"stage": stage, "confirm": confirm, "results": [o.to_json() for o in outcomes]}

    def human() -> None:
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

    conflicts = [o.error for o in outcomes if isinstance(o.error, PromotionConflictError)]
    others = [o.error for o in outcomes if o.error is not None and not isinstance(o.error, PolicyDeniedError)]
    denied = [o for o in outcomes if o.plan is not None and not o.plan.decision.allowed]
    if conflicts or others or denied:
        human()
        if conflicts:
            c = conflicts[0]
            raise PromotionConflictError(c.message, results=payload["results"], **c.details)
        if others:
            e = others[0]
            raise type(e)(e.message, hint=e.hint, results=payload["results"])
        from builder.promote import untrusted_hint

        untrusted = [o.plan for o in denied if o.plan is not None and not o.plan.trusted]
        raise PolicyDeniedError(
            f"{len(denied)} of {len(outcomes)} promotion(s) to {stage} denied: "
            + "; ".join(
                f"{o.target.variant}: " + "; ".join(f"{r.rule}: {r.reason}" for r in o.plan.decision.failed())
                for o in denied
                if o.plan is not None
            ),
            hint=untrusted_hint(env, stage, untrusted[0].target.variant, foreign=bool(untrusted[0].untrusted_signers))
            if untrusted
            else None,
            results=payload["results"],
        )
    emit(payload, human)


# --------------------------------------------------------------------------------------------- rollback


@click.command()
@click.argument("stage")
@click.argument("variant")
@policy_option
@key_option
@trust_option
@json_option
def rollback(stage: str, variant: str, policy_file: Path | None, key: Path | None, trust_root: Path | None) -> None:
    """Point STAGE back at VARIANT's previous digest (from the registry's promotion records)."""
    from builder.promote import rollback as core

    env = _env(policy_file, key, need_signer=True, trust_root=trust_root)
    target = _one_target(app_context().config, env.policy, variant)
    try:
        applied = core(env, target, stage)
    finally:
        if env.ledger is not None:
            env.ledger.close()
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
@click.option("--stage", "stages", multiple=True, help="Only these stages (repeatable).")
@policy_option
@trust_option
@json_option
def status(globs: tuple[str, ...], stages: tuple[str, ...], policy_file: Path | None, trust_root: Path | None) -> None:
    """Which digest each stage holds for each variant, since when, and its evidence."""
    from builder.promote import status as core

    env = _env(policy_file, None, need_signer=False, trust_root=trust_root)
    cfg = app_context().config
    targets = _targets(cfg, env.policy, (), globs or ("*",), None)
    for s in stages:
        env.policy.stage(s)
    rows = core(env, targets, list(stages) or None)

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
@click.option("--stage", "stages", multiple=True, help="Only these stages (default: every stage).")
@click.option("--limit", type=int, default=50, show_default=True)
@policy_option
@trust_option
@json_option
def history(
    variant: str, stages: tuple[str, ...], limit: int, policy_file: Path | None, trust_root: Path | None
) -> None:
    """The promotion history of VARIANT per stage, newest first, read from the registry."""
    from builder.errors import NotFoundError
    from builder.promote import _promoter_names, pointer_trust, promoter_label, stage_location
    from builder.promote import history as core

    env = _env(policy_file, None, need_signer=False, trust_root=trust_root)
    target = _one_target(app_context().config, env.policy, variant)
    for s in stages:
        env.policy.stage(s)  # NotFoundError (exit 8) naming the stages the policy defines
    out: list[dict[str, Any]] = []
    for s in stages or env.policy.stage_names:
        try:
            loc, recs = core(env, target, s, limit=limit)
        except NotFoundError:
            out.append({"stage": s, "pointer": None, "records": []})
            continue
        entry: dict[str, Any] = {
            "stage": s,
            "pointer": str(loc),
            "records": [{**r.to_json(), "by": promoter_label(env, r)} for r in recs],
        }
        if not recs:  # the pointer names a digest no trusted record explains: say why, as status does
            trust = pointer_trust(env, stage_location(env, target, s), s)
            entry.update(digest=trust.digest, note=trust.note(_promoter_names(env, s), short=True))
        else:
            entry["digest"] = recs[0].digest
        out.append(entry)

    def human() -> None:
        con = console()
        for h in out:
            con.print(f"[bold]{h['stage']}[/] {h['pointer'] or '(never promoted)'}")
            if h.get("note"):
                con.print(f"  {h['note']}", style="yellow", markup=False)
            if h["records"]:
                con.print(f"  {'time':<27}  {'action':<8} {'digest':<19}  {'previous':<19}  by", style="dim")
            for r in h["records"]:
                con.print(
                    f"  {r['time']:<27}  {r['action']:<8} {r['digest'][:19]}  {(r['previous'] or '-')[:19]:<19}"
                    f"  {r['by']}" + (f"  ticket {r['ticket']}" if r["ticket"] else ""),
                    markup=False,
                )

    emit({"variant": variant, "stages": out}, human)


# --------------------------------------------------------------------------------------------- resolve


@click.command()
@click.argument("variant")
@click.option("--stage", required=True, help="The stage whose digest to print.")
@click.option("--cluster", default=None, help="Refuse (exit 11) when the digest cannot run on this cluster.")
@click.option(
    "--fleet",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Fleet file naming the cluster (default: the file of the stage's policy `fleet` rule; "
    "required when the stage has none).",
)
@click.option("--no-verify", is_flag=True, help="Do not require a trusted promotion record on the digest.")
@policy_option
@trust_option
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
    import sys

    from builder.promote import resolve as core

    cfg = app_context().config
    env = _env(policy_file, None, need_signer=False, trust_root=trust_root)
    target = _one_target(cfg, env.policy, variant)
    fleet_file = (str(fleet) if fleet else _stage_fleet(env.policy, stage, cluster)) if cluster else None
    pinned = core(env, target, stage, cluster=cluster, fleet=fleet_file, verify=not no_verify)
    if app_context().json_output:
        emit({"variant": variant, "stage": stage, "cluster": cluster, "reference": pinned})
    else:
        sys.stdout.write(pinned + "\n")
