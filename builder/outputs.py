"""Files a command writes where the user said (``sbom -o``, ``report --svg``, ``keys ... --output-dir``,
``render --out``): one definition of how a missing folder is made and how a path that cannot be
written is reported, so every such option behaves the same way (docs/exit-codes.md, exit 8).

A missing folder is created with its parents (as ``mkdir -p``); a path that cannot be created or
written (a file where a folder should be, no permission, a read-only file system) is
:class:`~builder.errors.NotFoundError` naming the path, the option and the operating system's
reason - never a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

from builder.errors import NotFoundError


def cannot_write(path: Path, exc: OSError, what: str) -> NotFoundError:
    """The error for ``path`` (given as ``what``, e.g. ``"--output"``) that could not be created
    or written: ``exc.strerror`` says why (``Not a directory``, ``Permission denied``)."""
    reason = exc.strerror or type(exc).__name__
    if isinstance(exc, (FileExistsError, NotADirectoryError)):
        reason = "a file is there where a folder is needed"
    where = Path(exc.filename) if isinstance(exc.filename, str) else path
    return NotFoundError(
        f"cannot write {path} (given as {what}): {where}: {reason}",
        hint="give a path in a folder you may write (missing folders are created; a file of the "
        "same name as a folder on the way is not replaced)",
        path=str(path),
    )


def write_output(path: Path, text: str, what: str) -> None:
    """Write ``text`` (UTF-8) to ``path``, creating its missing folders. Raises NotFoundError
    (exit 8) naming ``path`` and ``what`` when it cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise cannot_write(path, exc, what) from exc


#: ``os.open`` flags of :func:`write_bytes` (as ``open(path, "wb")``; the mode is 0666 less the umask).
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)


def write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` (created or truncated; its folder must exist) with ``os.open``,
    ``os.write`` and ``os.close``: no buffered file object, for the 10,000 small files of
    ``render --out``. Raises OSError (the caller reports it with :func:`cannot_write`)."""
    fd = os.open(path, _WRITE_FLAGS, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def read_bytes(path: str) -> bytes:
    """The bytes of the file at ``path`` through ``os.open``/``os.read`` (no buffered file object
    and its ``fstat``: ``render`` compares 10,000 files on every run). Raises OSError."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
