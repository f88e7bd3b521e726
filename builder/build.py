"""Plan and run builds: skip existing content tags, build the rest in parallel, push write-once.

Flow for each selected variant (a :class:`~builder.models.RenderedImage`):

1. **Plan** (:func:`plan_builds`, pure): the content tag ``<variant-id>-<hash12>`` is looked up in
   the registry (:func:`lookup_content_tags`, HEAD requests only, in parallel). An existing tag
   means ``up-to-date``: nothing is built and no local state is needed.
2. **Build** (:func:`build_variants`): BuildKit through :mod:`builder.engine` with build args,
   labels, secrets (the host CA bundle as secret ``ca_bundle``), ``SOURCE_DATE_EPOCH``, optional
   registry cache and a chosen buildx builder; bounded parallelism; one failure does not stop the
   others; one log file per variant under ``<state_dir>/logs/``.
3. **Push safely**: buildx pushes to the variant's *pending* tag ``pending-<variant-id>`` (the
   docker driver cannot push by digest; a pending tag only keeps the pushed manifest referenced).
   The digest recorded is the one BuildKit reports, checked against the registry; every child
   manifest and blob of it is verified to exist; only then is the manifest PUT under the content
   tag, and only if that tag does not exist (checked before and after the write: write-once; a
   tag with another digest raises ``TagConflictError`` and is never overwritten). Finally the
   moving variant tag ``<variant-id>`` is pointed at it. A build killed at any point before that
   leaves no content tag, so a content tag always names a complete image.

Sources of facts: buildx's metadata file key ``containerimage.digest``; buildx 0.13 docker
driver error "push-by-digest is currently not implemented for docker driver" (seen on this
machine); BuildKit's ``SOURCE_DATE_EPOCH`` build argument (BuildKit docs, "build reproducibility").
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from builder.errors import (
    BuilderError,
    ConfigError,
    EngineUnavailableError,
    RegistryError,
    RegistryUnavailableError,
    TagConflictError,
    UnpinnedBaseError,
)
from builder.models import BuiltImage, RenderedImage

if TYPE_CHECKING:
    from sigstore.models import ClientTrustConfig
    from sigstore.oidc import IdentityToken

    from builder.config import Config
    from builder.engine import BuildRequest
    from builder.registry import RegistryClient
    from builder.sign import Signer

#: The host CA bundle (Debian/Ubuntu path) passed as BuildKit secret ``ca_bundle`` when it exists.
DEFAULT_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
CA_SECRET_ID = "ca_bundle"
PENDING_PREFIX = "pending-"
CACHE_PREFIX = "buildcache-"
MAX_TAG = 128
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")

Action = Literal["build", "up-to-date"]
ProgressFn = Callable[[str, str, str], None]  # (variant id, event, detail)


# --------------------------------------------------------------------------------------------
# options and plan (pure)
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BuildOptions:
    """How to build. ``registry``: host[:port] the repositories are relative to; ``workers``:
    parallel builds (>= 1); ``builder``: buildx builder name (None: current); ``platforms``:
    overrides each variant's platform; ``cache``: registry build cache under
    ``<repo>:buildcache-<variant-id>``; ``secrets``: ``(id, path)`` BuildKit secrets;
    ``source_date_epoch``: seconds (None: not set); ``rebuild``: build even when the content tag
    exists (the tag step stays write-once); ``buildx_provenance``: buildx's own attestation
    manifest (None: buildx default)."""

    registry: str
    state_dir: Path
    workers: int = 2
    builder: str | None = None
    platforms: tuple[str, ...] = ()
    cache: bool = False
    secrets: tuple[tuple[str, Path], ...] = ()
    source_date_epoch: int | None = None
    allow_unpinned: bool = False
    rebuild: bool = False
    no_cache: bool = False
    buildx_provenance: bool | None = None

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"


def default_secrets(ca_bundle: Path | None = DEFAULT_CA_BUNDLE) -> tuple[tuple[str, Path], ...]:
    """``(("ca_bundle", path),)`` when the CA bundle file exists, else ``()``."""
    if ca_bundle is not None and ca_bundle.is_file():
        return ((CA_SECRET_ID, ca_bundle),)
    return ()


@dataclasses.dataclass(frozen=True)
class PlannedBuild:
    """What will happen to one variant: ``action`` ``build`` or ``up-to-date`` (then
    ``existing_digest`` is the content tag's digest)."""

    rendered: RenderedImage
    registry: str
    action: Action
    existing_digest: str | None = None

    @property
    def variant_id(self) -> str:
        return self.rendered.variant.id

    @property
    def repository(self) -> str:
        return self.rendered.variant.repository

    @property
    def reference(self) -> str:
        return f"{self.registry}/{self.repository}"

    @property
    def content_tag(self) -> str:
        return self.rendered.content_tag

    @property
    def variant_tag(self) -> str:
        return self.rendered.variant.id

    @property
    def pending_tag(self) -> str:
        return (PENDING_PREFIX + self.variant_id)[:MAX_TAG]

    @property
    def cache_tag(self) -> str:
        return (CACHE_PREFIX + self.variant_id)[:MAX_TAG]

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant_id,
            "reference": self.reference,
            "content_tag": self.content_tag,
            "action": self.action,
            "existing_digest": self.existing_digest,
        }


