"""builder.process under interruption, with real child processes (a shell that starts a
grandchild): interrupt() stops the whole process group of every live child, the thread waiting
for it raises Interrupted, no new child starts except clean-up commands, and main() maps the
signal to 128 + its number with a message naming it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder import process

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    process.reset_interrupt()
    yield
    process.reset_interrupt()


def _in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def go() -> None:
        try:
            fn()
        except BaseException as exc:  # collected for the test's assertions
            errors.append(exc)

    t = threading.Thread(target=go)
    t.start()
    return t, errors


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("kind", ["run", "stream"])
def test_interrupt_stops_child_and_grandchild(kind: str, tmp_path: Path) -> None:
    """The child (sh) and its grandchild (sleep, not exec'd) both stop; the waiting thread raises."""
    pidfile = tmp_path / "pids"
    script = f"sleep 600 & echo $$ $! > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; wait"
    argv = ["sh", "-c", script]
    if kind == "run":
        t, errors = _in_thread(lambda: process.run(argv))
    else:
        t, errors = _in_thread(lambda: process.stream(argv, on_line=lambda _line: None))
    while not pidfile.exists() and t.is_alive():
        t.join(0.05)
    shell, sleeper = (int(p) for p in pidfile.read_text().split())
    assert process.live_children() == 1
    process.interrupt(signal.SIGTERM)
    t.join()
    assert len(errors) == 1 and isinstance(errors[0], process.Interrupted), errors
    assert errors[0].exit_code == 143
    assert not _alive(shell) and not _alive(sleeper)
    assert process.live_children() == 0


def test_no_new_child_after_interrupt_but_cleanup_runs() -> None:
    process.interrupt(signal.SIGHUP)
    with pytest.raises(process.Interrupted) as err:
        process.run(["true"])
    assert err.value.exit_code == 129 and err.value.signum == signal.SIGHUP
    with pytest.raises(process.Interrupted):
        process.stream(["true"], on_line=lambda _line: None)
    assert process.cleanup(["sh", "-c", "echo cleaned"]).stdout == "cleaned\n"


def test_a_cleanup_the_signal_lands_in_ends_and_then_stops_its_caller(tmp_path: Path) -> None:
    """`docker rm -f` on a timeout path runs to its end when SIGTERM arrives meanwhile, and then the
    caller is stopped (Interrupted), not left to carry on as if nothing came."""
    started = tmp_path / "started"
    box: list[BaseException] = []

    def clean() -> None:
        try:
            process.cleanup(["sh", "-c", f"touch {started}; sleep 0.5; echo removed > {tmp_path / 'done'}"])
        except process.Interrupted as exc:
            box.append(exc)

    t = threading.Thread(target=clean)
    t.start()
    while not started.exists() and t.is_alive():
        t.join(0.02)
    process.interrupt(signal.SIGTERM)
    t.join()
    assert (tmp_path / "done").read_text() == "removed\n" and len(box) == 1


def test_run_to_end_is_not_stopped_and_keeps_its_output_in_another_thread(tmp_path: Path) -> None:
    """A command run to its end (sbatch: the id of what it queued is only in its output) goes on
    when the process is interrupted and returns what it printed; the caller then raises."""
    started = tmp_path / "started"
    box: list[subprocess.CompletedProcess[bytes]] = []
    t, errors = _in_thread(lambda: box.append(process.run_to_end(["sh", "-c", f"touch {started}; sleep 0.5; echo 42"])))
    while not started.exists() and t.is_alive():
        t.join(0.05)
    process.interrupt(signal.SIGTERM)
    t.join()
    assert not errors and box[0].stdout == b"42\n" and box[0].returncode == 0
    with pytest.raises(process.Interrupted):
        process.raise_if_interrupted()
    with pytest.raises(process.Interrupted):  # nothing new starts once interrupted
        process.run_to_end(["true"])


def test_run_to_end_holds_back_the_signal_handlers_interrupt_in_the_main_thread(tmp_path: Path) -> None:
    """The CLI's handler raises Interrupted in the main thread wherever it is: inside a command run
    to its end that exception waits until the command has ended and its output is read."""

    def handler(signum: int, _frame: object) -> None:  # what builder.cli's handler does
        process.interrupt(signum)
        raise process.Interrupted(signum)

    started = tmp_path / "started"

    def signal_once_started() -> None:  # the child runs: the signal lands in the wait, not in Popen
        while not started.exists():
            threading.Event().wait(0.02)
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, handler)
    sender = threading.Thread(target=signal_once_started, daemon=True)
    try:
        sender.start()
        done = process.run_to_end(["sh", "-c", f"touch {started}; sleep 1; echo 'queued 42'"])
    finally:
        sender.join(5)
        signal.signal(signal.SIGTERM, previous)
    assert done.stdout == b"queued 42\n"
    assert process.interrupted() == signal.SIGTERM


