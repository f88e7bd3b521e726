"""Whether the process was interrupted (SIGINT, SIGTERM, SIGHUP), and the waits that end when it is.

Defined once, below every module that waits: :mod:`builder.process` (children, retries' backoff)
and :mod:`builder.lockfile` (a lock another holder keeps) both wait here, so a signal ends a wait
in any thread at once instead of after its timeout.

Signal-safe by construction. Python runs a signal handler in the main thread between two
bytecodes, whatever that thread holds (https://docs.python.org/3/library/signal.html#execution-of-python-signal-handlers);
a handler that takes a non-reentrant lock the main thread holds at that moment (the
``threading.Condition`` lock inside ``threading.Event.wait``/``set``, any ``threading.Lock``)
waits for itself forever, and every later signal does the same. So :func:`record` takes no lock:
it stores the signal number with a plain assignment and writes one byte into a self-pipe
(``os.write`` on a non-blocking pipe, the self-pipe trick of
https://man7.org/linux/man-pages/man7/signal-safety.7.html). Waiters ``poll(2)`` the pipe's
read end with their timeout (https://docs.python.org/3/library/select.html#select.poll): the byte
stays unread until :func:`reset`, so every waiter, in every thread, present or future, sees the
pipe readable and returns at once.
"""

from __future__ import annotations

import contextlib
import os
import signal


class Interrupted(KeyboardInterrupt):
    """The run was stopped by signal ``signum`` (SIGINT, SIGTERM or SIGHUP). A KeyboardInterrupt
    (a BaseException), so ``except Exception`` never swallows it and every ``with``/``finally``
    unwinds. ``exit_code`` is ``128 + signum`` (130, 143, 129: the shell's convention,
    https://tldp.org/LDP/abs/html/exitcodes.html); ``left`` collects what was not done (one
    line per unit of work, e.g. ``"2 of 5 variants not built"``) as the exception unwinds."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum
        self.left: list[str] = []


class _State:
    """The signal number (None: not interrupted) and the self-pipe that wakes waiters."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.read_fd, self.write_fd = self._pipe()

    @staticmethod
    def _pipe() -> tuple[int, int]:
        read_fd, write_fd = os.pipe()  # not inherited by the programs children run (PEP 446)
        os.set_blocking(read_fd, False)  # reset() drains it without blocking
        os.set_blocking(write_fd, False)  # record() never blocks, the pipe full or not
        return read_fd, write_fd

    def renew(self) -> None:
        """A forked child's own pipe: its signals must not wake its parent's waits (nor its
        ``reset`` drain them). Called by ``os.register_at_fork``."""
        os.close(self.read_fd)
        os.close(self.write_fd)
        self.read_fd, self.write_fd = self._pipe()
        if self.signum is not None:
            os.write(self.write_fd, b"\0")


_POLL_MAX_MS = 2**31 - 1
"""The longest one ``poll`` waits (a C int of milliseconds, about 24.8 days): a longer wait returns
then, as a wait that ran its time."""

_STATE = _State()
os.register_at_fork(after_in_child=_STATE.renew)  # https://docs.python.org/3/library/os.html#os.register_at_fork


def record(signum: int) -> None:
    """Mark the process interrupted by ``signum`` (the first signal is kept) and wake every
    waiter. Takes no lock and allocates no Python-level lock: safe in a signal handler whatever
    the interrupted thread holds, and more than once."""
    if _STATE.signum is None:
        _STATE.signum = signum
    with contextlib.suppress(BlockingIOError):  # the pipe is full: waiters are woken already
        os.write(_STATE.write_fd, b"\0")


def interrupted() -> int | None:
    """The signal number the process was interrupted by, or None."""
    return _STATE.signum


def wait(seconds: float) -> int | None:
    """Wait up to ``seconds`` (>= 0) or until the process is interrupted, whichever comes first,
    in any thread; the signal number when it was (or already is) interrupted, else None."""
    if _STATE.signum is not None:
        return _STATE.signum
    import select  # on first wait: most commands never wait

    poller = select.poll()
    poller.register(_STATE.read_fd, select.POLLIN)
    poller.poll(min(_POLL_MAX_MS, max(0, int(seconds * 1000 + 0.999))))  # ms, rounded up; EINTR: retried (PEP 475)
    return _STATE.signum


def reset() -> None:
    """Forget an interruption (the in-process command line runs several commands in one process):
    the signal number cleared and the pipe drained. Not for a signal handler."""
    _STATE.signum = None
    with contextlib.suppress(BlockingIOError):
        while os.read(_STATE.read_fd, 4096):
            pass
