"""The ``policy`` and ``fleet`` a project's matrices name (``policy: NAME`` / ``fleet: NAME`` in a
matrix file, docs/matrices.md): what a promotion command uses without ``--policy`` / ``--fleet``.

Read from the matrix index (:mod:`builder.matrix.index`, validated once per content), so every
promotion command's start-up does not import the rendering, locking and base-image modules of
:mod:`builder.variants`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from builder.errors import ConfigError, NotFoundError
from builder.matrix.files import matrix_paths

if TYPE_CHECKING:
    from collections.abc import Sequence

    from builder.config import Config
    from builder.matrix.load import Matrix


@dataclasses.dataclass(frozen=True)
class Binding:
    """What a command run without ``--policy`` / ``--fleet`` uses: the file the matrices name
    (None: none named, the command's own default) and ``source``, who named it, for the line the
    command prints (``matrices/demo.yaml``)."""

    path: Path | None
    source: str


def matrix_binding(cfg: Config, kind: str, matrix_files: Sequence[Path] = (), *, skip_broken: bool = True) -> Binding:
    """The ``policy`` or ``fleet`` (``kind``) the matrices name: ``matrix_files``, default every
    matrix of ``cfg``. A name is ``<policies_dir|fleets_dir>/<name>.yaml``; a value with ``/`` or a
    ``.yaml``/``.yml`` suffix is a file relative to the project root. A matrix naming no policy
    is judged by ``<policies_dir>/default.yaml``, so one that names another policy conflicts with
    it; a matrix naming no fleet has none. When the matrices name different ones, ConfigError
    (exit 2) listing each matrix's, with the option that chooses; NotFoundError (exit 8) naming the
    matrix and field when the file does not exist (:func:`bound_file`). ``skip_broken``: a matrix of
    the project that does not load is left out (a warning, :func:`builder.matrix.index.matrix_names`)
    instead of MatrixError; never for ``matrix_files`` given (each must load)."""
    from builder.matrix.index import matrix_names  # validated once per content (<state_dir>/cache)

    named: dict[Path, list[str]] = {}
    default = (cfg.policies_dir / "default.yaml").resolve()
    paths = matrix_paths(cfg.matrices_dir, matrix_files)
    for m in matrix_names(paths, cfg.state_dir / "cache", skip_broken=skip_broken and not matrix_files):
        value = m.policy if kind == "policy" else m.fleet
        if value is None:
            if kind == "policy":
                named.setdefault(default, []).append(_shown(cfg, m.path))
            continue
        path = bound_file(cfg, kind, m.path, value)
        named.setdefault(path.resolve(), []).append(_shown(cfg, m.path))
    if not named:
        return Binding(None, "")
    if len(named) > 1:
        listing = "; ".join(f"{', '.join(ms)}: {_shown(cfg, p)}" for p, ms in sorted(named.items()))
        raise ConfigError(
            f"the matrices name different {kind} files ({listing})",
            hint=f"pass --{kind} FILE, or --matrix FILE where the command takes it",
        )
    ((path, matrices),) = named.items()
    if kind == "policy" and path == default:
        return Binding(None, "")  # the default, as without matrices: nothing to say
    return Binding(path, ", ".join(matrices))


def bound_file(cfg: Config, kind: str, matrix_path: Path, value: str) -> Path:
    """The file a matrix's ``policy`` or ``fleet`` (``kind``) field ``value`` names:
    ``<policies_dir|fleets_dir>/<value>.yaml``, or, for a value with ``/`` or a ``.yaml``/``.yml``
    suffix, a file relative to the project root. NotFoundError (exit 8) naming the matrix, the
    field and the missing file, the closest existing name ("did you mean") and the names there
    are, when it does not exist; ConfigError (exit 2) naming the folder when it is one."""
    directory = cfg.policies_dir if kind == "policy" else cfg.fleets_dir
    is_file = "/" in value or value.endswith((".yaml", ".yml"))
    path = (cfg.root / value) if is_file else directory / f"{value}.yaml"
    if path.is_file():
        return path
    if path.is_dir():  # no "does not exist; did you mean '<its own name>'"
        raise ConfigError(
            f"{_shown(cfg, matrix_path)}: `{kind}: {value}` names {_shown(cfg, path)}, which is a folder, not a file",
            hint=f"rename or remove the folder {_shown(cfg, path)}; a {kind} is a YAML file",
        )
    from builder.suggest import did_you_mean  # only on this path: start-up budget

    names = sorted(p.stem for p in directory.glob("*.yaml")) if directory.is_dir() else []
    there = f" ({', '.join(names)})" if names else " (none there)"
    raise NotFoundError(
        f"{_shown(cfg, matrix_path)}: `{kind}: {value}` names {_shown(cfg, path)}, which does not exist"
        + did_you_mean(Path(value).stem, names),
        hint=f"name a file in {_shown(cfg, directory)}/ without .yaml{there}, or a path relative to {cfg.root}",
        matrix=str(matrix_path),
        field=kind,
    )


def binding_problems(cfg: Config, matrices: Sequence[Matrix]) -> tuple[str, ...]:
    """For each ``policy`` and ``fleet`` the ``matrices`` name that does not exist, what
    :func:`bound_file` would raise, as one line (message, then its hint after `` -- ``); empty when
    all exist. Matrices naming different files are no problem here (a command that uses them all
    asks for ``--policy``, :func:`matrix_binding`). The commands that use the file (status,
    promote, resolve, run) refuse with exit 8; ``builder matrix list`` shows these as warnings."""
    out: list[str] = []
    for m in matrices:
        for kind, value in (("policy", m.policy), ("fleet", m.fleet)):
            if value is None:
                continue
            try:
                bound_file(cfg, kind, m.path, value)
            except (NotFoundError, ConfigError) as exc:  # missing, or a folder
                out.append(f"{exc.message} -- {exc.hint}")
    return tuple(out)


def _shown(cfg: Config, path: Path) -> str:
    """``path`` relative to the project root when it is under it (for messages)."""
    try:
        return str(path.resolve().relative_to(cfg.root))
    except ValueError:
        return str(path)


__all__ = ["Binding", "binding_problems", "bound_file", "matrix_binding"]
