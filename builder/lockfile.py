"""Lock files shared by the builder processes of one machine (or of every checkout sharing a
``state_dir``): one writer at a time of a stage pointer, a ``.sig``/``.att`` tag or a referrers
index, held however the holder's work ends.

Defined once: how a lock file is taken, its mode, and what a wait past the timeout becomes.
The lock is ``flock(2)`` on the whole file (``fcntl.flock`` with ``LOCK_EX | LOCK_NB``, tried
every :data:`POLL_INTERVAL_S` seconds until ``timeout`` passes or the process is interrupted, the
wait between two tries being :func:`builder.interruption.wait`:
https://docs.python.org/3/library/fcntl.html#fcntl.flock, https://man7.org/linux/man-pages/man2/flock.2.html).
A flock belongs to the open file description, so every :func:`held` opens the file itself: two
threads of one process exclude each other as two processes do, and the kernel releases the lock
when the holder's descriptor is closed, the process killed included. The file stays in place on
release, so waiters share its inode. It is the lock filelock takes on POSIX
(https://py-filelock.readthedocs.io/en/latest/api.html, which builder used before #19 round 8),
so a builder of either kind sharing a ``state_dir`` waits for the other; filelock cost 12 ms of
imports on every writing command's start-up and 0.24 ms of CPU per lock cycle, this 0.021 ms (open,
flock, close: measured on the 2-core development machine, 2,000 cycles).
A wait past the timeout raises the caller's own :class:`~builder.errors.BuilderError` (a
documented exit code naming the lock file), never a traceback.

A wait is said once: after :data:`NOTICE_AFTER_S` seconds of waiting, one WARNING record on the
``builder.lockfile`` logger (:data:`LOG`) names what is awaited, the lock file and the timeout.
The locks are taken many calls deep (a signature tag while signing a build, a stage pointer while
promoting, a referrers index while attaching a bundle), so the notice travels the way
``builder.process`` reports the commands it runs: a standard :mod:`logging` record, which the
command line prints on stderr (``builder.cli._common.show_lock_waits``); this module never prints.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import time
from typing import TYPE_CHECKING

from builder import interruption

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from builder.errors import BuilderError

LOG = logging.getLogger("builder.lockfile")
"""Where a lock wait is said (one WARNING record per wait; ``args``: what, lock file, timeout s)."""

NOTICE_AFTER_S = 2.0
"""Seconds of waiting before the notice: a lock held for a registry round trip or two is taken
silently; a longer wait (another process promoting or signing) is said before it looks like a hang."""

POLL_INTERVAL_S = 0.05
"""Seconds between two tries of a lock another holder has (filelock's default ``poll_interval``)."""

LOCK_FILE_MODE = 0o644
"""Lock files are created ``rw-r--r--`` whatever the umask (set with ``fchmod`` by their creator)."""

_BUSY = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES})
"""``flock`` with ``LOCK_NB`` fails with ``EWOULDBLOCK`` (``EAGAIN`` on Linux) while another
description holds the lock; some systems say ``EACCES``. Any other errno is a real failure."""


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
    seconds (0: one try); released however the body ends (an error, an interrupt unwinding the
    stack). ``what``: the thing the lock guards, in words (``"stage pointer host/repo:staging"``):
    after ``notice_after`` seconds of waiting, one WARNING record on :data:`LOG` says
    "waiting for the lock of <what> (<path>), held by another builder process; up to <timeout> s".
    Raises ``timed_out(path)`` when another holder keeps it past ``timeout``,
    :class:`builder.interruption.Interrupted` when the process is interrupted while it waits
    (:func:`builder.interruption.wait` ends at the signal; exit 130/143/129), NotFoundError (exit 8,
    :func:`builder.outputs.cannot_write`) when the lock file or its folder cannot be created or the
    file system cannot lock it (``flock`` unsupported: ``ENOSYS``, ``ENOLCK``, ``EOPNOTSUPP``)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = _open(path)
    except OSError as exc:  # a file where the lock folder should be, no permission, a read-only disk
        raise _unwritable(path, exc) from exc
    try:
        try:
            taken = _wait(fd, path, timeout, what, notice_after)
        except OSError as exc:
            raise _unwritable(path, exc) from exc
        if not taken:
            raise timed_out(path)
        yield
    finally:
        os.close(fd)  # releases the flock (the last descriptor of its open file description)


def _open(path: Path) -> int:
    """A new descriptor of the lock file ``path`` (created ``LOCK_FILE_MODE`` when missing; not
    inherited by child processes, PEP 446). Raises OSError."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, LOCK_FILE_MODE)
    except FileExistsError:
        return os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        os.fchmod(fd, LOCK_FILE_MODE)  # the umask took bits away at creation
    except OSError:
        os.close(fd)
        raise
    return fd


def _wait(fd: int, path: Path, timeout: float, what: str, notice_after: float) -> bool:
    """Whether the flock on ``fd`` was taken within ``timeout`` s: tried at once, then every
    :data:`POLL_INTERVAL_S`; the notice logged once after ``notice_after`` s of waiting when the
    timeout is longer. Raises OSError when ``flock`` fails for another reason than a holder, and
    :class:`builder.interruption.Interrupted` (``builder.process.Interrupted``) as soon as the
    process is interrupted (SIGTERM, SIGINT, SIGHUP) while it waits, in any thread: a promotion
    worker waiting for a stage pointer stops at the signal instead of waiting out ``timeout``."""
    start = time.monotonic()
    told = timeout <= notice_after
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in _BUSY:
                raise
        waited = time.monotonic() - start
        if waited >= timeout:
            return False
        if not told and waited >= notice_after:
            told = True
            LOG.warning(
                "waiting for the lock of %s (%s), held by another builder process; up to %g s",
                what,
                path,
                timeout,
            )
        signum = interruption.wait(min(POLL_INTERVAL_S, timeout - waited))
        if signum is not None:  # SIGTERM/SIGINT while waiting: stop now, not at the timeout
            raise interruption.Interrupted(signum)


def _unwritable(path: Path, exc: OSError) -> BuilderError:
    from builder.outputs import cannot_write  # only on this error path

    return cannot_write(path, exc, "a lock file under state_dir")
