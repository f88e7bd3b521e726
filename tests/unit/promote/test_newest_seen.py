"""builder.promote.newest_seen: the newest trusted record kept per stage pointer, on disk, and when it
shows the stage moved past a record the registry shows (a replayed ``.att``)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from builder.promote.newest_seen import NewestSeen
from tests.unit.promote.test_model import _record

if TYPE_CHECKING:
    from pathlib import Path

    from builder.promote.model import PromotionRecord

POINTER = "127.0.0.1:5000/demo/jax:jax0.7-cpu-dev"
A, B, C = (f"sha256:{c * 64}" for c in "abc")


def record(digest: str, previous: str | None, time: str) -> PromotionRecord:
    """test_model's record, moved to ``POINTER`` and given its digest, previous digest and time."""
    return dataclasses.replace(_record(), reference=POINTER, digest=digest, previous=previous, time=time)


def test_the_newest_record_is_kept_across_runs_and_an_older_one_is_not(tmp_path: Path) -> None:
    first, second = record(A, None, "2026-12-01T10:00:00Z"), record(B, A, "2026-12-01T11:00:00Z")
    NewestSeen(tmp_path).offer(second)
    NewestSeen(tmp_path).offer(first)  # older: the kept one stays
    assert NewestSeen(tmp_path).get(POINTER) == second
    assert NewestSeen(tmp_path).get(POINTER.replace("dev", "prod")) is None
    assert [p.name.startswith(".seen-") for p in tmp_path.iterdir()] == [False]  # no temporary file left


def test_a_record_older_than_the_kept_one_is_moved_past_unless_it_came_after_it(tmp_path: Path) -> None:
    seen = NewestSeen(tmp_path)
    old, new = record(A, None, "2026-12-01T10:00:00Z"), record(B, A, "2026-12-01T11:00:00Z")
    seen.offer(new)
    assert seen.moved_past(old) == new  # the replay: the stage moved from A to B after old's record
    assert seen.moved_past(new) is None
    assert seen.moved_past(record(C, B, "2026-12-01T12:00:00Z")) is None  # newer: the stage moved on
    # a move away from B made by a machine whose clock runs 2 h behind still came after B's record
    assert seen.moved_past(record(C, B, "2026-12-01T09:00:00Z")) is None
    assert seen.moved_past(record(C, A, "2026-12-01T09:00:00Z")) == new  # older and not after B: moved past


def test_a_folder_that_cannot_be_written_keeps_it_for_the_run(tmp_path: Path) -> None:
    """A read-only state folder (or, here, a file where the folder should be): no error, kept in memory."""
    blocker = tmp_path / "state"
    blocker.write_text("a file, not a folder")
    seen = NewestSeen(blocker / "seen")
    rec = record(A, None, "2026-12-01T10:00:00Z")
    seen.offer(rec)
    assert seen.get(POINTER) == rec and blocker.read_text() == "a file, not a folder"


def test_a_broken_or_foreign_file_reads_as_nothing(tmp_path: Path) -> None:
    NewestSeen(tmp_path).offer(record(A, None, "2026-12-01T10:00:00Z"))
    [path] = tmp_path.iterdir()
    path.write_text("{not json")
    assert NewestSeen(tmp_path).get(POINTER) is None
    path.write_text('{"pointer": "elsewhere:5000/x:y", "predicate": {}}')
    assert NewestSeen(tmp_path).get(POINTER) is None
