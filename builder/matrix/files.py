"""Which matrix files a command reads: the ones given, else every ``*.yaml`` / ``*.yml`` of the
matrices directory. Kept apart from :mod:`builder.matrix.load` so the cached variant list
(:mod:`builder.matrix.index`) finds the files without importing the parser and validators.

Errors: ConfigError (exit 2) when the matrices directory does not exist.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from builder.errors import ConfigError
from builder.textfiles import read_text

if TYPE_CHECKING:
    from collections.abc import Sequence


def matrix_paths(matrices_dir: Path, given: Sequence[Path] = ()) -> tuple[Path, ...]:
    """The files given, else every ``*.yaml``/``*.yml`` in ``matrices_dir`` (sorted)."""
    if given:
        return tuple(Path(p) for p in given)
    if not matrices_dir.is_dir():
        raise ConfigError(
            f"matrices directory {matrices_dir} does not exist",
            hint="run builder inside your checkout (the directory with builder.toml) or pass `builder -C DIR`; "
            "or set matrices_dir in builder.toml",
        )
    return tuple(sorted([*matrices_dir.glob("*.yaml"), *matrices_dir.glob("*.yml")]))


def read_matrix_text(path: Path) -> str:
    """The UTF-8 text of the matrix file ``path``, at most ``yamldoc.MAX_BYTES`` bytes read (the one
    read of a matrix: the cache key and the loader take the same text). Raises ConfigError (exit
    2) when it does not exist, cannot be read, is larger or is not UTF-8, naming the file."""
    try:
        return read_text(path)  # at most yamldoc.MAX_BYTES
    except FileNotFoundError as exc:
        raise ConfigError(f"matrix file {path} does not exist", hint="pass an existing file with --matrix") from exc
    except IsADirectoryError as exc:
        raise ConfigError(
            f"matrix file {path} is a folder, not a file", hint="rename or remove the folder; a matrix is a YAML file"
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"matrix file {path} cannot be read as UTF-8 text: {exc}", hint="a matrix is a UTF-8 YAML file"
        ) from exc
