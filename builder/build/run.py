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
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from typing_extensions import TypedDict

from builder import process
from builder.build.plan import (
    BuildOptions,
    BuildPlanDocument,
    PlannedBuild,
    check_tags,
    content_key,
    plan_builds,
    split_pinned,
    unpinned_error,
)
from builder.build.pushed import pushed_dir, record_push, refuse_foreign_retag
from builder.build.tags import (
    annotate_image,
    lookup_content_tags,
    move_tag,
    platforms_of,
    publish_content_tag,
    resolve_many,
)
from builder.errors import (
    BuilderError,
    BuildFailedError,
    ConfigError,
    EngineUnavailableError,
    RegistryError,
    RegistryUnavailableError,
    TagConflictError,
)
from builder.models import BuiltImage, RenderedImage, SummaryRow

if TYPE_CHECKING:
    from builder.engine import BuildRequest, BuildResult
    from builder.registry import RegistryClient

ProgressFn = Callable[[str, str, str], None]  # (variant id, event, detail)

#: a BuildKit plain-progress step header: ``#5 [builder 2/4] RUN pip install ...``
#: (https://docs.docker.com/reference/cli/docker/buildx/build/#progress)
_STEP = re.compile(r"^#\d+ \[[^\]]+\] \S")


def buildkit_step(line: str) -> str | None:
    """The step ``line`` starts (``#N [stage] step``, at most 160 characters), or None when it is
    output, timing or anything else."""
    line = line.rstrip()
    return line[:160] if _STEP.match(line) else None


class BuiltImageDocument(TypedDict):
    """One variant's build in ``--json``: ``status`` (``signed``: built earlier without a valid
    signature and provenance by the key, signed by this run), the ``reference`` (``registry/repository``)
    and ``content_tag``, the ``digest`` and ``pinned`` reference (None when it failed), its
    ``platforms``, wall time in ``seconds``, the build ``log`` file (None: not built) and the
    ``error`` (None unless it failed)."""

    variant: str
    status: Literal["built", "up-to-date", "signed", "failed"]
    reference: str
    content_tag: str
    digest: str | None
    pinned: str | None
    platforms: list[str]
    seconds: float
    log: str | None
    error: str | None


#: How many variants ended in each status.
BuildCountsDocument = TypedDict("BuildCountsDocument", {"built": int, "up-to-date": int, "signed": int, "failed": int})


class UnpinnedVariantDocument(TypedDict):
    """A variant ``builder build`` left out: its id and why it is not pinned (what to run)."""

    variant: str
    reasons: list[str]


class BuildRunDocument(TypedDict):
    """``builder build --json``: ``ok`` when no variant failed and none was left out, wall time in
    ``seconds``, the ``counts`` per status, every image in plan order and the variants left out
    because their base or dependency lock is not pinned (``unpinned``; exit 13)."""

    ok: bool
    seconds: float
    counts: BuildCountsDocument
    images: list[BuiltImageDocument]
    unpinned: list[UnpinnedVariantDocument]


BuildDocument = BuildRunDocument | BuildPlanDocument
"""``builder build --json``: the run, or with ``--dry-run`` the plan."""


@dataclasses.dataclass(frozen=True)
class BuildRun:
    """Everything one ``build_variants`` call produced: ``results`` (same order as the plan),
    ``plan``, wall-clock ``seconds`` and the variants left out because they are not pinned
    (``unpinned``; :func:`raise_for_failures` lists them with exit 13)."""

    results: tuple[BuiltImage, ...]
    plan: tuple[PlannedBuild, ...]
    seconds: float
    unpinned: tuple[RenderedImage, ...] = ()

    @property
    def failed(self) -> tuple[BuiltImage, ...]:
        return tuple(r for r in self.results if r.status == "failed")

    def summary_rows(self) -> tuple[SummaryRow, ...]:
        """One row per image: variant, digest (empty when it failed) and status."""
        return tuple(SummaryRow(r.variant_id, r.digest or "", r.status) for r in self.results)

    def to_json(self) -> BuildRunDocument:
        def count(status: str) -> int:
            return sum(1 for r in self.results if r.status == status)

        return {
            "ok": not self.failed and not self.unpinned,
            "seconds": round(self.seconds, 3),
            "counts": {
                "built": count("built"),
                "up-to-date": count("up-to-date"),
                "signed": count("signed"),
                "failed": count("failed"),
            },
            "images": [built_json(r) for r in self.results],
            "unpinned": [{"variant": r.variant.id, "reasons": list(r.unpinned)} for r in self.unpinned],
        }