def check_tags(rendered: Iterable[RenderedImage]) -> None:
    """Content and variant tags must be valid OCI tags, at most 128 characters, and never start
    with ``sha256-`` (reserved for signatures and the referrers fallback index). ConfigError."""
    bad: list[str] = []
    for r in rendered:
        for tag in (r.content_tag, r.variant.id):
            if len(tag) > MAX_TAG or not _TAG_RE.match(tag) or tag.startswith("sha256-"):
                bad.append(f"{r.variant.id}: tag {tag!r}")
    if bad:
        raise ConfigError(
            "invalid image tags (at most 128 of [A-Za-z0-9_.-], not starting with sha256-): " + "; ".join(bad),
            hint="shorten the variant id (matrix axes values) so `<variant-id>-<hash12>` fits",
        )


def check_pinned(rendered: Iterable[RenderedImage], *, allow_unpinned: bool = False) -> None:
    """Refuse variants that are not reproducible (base without digest, missing/stale dependency
    lock): ``UnpinnedBaseError`` listing every one, unless ``allow_unpinned``."""
    if allow_unpinned:
        return
    problems = [(r.variant.id, reason) for r in rendered for reason in r.unpinned]
    if problems:
        listing = "\n".join(f"  {vid}: {reason}" for vid, reason in problems)
        raise UnpinnedBaseError(
            f"{len({p[0] for p in problems})} variant(s) are not reproducible:\n{listing}",
            variants=sorted({p[0] for p in problems}),
            reasons=[f"{vid}: {reason}" for vid, reason in problems],
            hint="run `builder bases update` / `builder lock` and commit, or pass --allow-unpinned for a "
            "throwaway build",
        )


def content_key(repository: str, content_tag: str) -> str:
    """Key of :func:`lookup_content_tags` results: ``<repository>:<content-tag>``."""
    return f"{repository}:{content_tag}"


def plan_builds(
    rendered: Sequence[RenderedImage],
    existing: Mapping[str, str | None],
    *,
    registry: str,
    rebuild: bool = False,
) -> list[PlannedBuild]:
    """Pure: decide per variant. ``existing``: :func:`content_key` -> digest or None (from
    :func:`lookup_content_tags`). Order follows ``rendered``."""
    out: list[PlannedBuild] = []
    for r in rendered:
        digest = existing.get(content_key(r.variant.repository, r.content_tag))
        action: Action = "up-to-date" if digest and not rebuild else "build"
        out.append(PlannedBuild(rendered=r, registry=registry, action=action, existing_digest=digest))
    return out


