"""Running builds: build the planned variants in parallel, push safely, report each result.

Flow for each variant the plan builds (:mod:`builder.build.plan`):

1. **Build**: BuildKit through :mod:`builder.engine` with build args, labels, secrets (the host CA
   bundle as secret ``ca_bundle``), ``SOURCE_DATE_EPOCH``, optional registry cache and a chosen
   buildx builder; bounded parallelism; one failure does not stop the others; one log file per
   variant under ``<state_dir>/logs/``.
2. **Push safely**: buildx pushes to the variant's *pending* tag ``pending-<variant-id>`` (the
   docker driver cannot push by digest; a pending tag only keeps the pushed manifest referenced).
   The digest recorded is the one BuildKit reports, checked against the registry; every child
   manifest and blob of it is verified to exist; only then is the manifest PUT under the content
   tag, write-once (:func:`builder.build.tags.publish_content_tag`). Finally the moving variant tag
   ``<variant-id>`` is pointed at it. A build killed at any point before that leaves no content
   tag, so a content tag always names a complete image.
   When buildx's push fails with a transient registry error (429/5xx or a dropped connection:
   :func:`builder.engine.registry_failure`), the build is run again with the same cache (its
   layers are cached, so it only pushes again), ``BuildOptions.push_attempts`` times in all,
   waiting the registry client's backoff between runs; then the checks above as always.
3. **After the push**: the ``on_built`` hook (signing and provenance: :mod:`builder.publish`).

Sources: buildx's metadata file key ``containerimage.digest``
(https://docs.docker.com/reference/cli/docker/buildx/build/#metadata-file); the docker driver's
"push-by-digest is currently not implemented for docker driver" (https://github.com/docker/buildx,
``driver/docker``); BuildKit's ``SOURCE_DATE_EPOCH`` build argument
(https://docs.docker.com/build/ci/github-actions/reproducible-builds/).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time
from typing import TYPE_CHECKING

from builder import process
from builder.build.plan import (
    BuildOptions,
    PlannedBuild,
    check_tags,
    content_key,
    plan_builds,
    split_pinned,
)
from builder.build.pushed import pushed_as, refuse_foreign_retag
from builder.build.results import BuildRun
from builder.build.tags import move_tag, resolve_many
from builder.build.variant import ProgressFn, build_one
from builder.errors import BuilderError, EngineUnavailableError, RegistryUnavailableError
from builder.models import BuiltImage, RenderedImage

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from builder.registry import RegistryClient


def preview(rendered: Sequence[RenderedImage], options: BuildOptions, client: RegistryClient) -> list[PlannedBuild]:
    """The plan ``builder build --dry-run`` shows: tags checked (ConfigError), every content tag and
    variant tag looked up as :func:`build_variants` looks them up (registry errors propagate), so an
    up-to-date variant whose variant tag was moved shows the retag the build would make and whether
    the digest it names now is foreign (:func:`planned`); variants that are not pinned listed as
    ``unpinned`` (unless ``options.allow_unpinned``); nothing built or moved."""
    check_tags(rendered)
    return planned(rendered, options, client, allow_unpinned=options.allow_unpinned)


def planned(
    rendered: Sequence[RenderedImage], options: BuildOptions, client: RegistryClient, *, allow_unpinned: bool
) -> list[PlannedBuild]:
    """One parallel pass of HEADs: each render's content tag (what to build) and variant tag (what
    it names now: ``PlannedBuild.variant_digest``, and ``variant_foreign`` when that is another
    digest than the content tag's which this checkout has no record of pushing as this variant,
    :func:`builder.build.pushed.pushed_as`), then :func:`plan_builds`. The one look-up of both
    ``--dry-run`` and the build. Raises RegistryUnavailableError / RegistryAuthError."""
    pairs = [(options.repository(r), t) for r in rendered for t in (r.content_tag, r.variant.id)]
    found = resolve_many(client, pairs)
    existing = {content_key(repo, tag): d for (repo, tag), d in found.items()}
    plan = plan_builds(
        rendered,
        existing,
        registry=options.registry,
        rebuild=options.rebuild,
        allow_unpinned=allow_unpinned,
        repository_prefix=options.repository_prefix,
    )
    out: list[PlannedBuild] = []
    for p in plan:
        now = found.get((p.repository, p.variant_tag))
        foreign = now is not None and now != p.existing_digest and not pushed_as(options.state_dir, now, p.variant_id)
        out.append(dataclasses.replace(p, variant_digest=now, variant_foreign=foreign))
    return out


def build_variants(
    rendered: Sequence[RenderedImage],
    options: BuildOptions,
    *,
    client: RegistryClient,
    on_built: Callable[[BuiltImage, RenderedImage], None] | None = None,
    on_progress: ProgressFn | None = None,
    engine_ping: Callable[[], object] | None = None,
    vet: Callable[[BuiltImage, bool], BuiltImage] | None = None,
) -> BuildRun:
    """Plan, then build every variant whose content tag is missing (see module docstring).

    ``on_built(built, rendered)`` runs after each successful push (signing hooks here); its
    failure marks that variant failed. ``on_progress(variant_id, event, detail)`` reports events
    ``up-to-date``, ``retagged`` (an up-to-date variant's moving tag pointed elsewhere and was
    moved back), ``building``, ``step`` (detail: the BuildKit step started, ``#N [stage] step``),
    ``pushed``, ``built``, ``failed``. Returns a :class:`BuildRun`
    (failed variants are in it; nothing raises for them). ``vet(built, retag)`` decides on an image
    found up to date before its variant tag is moved to it (``retag``: the variant tag names another
    digest and would move; ``builder.publish.sign_earlier``: sign it, or refuse a digest this
    checkout did not push); its result is the variant's, and a ``failed`` one leaves the variant tag
    where it was, so nothing is retagged to a digest the build refuses. Without ``vet``,
    :func:`builder.build.pushed.refuse_foreign_retag` decides: the variant tag moves only to a digest
    this checkout pushed.
    A built image gets its variant tag only after ``on_built`` (signing) succeeded and the content tag
    still names the digest this build pushed (else TagConflictError, exit 15, for that variant).
    Raises, before building anything:
    UnpinnedBaseError, ConfigError (bad tags), RegistryUnavailableError/RegistryAuthError/RegistryError
    (the content and variant tag look-ups), EngineUnavailableError (no engine while something must be
    built), ConfigError (an unknown ``options.builder``), and what ``vet`` raises for an up-to-date
    image (``builder.publish.sign_earlier``: RegistryUnavailableError, RegistryAuthError, RegistryError
    while reading its signatures and provenance, or a ``.sig`` tag; its signing errors are turned into a
    failed variant instead). When every build failed for the same infrastructure reason (engine or
    registry gone), that error is raised.
    """
    start = time.monotonic()
    check_tags(rendered)
    rendered, left_out = split_pinned(rendered, allow_unpinned=options.allow_unpinned)
    plan = planned(rendered, options, client, allow_unpinned=True)  # what --dry-run shows, the same look-up
    progress = on_progress or (lambda _v, _e, _d: None)
    results: dict[str, BuiltImage] = {}
    for p in plan:
        if p.action == "up-to-date":
            assert p.existing_digest is not None
            earlier = BuiltImage(
                variant_id=p.variant_id,
                reference=p.reference,
                digest=p.existing_digest,
                content_tag=p.content_tag,
                status="up-to-date",
                platforms=(p.rendered.variant.platform,),
            )
            retag = p.retag
            if vet is not None:
                earlier = vet(earlier, retag)
            else:
                earlier = refuse_foreign_retag(earlier, retag, options.state_dir, progress)
            results[p.variant_id] = earlier
            if earlier.status == "failed":  # refused (vet reported why): the variant tag stays
                continue
            if retag:
                # e.g. a template change was reverted: the variant tag goes back to this image
                move_tag(client, p.repository, p.variant_tag, p.existing_digest)
                progress(p.variant_id, "retagged", f"{p.variant_tag} -> {p.existing_digest}" + _was(p))
            progress(p.variant_id, "up-to-date", p.existing_digest)
    todo = [p for p in plan if p.action == "build"]
    if todo:
        if engine_ping is None:
            from builder import engine

            engine_ping = engine.ping
        engine_ping()  # EngineUnavailableError (exit 3) before any work
        if options.builder is not None:
            from builder.engine import buildx_builder

            buildx_builder(options.builder)  # ConfigError (exit 2) naming an unknown builder, before any build
        options.logs_dir.mkdir(parents=True, exist_ok=True)
        errors: dict[str, BuilderError] = {}
        futures: dict[concurrent.futures.Future[tuple[BuiltImage, BuilderError | None]], PlannedBuild] = {}
        try:
            with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, options.workers)) as pool:
                futures.update({pool.submit(build_one, p, options, client, progress, on_built): p for p in todo})
                try:
                    for fut in concurrent.futures.as_completed(futures):
                        p = futures[fut]
                        built, err = fut.result()
                        results[p.variant_id] = built
                        if err is not None:
                            errors[p.variant_id] = err
                except process.Interrupted:
                    for f in futures:  # queued builds never start; running ones lost their child
                        f.cancel()
                    raise
        except process.Interrupted as exc:
            exc.left.append(f"{len(todo) - _pushed(futures)} of {len(todo)} variants not built")
            raise
        _raise_if_infrastructure_down(errors, len(todo))
    ordered = tuple(results[p.variant_id] for p in plan)
    return BuildRun(results=ordered, plan=tuple(plan), seconds=time.monotonic() - start, unpinned=tuple(left_out))


def _was(p: PlannedBuild) -> str:
    """What the variant tag named before a retag, for the progress line (``--dry-run`` shows the same)."""
    if p.variant_digest is None:
        return " (was no tag)"
    return f" (was {p.variant_digest}{', not pushed by this checkout' if p.variant_foreign else ''})"


def _pushed(futures: Iterable[concurrent.futures.Future[tuple[BuiltImage, BuilderError | None]]]) -> int:
    """How many of the finished :func:`builder.build.variant.build_one` calls built and pushed their variant."""
    return sum(1 for f in futures if f.done() and not f.cancelled() and f.exception() is None and f.result()[1] is None)


def _raise_if_infrastructure_down(errors: Mapping[str, BuilderError], attempted: int) -> None:
    if not errors or len(errors) < attempted:
        return
    for kind in (EngineUnavailableError, RegistryUnavailableError):
        matching = [e for e in errors.values() if isinstance(e, kind)]
        if len(matching) == len(errors):
            raise matching[0]
