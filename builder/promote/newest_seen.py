"""The newest trusted promotion record this machine has seen for each stage pointer: the client's
defence against a rollback (replay) attack the registry alone cannot show.

A stage pointer is trusted when the newest trusted record on the digest it names put that digest
there and no newer record on the digest moved the stage away (:func:`builder.promote.records.pointer_trust`).
Someone who may push can defeat that last check: keep a copy of an older digest's ``.att``
manifest, let the stage move on (the move appends its successor record to that ``.att``), then
put the copy back and the pointer tag on the older digest. Every record left is genuine and
signed; only a reader that remembers a newer one can tell. This is the rollback attack of The
Update Framework, whose clients keep the newest trusted metadata they saw and refuse anything
older (TUF specification, "Detailed client workflow", the rollback checks of 5.3-5.6:
https://theupdateframework.github.io/specification/latest/#detailed-client-workflow).

So builder keeps, per stage pointer, the newest trusted record it has read (``resolve``,
``status``, a promotion's plan) or written (a promotion, a rollback), in one small JSON file
under ``<state_dir>/seen`` (named by the SHA-256 of the pointer reference). A pointer whose record
is older than the kept one is refused unless that record moved the stage away from the kept
record's digest (a promotion or rollback made after it, by a machine whose clock runs behind).
A machine that never saw the newer record (a fresh checkout, another developer) is not protected
by this: ``promotion_remote`` (the git compare-and-swap point) and ``builder ledger verify`` on the
promoting machine are (docs/promotion.md). Losing the folder loses only this protection.

Errors: none raised; a folder that cannot be written (a read-only state folder) keeps the records
for this run only, and an unreadable or malformed file reads as nothing kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from builder.promote.model import PromotionRecord


class NewestSeen:
    """The newest trusted record seen per stage pointer, under ``directory`` (None: this run only)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._memory: dict[str, PromotionRecord] = {}
        self._guard = threading.Lock()

    def _path(self, pointer: str) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / (hashlib.sha256(pointer.encode()).hexdigest()[:40] + ".json")

    def get(self, pointer: str) -> PromotionRecord | None:
        """The newest trusted record kept for ``pointer`` (``registry/repository:tag``), or None."""
        with self._guard:
            if pointer in self._memory:
                return self._memory[pointer]
        path = self._path(pointer)
        if path is None:
            return None
        from builder.promote.model import PromotionRecord

        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if doc.get("pointer") != pointer:  # another pointer's file (a hash prefix collision): not ours
                return None
            rec = PromotionRecord.from_predicate(doc["predicate"], signer=doc.get("signer"), layer=doc.get("layer"))
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None
        if rec is not None:
            with self._guard:
                self._memory.setdefault(pointer, rec)
        return rec

    def offer(self, rec: PromotionRecord) -> None:
        """Keep ``rec`` (a trusted record the stage pointer ``rec.reference`` names) when it is newer
        than the record kept for that pointer."""
        kept = self.get(rec.reference)
        if kept is not None and kept.when >= rec.when:
            return
        with self._guard:
            self._memory[rec.reference] = rec
        path = self._path(rec.reference)
        if path is None:
            return
        doc = {"pointer": rec.reference, "predicate": rec.predicate(), "signer": rec.signer, "layer": rec.layer}
        import tempfile  # on first write: a resolve that only reads what it kept does not import it

        with contextlib.suppress(OSError):  # a read-only state folder: kept in memory for this run
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".seen-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(doc, f)
                os.replace(tmp, path)  # whole or not at all
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise

    def moved_past(self, rec: PromotionRecord) -> PromotionRecord | None:
        """The kept record for ``rec.reference`` when it shows the stage moved past ``rec``: newer,
        naming another digest, and not the digest ``rec`` moved the stage away from (then ``rec``
        came after it, whatever the clocks say). None: nothing kept says so."""
        kept = self.get(rec.reference)
        if kept is None or kept.digest == rec.digest or kept.when <= rec.when or rec.previous == kept.digest:
            return None
        return kept


__all__ = ["NewestSeen"]
