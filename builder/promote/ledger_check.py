"""``builder ledger verify``: the local audit ledger's hash chain, and its agreement with the
registry's signed records.

Each ledger row of an applied promotion or rollback names the ``.att`` layer of the signed
``promotion/v1`` record it wrote (``attestation``). The check recomputes the ledger's hash chain
(``Ledger.verify``: an edited, removed or reordered row) and, for every such row, reads the
record from the registry (``records.records_on`` on the row's digest in the stage pointer's
repository): it must be there, verify, and be signed by a key the policy trusts for the stage.
A record deleted from the registry, or replaced, is named with its row. The other direction: for
each stage pointer the ledger has rows of, the registry's newest trusted record of what the
pointer holds, when signed by a promoter of this ledger, must have its row (rows removed at the
end leave the hash chain of the rest intact), and must not be older than the ledger's last move
of that pointer (a pointer put back by hand after the registry's newer records were removed or
an older ``.att`` manifest replayed: what the registry alone cannot tell, docs/promotion.md
"Integrity under attack, round 6").

Errors: LedgerError (33) when any problem is found (``details['problems']``);
RegistryAuthError (6) and RegistryUnavailableError (5) propagate (:data:`UNREADABLE`: a registry
that cannot be asked confirms nothing and breaks nothing); other registry errors of a row's
records are that row's problem.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from typing_extensions import TypedDict

from builder.errors import BuilderError, LedgerError, RegistryAuthError, RegistryUnavailableError
from builder.policy import parse_time
from builder.promote.location import Location
from builder.promote.pool import map_parallel
from builder.promote.records import records_on

if TYPE_CHECKING:
    from pathlib import Path

    from builder.ledger import Ledger, LedgerRecord
    from builder.promote.context import PromotionContext

UNREADABLE = (RegistryAuthError, RegistryUnavailableError)
"""Errors that say the registry could not be asked (no or wrong credentials: exit 6 with its login
hint; unreachable: exit 5), not that it disagrees with the ledger: they end ``ledger verify`` as
they are, never as a ledger problem (exit 33, whose hint is about an edited ledger)."""


class LedgerVerifyDocument(TypedDict):
    """``builder ledger verify --json``: the ``ledger`` file, ``rows`` read, ``checked`` (rows
    whose registry record was read), and every problem: ``chain`` (the hash chain) and
    ``registry`` (rows the registry's records do not confirm), each a sentence naming the row."""

    ledger: str
    rows: int
    checked: int
    chain: list[str]
    registry: list[str]


@dataclasses.dataclass(frozen=True)
class LedgerReport:
    """The result of :func:`verify_ledger` (see :class:`LedgerVerifyDocument`)."""

    ledger: str
    rows: int
    checked: int
    chain: tuple[str, ...]
    registry: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.chain and not self.registry

    def to_json(self) -> LedgerVerifyDocument:
        return {
            "ledger": self.ledger,
            "rows": self.rows,
            "checked": self.checked,
            "chain": list(self.chain),
            "registry": list(self.registry),
        }

    def raise_for_problems(self) -> None:
        """LedgerError (exit 33) listing every problem; nothing when the ledger agrees."""
        if self.ok:
            return
        import textwrap

        problems = [*self.chain, *self.registry]
        # each problem folded to 80 columns at spaces (a reference or digest is never split)
        listed = (
            textwrap.fill(
                p, 80, initial_indent="  ", subsequent_indent="    ", break_long_words=False, break_on_hyphens=False
            )
            for p in problems
        )
        raise LedgerError(
            textwrap.fill(
                f"ledger {self.ledger}: {len(problems)} problem(s):",
                73,
                subsequent_indent="  ",
                break_long_words=False,
                break_on_hyphens=False,
            )
            + "\n"
            + "\n".join(listed),
            hint="the ledger is append-only: never edit it; a record missing from the registry was deleted "
            "or replaced there (`builder history VARIANT --stage STAGE` shows what the registry holds); "
            "a key the policy does not list: verify with the policy the rows were promoted under (--policy)",
            problems=problems,
            report=self.to_json(),
        )


def pointer_location(reference: str) -> Location:
    """``registry/repository:tag`` (a ledger row's ``reference``) as a Location."""
    registry, _, rest = reference.partition("/")
    repository, _, tag = rest.rpartition(":")
    return Location(registry, repository, tag or None)


def _check_row(ctx: PromotionContext, row: LedgerRecord) -> str | None:
    loc = pointer_location(row.reference)
    try:
        on = records_on(ctx, loc, row.digest, row.stage)
    except UNREADABLE:  # no access to the registry (credentials, network): not a ledger break
        raise
    except BuilderError as exc:
        return f"row {row.seq} ({row.action} {row.variant} -> {row.stage}): the registry cannot be read: {exc.message}"
    if any(r.layer == row.attestation for r in on.records):
        return None
    where = f"row {row.seq} ({row.time[:19]}Z {row.action} {row.digest[:19]}… -> {row.reference})"
    layer = f"{(row.attestation or '')[:19]}…"
    if on.foreign:
        return f"{where}: its record {layer} is not among the trusted records there ({'; '.join(on.foreign)})"
    return f"{where}: the registry holds no record {layer} (deleted or replaced)"


def existing_ledger(path: Path) -> Ledger:
    """The ledger at ``path`` opened for verification, never created: LedgerError (33) when there
    is no file (verifying nothing cannot pass: a ledger deleted whole is rows removed)."""
    from builder.ledger import open_ledger

    if not path.is_file():
        raise LedgerError(
            f"no ledger at {path}: nothing to verify",
            hint="no promotion was applied with this state_dir, builder.toml `ledger` points elsewhere, or "
            "the file was deleted (then the registry's promotion records are what remains: `builder history`)",
        )
    return open_ledger(path, read_only=True)  # verifying writes nothing (a read-only state folder)


def _check_pointer(ctx: PromotionContext, rows: list[LedgerRecord], writers: set[str]) -> str | None:
    """The other direction, for one stage pointer the ledger has rows of (``rows``, in order): the
    registry's newest trusted record of what the pointer holds now, when written by a promoter
    that wrote rows of this ledger (``writers``: their fingerprints), must have its row here. A
    missing one is a row removed (at the end, where the hash chain of what is left stays intact)
    or a promotion applied with another ledger by the same key. A pointer naming another digest
    than the last row, whose newest trusted record is older than that row, was moved back by hand
    with the newer records gone from the registry."""
    last = rows[-1]
    loc = pointer_location(last.reference)
    try:
        current = ctx.client(loc.registry).try_resolve(loc.repository, loc.pointer_tag)
        on = records_on(ctx, loc, current, last.stage) if current is not None else None
    except UNREADABLE:
        raise
    except BuilderError as exc:
        return f"{last.reference}: the registry cannot be read: {exc.message}"
    if on is None or not on.records:
        return None  # moved away or untrusted: the rows' own checks say so
    newest = max(on.records, key=lambda r: r.time)
    moved_at = parse_time(last.time)
    if current is not None and current != last.digest and moved_at is not None and newest.when < moved_at:
        # the pointer holds a digest whose newest trusted record is older than this ledger's last
        # move of it: put back by hand, with the records that would say so (the successor record)
        # removed from the registry, e.g. an older .att manifest replayed
        return (
            f"{last.reference}: names {current[:19]}…, whose newest record ({newest.time[:19]}Z) is older than "
            f"row {last.seq} ({last.time[:19]}Z {last.action} {last.digest[:19]}…): the stage was moved back outside "
            "builder and the registry no longer holds the record of the move away"
        )
    if newest.promoter not in writers or any(r.attestation == newest.layer for r in rows):
        return None
    by = newest.promoter_name or newest.promoter[:19]
    return (
        f"{last.reference}: the registry's newest record ({newest.time[:19]}Z {newest.action} "
        f"{newest.digest[:19]}…, record {(newest.layer or '')[:19]}…, by {by}) has no row in this ledger: "
        "rows removed at the end, or promoted with another ledger"
    )


def verify_ledger(ctx: PromotionContext, ledger: Ledger, path: str) -> LedgerReport:
    """Check ``ledger`` (the file at ``path``) against itself and the registry (module docstring):
    every applied row's record is in the registry, and each stage pointer's newest record by a
    promoter of this ledger has its row (:func:`_check_pointer`)."""
    rows = ledger.records()
    applied = [r for r in rows if r.action in ("promote", "rollback") and r.allowed and r.attestation]
    found = map_parallel(lambda r: _check_row(ctx, r), applied)
    pointers: dict[str, list[LedgerRecord]] = {}
    for r in applied:
        pointers.setdefault(r.reference, []).append(r)
    writers = {r.who.split(" ", 1)[0] for r in applied if r.who}
    tails = map_parallel(lambda rs: _check_pointer(ctx, rs, writers), list(pointers.values()))
    return LedgerReport(
        path,
        len(rows),
        len(applied),
        tuple(ledger.verify()),
        tuple(p for p in [*found, *tails] if p is not None),
    )
