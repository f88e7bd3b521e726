"""The moves of each stage pointer this machine has seen: the client's defence against a rollback
(replay) attack the registry alone cannot show.

A stage pointer is trusted when the newest trusted record on the digest it names put that digest
there and no newer record on the digest moved the stage away (its successor records:
:func:`builder.promote.records.pointer_trust`). Someone who may push can defeat that last check:
keep a copy of an older digest's ``.att`` manifest, let the stage move on (the move appends its
successor record to that ``.att``), then put the copy back and the pointer tag on the older digest.
Every record left is genuine and signed; only a reader that remembers the move away can tell. This
is the rollback attack of The Update Framework, whose clients keep the newest trusted metadata they
saw and refuse anything older (TUF specification, "Detailed client workflow", the rollback checks:
https://theupdateframework.github.io/specification/latest/#detailed-client-workflow).

So builder remembers, per stage pointer, every move away from a digest it has seen: each trusted
record it reads (``resolve``, ``status``, a promotion's plan) or writes (a promotion, a rollback)
moved the stage away from the record's ``previous`` digest at the record's time. They are kept in
one small JSON file per pointer under ``<state_dir>/seen`` (named by the SHA-256 of the pointer's
canonical reference), the newest move away from each digest, at most :data:`MAX_DIGESTS` digests.
A pointer whose trusted record is older than a move away from its digest that this machine saw is
refused, exactly as a successor record on the digest would refuse it; a record newer than every
move away from its digest (the digest promoted again, a signed rollback) is trusted. Nothing else
is compared: a promotion another machine made meanwhile, or two promotions that overwrote each
other (``history`` shows those forks), are not refused here.

A machine that never saw the move away (a fresh checkout, another developer) is not protected by
this: ``promotion_remote`` (the git compare-and-swap point) and ``builder ledger verify`` on the
promoting machine are (docs/promotion.md). Losing the folder loses only this protection.

Errors: none raised; a folder that cannot be written (a read-only state folder) keeps the moves for
this run only, and an unreadable or malformed file reads as nothing seen.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from builder.promote.model import PromotionRecord

MAX_DIGESTS = 256
"""The most digests whose move away one pointer's file keeps (the newest moves): a stage moves a few
times a day, so this is months of history; an older move is the registry's successor records' to show."""


def _key(reference: str) -> str:
    """The pointer's canonical reference (``localhost:5000`` and ``127.0.0.1:5000`` spell one registry
    alike, as :func:`builder.promote.records.records_on` compares them)."""
    from builder.registry.reference import canonical_reference

    return canonical_reference(reference)


class NewestSeen:
    """The moves away seen per stage pointer, under ``directory`` (None: this run only)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._memory: dict[str, dict[str, PromotionRecord]] = {}  # pointer -> digest left -> the record
        self._guard = threading.Lock()

    def _path(self, pointer: str) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / (hashlib.sha256(pointer.encode()).hexdigest()[:40] + ".json")

    def path(self, reference: str) -> Path | None:
        """The file that keeps what was seen for the pointer ``reference`` (None: kept in memory only)."""
        return self._path(_key(reference))

    def _moves(self, pointer: str) -> dict[str, PromotionRecord]:
        """Digest -> the newest record seen that moved ``pointer`` away from it (read once per run)."""
        with self._guard:
            if pointer in self._memory:
                return self._memory[pointer]
        moves: dict[str, PromotionRecord] = {}
        path = self._path(pointer)
        if path is not None:
            from builder.promote.model import PromotionRecord

            with contextlib.suppress(OSError, ValueError, TypeError, KeyError, AttributeError):
                doc = json.loads(path.read_text(encoding="utf-8"))
                if doc.get("pointer") == pointer:  # else another pointer's file (a hash prefix collision)
                    for left, item in doc["left"].items():
                        rec = PromotionRecord.from_predicate(
                            item["predicate"], signer=item.get("signer"), layer=item.get("layer")
                        )
                        if rec is not None and rec.previous == left:
                            moves[left] = rec
        with self._guard:
            return self._memory.setdefault(pointer, moves)

    def moved_away(self, rec: PromotionRecord) -> PromotionRecord | None:
        """The record of a move away from ``rec.digest`` this machine saw that is newer than ``rec`` (the
        trusted record that put the digest into the pointer ``rec.reference``): the pointer was moved
        back outside builder. None: none seen."""
        later = self._moves(_key(rec.reference)).get(rec.digest)
        return later if later is not None and later.when > rec.when else None

    def offer(self, rec: PromotionRecord) -> None:
        """Remember that ``rec`` (a trusted record of the pointer ``rec.reference``) moved the stage away
        from ``rec.previous``, when no newer move away from it is kept."""
        if rec.previous is None:
            return
        pointer = _key(rec.reference)
        moves = self._moves(pointer)
        with self._guard:
            kept = moves.get(rec.previous)
            if kept is not None and kept.when >= rec.when:
                return
            moves[rec.previous] = rec
            newest = sorted(moves.items(), key=lambda m: m[1].when)[-MAX_DIGESTS:]
            doc: dict[str, Any] = {
                "pointer": pointer,
                "left": {d: {"predicate": r.predicate(), "signer": r.signer, "layer": r.layer} for d, r in newest},
            }
            self._write(pointer, doc)

    def _write(self, pointer: str, doc: dict[str, Any]) -> None:
        """Replace the pointer's file with ``doc``, whole or not at all; a folder that cannot be written
        leaves it in memory."""
        path = self._path(pointer)
        if path is None:
            return
        import tempfile  # on first write: a resolve that only reads what it kept does not import it

        with contextlib.suppress(OSError):  # a read-only state folder: kept in memory for this run
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".seen-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(doc, f)
                os.replace(tmp, path)
            except BaseException:  # an interruption too: no temporary file left behind
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise


__all__ = ["MAX_DIGESTS", "NewestSeen"]
