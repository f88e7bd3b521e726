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
