"""The build of one planned variant (step 1 and 2 of :mod:`builder.build.run`'s flow): its build
context and Dockerfile written out (:func:`materialize`), the BuildKit request
(:func:`build_request`), buildx run and pushed to the pending tag (run again on a transient
push failure, waiting the registry client's backoff, which SIGTERM/SIGINT ends), the pushed
digest checked against the registry and verified complete, its ``gpu-archs`` claim checked,
the write-once content tag, the ``on_built`` hook (signing), then the moving variant tag. One log
file per variant; BuildKit's step headers reported as progress (:func:`buildkit_step`).

Sources: BuildKit's plain progress format
(https://docs.docker.com/reference/cli/docker/buildx/build/#progress); ``SOURCE_DATE_EPOCH``
(https://docs.docker.com/build/ci/github-actions/reproducible-builds/); a registry keeps no tag
write-once (OCI distribution-spec v1.1, "Pushing Manifests",
https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pushing-manifests).
Errors: :func:`build_one` returns a failed :class:`builder.models.BuiltImage` with the
``BuilderError`` instead of raising it; ``process.Interrupted`` propagates.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from builder import process
from builder.build.pushed import pushed_dir, record_push
from builder.build.tags import annotate_image, move_tag, platforms_of, publish_content_tag
from builder.errors import (
    BuilderError,
    ConfigError,
    EngineCommandError,
    RegistryError,
    RegistryUnavailableError,
    TagConflictError,
)
from builder.models import BuiltImage, RenderedImage

if TYPE_CHECKING:
    from builder.build.plan import BuildOptions, PlannedBuild
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
    (``details['transient']``), and once more without BuildKit's cache (``--no-cache``) when the build
    failed on that cache's stale record (``details['stale_cache']``: a killed or pruned earlier build,
    :func:`builder.engine.stale_build_cache`); any other error, or the last one, is raised;
    ``process.Interrupted`` when SIGTERM/SIGINT arrives during the wait."""
    from builder import engine

    attempt = 1
    while True:
        try:
            return engine.build_and_push(req, log=log, metadata_file=metadata_file)
        except EngineCommandError as exc:
            if not exc.details.get("stale_cache") or req.no_cache:
                raise
            log(
                "# BuildKit's cache names a snapshot it no longer has (an earlier build killed or pruned "
                "while it exported); building again without the cache (--no-cache)"
            )
            req = dataclasses.replace(req, no_cache=True)
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


def build_one(
    p: PlannedBuild,
    options: BuildOptions,
    client: RegistryClient,
    progress: ProgressFn,
    on_built: Callable[[BuiltImage, RenderedImage], None] | None,
) -> tuple[BuiltImage, BuilderError | None]:
    """Build, push, verify and tag the planned variant ``p`` (the module docstring's steps), its log
    in ``options.logs_dir/<variant>.log``; ``progress(variant, event, detail)`` gets ``building``,
    ``step``, ``pushed``, ``built`` or ``failed``. Returns ``(built, None)`` (status ``built``) or,
    when a step raised a BuilderError, ``(failed, error)``: status ``failed``, the error's kind and
    message, the digest kept only for a TagConflictError (exit 15). Raises ``process.Interrupted``
    (SIGTERM/SIGINT: the child stopped, the push backoff ended) and OSError when the log file
    cannot be opened; a BuilderError never."""
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
