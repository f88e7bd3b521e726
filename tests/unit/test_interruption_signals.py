"""Real signals sent to real builder processes: the command line's SIGTERM/SIGINT handler
(``builder.cli._install_signal_handlers``) never deadlocks on a lock the interrupted main thread
holds, a second signal is handled too, and a worker thread waiting for a lock file another process
holds stops at the signal (``Interrupted``, exit 143/130) instead of waiting out the lock's timeout.

Each child is a separate Python process running builder's own code; the test only sends it
signals and reads what it printed and its exit status. ``BOUND`` is a bound against a hang (a
deadlocked or still-waiting child is killed and the test fails), not a timing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.conftest import lock_holder

if TYPE_CHECKING:
    from collections.abc import Sequence

ROOT = Path(__file__).resolve().parents[2]
BOUND = 60.0
"""Seconds a signalled child gets to exit: one that deadlocked or waits out an hour never does."""

_HOLDING_A_LOCK = """
import os, signal, sys
from builder import process
from builder.cli import _install_signal_handlers

_install_signal_handlers()
print("ready", flush=True)
try:
    with process._CHILDREN.lock:  # the lock add()/discard() take, held by the main thread
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs at the next bytecode: still inside
        for _ in range(1000):
            pass
    print("not interrupted", flush=True)
except process.Interrupted as exc:
    print("interrupted", exc.exit_code, flush=True)
    with process._CHILDREN.lock:  # a second signal while unwinding: handled, not raised again
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):
            pass
    print("second signal handled", process.interrupted(), flush=True)
    sys.exit(exc.exit_code)
"""

_WAITING_IN_A_LOOP = """
import os, random, signal, sys, threading
from builder import process
from builder.cli import _install_signal_handlers

ROUNDS = int(sys.argv[1])
armed = threading.Semaphore(0)


def sender():  # a real SIGTERM to this process at a random point of each round's waits
    for _ in range(ROUNDS):
        armed.acquire()
        threading.Event().wait(random.uniform(0, 0.005))
        os.kill(os.getpid(), signal.SIGTERM)


threading.Thread(target=sender, daemon=True).start()
for round_ in range(ROUNDS):
    _install_signal_handlers()  # forgets the last round's interruption
    armed.release()
    try:
        while True:  # the waits retries make (registry backoff, lock waits), as often as possible
            process.wait_interrupted(0.0)
    except process.Interrupted as exc:
        print("interrupted", exc.exit_code, flush=True)
sys.exit(143)
"""

_WORKER_WAITING_FOR_A_LOCK = """
import logging, sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from builder import process
from builder.cli import _install_signal_handlers
from builder.errors import PromotionConflictError
from builder.lockfile import LOG, held


class _Said(logging.Handler):
    def emit(self, record):
        print("notice:", record.getMessage(), flush=True)


LOG.addHandler(_Said())
_install_signal_handlers()


def conflict(path):
    return PromotionConflictError(f"held: {path}", pointer="r:staging")


def worker():
    try:
        with held(Path(sys.argv[1]), 3600, conflict, what="stage pointer r:staging", notice_after=0.1):
            return "took the lock"
    except process.Interrupted as exc:
        return f"worker interrupted {exc.exit_code}"
    except Exception as exc:
        return f"worker failed: {type(exc).__name__}: {exc}"


with ThreadPoolExecutor(1) as pool:  # as promote/apply.py runs its targets
    future = pool.submit(worker)
    try:
        print(future.result(), flush=True)
    except process.Interrupted as exc:
        print("main interrupted", exc.exit_code, flush=True)
        print(future.result(), flush=True)  # the worker: it must end at the signal too
        sys.exit(exc.exit_code)
"""


def _start(script: str, *args: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert child.stdout is not None
    return child


def _finish(child: subprocess.Popen[str], signals: Sequence[signal.Signals] = ()) -> tuple[int, str]:
    """Send ``signals`` to ``child``, then its exit status and stdout; a child still running after
    ``BOUND`` s (deadlocked, or waiting out its lock) is killed and the test fails."""
    for sig in signals:
        os.kill(child.pid, sig)
    try:
        out, err = child.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        pytest.fail(f"the signalled process did not end (deadlocked or still waiting): {out!r} {err!r}")
    assert "Traceback" not in err, err
    return child.returncode, out


def test_a_signal_while_the_main_thread_holds_the_childrens_lock_does_not_deadlock() -> None:
    child = _start(_HOLDING_A_LOCK)
    code, out = _finish(child)
    assert out.splitlines() == ["ready", "interrupted 143", "second signal handled 15"], out
    assert code == 143


def test_signals_landing_in_the_waits_of_retries_end_the_process() -> None:
    """The old handler set a ``threading.Event`` whose Condition lock ``Event.wait`` holds for a
    moment on every call: a signal landing then deadlocked the process (and every later SIGTERM).
    ``ROUNDS`` signals land at random points of a loop of such waits; each must end its round."""
    rounds = 40
    child = _start(_WAITING_IN_A_LOOP, str(rounds))
    code, out = _finish(child)
    assert out.splitlines() == ["interrupted 143"] * rounds, out
    assert code == 143


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_worker_waiting_for_a_lock_stops_at_the_signal(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    path = tmp_path / "locks" / "stage.lock"
    path.parent.mkdir()
    holder = lock_holder(path)  # another process keeps the lock the whole test
    try:
        child = _start(_WORKER_WAITING_FOR_A_LOCK, str(path))
        assert child.stdout is not None
        notice = child.stdout.readline()  # the worker is inside the wait once it says so
        assert notice == (
            f"notice: waiting for the lock of stage pointer r:staging ({path}), "
            "held by another builder process; up to 3600 s\n"
        )
        got, out = _finish(child, [sig])
    finally:
        holder.kill()
        holder.wait()
    assert out.splitlines() == [f"main interrupted {code}", f"worker interrupted {code}"], out
    assert got == code


_FORKED_CHILD_INTERRUPTED = """
import os, select, signal
from builder import interruption

pid = os.fork()
if pid == 0:  # the child is interrupted and exits; its pipe is its own
    interruption.record(signal.SIGTERM)
    os._exit(0 if interruption.wait(3600) == signal.SIGTERM else 1)
_, status = os.waitpid(pid, 0)
readable = select.select([interruption._STATE.read_fd], [], [], 0)[0]
print(os.waitstatus_to_exitcode(status), interruption.interrupted(), bool(readable), flush=True)
"""


def test_a_forked_childs_interruption_does_not_wake_its_parents_waits() -> None:
    """A pipe shared with a forked child would stay readable in the parent after the child's
    signal: every later backoff and lock wait of the parent would return at once, uninterrupted."""
    code, out = _finish(_start(_FORKED_CHILD_INTERRUPTED))
    assert (code, out) == (0, "0 None False\n")