def test_timeout_still_kills_and_reports() -> None:
    with pytest.raises(subprocess.TimeoutExpired) as err:
        process.run(["sh", "-c", "echo partial; exec sleep 600"], timeout=0.5)
    assert err.value.stdout == "partial\n"
    assert process.live_children() == 0


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_main_exits_128_plus_signal_with_a_message(sig: signal.Signals, code: int, tmp_path: Path) -> None:
    """builder's main() in its own process, running a command whose work is a child that waits
    (registered like any command in COMMANDS), gets the signal: exit 128 + signal, a message."""
    ready = tmp_path / "ready"
    (tmp_path / "waitcmd.py").write_text(
        "import pathlib\n"
        "import click\n"
        "from builder import process\n"
        "@click.command('wait-child')\n"
        "def wait_child():\n"
        f"    pathlib.Path({str(ready)!r}).write_text('x')\n"
        "    process.run(['sleep', '600'])\n"
    )
    driver = (
        "from builder.cli import COMMANDS, main\n"
        "COMMANDS['wait-child'] = ('waitcmd:wait_child', 'a child that waits')\n"
        "main(['wait-child'])\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", driver],
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)]),
            "GITHUB_ACTIONS": "true",  # the interruption is annotated for GitHub too
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    while not ready.exists() and proc.poll() is None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(0.05)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, out + err
    assert f"interrupted by {sig.name}" in err
    assert f"::error title=interrupted::interrupted by {sig.name}" in err


FLOOD = "import sys\nwhile True:\n    sys.stdout.buffer.write(b'A' * 65535 + b'\\n')\n"


def test_an_endless_output_is_kept_to_its_first_and_last_part() -> None:
    """A command that prints without end (an image whose python3 is `yes`): run keeps at most
    CAPTURE_LIMIT bytes of it, head and tail, and the timeout still ends it."""
    with pytest.raises(subprocess.TimeoutExpired) as err:
        process.run([sys.executable, "-c", FLOOD], timeout=3)
    out = err.value.output
    assert isinstance(out, str) and "bytes of output left out" in out
    assert len(out) < process.CAPTURE_LIMIT + 200


def test_a_long_output_that_ends_is_whole_below_the_limit_and_trimmed_above_it() -> None:
    small = process.run([sys.executable, "-c", "print('x' * 100000); print('end')"], timeout=60)
    assert small.stdout == "x" * 100000 + "\nend\n"
    n = process.CAPTURE_LIMIT // 65536 + 8
    script = f"import sys\nfor i in range({n}): sys.stdout.write(str(i % 10) * 65535 + '\\n')\nprint('last')"
    big = process.run([sys.executable, "-c", script], timeout=120)
    assert big.stdout.startswith("0" * 65535) and big.stdout.endswith("last\n")
    assert "bytes of output left out" in big.stdout and len(big.stdout) < process.CAPTURE_LIMIT + 200


def test_stream_passes_a_line_without_end_in_pieces() -> None:
    pieces: list[int] = []
    code, _tail = process.stream(
        [sys.executable, "-c", "import sys; sys.stdout.write('y' * 300000)"], on_line=lambda s: pieces.append(len(s))
    )
    assert code == 0 and sum(pieces) == 300000 and max(pieces) <= process.LINE_LIMIT
