"""Lock files shared by the builder processes of one machine (or of every checkout sharing a
``state_dir``): one writer at a time of a stage pointer, a ``.sig``/``.att`` tag or a referrers
index, held however the holder's work ends.

Defined once: the lock file's mode and what a wait past the timeout becomes. filelock
(https://py-filelock.readthedocs.io/en/latest/api.html) takes the lock (``flock`` on POSIX) and
raises ``filelock.Timeout`` when ``timeout`` seconds pass; :func:`held` turns that into the
caller's own :class:`~builder.errors.BuilderError` (a documented exit code naming the lock file),
never a traceback.

A wait is said once: after :data:`NOTICE_AFTER_S` seconds of waiting, one WARNING record on the
``builder.lockfile`` logger (:data:`LOG`) names what is awaited, the lock file and the timeout.
The locks are taken many calls deep (a signature tag while signing a build, a stage pointer while
promoting, a referrers index while attaching a bundle), so the notice travels the way
``builder.process`` reports the commands it runs: a standard :mod:`logging` record, which the
command line prints on stderr (``builder.cli._common.show_lock_waits``); this module never prints.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from filelock import AcquireReturnProxy, BaseFileLock

    from builder.errors import BuilderError

LOG = logging.getLogger("builder.lockfile")
"""Where a lock wait is said (one WARNING record per wait; ``args``: what, lock file, timeout s)."""

NOTICE_AFTER_S = 2.0
"""Seconds of waiting before the notice: a lock held for a registry round trip or two is taken
silently; a longer wait (another process promoting or signing) is said before it looks like a hang."""

LOCK_FILE_MODE = 0o644
"""Lock files are created ``rw-r--r--`` (what filelock's default 0o666 gives under the usual umask
022); an explicit mode without group/other write also spares filelock 4 its per-new-file probe of
the directory's flock support (a temporary file opened, locked and closed each time)."""


@contextlib.contextmanager
def held(
    path: Path,
    timeout: float,
    timed_out: Callable[[Path], BuilderError],
    *,
    what: str,
    notice_after: float = NOTICE_AFTER_S,
) -> Iterator[None]:
    """Hold the lock file ``path`` (its directory created when missing), waiting up to ``timeout``
    seconds; released however the body ends (an error, an interrupt unwinding the stack).
    ``what``: the thing the lock guards, in words (``"stage pointer host/repo:staging"``): after
    ``notice_after`` seconds of waiting, one WARNING record on :data:`LOG` says
    "waiting for the lock of <what> (<path>), held by another builder process; up to <timeout> s".
    Raises ``timed_out(path)`` when another holder keeps it past ``timeout``, NotFoundError (exit 8,
    :func:`builder.outputs.cannot_write`) when the lock file or its folder cannot be created."""
    from filelock import FileLock, Timeout  # only writers lock (start-up of the read-only commands)

    lock = FileLock(str(path), mode=LOCK_FILE_MODE)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        acquired = _acquire(lock, path, timeout, what, notice_after)
    except Timeout as exc:
        raise timed_out(path) from exc
    except OSError as exc:  # a file where the lock folder should be, no permission, a read-only disk
        from builder.outputs import cannot_write  # only on this error path

        raise cannot_write(path, exc, "a lock file under state_dir") from exc
    with acquired:
        yield


def _acquire(
    lock: BaseFileLock, path: Path, timeout: float, what: str, notice_after: float
) -> AcquireReturnProxy[BaseFileLock]:
    """``lock`` acquired within ``timeout`` s: first for up to ``notice_after`` s in silence, then,
    the notice logged once, for the rest. Raises filelock's ``Timeout``."""
    from filelock import Timeout

    if timeout <= notice_after:
        return lock.acquire(timeout=timeout)
    try:
        return lock.acquire(timeout=notice_after)
    except Timeout:
        LOG.warning(
            "waiting for the lock of %s (%s), held by another builder process; up to %g s",
            what,
            path,
            timeout,
        )
    return lock.acquire(timeout=timeout - notice_after)
