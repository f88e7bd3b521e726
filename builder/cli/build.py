"""``builder build`` and ``builder bases``: thin Click layer over ``builder.build`` and ``builder.bases``.

Docs: docs/build.md. Exit codes: 0 all built or up to date; 14 some variant failed (the summary
lists each with its log); 3 engine unavailable; 5 registry unavailable; 6 registry refused our
credentials; 13 variants left out because their base or lock is not pinned (the others were
built); 15 every failure was a content tag already holding another digest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from builder.cli._common import (
    allow_unpinned_option,
    app_context,
    buildx_builder_option,
    bundle_option,
    changed_since_option,
    console,
    default_source_date_epoch,
    docker_config_option,
    emit,
    file_option,
    json_option,
    key_option,
    keyless_options,
    matrix_option,
    platform_option,
    select_option,
    shard_option,
    workers_option,
)
from builder.cli.progress import BuildSteps, progress_option

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from builder.bases import BasesUpdate
    from builder.build.plan import PlannedBuild
    from builder.build.results import BuildRun
    from builder.cli.progress import Mode
    from builder.models import RenderedImage


@click.command()
@matrix_option
@select_option
@shard_option
@changed_since_option
@workers_option
@buildx_builder_option
@platform_option("Override the variants' platform", multiple=True)
@click.option(
    "--registry-cache/--no-registry-cache",
    "registry_cache",
    default=False,
    help="Use a registry build cache (<repo>:buildcache-<variant>) via --cache-from/--cache-to.",
)
@click.option("--no-cache", is_flag=True, help="Do not use BuildKit's cache at all.")
@click.option(
    "--rebuild",
    is_flag=True,
    help="Build even when the content tag exists (the tag stays write-once: a different digest fails).",
)
@allow_unpinned_option
@file_option(
    "--ca-bundle",
    help="CA bundle passed as BuildKit secret `ca_bundle` (default: /etc/ssl/certs/ca-certificates.crt).",
)
@click.option("--no-ca-bundle", is_flag=True, help="Do not pass a CA bundle secret.")
@click.option("--secret", "secrets", multiple=True, metavar="id=ID,src=PATH", help="Extra BuildKit secret.")
@click.option(
    "--source-date-epoch",
    type=click.IntRange(min=0),
    default=None,
    help="SOURCE_DATE_EPOCH for the build (default: $SOURCE_DATE_EPOCH, else the HEAD commit time).",
)
@click.option(
    "--sign/--no-sign",
    default=False,
    help="Sign each pushed image and attach its SLSA provenance (--keyless implies it).",
)
@bundle_option("the provenance", ".sig/.att tags are")
@key_option
@keyless_options
@click.option(
    "--dry-run",
    is_flag=True,
    help="Show the plan (built, up to date, or left out as unpinned, with what to run) and stop.",
)
@progress_option
@docker_config_option
@json_option
def build(
    matrices: tuple[Path, ...],
    globs: tuple[str, ...],
    shard: str | None,
    changed_since: str | None,
    workers: int | None,
    buildx_builder: str | None,
    platforms: tuple[str, ...],
    registry_cache: bool,
    no_cache: bool,
    rebuild: bool,
    allow_unpinned: bool,
    ca_bundle: Path | None,
    no_ca_bundle: bool,
    secrets: tuple[str, ...],
    source_date_epoch: int | None,
    sign: bool,
    bundle: bool,
    key: Path | None,
    keyless_: bool,
    oidc_token: str | None,
    trust_config: Path | None,
    dry_run: bool,
    progress_mode: Mode,
) -> None:
    """Build and push variants under write-once content tags; existing tags are not rebuilt.

    \b
    Each image is pushed, verified complete in the registry, then tagged
    <variant-id>-<hash12> (write-once) and <variant-id> (moving).
    Examples:
      builder build                              everything that changed
      builder build --select 'jax*' --workers 4
      builder build --changed-since origin/main --shard 1/4 --json
      builder build --select 'jax*' --keyless    in CI: sign keylessly (OIDC)
    """
    from builder.build.plan import BuildOptions, build_secrets
    from builder.build.results import BuildPreview, raise_for_failures
    from builder.publish import SigningRequest, build_images
    from builder.selection import Selection
    from builder.variants import select_renders

    ctx = app_context()
    app = ctx.app
    cfg = app.config
    con = console()
    rendered = select_renders(cfg, matrices, Selection.from_options(globs, shard, changed_since))
    epoch = source_date_epoch if source_date_epoch is not None else default_source_date_epoch(cfg)
    options = BuildOptions(
        registry=cfg.registry,
        state_dir=cfg.state_dir,
        workers=workers or cfg.workers,
        builder=buildx_builder,
        platforms=platforms,
        cache=registry_cache,
        secrets=build_secrets(ca_bundle, no_ca_bundle=no_ca_bundle, extra=secrets),
        source_date_epoch=epoch,
        allow_unpinned=allow_unpinned,
        repository_prefix=cfg.repository_prefix,
        image_labels=app.source_facts(epoch).labels(),
        rebuild=rebuild,
        no_cache=no_cache,
    )
    signing = SigningRequest(
        sign=sign, key=key, keyless=keyless_, oidc_token=oidc_token, trust_config=trust_config, bundle=bundle
    )

    steps = BuildSteps("quiet" if ctx.json_output or dry_run else progress_mode, con.rich)

    def progress(variant: str, event: str, detail: str) -> None:
        from rich.markup import escape

        if not steps.event(variant, event, detail) or (ctx.json_output and event not in ("failed",)):
            return
        style = {
            "built": "green",
            "up-to-date": "dim",
            "signed": "green",
            "failed": "red",
            "building": "cyan",
            "pushed": "blue",
        }
        con.print(f"[{style.get(event, 'white')}]{event:>10}[/] {variant}  [dim]{escape(detail)}[/]", highlight=False)

    with steps:
        result = build_images(
            rendered,
            options,
            client=app.default_client,
            signing=signing,
            signer_of=app.signer,
            source_root=cfg.root,
            dry_run=dry_run,
            on_progress=progress,
        )
    if isinstance(result, BuildPreview):
        emit(result.to_json(), lambda: _print_plan(result.plan), report=result)
        return
    if not result.results:
        emit(result.to_json(), "nothing to build (no variant selected)")
        return
    if (result.failed or result.unpinned) and not ctx.json_output:
        _print_summary(result)
    if result.failed or result.unpinned:  # the step summary lists them too (the error below ends the command)
        from builder.cli.github import report_result

        report_result(result)
    raise_for_failures(result)
    emit(result.to_json(), lambda: _print_summary(result), report=result)


def escape_text(text: str) -> str:
    """``text`` with Rich markup escaped (ids and reasons are printed as they are)."""
    from rich.markup import escape

    return escape(text)


def _print_plan(plan: Sequence[PlannedBuild]) -> None:
    from rich.markup import escape

    from builder.build.results import planned_action
    from builder.cli.tables import Column, fitted_table

    columns = [Column("variant", whole=True), Column("action"), Column("content tag", 1, whole=True)]
    columns.append(Column("existing digest", 1, whole=True))
    style = {"unpinned": "yellow", "would retag": "yellow", "would retag (foreign)": "red"}

    def action(p: PlannedBuild) -> str:
        words = planned_action(p)
        return f"[{style[words]}]{words}[/]" if words in style else words

    rows = [[escape(p.variant_id), action(p), escape(p.content_tag), (p.existing_digest or "")[:19]] for p in plan]
    console().print(fitted_table(columns, rows, console().width, title="build plan", show_lines=False))
    for p in plan:  # what each retag would replace: the digest the variant tag names now (80 columns)
        if p.retag:
            foreign = "\n  [red]now on a digest not pushed by this checkout[/]" if p.variant_foreign else ""
            console().print(
                f"[yellow]{escape(p.variant_id)}[/]: the build would move its variant tag{foreign}\n"
                f"  from {p.variant_digest or '(no tag)'}\n  to   {p.existing_digest}",
                highlight=False,
                soft_wrap=True,
            )
    _print_unpinned([p.rendered for p in plan if p.action == "unpinned"], len(plan))


def _print_unpinned(left_out: Sequence[RenderedImage], selected: int) -> None:
    """The variants a build leaves out because they are not pinned, each with what to run."""
    if not left_out:
        return
    con = console()
    con.print(
        f"[yellow]{len(left_out)} of {selected} variant(s) not pinned[/] (not built; exit 13 "
        "after the others are built):",
        highlight=False,
    )
    import textwrap

    for r in left_out:
        con.print(f"  {escape_text(r.variant.id)}", highlight=False, soft_wrap=True)  # an id is never cut
        for reason in r.unpinned:
            text = textwrap.fill(
                reason,
                width=max(40, con.width - 1),
                initial_indent="    ",
                subsequent_indent="      ",
                break_long_words=False,
                break_on_hyphens=False,
            )
            con.print(escape_text(text), highlight=False, soft_wrap=True)


def _print_summary(run: BuildRun) -> None:
    from rich.markup import escape

    from builder.build.results import log_tail
    from builder.cli.tables import Column, fitted_table

    columns = [
        Column("variant", whole=True),
        Column("status"),
        Column("digest", 0, whole=True),
        Column("time", 1),
        Column("log", 2, whole=True),
    ]
    colors = {"built": "green", "up-to-date": "dim", "signed": "green", "failed": "red"}
    rows = [
        [
            escape(b.variant_id),
            f"[{colors[b.status]}]{b.status}[/]",
            b.digest[:19] if b.digest else escape((b.error or "")[:80]),  # no markup in engine errors
            f"{b.seconds:.1f}s" if b.status in ("built", "failed") else "",
            escape(str(b.log_path or "")),
        ]
        for b in run.results
    ]
    counts = ", ".join(f"{n} {status}" for status, n in run.to_json()["counts"].items() if n)
    title = f"build summary ({counts}; {run.seconds:.1f} s)"
    console().print(fitted_table(columns, rows, console().width, title=title))
    for b in run.results:
        if b.status != "failed":
            continue
        console().print(f"[red]{escape(b.variant_id)}[/]: {escape(b.error or '')}", highlight=False)
        tail = log_tail(b)
        if tail:
            console().print("\n".join(f"  [dim]|[/] {escape(line)}" for line in tail), highlight=False)
    _print_unpinned(run.unpinned, len(run.results) + len(run.unpinned))


@click.group()
def bases() -> None:
    """Pin base images: resolve their tags to digests in the committed bases.lock.json."""


@bases.command("update")
@matrix_option
@click.option("--check", is_flag=True, help="Do not write; exit 12 when the lock is out of date.")
@docker_config_option
@json_option
def bases_update(matrices: tuple[Path, ...], check: bool) -> None:
    """Resolve every upstream base tag of the matrices to a digest and write bases.lock.json
    (with --matrix only those matrices' entries change; the rest of the lock stays), showing
    what changed: the digest and NVIDIA_REQUIRE_CUDA, CUDA_VERSION, NV_CUDNN_VERSION and
    NCCL_VERSION of the image's environment.

    \b
    Short names are Docker Hub's (ubuntu:24.04 = docker.io/library/ubuntu:24.04),
    reached at registry-1.docker.io, through builder.toml `mirror_map`, or at a
    `registry_endpoints` stand-in ("docker.io=HOST:PORT"); credentials from the
    Docker config (`docker login`). Examples:
      builder bases update
      builder bases update --check --json     in CI: exit 12 when out of date
    """
    from builder.bases import pin_bases
    from builder.selection import Selection
    from builder.variants import select_variants

    app = app_context().app
    cfg = app.config
    chosen = select_variants(cfg, matrices, Selection())
    update = pin_bases(
        chosen.variants,
        chosen.bases,
        cfg.bases_lock,
        resolve_client=app.client,
        check=check,
        every_matrix=not matrices,  # --matrix named: the other matrices' lock entries stay
    )
    if update.stale:
        _print_bases(update)
    update.raise_if_stale()
    emit(update.to_json(), lambda: _print_bases(update))


def _print_bases(update: BasesUpdate) -> None:
    con = console()
    if not update.changes:
        con.print("no upstream base images in the matrices")
    from rich.markup import escape

    for c in update.changes:
        if not c.changed:
            con.print(f"[dim]unchanged[/] {escape(c.reference)} {c.new_digest[:19]}", highlight=False)
            continue
        old = c.old_digest[:19] if c.old_digest else "(not pinned)"
        con.print(f"[yellow]changed[/]   {escape(c.reference)}", highlight=False)
        if c.pulled_from and c.pulled_from != c.reference:
            con.print(f"  from {escape(c.pulled_from)}", highlight=False, soft_wrap=True)
        con.print(f"  digest {old} -> {c.new_digest[:19]}", highlight=False)
        for k, (o, n) in c.fact_changes.items():
            con.print(f"  [bold red]{k}[/]", highlight=False)
            con.print(f"    - {escape(str(o))}\n    + {escape(str(n))}", highlight=False, soft_wrap=True)
    con.print(f"{'wrote' if update.written else 'checked'} {escape(str(update.lock))}", highlight=False)