def changed_variants(now: Sequence[RenderedImage], before: Iterable[RenderedImage]) -> list[RenderedImage]:
    """Pure: the variants of ``now`` whose content hash differs from ``before`` (or that are new)."""
    old = {r.variant.id: r.content_hash for r in before}
    return [r for r in now if old.get(r.variant.id) != r.content_hash]


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> ``(2, 4)`` (1-based). ConfigError when malformed."""
    m = re.match(r"^\s*(\d+)\s*/\s*(\d+)\s*$", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ConfigError(f"--shard {text!r}: expected I/N with 1 <= I <= N, e.g. 1/4")
    return int(m.group(1)), int(m.group(2))


def shard(items: Sequence[RenderedImage], i: int, n: int) -> list[RenderedImage]:
    """Shard ``i`` of ``n`` (1-based) over the variants sorted by id: disjoint, covering, stable."""
    ordered = sorted(items, key=lambda r: r.variant.id)
    return ordered[i - 1 :: n]


def select(items: Sequence[RenderedImage], globs: Sequence[str]) -> list[RenderedImage]:
    """Variants whose id matches any shell glob; all when ``globs`` is empty. NotFoundError when a
    glob matches nothing (a typo must not silently build nothing)."""
    import fnmatch

    from builder.errors import NotFoundError

    if not globs:
        return list(items)
    for g in globs:
        if not any(fnmatch.fnmatchcase(r.variant.id, g) for r in items):
            raise NotFoundError(f"--select {g!r} matches no variant", hint="`builder matrix list` shows the ids")
    return [r for r in items if any(fnmatch.fnmatchcase(r.variant.id, g) for g in globs)]


# --------------------------------------------------------------------------------------------
# registry look-ups and the write-once tag step
# --------------------------------------------------------------------------------------------


def resolve_many(
    client: RegistryClient, refs: Iterable[tuple[str, str]], *, workers: int = 16
) -> dict[tuple[str, str], str | None]:
    """HEAD many ``(repository, tag)`` pairs in parallel -> digest or None (missing).
    Raises RegistryUnavailableError / RegistryAuthError (the first one met)."""
    keys = list(dict.fromkeys(refs))
    if not keys:
        return {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(workers, len(keys)))) as pool:
        digests = list(pool.map(lambda k: client.try_resolve(k[0], k[1]), keys))
    return dict(zip(keys, digests, strict=True))


def lookup_content_tags(
    client: RegistryClient, rendered: Sequence[RenderedImage], *, workers: int = 16
) -> dict[str, str | None]:
    """HEAD every content tag (in parallel): :func:`content_key` -> digest or None.
    Raises RegistryUnavailableError / RegistryAuthError (the first one met)."""
    found = resolve_many(client, ((r.variant.repository, r.content_tag) for r in rendered), workers=workers)
    return {content_key(repo, tag): d for (repo, tag), d in found.items()}


def publish_content_tag(client: RegistryClient, repository: str, content_tag: str, digest: str) -> bool:
    """Write-once: PUT the manifest ``digest`` under ``content_tag`` only when the tag does not
    exist; re-read after the write. Returns True when written, False when the tag already held
    ``digest``. Raises TagConflictError (never overwrites) when the tag holds another digest,
    before or after our write."""
    where = f"{client.registry}/{repository}:{content_tag}"
    current = client.try_resolve(repository, content_tag)
    if current == digest:
        return False
    if current is not None:
        raise TagConflictError(
            f"content tag {where} already points at {current}; the build produced {digest}. Nothing was "
            "overwritten (content tags are write-once)",
            reference=where,
            existing=current,
            built=digest,
        )
    manifest = client.get_manifest(repository, digest)
    client.put_manifest(repository, content_tag, manifest.raw, manifest.media_type)
    after = client.try_resolve(repository, content_tag)
    if after != digest:
        raise TagConflictError(
            f"content tag {where} changed under us: it now points at {after}, we wrote {digest} "
            "(another build wrote it at the same time)",
            reference=where,
            existing=after,
            built=digest,
        )
    return True


def move_tag(client: RegistryClient, repository: str, tag: str, digest: str) -> None:
    """Point a moving tag (the variant tag) at ``digest``; no-op when it already does."""
    if client.try_resolve(repository, tag) == digest:
        return
    m = client.get_manifest(repository, digest)
    client.put_manifest(repository, tag, m.raw, m.media_type)


def _platforms(client: RegistryClient, repository: str, digest: str, fallback: tuple[str, ...]) -> tuple[str, ...]:
    from builder.registry import platform_names

    m = client.get_manifest(repository, digest)
    if m.is_index:
        return platform_names(m) or fallback
    return fallback


# --------------------------------------------------------------------------------------------
# running builds
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BuildRun:
    """Everything one ``build_variants`` call produced: ``results`` (same order as the plan),
    ``plan``, and wall-clock ``seconds``."""

    results: tuple[BuiltImage, ...]
    plan: tuple[PlannedBuild, ...]
    seconds: float

    @property
    def failed(self) -> tuple[BuiltImage, ...]:
        return tuple(r for r in self.results if r.status == "failed")

    def to_json(self) -> dict[str, Any]:
        counts = {s: sum(1 for r in self.results if r.status == s) for s in ("built", "up-to-date", "failed")}
        return {
            "ok": not self.failed,
            "seconds": round(self.seconds, 3),
            "counts": counts,
            "images": [built_json(r) for r in self.results],
        }


def built_json(b: BuiltImage) -> dict[str, Any]:
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


def build_variants(
    rendered: Sequence[RenderedImage],
    options: BuildOptions,
    *,
    client: RegistryClient,
    on_built: Callable[[BuiltImage, RenderedImage], None] | None = None,
    on_progress: ProgressFn | None = None,
    engine_ping: Callable[[], Any] | None = None,
) -> BuildRun:
    """Plan, then build every variant whose content tag is missing (see module docstring).

    ``on_built(built, rendered)`` runs after each successful push (signing hooks here); its
    failure marks that variant failed. ``on_progress(variant_id, event, detail)`` reports events
    ``up-to-date``, ``retagged`` (an up-to-date variant's moving tag pointed elsewhere and was
    moved back), ``building``, ``pushed``, ``built``, ``failed``. Returns a :class:`BuildRun`
    (failed variants are in it; nothing raises for them). Raises, before building anything:
    UnpinnedBaseError, ConfigError (bad tags), RegistryUnavailableError/RegistryAuthError (look-ups),
    EngineUnavailableError (no engine while something must be built). When every build failed
    for the same infrastructure reason (engine or registry gone), that error is raised.
    """
    start = time.monotonic()
    check_tags(rendered)
    check_pinned(rendered, allow_unpinned=options.allow_unpinned)
    # one parallel pass: content tags (what to build) and variant tags (to keep them current)
    found = resolve_many(client, [(r.variant.repository, t) for r in rendered for t in (r.content_tag, r.variant.id)])
    existing = {content_key(repo, tag): d for (repo, tag), d in found.items()}
    plan = plan_builds(rendered, existing, registry=options.registry, rebuild=options.rebuild)
    progress = on_progress or (lambda _v, _e, _d: None)
    results: dict[str, BuiltImage] = {}
    for p in plan:
        if p.action == "up-to-date":
            assert p.existing_digest is not None
            if found.get((p.repository, p.variant_tag)) != p.existing_digest:
                # e.g. a template change was reverted: the variant tag goes back to this image
                move_tag(client, p.repository, p.variant_tag, p.existing_digest)
                progress(p.variant_id, "retagged", f"{p.variant_tag} -> {p.existing_digest}")
            results[p.variant_id] = BuiltImage(
                variant_id=p.variant_id,
                reference=p.reference,
                digest=p.existing_digest,
                content_tag=p.content_tag,
                status="up-to-date",
                platforms=(p.rendered.variant.platform,),
            )
            progress(p.variant_id, "up-to-date", p.existing_digest)
    todo = [p for p in plan if p.action == "build"]
    if todo:
        if engine_ping is None:
            from builder import engine

            engine_ping = engine.ping
        engine_ping()  # EngineUnavailableError (exit 3) before any work
        options.logs_dir.mkdir(parents=True, exist_ok=True)
        errors: dict[str, BuilderError] = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, options.workers)) as pool:
            futures = {pool.submit(_build_one, p, options, client, progress, on_built): p for p in todo}
            for fut in concurrent.futures.as_completed(futures):
                p = futures[fut]
                built, err = fut.result()
                results[p.variant_id] = built
                if err is not None:
                    errors[p.variant_id] = err
        _raise_if_infrastructure_down(errors, len(todo))
    ordered = tuple(results[p.variant_id] for p in plan)
    return BuildRun(results=ordered, plan=tuple(plan), seconds=time.monotonic() - start)


def _raise_if_infrastructure_down(errors: Mapping[str, BuilderError], attempted: int) -> None:
    if not errors or len(errors) < attempted:
        return
    for kind in (EngineUnavailableError, RegistryUnavailableError):
        matching = [e for e in errors.values() if isinstance(e, kind)]
        if len(matching) == len(errors):
            raise matching[0]


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
    """The :class:`builder.engine.BuildRequest` for one planned build (pure)."""
    from builder.engine import BuildRequest

    args = dict(p.rendered.build_args)
    if options.source_date_epoch is not None:
        args["SOURCE_DATE_EPOCH"] = str(options.source_date_epoch)
    platforms = options.platforms or (p.rendered.variant.platform,)
    return BuildRequest(
        context_dir=context,
        dockerfile=dockerfile,
        push_ref=f"{p.reference}:{p.pending_tag}",
        build_args=tuple(sorted(args.items())),
        labels=p.rendered.labels,
        secrets=options.secrets,
        platforms=tuple(platforms),
        builder=options.builder,
        cache_ref=f"{p.reference}:{p.cache_tag}" if options.cache else None,
        provenance=options.buildx_provenance,
        no_cache=options.no_cache,
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
            result = engine.build_and_push(req, log=log, metadata_file=Path(tmp) / "metadata.json")
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
        written = publish_content_tag(client, p.repository, p.content_tag, digest)
        recorded = client.resolve(p.repository, p.content_tag)  # the digest the registry returns
        move_tag(client, p.repository, p.variant_tag, recorded)
        log(f"# content tag {p.content_tag} -> {recorded} ({'written' if written else 'already there'})")
        built = BuiltImage(
            variant_id=p.variant_id,
            reference=p.reference,
            digest=recorded,
            content_tag=p.content_tag,
            status="built",
            seconds=time.monotonic() - t0,
            log_path=str(log_path),
            platforms=_platforms(client, p.repository, recorded, tuple(req.platforms)),
        )
        if on_built is not None:
            on_built(built, p.rendered)
        progress(p.variant_id, "built", recorded)
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


# --------------------------------------------------------------------------------------------
# inputs: render the matrices (now or at a git ref), git facts
# --------------------------------------------------------------------------------------------


def render_matrices(
    cfg: Config, matrix_files: Sequence[Path] = (), *, root: Path | None = None
) -> tuple[RenderedImage, ...]:
    """Load the matrices and render every variant with the bases lock, mirror record and locks of
    ``cfg`` (paths re-rooted at ``root`` when given, e.g. a git ref extracted to a temp dir; the
    machine-local mirror record always comes from ``cfg.state_dir``)."""
    from builder.matrix import load_matrices, matrix_paths
    from builder.render import load_bases, render_all

    def at(path: Path) -> Path:
        if root is None:
            return path
        try:
            return root / path.relative_to(cfg.root)
        except ValueError:
            return path

    bases = load_bases(at(cfg.bases_lock), cfg.mirror_record, cfg.mirror_map)
    files = tuple(at(Path(f).resolve()) for f in matrix_files) if matrix_files else ()
    paths = matrix_paths(at(cfg.matrices_dir), files)
    matrices = load_matrices(paths, bases=bases)
    variants = [v for m in matrices for v in m.variants]
    return render_all(variants, images_dir=at(cfg.images_dir), locks_dir=at(cfg.locks_dir), bases=bases)


def render_at_ref(cfg: Config, ref: str, matrix_files: Sequence[Path] = ()) -> tuple[RenderedImage, ...]:
    """Render the matrices as they were at git ``ref`` (templates, matrices, locks, bases lock
    extracted with ``git archive``), with this version of builder. Matrices that did not exist at
    ``ref`` render nothing. ConfigError when ``ref`` is unknown or this is not a git work tree."""
    import io
    import tarfile

    def git(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(["git", "-C", str(cfg.root), *args], capture_output=True, check=False)

    check = git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if check.returncode != 0:
        raise ConfigError(
            f"--changed-since {ref}: not a commit in the git repository at {cfg.root}",
            hint="fetch enough history (actions/checkout fetch-depth: 0) or name an existing ref",
        )
    rels: list[str] = []
    for p in (cfg.images_dir, cfg.matrices_dir, cfg.locks_dir, cfg.bases_lock):
        try:
            rel = p.relative_to(cfg.root).as_posix()
        except ValueError:
            continue
        if git("cat-file", "-e", f"{ref}:{rel}").returncode == 0:
            rels.append(rel)
    if not rels:
        return ()
    proc = git("archive", "--format=tar", ref, "--", *rels)
    if proc.returncode != 0:
        raise ConfigError(f"--changed-since {ref}: git archive failed: {proc.stderr.decode().strip()}")
    members = [proc.stdout]
    with tempfile.TemporaryDirectory(prefix="builder-ref-") as tmp:
        for blob in members:
            with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
                tar.extractall(tmp, filter="data")
        root = Path(tmp)
        if not (root / cfg.matrices_dir.relative_to(cfg.root)).is_dir():
            return ()
        old_files = [f for f in matrix_files if (root / Path(f).resolve().relative_to(cfg.root)).exists()]
        if matrix_files and not old_files:
            return ()
        from builder.errors import MatrixError

        try:
            return render_matrices(cfg, old_files, root=root)
        except MatrixError:
            return ()  # the old matrices are invalid today: treat every variant as changed


def git_commit(root: Path) -> str | None:
    """``git rev-parse HEAD`` of ``root`` (None outside a git work tree)."""
    proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None


def git_commit_time(root: Path) -> int | None:
    """Commit time of HEAD in seconds since the epoch (for ``SOURCE_DATE_EPOCH``), or None."""
    proc = subprocess.run(
        ["git", "-C", str(root), "log", "-1", "--format=%ct"], capture_output=True, text=True, check=False
    )
    text = proc.stdout.strip()
    return int(text) if proc.returncode == 0 and text.isdigit() else None


# --------------------------------------------------------------------------------------------
# signing hook (on_built): SLSA provenance + signature, with a key or keyless
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class KeylessSetup:
    """What a keyless build signature needs: the OIDC identity token (explicit, or the ambient CI token
    found by ``builder.keyless.ambient_identity_token``; the CLI decides) and the Sigstore client trust
    config (``builder.keyless.load_trust_config``: public-good or a private instance)."""

    identity_token: IdentityToken
    trust_config: ClientTrustConfig


def signing_hook(
    *,
    client: RegistryClient,
    options: BuildOptions,
    lock_dir: Path,
    git_commit: str | None,
    signer: Signer | None = None,
    keyless: KeylessSetup | None = None,
    secret_ids: Sequence[str] | None = None,
    source_repository: str | None = None,
    now: Callable[[], Any] | None = None,
) -> Callable[[BuiltImage, RenderedImage], None]:
    """The ``on_built`` hook of :func:`build_variants`: after each push, build the SLSA provenance v1
    predicate (``builder.provenance.provenance_predicate``: ``git_commit``, ``options.builder``,
    ``secret_ids`` (default: the ids of ``options.secrets``), ``options.source_date_epoch``, finish time
    ``now()`` (default: UTC now)) and sign the digest and attach the provenance, either with ``signer``
    (``builder.sign.sign_and_attest_build``: ``.sig``/``.att`` layers) or keylessly with ``keyless``
    (``builder.keyless.keyless_sign_and_attest_build``: legacy layers and Sigstore bundle referrers).
    ``lock_dir``: file locks for concurrent writers of the same signature tags (``<state_dir>/locks``).

    Exactly one of ``signer`` and ``keyless``; otherwise ConfigError. The hook raises SigningError and
    registry errors, which ``build_variants`` turns into a failed variant."""
    import datetime as dt

    if (signer is None) == (keyless is None):
        raise ConfigError(
            "signing needs exactly one of a signing key and a keyless (OIDC) setup",
            hint="pass --key/--sign for a key pair, or --keyless (not both)",
        )
    from builder.provenance import provenance_predicate

    ids = list(secret_ids) if secret_ids is not None else [s[0] for s in options.secrets]
    clock = now or (lambda: dt.datetime.now(dt.UTC))

    def hook(built: BuiltImage, rendered: RenderedImage) -> None:
        predicate = provenance_predicate(
            rendered,
            built,
            git_commit=git_commit,
            source_repository=source_repository,
            buildx_builder=options.builder,
            secret_ids=ids,
            source_date_epoch=options.source_date_epoch,
            finished=clock(),
        )
        repository = built.reference.split("/", 1)[1]  # BuiltImage.reference is registry/repository
        if keyless is not None:
            from builder.keyless import keyless_sign_and_attest_build

            keyless_sign_and_attest_build(
                client,
                repository,
                built.digest,
                predicate,
                identity_token=keyless.identity_token,
                trust_config=keyless.trust_config,
                lock_dir=lock_dir,
            )
            return
        from builder.sign import sign_and_attest_build

        assert signer is not None
        sign_and_attest_build(client, repository, built.digest, signer, predicate, lock_dir=lock_dir)

    return hook


# --------------------------------------------------------------------------------------------
# bases lock update
# --------------------------------------------------------------------------------------------

_ENV_FACTS = ("NVIDIA_REQUIRE_CUDA", "CUDA_VERSION")


@dataclasses.dataclass(frozen=True)
class BaseChange:
    """One base reference after ``bases update``: ``old``/``new`` digests and the image facts
    (``NVIDIA_REQUIRE_CUDA``, ``CUDA_VERSION`` from the config's Env) that changed between them."""

    reference: str
    old_digest: str | None
    new_digest: str
    old_facts: Mapping[str, str | None]
    new_facts: Mapping[str, str | None]

    @property
    def changed(self) -> bool:
        return self.old_digest != self.new_digest

    @property
    def fact_changes(self) -> dict[str, tuple[str | None, str | None]]:
        return {
            k: (self.old_facts.get(k), self.new_facts.get(k))
            for k in _ENV_FACTS
            if self.old_facts.get(k) != self.new_facts.get(k)
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "old_digest": self.old_digest,
            "new_digest": self.new_digest,
            "changed": self.changed,
            "facts": dict(self.new_facts),
            "fact_changes": {k: {"old": o, "new": n} for k, (o, n) in self.fact_changes.items()},
        }


def base_facts(client: RegistryClient, repository: str, digest: str) -> dict[str, str | None]:
    """``NVIDIA_REQUIRE_CUDA`` and ``CUDA_VERSION`` from the image config's Env (None when absent);
    for an index, the linux/amd64 (else first runnable) platform's config."""
    from builder.registry import config_env, image_config

    env = config_env(image_config(client, repository, digest))
    return {k: env.get(k) for k in _ENV_FACTS}


def update_bases(
    references: Iterable[str],
    lock_path: Path,
    *,
    resolve_client: Callable[[str], RegistryClient],
    default_registry: str,
    map_reference: Callable[[str], str] = lambda r: r,
    write: bool = True,
) -> list[BaseChange]:
    """Resolve every upstream base reference (through the mirror map when the site has one) to a
    digest, read its CUDA facts, compare with the lock (``old`` facts are read from the registry
    for the old digest when it still resolves, else from the lock entry), and write
    ``bases.lock.json`` (format owned by ``builder.render``: ``{"version": 1, "bases": {ref:
    {"digest", "nvidia_require_cuda", "cuda_version"}}}``). References no longer used are dropped.
    Raises NotFoundError / RegistryError naming the reference."""
    import json

    from builder.registry import parse_reference
    from builder.render import write_bases_lock

    old_doc: dict[str, Any] = {}
    if lock_path.exists():
        try:
            old_doc = dict(json.loads(lock_path.read_text()).get("bases") or {})
        except (ValueError, AttributeError) as exc:
            raise ConfigError(f"{lock_path}: not a valid bases lock ({exc})") from exc
    changes: list[BaseChange] = []
    entries: dict[str, dict[str, Any]] = {}
    for reference in sorted(set(references)):
        ref = parse_reference(map_reference(reference), default_registry)
        client = resolve_client(ref.registry)
        new_digest = client.resolve(ref.repository, ref.ref)
        new_facts = base_facts(client, ref.repository, new_digest)
        old_entry = old_doc.get(reference) if isinstance(old_doc.get(reference), dict) else None
        old_digest = old_entry.get("digest") if old_entry else None
        old_facts: dict[str, str | None] = {
            "NVIDIA_REQUIRE_CUDA": old_entry.get("nvidia_require_cuda") if old_entry else None,
            "CUDA_VERSION": old_entry.get("cuda_version") if old_entry else None,
        }
        if old_digest and old_digest != new_digest:
            with contextlib.suppress(BuilderError):  # old digest gone: keep what the lock recorded
                old_facts = base_facts(client, ref.repository, old_digest)
        elif old_digest == new_digest:
            old_facts = new_facts
        changes.append(BaseChange(reference, old_digest, new_digest, old_facts, new_facts))
        entries[reference] = {
            "digest": new_digest,
            "nvidia_require_cuda": new_facts.get("NVIDIA_REQUIRE_CUDA"),
            "cuda_version": new_facts.get("CUDA_VERSION"),
        }
    if write:
        write_bases_lock(lock_path, entries)
    return changes
