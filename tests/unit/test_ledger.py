"""The audit ledger: append-only (triggers), hash-chained, one transaction per record."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from builder.errors import LedgerError
from builder.ledger import GENESIS, LedgerRecord, open_ledger

if TYPE_CHECKING:
    from pathlib import Path


def rec(n: int, action: str = "promote") -> LedgerRecord:
    return LedgerRecord(
        time=f"2026-11-30T12:00:0{n}.000000Z",
        action=action,
        variant="jax0.7-cpu",
        stage="dev",
        from_stage="build",
        reference="127.0.0.1:5000/ml/jax:jax0.7-cpu-dev",
        digest="sha256:" + str(n) * 64,
        previous=None if n == 0 else "sha256:" + str(n - 1) * 64,
        allowed=action != "denied",
        decision='{"allowed": true}',
        who="sha256:ff alice",
        ticket="CHG-1234",
        attestation="sha256:" + "e" * 63 + str(n),
    )


def test_append_read_and_chain(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "ledger.sqlite"
    with open_ledger(path) as ledger:
        a = ledger.append(rec(0))
        b = ledger.append(rec(1, "denied"))
        assert (a.seq, b.seq) == (1, 2)
        assert a.prev_hash == GENESIS and b.prev_hash == a.hash
        rows = ledger.records()
        assert [(r.seq, r.action, r.allowed) for r in rows] == [(1, "promote", True), (2, "denied", False)]
        assert ledger.records(stage="prod") == []
        assert ledger.has_attestation(rec(1).attestation or "")
        assert ledger.verify() == []
        assert rows[0].to_json()["decision"] == {"allowed": True}
    # reopening keeps everything (and the schema is not re-created)
    with open_ledger(path) as ledger:
        assert len(ledger.records()) == 2 and ledger.verify() == []


def test_update_and_delete_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with open_ledger(path) as ledger:
        ledger.append(rec(0))
    db = sqlite3.connect(path)
    for sql in ("UPDATE records SET digest = 'x'", "DELETE FROM records"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            db.execute(sql)
    db.close()
    with open_ledger(path) as ledger:
        assert len(ledger.records()) == 1


def test_tampering_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with open_ledger(path) as ledger:
        for n in range(3):
            ledger.append(rec(n))
    db = sqlite3.connect(path)
    db.execute("DROP TRIGGER records_no_update")  # what an attacker with file access could do
    db.execute("UPDATE records SET digest = 'sha256:evil' WHERE seq = 2")
    db.commit()
    db.close()
    with open_ledger(path) as ledger:
        problems = ledger.verify()
    assert problems == ["row 2: content does not match its hash (edited)"]


def _removed(path: Path, *seqs: int) -> list[str]:
    """The problems after an attacker with file access deletes rows ``seqs``."""
    db = sqlite3.connect(path)
    db.execute("DROP TRIGGER IF EXISTS records_no_delete")
    for seq in seqs:
        db.execute("DELETE FROM records WHERE seq = ?", (seq,))
    db.commit()
    db.close()
    with open_ledger(path) as ledger:
        return ledger.verify()


def test_removed_rows_are_named_first_middle_and_tail(tmp_path: Path) -> None:
    """Every removal names the missing rows: the first row (it said "does not name row 0's hash", a row
    that never exists), rows in the middle, and the last row (it passed: the chain of what is left is
    intact; SQLite's AUTOINCREMENT counter still says it was written)."""
    cases = {
        (1,): ["row 1 missing before row 2 (removed)"],
        (2, 3): ["rows 2-3 missing before row 4 (removed)"],
        (4,): ["row 4 missing at the end (removed: the ledger issued row numbers up to 4, its last row is 3)"],
        (3, 4): ["rows 3-4 missing at the end (removed: the ledger issued row numbers up to 4, its last row is 2)"],
        (1, 2, 3, 4): [
            "rows 1-4 missing at the end (removed: the ledger issued row numbers up to 4, its last row is none)"
        ],
    }
    for i, (seqs, expected) in enumerate(cases.items()):
        path = tmp_path / f"l{i}.sqlite"
        with open_ledger(path) as ledger:
            for n in range(4):
                ledger.append(rec(n))
        assert _removed(path, *seqs) == expected, seqs
        assert not any("row 0" in p for p in expected)
    # a row appended after the tail was removed chains onto what is left: the gap still shows
    with open_ledger(tmp_path / "l2.sqlite") as ledger:
        ledger.append(rec(5))
        assert ledger.verify() == ["row 4 missing before row 5 (removed)"]


def test_not_a_ledger(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(LedgerError, match="cannot open the audit ledger"):
        open_ledger(path)


def test_invalid_action_is_refused(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "l.sqlite") as ledger, pytest.raises(LedgerError):
        ledger.append(rec(0, "teleport"))


def test_wal_and_rows_visible_to_another_connection(tmp_path: Path) -> None:
    """The ledger is in WAL mode (no fsync per commit; the mode is a property of the file, so another
    connection sees it); a committed row is in the file at once: another connection (another process)
    reads it without the writer closing."""
    path = tmp_path / "ledger.sqlite"
    with open_ledger(path) as ledger:
        ledger.append(rec(0))
        other = sqlite3.connect(str(path))
        try:
            assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert other.execute("SELECT count(*) FROM records").fetchone()[0] == 1
        finally:
            other.close()
        assert path.with_name(path.name + "-wal").exists()
