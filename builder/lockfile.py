"""Lock files shared by the builder processes of one machine (or of every checkout sharing a
``state_dir``): one writer at a time of a stage pointer, a ``.sig``/``.att`` tag or a referrers
index, held however the holder's work ends.

Defined once: the lock file's mode and what a wait past the timeout becomes. filelock
(https://py-filelock.readthedocs.io/en/latest/api.html) takes the lock (``flock`` on POSIX) and
raises ``filelock.Timeout`` when ``timeout`` seconds pass; :func:`held` turns that into the
caller's own :class:`~builder.errors.BuilderError` (a documented exit code naming the lock file),
never a traceback.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from builder.errors import BuilderError

LOCK_FILE_MODE = 0o644
"""Lock files are created ``rw-r--r--`` (what filelock's default 0o666 gives under the usual umask
022); an explicit mode without group/other write also spares filelock 4 its per-new-file probe of
the directory's flock support (a temporary file opened, locked and closed each time)."""


@contextlib.contextmanager
def held(path: Path, timeout: float, timed_out: Callable[[Path], BuilderError]) -> Iterator[None]:
    """Hold the lock file ``path`` (its directory created when missing), waiting up to ``timeout``
    seconds; released however the body ends (an error, an interrupt unwinding the stack).
    Raises ``timed_out(path)`` when another holder keeps it past ``timeout``, NotFoundError (exit 8,
    :func:`builder.outputs.cannot_write`) when the lock file or its folder cannot be created."""
    from filelock import FileLock, Timeout  # only writers lock (start-up of the read-only commands)

    lock = FileLock(str(path), mode=LOCK_FILE_MODE)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        acquired = lock.acquire(timeout=timeout)
    except Timeout as exc:
        raise timed_out(path) from exc
    except OSError as exc:  # a file where the lock folder should be, no permission, a read-only disk
        from builder.outputs import cannot_write  # only on this error path

        raise cannot_write(path, exc, "a lock file under state_dir") from exc
    with acquired:
        yield
