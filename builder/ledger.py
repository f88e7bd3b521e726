"""The local audit ledger: one SQLite row per promotion, rollback or denied attempt, append-only.

Path: ``Config.ledger_path`` (builder.toml ``ledger``; default ``<state_dir>/ledger.sqlite``).
The registry is the shared, durable record (signed ``promotion/v1`` attestations, which
``status``/``history``/``rollback`` read); the ledger is this machine's audit trail.

Guarantees:
- Append-only: SQLite triggers abort every UPDATE and DELETE on ``records``.
- Tamper-evident: each row stores ``hash`` = sha256 over its content and the previous row's hash;
  :meth:`Ledger.verify` recomputes the chain and names the first row that does not match.
- Crash-safe: WAL journal, ``synchronous=NORMAL``, one ``BEGIN IMMEDIATE`` transaction per record
  (a process killed mid-write leaves either the whole row or nothing). In WAL mode NORMAL syncs
  at checkpoints, not at each commit (https://www.sqlite.org/pragma.html#pragma_synchronous): a
  killed process loses nothing committed; a power cut may lose the last rows but never corrupts
  the file. The signed records in the registry are the durable copy, and re-running a promotion
  whose tag already moved appends its missing row (``builder.promote``).

Read-only use (``read_only=True``: ``ledger verify``; dry runs do not open the ledger at all)
opens the file with SQLite's ``mode=ro`` URI parameter (https://www.sqlite.org/uri.html), so a
state folder this user may read but not write serves every read. A WAL database can be read
without write access only when its ``-wal``/``-shm`` files exist or can be created, else only as
``immutable=1`` (https://www.sqlite.org/wal.html#readonly): in a folder that cannot be written
(so no writer of ours can change the file meanwhile) that is how it is opened.

Errors: ``LedgerError`` (exit 33) when the file cannot be opened or read, or is not a ledger;
``NotFoundError`` (exit 8, docs/exit-codes.md: a path that cannot be written) when a write is
needed and the ledger's folder or file is not writable by this user (or on a read-only file
system), naming the folder or file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sqlite3
import threading
from typing import TYPE_CHECKING, Any

from builder.errors import LedgerError, NotFoundError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    time TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('promote', 'rollback', 'denied')),
    variant TEXT NOT NULL,
    stage TEXT NOT NULL,
    from_stage TEXT NOT NULL,
    reference TEXT NOT NULL,
    digest TEXT NOT NULL,
    previous TEXT,
    allowed INTEGER NOT NULL,
    decision TEXT NOT NULL,
    who TEXT NOT NULL,
    ticket TEXT,
    attestation TEXT,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL UNIQUE
);
CREATE INDEX IF NOT EXISTS records_stage ON records (reference, stage, seq);
CREATE TRIGGER IF NOT EXISTS records_no_update BEFORE UPDATE ON records
BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS records_no_delete BEFORE DELETE ON records
BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: DELETE refused'); END;
"""

_FIELDS = (
    "time",
    "action",
    "variant",
    "stage",
    "from_stage",
    "reference",
    "digest",
    "previous",
    "allowed",
    "decision",
    "who",
    "ticket",
    "attestation",
)
GENESIS = "sha256:" + "0" * 64


