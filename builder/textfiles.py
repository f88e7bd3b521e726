"""The project's hand-written files (builder.toml, matrices, policies, fleets, keys) read with a size limit:
:data:`MAX_BYTES`, :class:`TooLarge`, :func:`read_text`. A larger file (or ``/dev/zero``) is refused
instead of read into memory.

A module of its own, below :mod:`builder.yamldoc` (which parses what is read here, and refuses a
longer text too): the commands that read a matrix or policy back from its validated copy in
``<state_dir>/cache`` (``builder resolve``, ``status``, ``history``) read and hash the file's text but
never parse it, and so import neither the YAML parser's module nor its problem and document classes
(start-up, issue 19).
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

MAX_BYTES = 4 * 1024 * 1024
"""The largest hand-written file read (bytes): builder.toml, matrices, policies and fleets are
files of a few KiB; a larger one (or ``/dev/zero``) is refused instead of read into memory."""


class TooLarge(OSError):
    """A file over :data:`MAX_BYTES` (an ``OSError`` with ``errno.EFBIG``, so every reader that
    reports unreadable files reports it too)."""


def read_text(path: Path, limit: int = MAX_BYTES) -> str:
    """The UTF-8 text of ``path``, read with a size limit: at most ``limit`` bytes. Raises
    :class:`TooLarge` (an OSError) over the limit, OSError / UnicodeDecodeError as ``read_text``."""
    with path.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(
            errno.EFBIG, f"larger than the {limit // (1024 * 1024)} MiB limit for a hand-written file", str(path)
        )
    return data.decode("utf-8")