def built_json(b: BuiltImage) -> BuiltImageDocument:
    """One build result as its ``--json`` document."""
    return {
        "variant": b.variant_id,
        "status": b.status,
        "reference": b.reference,
        "content_tag": b.content_tag,
        "digest": b.digest or None,
        "pinned": b.pinned if b.digest else None,
        "platforms": list(b.platforms),
        "seconds": round(b.seconds, 3),
        "log": b.log_path,
        "error": b.error,
    }


@dataclasses.dataclass(frozen=True)
class BuildPreview:
    """What ``builder build --dry-run`` would do: one planned build per selected variant."""

    plan: tuple[PlannedBuild, ...]

    def to_json(self) -> BuildPlanDocument:
        return {
            "plan": [p.to_json() for p in self.plan],
            "unpinned": [p.variant_id for p in self.plan if p.action == "unpinned"],
        }

    def summary_rows(self) -> tuple[SummaryRow, ...]:
        """One row per planned build: variant, the digest its content tag already names (empty:
        none) and what would happen (``would build``, ``up-to-date`` or ``unpinned``)."""
        return tuple(
            SummaryRow(p.variant_id, p.existing_digest or "", "would build" if p.action == "build" else p.action)
            for p in self.plan
        )


def log_tail(built: BuiltImage, lines: int = 8) -> list[str]:
    """The last ``lines`` lines of ``built``'s build log (``[]`` when it has none or it is gone)."""
    if not built.log_path:
        return []
    try:
        return Path(built.log_path).read_text(errors="replace").splitlines()[-lines:]
    except FileNotFoundError:
        return []


def preview(rendered: Sequence[RenderedImage], options: BuildOptions, client: RegistryClient) -> list[PlannedBuild]:
    """The plan ``builder build --dry-run`` shows: tags checked (ConfigError), every content tag
    looked up (registry errors propagate), variants that are not pinned listed as ``unpinned``
    (unless ``options.allow_unpinned``), nothing built."""
    check_tags(rendered)
    existing = lookup_content_tags(client, rendered, repository=options.repository)
    return plan_builds(
        rendered,
        existing,
        registry=options.registry,
        rebuild=options.rebuild,
        allow_unpinned=options.allow_unpinned,
        repository_prefix=options.repository_prefix,
    )


def raise_for_failures(run: BuildRun) -> None:
    """Nothing when every variant was built or up to date; else TagConflictError (exit 15) when every
    failure was a content tag holding another digest, BuildFailedError (exit 14) otherwise. Both carry
    ``details['failed']`` (:func:`built_json` of each failure) and ``details['summary']``. With no
    failure but variants left out as not pinned: UnpinnedBaseError (exit 13) listing them, with
    ``details['summary']``."""
    if not run.failed:
        error = unpinned_error(run.unpinned, built=len(run.results), summary=run.to_json())
        if error is not None:
            raise error
        return
    failed = [built_json(b) for b in run.failed]
    if all((b.error or "").startswith(TagConflictError.kind + ":") for b in run.failed):
        raise TagConflictError(
            "; ".join((b.error or "").split(":", 1)[1].strip() for b in run.failed),
            failed=failed,
            summary=run.to_json(),
        )
    raise BuildFailedError(
        f"{len(run.failed)} of {len(run.results)} variant(s) failed: "
        + ", ".join(f"{b.variant_id} ({b.failure_note})" for b in run.failed),
        failed=failed,
        summary=run.to_json(),
    )


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
    # one parallel pass: content tags (what to build) and variant tags (to keep them current)
    pairs = [(options.repository(r), t) for r in rendered for t in (r.content_tag, r.variant.id)]
    found = resolve_many(client, pairs)
    existing = {content_key(repo, tag): d for (repo, tag), d in found.items()}
    plan = plan_builds(
        rendered,
        existing,
        registry=options.registry,
        rebuild=options.rebuild,
        allow_unpinned=True,
        repository_prefix=options.repository_prefix,
    )
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
            retag = found.get((p.repository, p.variant_tag)) != p.existing_digest
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
                progress(p.variant_id, "retagged", f"{p.variant_tag} -> {p.existing_digest}")
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
                futures.update({pool.submit(_build_one, p, options, client, progress, on_built): p for p in todo})
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


def _pushed(futures: Iterable[concurrent.futures.Future[tuple[BuiltImage, BuilderError | None]]]) -> int:
    """How many of the finished ``_build_one`` calls built and pushed their variant."""
    return sum(1 for f in futures if f.done() and not f.cancelled() and f.exception() is None and f.result()[1] is None)


def _raise_if_infrastructure_down(errors: Mapping[str, BuilderError], attempted: int) -> None:
    if not errors or len(errors) < attempted:
        return
    for kind in (EngineUnavailableError, RegistryUnavailableError):
        matching = [e for e in errors.values() if isinstance(e, kind)]
        if len(matching) == len(errors):
            raise matching[0]


