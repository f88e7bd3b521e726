"""Every external command builder runs (docker, git, uv, credential helpers, nvidia-smi, ...)
goes through this module, so each one is logged before it runs (house style of cibuildwheel:
``builder --debug`` echoes every external command) and fails the same way.

The core never prints: each command is logged on the ``builder.process`` logger at DEBUG level
as ``+ argv`` (shell-quoted); the command line decides whether and where that is shown.

Interruption: every live child is kept in a registry. :func:`interrupt` (called by the command
line's SIGINT/SIGTERM/SIGHUP handler) marks the process interrupted and sends SIGTERM to each
child's process group (children start in their own session, so a ``docker buildx build`` plugin
process under the ``docker`` client is reached too); the thread waiting for that child then
raises :class:`Interrupted`, and no new child starts (except :func:`cleanup` commands such as
``docker rm -f``), so thread-pool workers stop instead of starting more work.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Literal, overload

from builder import interruption

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from pathlib import Path

LOG = logging.getLogger("builder.process")

Interrupted = interruption.Interrupted
"""The run was stopped by a signal: :class:`builder.interruption.Interrupted` (defined there, below
:mod:`builder.lockfile`, which raises it too), under the name every caller knows."""

#: seconds a child gets after SIGTERM before SIGKILL
GRACE = 10.0


class _Children:
    """The live children (Popen objects), shared by all threads. ``lock`` orders the threads'
    changes; :func:`interrupt` (a signal handler) never takes it: it copies ``live`` with one
    C-level call, which no other thread interleaves under the GIL, and a thread that adds a child
    adds it before it reads the interruption, so no child escapes both."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live: set[subprocess.Popen[str] | subprocess.Popen[bytes]] = set()

    def add(self, proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
        with self.lock:
            self.live.add(proc)
        if interruption.interrupted() is not None:  # started while the handler ran: stop it as well
            _signal_group(proc, signal.SIGTERM)

    def discard(self, proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
        with self.lock:
            self.live.discard(proc)


_CHILDREN = _Children()


def interrupt(signum: int) -> None:
    """Mark the process interrupted by ``signum`` and send SIGTERM to every live child's process
    group (returns at once; the threads waiting for those children reap them and raise
    :class:`Interrupted`). Safe to call from a signal handler and more than once: it takes no
    lock (:func:`builder.interruption.record`; the children are copied without ``_CHILDREN.lock``
    and ``Popen.poll`` only tries its own lock), so a signal landing while the main thread holds
    one of them cannot deadlock."""
    interruption.record(signum)
    for proc in tuple(_CHILDREN.live):  # one C-level copy: atomic under the GIL
        _signal_group(proc, signal.SIGTERM)


def interrupted() -> int | None:
    """The signal number the process was interrupted by, or None."""
    return interruption.interrupted()


def wait_interrupted(seconds: float) -> int | None:
    """Wait up to ``seconds`` (a retry's backoff) or until the process is interrupted, whichever
    comes first; the signal number when it was (or already is) interrupted, else None."""
    return interruption.wait(seconds)


def backoff(seconds: float) -> None:
    """Sleep ``seconds`` (a retry's backoff) unless the process is (or gets) interrupted: then
    raise :class:`Interrupted` at once, in any thread. The one sleep between attempts in builder
    (registry retries, manifest repairs, buildx push runs): a CI job cancelled with SIGTERM during
    a 30 s backoff in a worker thread exits at the signal instead of waiting it out (the signal
    handler unwinds only the main thread; the wait polls the self-pipe :func:`interrupt` writes
    to: :func:`builder.interruption.wait`)."""
    signum = wait_interrupted(max(0.0, seconds))
    if signum is not None:
        raise Interrupted(signum)


def reset_interrupt() -> None:
    """Forget an interruption (the in-process CLI runs several commands in one process)."""
    interruption.reset()


def live_children() -> int:
    """How many children are running now."""
    with _CHILDREN.lock:
        return len(_CHILDREN.live)


def raise_if_interrupted() -> None:
    """Raise :class:`Interrupted` when the process is (already) interrupted."""
    signum = interruption.interrupted()
    if signum is not None:
        raise Interrupted(signum)


def _signal_group(proc: subprocess.Popen[str] | subprocess.Popen[bytes], sig: int) -> None:
    """Send ``sig`` to the child's process group (its own session, see ``_popen``)."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        LOG.debug("child %d already gone", proc.pid)


def announce(argv: Sequence[str]) -> None:
    """Log ``argv`` as the next external command (``+ docker buildx build ...``)."""
    import shlex  # on first use: a command that runs nothing (--help) does not import it

    LOG.debug("+ %s", shlex.join(str(a) for a in argv))


@overload
def run(
    argv: Sequence[str],
    *,
    input: str | None = ...,
    text: Literal[True] = ...,
    timeout: float | None = ...,
    cwd: Path | None = ...,
    env: Mapping[str, str] | None = ...,
) -> subprocess.CompletedProcess[str]: ...
@overload
def run(
    argv: Sequence[str],
    *,
    input: bytes | None = ...,
    text: Literal[False],
    timeout: float | None = ...,
    cwd: Path | None = ...,
    env: Mapping[str, str] | None = ...,
) -> subprocess.CompletedProcess[bytes]: ...
def run(
    argv: Sequence[str],
    *,
    input: str | bytes | None = None,
    text: bool = True,
    timeout: float | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str] | subprocess.CompletedProcess[bytes]:
    """Run ``argv`` to completion with stdout and stderr captured; never raises on a non-zero
    exit (the caller classifies it).

    Raises ``FileNotFoundError`` when the program is not installed,
    ``subprocess.TimeoutExpired`` after ``timeout`` seconds (the child is killed) and
    :class:`Interrupted` when the process is (or gets) interrupted: the child is terminated
    first."""
    raise_if_interrupted()
    return _run(argv, input=input, text=text, timeout=timeout, cwd=cwd, env=env)


def run_to_end(
    argv: Sequence[str], *, input: bytes | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[bytes]:
    """Run a command whose result must not be lost once it started: one that creates something
    remote and names it only in its output (``sbatch --parsable`` prints the id of the job it
    queued). Started only while not interrupted (:class:`Interrupted` otherwise); a signal arriving
    meanwhile neither stops it nor discards its output, so the caller can record what it created
    (for its clean-up to undo) and then call :func:`raise_if_interrupted`. Bytes in, bytes out;
    raises ``FileNotFoundError`` and ``subprocess.TimeoutExpired`` (the child killed) like :func:`run`."""
    raise_if_interrupted()
    return _run(argv, input=input, text=False, timeout=timeout, cwd=None, env=None, to_end=True)


def cleanup(argv: Sequence[str], *, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run a clean-up command (``docker rm -f NAME``) even while interrupted, and to its end when a
    signal arrives meanwhile: the one kind of child started after :func:`interrupt`. Never raises
    on a non-zero exit; raises ``FileNotFoundError`` and ``subprocess.TimeoutExpired`` like
    :func:`run`, and :class:`Interrupted` once it has ended when the signal arrived while it ran
    (not when the process was interrupted already: a clean-up while unwinding)."""
    before = interruption.interrupted()
    done = _run(argv, input=None, text=True, timeout=timeout, cwd=None, env=None, to_end=True)
    if before is None:  # a signal held back while it ran: the caller's work stops now
        raise_if_interrupted()
    return done


SECRET_VARIABLES = frozenset({"BUILDER_KEY_PASSWORD", "COSIGN_PASSWORD"})
"""Variables holding builder's own secrets (the signing key password: docs/configuration.md);
never passed on to a child process (docker, git, uv, credential helpers, ...): none of them needs
it, and a child's environment is readable in ``/proc/<pid>/environ`` and ends up in logs."""

_CHILD_ENV: list[dict[str, str] | None] = [None]  # the invocation's child environment (one slot)


def set_child_environment(environ: Mapping[str, str] | None) -> None:
    """The environment a child gets when its caller passes none: ``environ`` (the invocation's, given
    by the composition root) without :data:`SECRET_VARIABLES`; None: the parent's, inherited."""
    _CHILD_ENV[0] = None if environ is None else {k: v for k, v in environ.items() if k not in SECRET_VARIABLES}


def child_environment(env: Mapping[str, str] | None) -> dict[str, str] | None:
    """What a child is started with: ``env`` (a caller's own) or the invocation's environment, never
    holding :data:`SECRET_VARIABLES`; None only before any invocation set one (tests)."""
    if env is not None:
        return {k: v for k, v in env.items() if k not in SECRET_VARIABLES}
    current = _CHILD_ENV[0]
    return dict(current) if current is not None else None


def _run(
    argv: Sequence[str],
    *,
    input: str | bytes | None,
    text: bool,
    timeout: float | None,
    cwd: Path | None,
    env: Mapping[str, str] | None,
    to_end: bool = False,
) -> subprocess.CompletedProcess[Any]:
    """Run ``argv`` with its output captured. ``to_end``: the child is not one :func:`interrupt`
    stops, and an :class:`Interrupted` the signal handler raises while it runs is held back until
    it has ended and its output is read (:func:`run_to_end`, :func:`cleanup`)."""
    import subprocess  # on first use: a command that runs nothing (resolve) does not import it

    argv = [str(a) for a in argv]
    announce(argv)
    child = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=child_environment(env),
        start_new_session=True,  # its own process group: interrupt() reaches grandchildren
    )
    data = input.encode() if isinstance(input, str) else input
    deadline = None if timeout is None else time.monotonic() + timeout
    with _tracked(child, track=not to_end) as proc:
        captured = _Captured(proc, data)
        try:
            while True:
                try:
                    proc.wait(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
                    stdout, stderr = captured.result(text)
                    break
                except Interrupted:
                    if not to_end:
                        raise
                    # the signal handler raised here (once): this child runs on; the caller sees
                    # the interruption once it has what the child did
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
            stdout, stderr = captured.result(text, wait=GRACE)
            raise subprocess.TimeoutExpired(argv, timeout or 0.0, output=stdout, stderr=stderr) from None
        except BaseException:
            terminate(proc)
            raise
        if not to_end:
            raise_if_interrupted()
        return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


CAPTURE_LIMIT = 16 * 1024 * 1024
"""The most bytes of one output stream (stdout or stderr) :func:`run` keeps: its first and last
halves, with a line saying how much was left out between them. A command's output is as long
as its author wants (an image's ``python3`` replaced by ``yes`` fills memory at tens of MB/s);
every output builder parses (``docker inspect``, ``nvidia-smi -q``, a check's JSON) is far
shorter."""


class _Capture:
    """One output stream's bytes, bounded by :data:`CAPTURE_LIMIT` (head and tail kept)."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.left_out = 0

    def feed(self, chunk: bytes) -> None:
        half = CAPTURE_LIMIT // 2
        room = half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail.append(chunk)
        self.tail_size += len(chunk)
        while self.tail_size - len(self.tail[0]) >= half:  # whole chunks past the kept tail
            self.left_out += len(self.tail[0])
            self.tail_size -= len(self.tail.popleft())

    def value(self) -> bytes:
        tail = b"".join(self.tail)
        if not self.left_out:
            return bytes(self.head) + tail
        return bytes(self.head) + f"\n[... {self.left_out} bytes of output left out ...]\n".encode() + tail


class _Captured:
    """A child's stdout and stderr read by two threads into :class:`_Capture` buffers (and
    ``data`` written to its stdin by a third): bounded memory, unlike ``Popen.communicate``."""

    def __init__(self, proc: subprocess.Popen[bytes], data: bytes | None) -> None:
        self.out, self.err = _Capture(), _Capture()
        self.threads = [
            threading.Thread(target=_drain, args=(proc.stdout, self.out), daemon=True),
            threading.Thread(target=_drain, args=(proc.stderr, self.err), daemon=True),
        ]
        if data is not None:
            self.threads.append(threading.Thread(target=_feed, args=(proc.stdin, data), daemon=True))
        for t in self.threads:
            t.start()

    def result(self, text: bool, wait: float | None = None) -> tuple[Any, Any]:
        """(stdout, stderr) once both streams ended (or after ``wait`` seconds: what arrived), as
        text (the locale's encoding, undecodable bytes replaced, universal newlines) or bytes."""
        for t in self.threads:
            t.join(wait)
        out, err = self.out.value(), self.err.value()
        if not text:
            return out, err
        import locale

        encoding = locale.getpreferredencoding(False)

        def decoded(b: bytes) -> str:
            return b.decode(encoding, errors="replace").replace("\r\n", "\n").replace("\r", "\n")

        return decoded(out), decoded(err)


def _drain(pipe: Any, capture: _Capture) -> None:  # noqa: ANN401  (a Popen pipe: BufferedReader)
    with contextlib.suppress(OSError, ValueError):  # closed under us: what was read is kept
        while chunk := pipe.read1(65536):
            capture.feed(chunk)


def _feed(pipe: Any, data: bytes) -> None:  # noqa: ANN401  (a Popen pipe: BufferedWriter)
    with contextlib.suppress(OSError, ValueError):  # BrokenPipeError: the child stopped reading
        pipe.write(data)
        pipe.close()


@contextlib.contextmanager
def _tracked(proc: subprocess.Popen[Any], *, track: bool = True) -> Iterator[subprocess.Popen[Any]]:
    """``with proc`` (pipes closed, child reaped on exit), registered as a live child while it
    runs unless ``track`` is false."""
    if track:
        _CHILDREN.add(proc)
    try:
        with proc:
            yield proc
    finally:
        if track:
            _CHILDREN.discard(proc)


def stream(
    argv: Sequence[str],
    *,
    on_line: Callable[[str], None],
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    keep: int = 40,
) -> tuple[int, tuple[str, ...]]:
    """Run ``argv`` with stdout and stderr merged, passing each output line (without its newline)
    to ``on_line`` as it arrives; memory stays bounded however long the output.

    Returns ``(exit status, the last `keep` lines)``. Raises ``FileNotFoundError`` when the
    program is not installed. If the caller is interrupted (:class:`Interrupted`, raised here
    too when :func:`interrupt` stopped this child), the child is terminated before the exception
    propagates: no orphaned work."""
    import subprocess  # on first use: a command that runs nothing (resolve) does not import it

    raise_if_interrupted()
    argv = [str(a) for a in argv]
    announce(argv)
    tail: deque[str] = deque(maxlen=keep)
    child = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        cwd=cwd,
        env=child_environment(env),
        start_new_session=True,
    )
    with _tracked(child) as proc:
        try:
            assert proc.stdout is not None
            out = proc.stdout
            for raw in iter(lambda: out.readline(LINE_LIMIT), ""):  # a line without end comes in pieces
                line = raw.rstrip("\n")
                tail.append(line)
                on_line(line)
            code = _wait(proc)
        except BaseException:
            terminate(proc)
            raise
        raise_if_interrupted()
        return code, tuple(tail)


LINE_LIMIT = 64 * 1024
"""The longest piece of one output line :func:`stream` passes on (characters): a line longer than
that (a command printing without newlines) arrives in pieces, so memory stays bounded."""


def _wait(proc: subprocess.Popen[Any]) -> int:
    """Wait for a child whose output has ended; once interrupted, SIGKILL it after ``GRACE``."""
    import subprocess  # on first use: a command that runs nothing (resolve) does not import it

    if interruption.interrupted() is None:
        return proc.wait()
    try:
        return proc.wait(timeout=GRACE)
    except subprocess.TimeoutExpired:
        _signal_group(proc, signal.SIGKILL)
        return proc.wait()


def terminate(proc: subprocess.Popen[Any], grace: float = GRACE) -> None:
    """Stop a child and its process group: SIGTERM, then SIGKILL after ``grace`` seconds."""
    import subprocess  # on first use: a command that runs nothing (resolve) does not import it

    if proc.poll() is not None:
        return
    _signal_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _signal_group(proc, signal.SIGKILL)
        proc.wait()
