"""builder.lockfile.held: a real second holder of the lock file makes the wait end in the caller's
own error (naming the file), the file is created rw-r--r-- in a directory created on demand, and
the lock is released however the body ends; a wait past ~2 s is said once (what, file, timeout)."""

from __future__ import annotations

import logging
import stat
from typing import TYPE_CHECKING

import pytest
from filelock import FileLock

from builder.errors import NotFoundError, PromotionConflictError
from builder.lockfile import LOG, held
from tests.conftest import lock_holder

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Iterator
    from pathlib import Path


def _conflict(path: Path) -> PromotionConflictError:
    return PromotionConflictError(f"held: {path}", pointer="p")


def test_a_lock_held_elsewhere_past_the_timeout_is_the_callers_error(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "stage-x.lock"
    with held(path, 1, _conflict, what="x"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        # a second holder (flock is per open file description: it waits even in this process)
        with pytest.raises(PromotionConflictError, match=r"stage-x\.lock"), held(path, 0.05, _conflict, what="x"):
            pass


def test_the_lock_is_released_when_the_body_raises(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"
    with pytest.raises(RuntimeError), held(path, 1, _conflict, what="x"):
        raise RuntimeError("interrupted")
    other = FileLock(str(path))
    other.acquire(timeout=0)  # free again
    other.release()


def test_a_file_where_the_lock_folder_should_be_is_named_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "locks").write_text("x")
    with pytest.raises(NotFoundError) as info, held(tmp_path / "locks" / "a.lock", 1, _conflict, what="x"):
        pass
    assert info.value.exit_code == 8
    assert "a file is there where a folder is needed" in info.value.message
    assert str(tmp_path / "locks") in info.value.message


class _Releasing(logging.Handler):
    """Records the notices; the first one lets the holding process go (no timed wait in the test:
    the holder keeps the lock until the notice has been said)."""

    def __init__(self, holder: subprocess.Popen[str]) -> None:
        super().__init__()
        self.holder = holder
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        if self.holder.stdin is not None and not self.holder.stdin.closed:
            self.holder.stdin.write("go\n")
            self.holder.stdin.close()


def test_a_wait_on_another_process_is_said_once_with_what_why_and_how_long(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "sig.lock"
    path.parent.mkdir()
    holder = lock_holder(path)
    handler = _Releasing(holder)
    LOG.addHandler(handler)
    try:
        with held(path, 60, _conflict, what="the signature tag r/x:sha256-ab.sig", notice_after=0.2):
            assert holder.wait(30) == 0  # we hold it only after the other process let it go
    finally:
        LOG.removeHandler(handler)
        holder.kill()
        holder.wait()
    assert handler.messages == [
        f"waiting for the lock of the signature tag r/x:sha256-ab.sig ({path}), "
        "held by another builder process; up to 60 s"
    ]


class _Said(logging.Handler):
    """The records of ``LOG`` itself (the command line stops its propagation to the root logger)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def said() -> Iterator[_Said]:
    handler = _Said()
    LOG.addHandler(handler)
    yield handler
    LOG.removeHandler(handler)


def test_a_free_lock_is_taken_without_a_word(tmp_path: Path, said: _Said) -> None:
    with held(tmp_path / "a.lock", 60, _conflict, what="x", notice_after=0):
        pass
    assert said.records == []


def test_a_timeout_within_the_notice_delay_fails_without_a_notice(tmp_path: Path, said: _Said) -> None:
    path = tmp_path / "a.lock"
    with (
        held(path, 1, _conflict, what="x"),
        pytest.raises(PromotionConflictError),
        held(path, 0.05, _conflict, what="x"),
    ):
        pass
    assert said.records == []


def test_two_threads_of_one_process_exclude_each_other(tmp_path: Path) -> None:
    """Each ``held`` opens the file itself (a flock belongs to the open file description): a second
    thread waits for the first, says so once, and enters only after the first has left."""
    import threading

    path = tmp_path / "t.lock"
    order: list[str] = []
    waiting = threading.Event()

    class _Waiting(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            del record
            waiting.set()

    def second() -> None:
        with held(path, 60, _conflict, what="x", notice_after=0.01):
            order.append("second in")

    handler = _Waiting()
    LOG.addHandler(handler)
    try:
        with held(path, 1, _conflict, what="x"):
            thread = threading.Thread(target=second)
            thread.start()
            assert waiting.wait(30), "the second thread took the lock the first one holds"
            order.append("first out")
        thread.join(30)
    finally:
        LOG.removeHandler(handler)
    assert order == ["first out", "second in"]


def test_a_new_lock_file_is_rw_r__r__whatever_the_umask(tmp_path: Path) -> None:
    import os

    old = os.umask(0o077)
    try:
        with held(tmp_path / "u.lock", 1, _conflict, what="x"):
            pass
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "u.lock").stat().st_mode) == 0o644


def test_an_existing_lock_file_is_taken_as_it_is(tmp_path: Path) -> None:
    """A lock file another builder created stays (content and mode): waiters share its inode."""
    path = tmp_path / "e.lock"
    path.write_text("x")
    path.chmod(0o600)
    inode = path.stat().st_ino
    with held(path, 1, _conflict, what="x"):
        pass
    assert path.read_text() == "x" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.stat().st_ino == inode


def test_a_lock_builder_holds_stops_a_filelock_holder(tmp_path: Path) -> None:
    """The same flock as filelock's (builder before #19 round 8, or any tool using it): a process
    sharing the state_dir with an older builder waits for this one too."""
    from filelock import Timeout

    path = tmp_path / "f.lock"
    with held(path, 1, _conflict, what="x"), pytest.raises(Timeout):
        FileLock(str(path)).acquire(timeout=0)
    other = FileLock(str(path))
    other.acquire(timeout=0)  # released on leaving
    other.release()