def _with_steps(log: Callable[[str], None], variant: str, progress: ProgressFn) -> Callable[[str], None]:
    """``log`` that also reports each BuildKit step it sees as ``progress(variant, "step", step)``."""

    def write(line: str) -> None:
        log(line)
        step = buildkit_step(line)
        if step is not None:
            progress(variant, "step", step)

    return write


class _Log:
    """A per-variant build log file (thread-safe line writer)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._f = path.open("w", encoding="utf-8")
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self._lock:
            self._f.write(line if line.endswith("\n") else line + "\n")
            self._f.flush()

    def close(self) -> None:
        self._f.close()


def materialize(rendered: RenderedImage, directory: Path) -> tuple[Path, Path]:
    """Write the build context (``directory/context``) and the Dockerfile (``directory/Dockerfile``,
    outside the context so it never lands in it). Returns (context dir, Dockerfile path).
    Rejects context paths that escape the directory (ConfigError)."""
    ctx = directory / "context"
    ctx.mkdir(parents=True, exist_ok=True)
    root = ctx.resolve()
    for rel, data in rendered.context:
        target = (ctx / rel).resolve()
        if root not in target.parents:
            raise ConfigError(f"{rendered.variant.id}: context file {rel!r} escapes the build context")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    dockerfile = directory / "Dockerfile"
    dockerfile.write_text(rendered.dockerfile)
    return ctx, dockerfile


def build_request(p: PlannedBuild, options: BuildOptions, context: Path, dockerfile: Path) -> BuildRequest:
    """The :class:`builder.engine.BuildRequest` for one planned build (pure): the render's labels and
    ``options.image_labels`` as labels, and the same keys as manifest and index annotations."""
    from builder.engine import BuildRequest
    from builder.labels import annotation_items

    args = dict(p.rendered.build_args)
    if options.source_date_epoch is not None:
        args["SOURCE_DATE_EPOCH"] = str(options.source_date_epoch)
    platforms = options.platforms or (p.rendered.variant.platform,)
    labels = tuple(sorted({**dict(p.rendered.labels), **dict(options.image_labels)}.items()))
    return BuildRequest(
        context_dir=context,
        dockerfile=dockerfile,
        push_ref=f"{p.reference}:{p.pending_tag}",
        build_args=tuple(sorted(args.items())),
        labels=labels,
        annotations=annotation_items(labels),
        secrets=options.secrets,
        platforms=tuple(platforms),
        builder=options.builder,
        cache_ref=f"{p.reference}:{p.cache_tag}" if options.cache else None,
        provenance=options.buildx_provenance,
        no_cache=options.no_cache,
    )


def _build_and_push(
    req: BuildRequest,
    *,
    log: Callable[[str], None],
    metadata_file: Path,
    attempts: int,
    wait: Callable[[int], float],
) -> BuildResult:
    """:func:`builder.engine.build_and_push`, run again (at most ``attempts`` runs in all, after
    ``wait(n)`` seconds before run n+1) while the push fails with a transient registry error
    (``details['transient']``); any other error, or the last one, is raised; ``process.Interrupted``
    when SIGTERM/SIGINT arrives during the wait."""
    from builder import engine

    attempt = 1
    while True:
        try:
            return engine.build_and_push(req, log=log, metadata_file=metadata_file)
        except (RegistryError, RegistryUnavailableError) as exc:
            if not exc.details.get("transient") or attempt >= attempts:
                raise
            log(f"# push failed ({exc.message.splitlines()[0]}); pushing again, run {attempt + 1} of {attempts}")
            process.backoff(wait(attempt))  # SIGTERM/SIGINT ends the wait: Interrupted, no further run
            attempt += 1


def _check_claims(
    p: PlannedBuild,
    options: BuildOptions,
    client: RegistryClient,
    digest: str,
    platforms: tuple[str, ...],
    log: Callable[[str], None],
) -> None:
    """The pushed image's ``gpu-archs`` label checked against its measured GPU code
    (:func:`builder.build.claims.check_label_claim`, layers cached under ``<state_dir>/cache/layers``).
    Raises BuildFailedError (14) when the label claims what no framework library has."""
    from builder.build.claims import check_label_claim, claimed_archs

    labels = dict(p.rendered.labels)
    if not claimed_archs(labels):  # CPU images and gpu-archs=none: nothing to read
        return
    from builder.image.layers import LayerCache

    cache = LayerCache(options.state_dir / "cache" / "layers")
    check_label_claim(client, p.repository, digest, labels, platforms=platforms, cache=cache, log=log)


def _check_content_tag(client: RegistryClient, p: PlannedBuild, digest: str) -> None:
    """Raise TagConflictError (exit 15) when the content tag no longer names ``digest``, the image
    this build pushed and wrote under it (someone who may push replaced it meanwhile: a registry
    keeps no tag write-once, OCI distribution spec "Pushing Manifests",
    https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pushing-manifests)."""
    now = client.try_resolve(p.repository, p.content_tag)
    if now != digest:
        where = f"{p.reference}:{p.content_tag}"
        raise TagConflictError(
            f"content tag {where} was moved to {now} after this build wrote {digest} under it; the variant "
            f"tag {p.variant_tag} was not moved and {now} was not signed. Inspect who pushed it; the "
            f"build itself is {p.reference}@{digest}",
            reference=where,
            existing=now,
            built=digest,
        )


def _build_one(
    p: PlannedBuild,
    options: BuildOptions,
    client: RegistryClient,
    progress: ProgressFn,
    on_built: Callable[[BuiltImage, RenderedImage], None] | None,
) -> tuple[BuiltImage, BuilderError | None]:
    from builder import engine
    from builder.registry import verify_complete

    t0 = time.monotonic()
    log_path = options.logs_dir / f"{p.variant_id}.log"
    log = _Log(log_path)
    progress(p.variant_id, "building", str(log_path))
    digest = ""
    try:
        with tempfile.TemporaryDirectory(prefix=f"builder-{p.variant_id[:40]}-") as tmp:
            ctx, dockerfile = materialize(p.rendered, Path(tmp))
            req = build_request(p, options, ctx, dockerfile)
            log(f"# variant {p.variant_id}  content tag {p.reference}:{p.content_tag}")
            log("# " + " ".join(engine.build_command(req)))
            result = _build_and_push(
                req,
                log=_with_steps(log, p.variant_id, progress),
                metadata_file=Path(tmp) / "metadata.json",
                attempts=options.push_attempts,
                wait=lambda attempt: client.transport.delay(attempt, None),
            )
        digest = result.digest
        log(f"# buildx pushed {p.reference}@{digest} (pending tag {p.pending_tag})")
        progress(p.variant_id, "pushed", digest)
        registry_digest = client.try_resolve(p.repository, digest)
        if registry_digest != digest:
            raise RegistryError(
                f"BuildKit reported {digest} for {p.reference}, but the registry does not have it",
                hint="check the registry's logs and the build log",
            )
        missing = verify_complete(client, p.repository, digest)
        if missing:
            raise RegistryError(
                f"{p.reference}@{digest} is incomplete in the registry: missing {', '.join(missing[:5])}",
                hint="rerun the build; the content tag was not written",
            )
        annotated = annotate_image(client, p.repository, digest, req.annotations)
        if annotated != digest:
            log(f"# annotations written on the index and platform manifests: {p.reference}@{annotated}")
            digest = annotated
        _check_claims(p, options, client, digest, tuple(req.platforms), log)  # before any tag or signature
        if not record_push(options.state_dir, digest, p.content_tag, p.reference):
            log(f"# could not record the push under {pushed_dir(options.state_dir)}: a later run will not sign it")
        written = publish_content_tag(client, p.repository, p.content_tag, digest)
        log(f"# content tag {p.content_tag} -> {digest} ({'written' if written else 'already there'})")
        # from here on only the digest this build pushed and checked: the tag is not read for it
        # again, so a push landing under the content tag now is neither signed nor given the variant tag
        built = BuiltImage(
            variant_id=p.variant_id,
            reference=p.reference,
            digest=digest,
            content_tag=p.content_tag,
            status="built",
            seconds=time.monotonic() - t0,
            log_path=str(log_path),
            platforms=platforms_of(client, p.repository, digest, tuple(req.platforms)),
        )
        if on_built is not None:
            on_built(built, p.rendered)  # signing first: an unsigned build gets no variant tag
        _check_content_tag(client, p, digest)
        move_tag(client, p.repository, p.variant_tag, digest)
        progress(p.variant_id, "built", digest)
        return built, None
    except BuilderError as exc:
        log(f"# FAILED: {exc.message}")
        if exc.hint:
            log(f"# hint: {exc.hint}")
        progress(p.variant_id, "failed", exc.message.splitlines()[0] if exc.message else type(exc).__name__)
        failed = BuiltImage(
            variant_id=p.variant_id,
            reference=p.reference,
            digest=digest if digest and isinstance(exc, TagConflictError) else "",
            content_tag=p.content_tag,
            status="failed",
            seconds=time.monotonic() - t0,
            log_path=str(log_path),
            error=f"{exc.kind}: {exc.message}",
        )
        return failed, exc
    finally:
        log.close()
