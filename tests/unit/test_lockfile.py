"""builder.lockfile.held: a real second holder of the lock file makes the wait end in the caller's
own error (naming the file), the file is created rw-r--r-- in a directory created on demand, and
the lock is released however the body ends."""

from __future__ import annotations

import stat
from typing import TYPE_CHECKING

import pytest
from filelock import FileLock

from builder.errors import NotFoundError, PromotionConflictError
from builder.lockfile import held

if TYPE_CHECKING:
    from pathlib import Path


def _conflict(path: Path) -> PromotionConflictError:
    return PromotionConflictError(f"held: {path}", pointer="p")


def test_a_lock_held_elsewhere_past_the_timeout_is_the_callers_error(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "stage-x.lock"
    with held(path, 1, _conflict):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        # a second holder (flock is per open file description: it waits even in this process)
        with pytest.raises(PromotionConflictError, match=r"stage-x\.lock"), held(path, 0.05, _conflict):
            pass


def test_the_lock_is_released_when_the_body_raises(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"
    with pytest.raises(RuntimeError), held(path, 1, _conflict):
        raise RuntimeError("interrupted")
    other = FileLock(str(path))
    other.acquire(timeout=0)  # free again
    other.release()


def test_a_file_where_the_lock_folder_should_be_is_named_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "locks").write_text("x")
    with pytest.raises(NotFoundError) as info, held(tmp_path / "locks" / "a.lock", 1, _conflict):
        pass
    assert info.value.exit_code == 8
    assert "a file is there where a folder is needed" in info.value.message
    assert str(tmp_path / "locks") in info.value.message
