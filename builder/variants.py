"""The project's variants for a command: load the configured matrices, render them (now or at a
git ref) and apply a :class:`~builder.selection.Selection`.

Every command that selects variants goes through :func:`select_variants` (variants only: ``matrix
list``, ``lock``) or :func:`select_renders` (rendered: ``build``, ``render``, ``run``); both apply
the selection with :func:`builder.selection.apply`, so they choose the same variants. Paths come
from the :class:`~builder.config.Config` the CLI passes in.
"""

from __future__ import annotations

import dataclasses
import io
import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from builder import process
from builder.bases import BaseResolution, load_bases
from builder.errors import ConfigError, MatrixError
from builder.locks import LockResult, find_uv, lock_variants
from builder.matrix import Matrix, github_matrix, load_matrices, matrix_paths, variant_json
from builder.matrix.bindings import binding_problems
from builder.render import RenderOutcome, check_renders, render_all, write_renders
from builder.selection import Selection, apply, changed

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping, Sequence

    from builder.config import Config
    from builder.matrix.formats import GithubMatrixDocument, MatrixListDocument
    from builder.models import RenderedImage, Variant


@dataclasses.dataclass(frozen=True)
class Chosen:
    """The selected ``variants`` (Selection order: see :func:`builder.selection.apply`), the
    ``matrices`` they were chosen from, the ``bases`` they were resolved with and ``problems``
    (named policy/fleet files that do not exist)."""

    matrices: tuple[Matrix, ...]
    variants: tuple[Variant, ...]
    bases: BaseResolution
    repository_prefix: str = ""
    #: what the matrices name that does not exist (:func:`binding_problems`), one line each
    problems: tuple[str, ...] = ()

    def to_json(self) -> MatrixListDocument:
        """``builder matrix list --json``: each variant's :func:`builder.matrix.variant_json`."""
        return [variant_json(v, self.repository_prefix) for v in self.variants]

    def github_matrix(self) -> GithubMatrixDocument:
        """``builder matrix list --format github``: :func:`builder.matrix.github_matrix` of the variants."""
        return github_matrix(self.variants, self.repository_prefix)


def project_bases(cfg: Config) -> BaseResolution:
    """The bases lock, mirror record and mirror map of ``cfg`` (ConfigError when one is invalid)."""
    return load_bases(cfg.bases_lock, cfg.mirror_record, cfg.mirror_map)


def select_variants(cfg: Config, matrix_files: Sequence[Path], selection: Selection) -> Chosen:
    """Load the matrices (``matrix_files``, default every matrix of ``cfg``) with the project's bases and
    apply ``selection``; with ``changed_since`` the glob-selected variants are rendered now and at that
    ref (:func:`render_at_ref`); ``problems`` says which named policy or fleet files do not exist
    (:func:`binding_problems`). Raises MatrixError, ConfigError, NotFoundError (a glob matches nothing)."""
    bases = project_bases(cfg)
    matrices = load_matrices(matrix_paths(cfg.matrices_dir, matrix_files), bases=bases)
    variants = [v for m in matrices for v in m.variants]
    changed_ids = None
    if selection.changed_since is not None:
        by_glob = apply(variants, Selection(globs=selection.globs))
        now = render_all(by_glob, images_dir=cfg.images_dir, locks_dir=cfg.locks_dir, bases=bases)
        changed_ids = {r.variant.id for r in changed(now, render_at_ref(cfg, selection.changed_since, matrix_files))}
    chosen = tuple(apply(variants, selection, changed_ids=changed_ids))
    return Chosen(matrices, chosen, bases, cfg.repository_prefix, binding_problems(cfg, matrices))


def select_renders(cfg: Config, matrix_files: Sequence[Path], selection: Selection) -> tuple[RenderedImage, ...]:
    """:func:`select_variants`, rendered (templates, locks and bases of ``cfg``). Raises what
    ``select_variants`` raises, NotFoundError (no template), ConfigError (template error)."""
    chosen = select_variants(cfg, matrix_files, Selection(globs=selection.globs))
    rendered = render_all(chosen.variants, images_dir=cfg.images_dir, locks_dir=cfg.locks_dir, bases=chosen.bases)
    changed_ids = None
    if selection.changed_since is not None:
        before = render_at_ref(cfg, selection.changed_since, matrix_files)
        changed_ids = {r.variant.id for r in changed(rendered, before)}
    return tuple(apply(rendered, selection, changed_ids=changed_ids))


def lock_project(
    cfg: Config,
    matrix_files: Sequence[Path] = (),
    globs: Sequence[str] = (),
    *,
    environ: Mapping[str, str],
    upgrade: bool = False,
    timeout: float = 300.0,
) -> tuple[LockResult, ...]:
    """``builder lock``: each selected variant's Python packages resolved by uv (:func:`builder.locks.find_uv`)
    into ``cfg.locks_dir`` (:func:`builder.locks.lock_variants`; current locks kept unless ``upgrade``;
    ``timeout``: seconds per resolution). uv runs with ``environ`` plus ``UV_HTTP_TIMEOUT=15`` unless it is
    set. Raises what :func:`select_variants` raises; an unresolvable variant is reported ``unresolved``."""
    variants = select_variants(cfg, matrix_files, Selection(globs=tuple(globs))).variants
    env = {"UV_HTTP_TIMEOUT": "15", **environ}
    return lock_variants(variants, cfg.locks_dir, uv=find_uv(), env=env, upgrade=upgrade, timeout=timeout)


def render_project(
    cfg: Config,
    matrix_files: Sequence[Path] = (),
    globs: Sequence[str] = (),
    *,
    out_dir: Path | None = None,
    check: bool = False,
) -> RenderOutcome:
    """``builder render``: the selected variants (``matrix_files``, default every matrix; ``globs``) rendered
    into ``out_dir`` (default ``cfg.render_dir``) as ``<matrix>/<variant-id>.Dockerfile``, or with ``check``
    compared with the committed renders. Without globs the renders of variants no longer in those matrices
    are removed (and, with every matrix rendered, those of matrices that no longer exist). Raises what
    :func:`select_renders` raises, RenderStaleError (``check``: the committed renders differ; the diff in
    its details)."""
    rendered = select_renders(cfg, matrix_files, Selection(globs=tuple(globs)))
    out = out_dir or cfg.render_dir
    prune = not globs
    every = not matrix_files and not globs
    if check:
        report = check_renders(out, rendered, prune=prune, every_matrix=every)
    else:
        report = write_renders(out, rendered, prune=prune, every_matrix=every)
    return RenderOutcome(report, rendered, checked=check)


def render_matrices(
    cfg: Config, matrix_files: Sequence[Path] = (), *, root: Path | None = None
) -> tuple[RenderedImage, ...]:
    """Load the matrices and render every variant with the bases lock, mirror record and locks of
    ``cfg`` (paths re-rooted at ``root`` when given, e.g. a git ref extracted to a temp dir; the
    machine-local mirror record always comes from ``cfg.state_dir``)."""

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

    def git(*args: str) -> subprocess.CompletedProcess[bytes]:
        try:
            return process.run(["git", "-C", str(cfg.root), *args], text=False, timeout=300)
        except FileNotFoundError as exc:
            raise ConfigError("--changed-since needs git, which is not installed") from exc

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
        try:
            return render_matrices(cfg, old_files, root=root)
        except MatrixError:
            return ()  # the old matrices are invalid today: treat every variant as changed
