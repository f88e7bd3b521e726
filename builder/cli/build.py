"""``builder build`` and ``builder bases``: thin Click layer over ``builder.build`` and ``builder.bases``.

Docs: docs/build.md. Exit codes: 0 all built or up to date; 14 some variant failed (the summary
lists each with its log); 3 engine unavailable; 5 registry unavailable; 6 registry refused our
credentials; 13 unpinned bases/locks; 15 every failure was a content tag already holding another
digest.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from builder.cli._common import (
    allow_unpinned_option,
    app_context,
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

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from builder.build.plan import BuildOptions, PlannedBuild
    from builder.build.run import BuildRun
    from builder.config import Config
    from builder.models import BuiltImage, RenderedImage
    from builder.registry import RegistryClient


@click.command()
@matrix_option
@select_option
@shard_option
@changed_since_option
@workers_option
@click.option(
    "--builder",
    "buildx_builder",
    default=None,
    metavar="NAME",
    help="buildx builder to use (remote, kubernetes, ...); default: the current one.",
)
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
    type=int,
    default=None,
    help="SOURCE_DATE_EPOCH for the build (default: $SOURCE_DATE_EPOCH, else the HEAD commit time).",
)
@click.option(
    "--sign/--no-sign",
    default=False,
    help="Sign each pushed image and attach its SLSA provenance (--keyless implies it).",
)
@key_option
@keyless_options
@click.option("--dry-run", is_flag=True, help="Show the plan (what would be built) and stop.")
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
    key: Path | None,
    keyless_: bool,
    oidc_token: str | None,
    trust_config: Path | None,
    dry_run: bool,
) -> None:
    """Build and push variants under write-once content tags; existing tags are not rebuilt.

    \b
    Each image is pushed, verified complete in the registry, then tagged
    <variant-id>-<hash12> (write-once) and <variant-id> (moving).
    Examples:
      builder build                              everything that changed
      builder build --select 'jax*' --workers 4
      builder build --changed-since origin/main --shard 1/4 --json
      builder build --select 'jax*' --keyless    in CI: sign with the workflow's OIDC identity
    """
    from builder.build.plan import BuildOptions, build_secrets
    from builder.build.run import build_variants, preview, raise_for_failures
    from builder.errors import ConfigError
    from builder.selection import Selection
    from builder.variants import select_renders

    app = app_context()
    cfg = app.config
    con = console()
    rendered = select_renders(cfg, matrices, Selection.from_options(globs, shard, changed_since))
    secret_pairs = build_secrets(ca_bundle, no_ca_bundle=no_ca_bundle, extra=secrets)
    if source_date_epoch is None:
        source_date_epoch = default_source_date_epoch(cfg)
    options = BuildOptions(
        registry=cfg.registry,
        state_dir=cfg.state_dir,
        workers=workers or cfg.workers,
        builder=buildx_builder,
        platforms=platforms,
        cache=registry_cache,
        secrets=secret_pairs,
        source_date_epoch=source_date_epoch,
        allow_unpinned=allow_unpinned,
        rebuild=rebuild,
        no_cache=no_cache,
    )
    client = app_context().app.default_client

    if dry_run:
        plan = preview(rendered, options, client)
        emit({"plan": [p.to_json() for p in plan]}, lambda: _print_plan(plan))
        return

    if keyless_ and key is not None:
        raise ConfigError("--keyless and --key exclude each other", hint="drop --key to sign keylessly")
    on_built = None
    if sign or keyless_:
        on_built = _signing_hook(
            cfg, key, client, options, keyless=keyless_, oidc_token=oidc_token, trust_config=trust_config
        )

    def progress(variant: str, event: str, detail: str) -> None:
        from rich.markup import escape

        if app.json_output and event not in ("failed",):
            return
        style = {"built": "green", "up-to-date": "dim", "failed": "red", "building": "cyan", "pushed": "blue"}
        con.print(f"[{style.get(event, 'white')}]{event:>10}[/] {variant}  [dim]{escape(detail)}[/]", highlight=False)

    if not rendered:
        emit(
            {"ok": True, "seconds": 0.0, "counts": {"built": 0, "up-to-date": 0, "failed": 0}, "images": []},
            "nothing to build (no variant selected)",
        )
        return
    run = build_variants(rendered, options, client=client, on_built=on_built, on_progress=progress)
    if run.failed and not app.json_output:
        _print_summary(run)
    raise_for_failures(run)
    emit(run.to_json(), lambda: _print_summary(run))


def _signing_hook(
    cfg: Config,
    key: Path | None,
    client: RegistryClient,
    options: BuildOptions,
    *,
    keyless: bool = False,
    oidc_token: str | None = None,
    trust_config: Path | None = None,
) -> Callable[[BuiltImage, RenderedImage], None]:
    """``on_built`` hook through ``builder.publish.signing_hook``: the CLI reads the key password
    (``BUILDER_KEY_PASSWORD``, else ``COSIGN_PASSWORD``) or, with ``keyless``, the OIDC token
    (``--oidc-token``/``BUILDER_OIDC_TOKEN``, else the ambient CI token) and the trust config."""
    from builder.build.source import git_commit
    from builder.publish import KeylessSetup, signing_hook

    setup = None
    signer = None
    if keyless:
        from builder.signing.keyless import trust as kl

        token = kl.identity_token(oidc_token) if oidc_token else kl.ambient_identity_token()
        setup = KeylessSetup(identity_token=token, trust_config=kl.load_trust_config(trust_config))
    else:
        from builder.signing.keys import load_signer

        password = cfg.key_password if cfg.key_password is not None else os.environ.get("COSIGN_PASSWORD")
        signer = load_signer(key or cfg.key_path, password)
    return signing_hook(
        client=client,
        options=options,
        lock_dir=cfg.state_dir / "locks",
        git_commit=git_commit(cfg.root),
        signer=signer,
        keyless=setup,
    )


def _print_plan(plan: Sequence[PlannedBuild]) -> None:
    from rich.table import Table

    t = Table(title="build plan", show_lines=False)
    for col in ("variant", "action", "content tag", "existing digest"):
        t.add_column(col)
    for p in plan:
        t.add_row(p.variant_id, p.action, p.content_tag, (p.existing_digest or "")[:19])
    console().print(t)


def _print_summary(run: BuildRun) -> None:
    from rich.table import Table
    from rich.text import Text

    t = Table(title=f"build summary ({run.seconds:.1f} s)")
    for col in ("variant", "status", "digest", "time", "log"):
        t.add_column(col, overflow="fold")
    colors = {"built": "green", "up-to-date": "dim", "failed": "red"}
    for b in run.results:
        t.add_row(
            b.variant_id,
            f"[{colors[b.status]}]{b.status}[/]",
            b.digest[:19] if b.digest else Text((b.error or "")[:80]),  # Text: no markup in engine errors
            f"{b.seconds:.1f}s" if b.status != "up-to-date" else "",
            b.log_path or "",
        )
    console().print(t)
    for b in run.results:
        if b.status != "failed":
            continue
        console().print(f"[red]{b.variant_id}[/]: {b.error}", highlight=False, markup=False)
        if b.log_path and Path(b.log_path).is_file():
            from rich.markup import escape

            tail = Path(b.log_path).read_text(errors="replace").splitlines()[-8:]
            console().print("\n".join(f"  [dim]|[/] {escape(line)}" for line in tail), highlight=False)


@click.group()
def bases() -> None:
    """Pin base images: resolve their tags to digests in the committed bases.lock.json."""


@bases.command("update")
@matrix_option
@click.option("--check", is_flag=True, help="Do not write; exit 12 when the lock is out of date.")
@docker_config_option
@json_option
def bases_update(matrices: tuple[Path, ...], check: bool) -> None:
    """Resolve every upstream base tag of the matrices to a digest and write bases.lock.json,
    showing what changed, including a changed NVIDIA_REQUIRE_CUDA or CUDA_VERSION."""
    from builder.bases import update_bases, upstream_references
    from builder.errors import RenderStaleError
    from builder.selection import Selection
    from builder.variants import select_variants

    cfg = app_context().config
    chosen = select_variants(cfg, matrices, Selection())
    changes = update_bases(
        upstream_references(chosen.variants),
        cfg.bases_lock,
        resolve_client=app_context().app.client,
        default_registry=cfg.registry,
        map_reference=chosen.bases.map_reference,
        write=not check,
    )
    changed = [c for c in changes if c.changed]
    payload = {"lock": str(cfg.bases_lock), "written": not check, "bases": [c.to_json() for c in changes]}

    def human() -> None:
        con = console()
        if not changes:
            con.print("no upstream base images in the matrices")
        for c in changes:
            if not c.changed:
                con.print(f"[dim]unchanged[/] {c.reference} {c.new_digest[:19]}")
                continue
            old = c.old_digest[:19] if c.old_digest else "(not pinned)"
            con.print(f"[yellow]changed[/]   {c.reference}: {old} -> {c.new_digest[:19]}")
            for k, (o, n) in c.fact_changes.items():
                con.print(f"          [bold red]{k}[/] {o!r} -> {n!r}")
        con.print(f"{'checked' if check else 'wrote'} {cfg.bases_lock}")

    if check and changed:
        human()
        raise RenderStaleError(
            f"{cfg.bases_lock} is out of date for {len(changed)} base(s): " + ", ".join(c.reference for c in changed),
            hint="run `builder bases update` and commit bases.lock.json",
            bases=[c.to_json() for c in changed],
        )
    emit(payload, human)
