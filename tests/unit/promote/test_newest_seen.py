"""builder.promote.newest_seen: the newest trusted record kept per stage pointer, on disk, and when it
shows the stage moved past a record the registry shows (a replayed ``.att``)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from builder.promote.newest_seen import MAX_DIGESTS, NewestSeen
from tests.unit.promote.test_model import _record

if TYPE_CHECKING:
    from pathlib import Path

    from builder.promote.model import PromotionRecord

POINTER = "127.0.0.1:5000/demo/jax:jax0.7-cpu-dev"
A, B, C, D, E = (f"sha256:{c * 64}" for c in "abcde")


def record(digest: str, previous: str | None, time: str) -> PromotionRecord:
    """test_model's record, moved to ``POINTER`` and given its digest, previous digest and time."""
    return dataclasses.replace(_record(), reference=POINTER, digest=digest, previous=previous, time=time)


def test_a_move_away_is_remembered_across_runs_and_refuses_an_older_record_of_that_digest(tmp_path: Path) -> None:
    old, new = record(A, None, "2026-12-01T10:00:00Z"), record(B, A, "2026-12-01T11:00:00Z")
    NewestSeen(tmp_path).offer(new)  # the stage moved away from A at 11:00
    again = NewestSeen(tmp_path)  # another run
    assert again.moved_away(old) == new  # A's record of 10:00 put back: moved back outside builder
    assert again.moved_away(new) is None
    assert again.moved_away(record(A, B, "2026-12-01T12:00:00Z")) is None  # A promoted again (or rolled back) later
    assert [p.name.startswith(".seen-") for p in tmp_path.iterdir()] == [False]  # no temporary file left


def test_only_a_move_away_from_the_same_digest_refuses(tmp_path: Path) -> None:
    """Clocks: a machine whose clock runs fast stamped B; promotions after it by slower clocks, and a
    promotion that overwrote another (a fork ``history`` shows), are not moves back."""
    seen = NewestSeen(tmp_path)
    seen.offer(record(B, A, "2026-12-01T10:00:00Z"))  # fast clock
    c = record(C, B, "2026-12-01T09:58:00Z")
    assert seen.moved_away(c) is None
    seen.offer(c)
    assert seen.moved_away(record(D, C, "2026-12-01T09:59:00Z")) is None
    assert seen.moved_away(record(E, A, "2026-12-01T09:57:00Z")) is None  # E never left: not refused here
    seen.offer(record(D, C, "2026-12-01T09:59:00Z"))  # the stage moved away from C at 09:59
    assert seen.moved_away(record(C, B, "2026-12-01T09:58:00Z")) is not None  # C was left at 09:59


def test_a_cycle_back_to_a_digest_refuses_its_older_record(tmp_path: Path) -> None:
    """A -> B -> C -> A -> B: C's old record put back is refused (C was left at t3), though it names B."""
    seen = NewestSeen(tmp_path)
    for rec in (
        record(B, A, "2026-12-01T01:00:00Z"),
        record(C, B, "2026-12-01T02:00:00Z"),
        record(A, C, "2026-12-01T03:00:00Z"),
        record(B, A, "2026-12-01T05:00:00Z"),
    ):
        seen.offer(rec)
    assert seen.moved_away(record(C, B, "2026-12-01T02:00:00Z")) is not None


def test_the_pointer_is_one_however_the_registry_is_spelled(tmp_path: Path) -> None:
    seen = NewestSeen(tmp_path)
    seen.offer(record(B, A, "2026-12-01T11:00:00Z"))
    other = dataclasses.replace(
        record(A, None, "2026-12-01T10:00:00Z"), reference=POINTER.replace("127.0.0.1", "localhost")
    )
    assert NewestSeen(tmp_path).moved_away(other) is not None


def test_a_folder_that_cannot_be_written_keeps_it_for_the_run(tmp_path: Path) -> None:
    """A read-only state folder (or, here, a file where the folder should be): no error, kept in memory."""
    blocker = tmp_path / "state"
    blocker.write_text("a file, not a folder")
    seen = NewestSeen(blocker / "seen")
    seen.offer(record(B, A, "2026-12-01T11:00:00Z"))
    assert seen.moved_away(record(A, None, "2026-12-01T10:00:00Z")) is not None
    assert blocker.read_text() == "a file, not a folder"


def test_a_broken_or_foreign_file_reads_as_nothing(tmp_path: Path) -> None:
    NewestSeen(tmp_path).offer(record(B, A, "2026-12-01T11:00:00Z"))
    [path] = tmp_path.iterdir()
    older = record(A, None, "2026-12-01T10:00:00Z")
    path.write_text("{not json")
    assert NewestSeen(tmp_path).moved_away(older) is None
    path.write_text('{"pointer": "elsewhere:5000/x:y", "left": {}}')
    assert NewestSeen(tmp_path).moved_away(older) is None


def test_at_most_max_digests_moves_are_kept(tmp_path: Path) -> None:
    seen = NewestSeen(tmp_path)
    digests = [f"sha256:{i:064x}" for i in range(MAX_DIGESTS + 2)]
    for i in range(1, len(digests)):
        seen.offer(record(digests[i], digests[i - 1], f"2026-12-01T00:{i // 60:02d}:{i % 60:02d}Z"))
    again = NewestSeen(tmp_path)
    assert again.moved_away(record(digests[0], None, "2026-11-30T00:00:00Z")) is None  # the oldest move dropped
    assert again.moved_away(record(digests[-2], None, "2026-11-30T00:00:00Z")) is not None