@dataclasses.dataclass(frozen=True)
class LedgerRecord:
    """One row. ``reference``: ``registry/repository:tag`` of the stage pointer; ``decision``: the
    JSON text of the policy decision; ``who``: signer fingerprint (+ `` name``); ``attestation``:
    digest of the promotion/v1 layer written to the registry (None for denied attempts)."""

    time: str
    action: str
    variant: str
    stage: str
    from_stage: str
    reference: str
    digest: str
    previous: str | None
    allowed: bool
    decision: str
    who: str
    ticket: str | None = None
    attestation: str | None = None
    seq: int = 0
    hash: str = ""
    prev_hash: str = ""

    def content_hash(self, prev_hash: str) -> str:
        body = {f: getattr(self, f) for f in _FIELDS}
        body["allowed"] = bool(self.allowed)
        data = json.dumps({"prev": prev_hash, "record": body}, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(data.encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        with contextlib.suppress(ValueError):
            out["decision"] = json.loads(self.decision)
        return out


class Ledger:
    """An open ledger file. Use as a context manager or call :meth:`close`. ``read_only``: an
    existing ledger opened for reading only (see the module); :meth:`append` then fails."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = path
        self._lock = threading.RLock()
        if read_only:
            self._db = _open_read_only(path)
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # one connection shared by the threads of a batch (promote_many); writes are serialized
            # by self._lock and by SQLite's own locking across processes
            self._db = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            self._db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        except sqlite3.DatabaseError as exc:
            raise _unwritable(path) or LedgerError(
                f"cannot open the audit ledger {path}: {exc}", path=str(path)
            ) from exc
        except OSError as exc:
            raise _unwritable(path) or LedgerError(
                f"cannot create the audit ledger {path}: {exc.strerror}", path=str(path)
            ) from exc

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[None]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")

    def append(self, record: LedgerRecord) -> LedgerRecord:
        """Append ``record`` in one transaction; returns it with ``seq``, ``hash``, ``prev_hash``."""
        try:
            with self._tx():
                row = self._db.execute("SELECT hash FROM records ORDER BY seq DESC LIMIT 1").fetchone()
                prev_hash = row[0] if row else GENESIS
                h = record.content_hash(prev_hash)
                values = [getattr(record, f) for f in _FIELDS]
                values[_FIELDS.index("allowed")] = int(record.allowed)
                cur = self._db.execute(
                    f"INSERT INTO records ({', '.join(_FIELDS)}, prev_hash, hash) "
                    f"VALUES ({', '.join('?' for _ in _FIELDS)}, ?, ?)",
                    (*values, prev_hash, h),
                )
                seq = int(cur.lastrowid or 0)
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"cannot write to the audit ledger {self.path}: {exc}", path=str(self.path)) from exc
        return dataclasses.replace(record, seq=seq, hash=h, prev_hash=prev_hash)

    def records(
        self, *, stage: str | None = None, variant: str | None = None, reference: str | None = None
    ) -> list[LedgerRecord]:
        """Rows in order, filtered by stage / variant / pointer reference."""
        where, args = [], []
        for col, val in (("stage", stage), ("variant", variant), ("reference", reference)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        sql = f"SELECT seq, {', '.join(_FIELDS)}, prev_hash, hash FROM records"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq"
        try:
            with self._lock:
                rows = self._db.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"cannot read the audit ledger {self.path}: {exc}", path=str(self.path)) from exc
        out = []
        for r in rows:
            values = dict(zip(("seq", *_FIELDS, "prev_hash", "hash"), r, strict=True))
            values["allowed"] = bool(values["allowed"])
            out.append(LedgerRecord(**values))
        return out

    def has_attestation(self, attestation: str) -> bool:
        with self._lock:
            row = self._db.execute("SELECT 1 FROM records WHERE attestation = ? LIMIT 1", (attestation,)).fetchone()
        return row is not None

    def verify(self) -> list[str]:
        """Recompute the hash chain; returns problems (empty: consistent), each naming the rows.

        Rows are numbered by SQLite ``AUTOINCREMENT``, which never reuses a number and keeps the
        highest one issued in ``sqlite_sequence`` (https://www.sqlite.org/autoinc.html): a gap in
        the numbers is rows removed there, and a highest number above the last row is rows removed
        at the end (a truncated tail, which the chain alone cannot show)."""
        problems: list[str] = []
        prev = GENESIS
        last_seq = 0
        for rec in self.records():
            if rec.seq <= last_seq:
                problems.append(f"row {rec.seq}: out of order")
            elif rec.seq > last_seq + 1:
                problems.append(f"{_rows(last_seq + 1, rec.seq - 1)} missing before row {rec.seq} (removed)")
            elif rec.prev_hash != prev:
                why = f"prev_hash does not name row {last_seq}'s hash (row {last_seq} replaced?)"
                problems.append(f"row {rec.seq}: {why}")
            if rec.content_hash(rec.prev_hash) != rec.hash:
                problems.append(f"row {rec.seq}: content does not match its hash (edited)")
            prev, last_seq = rec.hash, max(rec.seq, last_seq)
        issued = self.highest_issued()
        if issued > last_seq:
            problems.append(
                f"{_rows(last_seq + 1, issued)} missing at the end (removed: the ledger issued row numbers up to "
                f"{issued}, its last row is {last_seq or 'none'})"
            )
        return problems

    def highest_issued(self) -> int:
        """The highest row number ever issued (``sqlite_sequence``; 0 when none was)."""
        try:
            with self._lock:
                row = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'records'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"cannot read the audit ledger {self.path}: {exc}", path=str(self.path)) from exc
        return int(row[0]) if row else 0


def _open_read_only(path: Path) -> sqlite3.Connection:
    """``path`` opened with ``mode=ro``, or ``immutable=1`` when that fails in a folder this user
    cannot write (see the module). Raises LedgerError when it cannot be read as a ledger."""
    uri = f"{path.absolute().as_uri()}?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None, check_same_thread=False)
        try:
            db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except sqlite3.OperationalError:
            db.close()
            if os.access(path.parent, os.W_OK):
                raise
            db = sqlite3.connect(f"{uri}&immutable=1", uri=True, isolation_level=None, check_same_thread=False)
            db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"cannot read the audit ledger {path}: {exc}", path=str(path)) from exc
    return db


def _unwritable(path: Path) -> NotFoundError | None:
    """NotFoundError naming what keeps the ledger at ``path`` from being written: the file itself
    or the nearest existing folder above it, when this user may not write it (``os.access``,
    which also reports a read-only file system); None when both are writable (the cause is
    elsewhere: a broken file)."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    blocked = [(f"the file {path} is read-only", path)] if path.exists() and not os.access(path, os.W_OK) else []
    if not os.access(folder, os.W_OK):  # SQLite writes its -wal and -shm files beside the ledger
        blocked.append((f"the folder {folder} is not writable", folder))
    if not blocked:
        return None
    what = " and ".join(w for w, _ in blocked)
    return NotFoundError(
        f"cannot write the audit ledger {path}: {what} by this user (a promotion or rollback with --confirm "
        "appends a row)",
        hint=f"make {' and '.join(str(p) for _, p in blocked)} writable for this user, or set builder.toml "
        "`state_dir` (or `ledger`, or BUILDER_STATE_DIR) to a folder it can write; a dry run (without "
        "--confirm) only reads",
        path=str(path),
        folder=str(folder),
    )


def _rows(first: int, last: int) -> str:
    """``row 3`` / ``rows 3-5``."""
    return f"row {first}" if first == last else f"rows {first}-{last}"


def open_ledger(path: Path, *, read_only: bool = False) -> Ledger:
    """Open (creating if needed) the ledger at ``path``; ``read_only``: an existing one, for
    reading only. Raises LedgerError, NotFoundError (a folder or file that cannot be written)."""
    return Ledger(path, read_only=read_only)
