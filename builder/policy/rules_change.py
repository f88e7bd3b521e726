"""Policy rules about the change itself rather than the image: ``approvals`` (people),
``change_ticket``, ``freeze`` (time windows) and ``soak`` (time spent in the previous stage).

Time zones are IANA names (https://www.iana.org/time-zones), read through ``zoneinfo``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from builder.policy.durations import format_duration, parse_time
from builder.policy.model import BUILD_STAGE
from builder.policy.rules import Rule, evidence_problems
from builder.policy.signers import Approver, KeySet, sets_match, signer_text
from builder.predicates import APPROVAL_V1, PROMOTION_V1

if TYPE_CHECKING:
    from builder.policy.evidence import Context
    from builder.policy.results import RuleResult


@dataclasses.dataclass(frozen=True)
class ApprovalRule(Rule):
    """``count`` distinct approvers from ``approvers`` signed an ``approval/v1`` attestation for
    this digest and this stage (the predicate names both; a replay onto another digest or stage
    does not count). ``same_ticket``: the approval names the promotion's change ticket."""

    count: int = 1
    approvers: tuple[Approver, ...] = ()
    same_ticket: bool = False
    kind: str = dataclasses.field(default="approvals", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        summary = f"{self.count} of {', '.join(a.name for a in self.approvers)}"
        names: set[str] = set()
        notes: list[str] = []
        ev = ctx.evidence
        for a in ev.attestations:
            if a.predicate_type != APPROVAL_V1:
                continue
            who = signer_text(a.signer, a.identity, ctx.names)
            if not a.verified:
                notes.append(f"approval by {who} does not verify ({a.reason or 'unverifiable'})")
                continue
            if ev.digest not in a.subject_digests:
                notes.append(f"approval by {who} is for another digest")
                continue
            p = a.predicate
            approver = next((x for x in self.approvers if x.key.matches(a.signer, a.identity)), None)
            if approver is None:
                notes.append(f"approval signed by {who}, who is not a listed approver")
                continue
            if p.get("digest") != ev.digest:
                notes.append(f"approval by {approver.name} names digest {p.get('digest')}, not this one (replayed)")
                continue
            if p.get("stage") != ctx.stage:
                notes.append(f"approval by {approver.name} is for stage {p.get('stage')!r}, not {ctx.stage!r}")
                continue
            claimed = p.get("approver")
            if isinstance(claimed, Mapping) and claimed.get("fingerprint") not in (None, a.signer):
                notes.append(f"approval by {approver.name} claims another approver key")
                continue
            if self.same_ticket and (not ev.ticket or p.get("ticket") != ev.ticket):
                notes.append(f"approval by {approver.name} names ticket {p.get('ticket')!r}, not {ev.ticket!r}")
                continue
            names.add(approver.name)
        if len(names) >= self.count:
            return self.result(True, f"approved by {', '.join(sorted(names))}", summary)
        have = f"{len(names)} ({', '.join(sorted(names))})" if names else "0"
        # one note per cause: copied approval layers would repeat the same sentence each
        extra = ("; " + "; ".join(dict.fromkeys(notes))) if notes else ""
        key_probs = "".join(f"; approver {a.name}: {a.key.problem}" for a in self.approvers if a.key.problem)
        return self.result(
            False,
            f"needs {self.count} distinct approvals for stage {ctx.stage}, has {have}{extra}{key_probs}"
            + evidence_problems(ctx),
            summary,
        )


@dataclasses.dataclass(frozen=True)
class ChangeTicketRule(Rule):
    """The promotion names a change ticket (``--change``) that fully matches ``pattern`` (a regex)."""

    pattern: str = ""
    kind: str = dataclasses.field(default="change_ticket", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        t = ctx.evidence.ticket
        if not t:
            return self.result(False, f"no change ticket given (--change TICKET matching {self.pattern})")
        if re.fullmatch(self.pattern, t) is None:
            return self.result(False, f"ticket {t!r} does not match {self.pattern}")
        return self.result(True, f"ticket {t} matches {self.pattern}")


@dataclasses.dataclass(frozen=True)
class FreezeWindow:
    """Absolute (``start``..``end``, naive local times) or weekly (``days``, 0 = Monday, with
    optional ``time_from``/``time_to``; ``time_to`` at or before ``time_from`` runs overnight)."""

    reason: str
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    days: tuple[int, ...] = ()
    time_from: dt.time | None = None
    time_to: dt.time | None = None

    def contains(self, local: dt.datetime) -> bool:
        """Whether ``local`` (local time; any tzinfo is ignored) is inside the window."""
        naive = local.replace(tzinfo=None)
        if self.start is not None and self.end is not None:
            return self.start <= naive < self.end
        t = naive.time()
        start, end = self.time_from or dt.time(0, 0), self.time_to
        if end is None or end <= start:  # to end of day, or overnight
            if naive.weekday() in self.days and t >= start:
                return True
            # overnight window spilling into the next day
            return end is not None and end <= start and (naive.weekday() - 1) % 7 in self.days and t < end
        return naive.weekday() in self.days and start <= t < end

    def ends(self, local: dt.datetime) -> dt.datetime:
        """When this window, which contains ``local``, ends (naive local time)."""
        naive = local.replace(tzinfo=None)
        if self.start is not None and self.end is not None:
            return self.end
        day = dt.datetime.combine(naive.date(), dt.time(0, 0))
        start, end = self.time_from or dt.time(0, 0), self.time_to
        if end is None:  # until midnight
            return day + dt.timedelta(days=1)
        if end <= start and naive.weekday() in self.days and naive.time() >= start:  # overnight, first day
            return dt.datetime.combine(naive.date() + dt.timedelta(days=1), end)
        return dt.datetime.combine(naive.date(), end)


def freeze_ends(windows: Sequence[FreezeWindow], local: dt.datetime) -> dt.datetime | None:
    """When the freeze that holds at ``local`` (naive local time) lifts: the end of the window that
    contains it, followed through windows that continue it (Friday evening, then the weekend);
    None when no window contains ``local`` or the windows chain for over a year."""
    t = local.replace(tzinfo=None)
    if not any(w.contains(t) for w in windows):
        return None
    for _ in range(400):
        holding = [w for w in windows if w.contains(t)]
        if not holding:
            return t
        t = max(w.ends(t) for w in holding)
    return None


@dataclasses.dataclass(frozen=True)
class FreezeRule(Rule):
    """Denies while ``now`` (in ``timezone``, an IANA name) is inside one of ``windows``."""

    timezone: str = "UTC"
    windows: tuple[FreezeWindow, ...] = ()
    kind: str = dataclasses.field(default="freeze", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        from zoneinfo import ZoneInfo  # zoneinfo pulls sysconfig: only when a freeze rule is evaluated (#19)

        zone = ZoneInfo(self.timezone)
        local = ctx.now.astimezone(zone)
        for w in self.windows:
            if w.contains(local):
                until = freeze_ends(self.windows, local)
                if until is None:
                    when = "for over a year"
                else:
                    aware = until.replace(tzinfo=zone)
                    left = aware.astimezone(dt.UTC) - ctx.now.astimezone(dt.UTC)
                    when = f"until {aware:%Y-%m-%d %H:%M %Z} ({self.timezone}, {format_duration(left)} to go)"
                return self.result(False, f"frozen {when}: {w.reason}; now {local:%Y-%m-%d %H:%M %Z}")
        return self.result(True, f"no freeze window at {local:%Y-%m-%d %H:%M %Z} ({self.timezone})")


@dataclasses.dataclass(frozen=True)
class SoakRule(Rule):
    """The digest has been in the ``from`` stage for at least ``minimum``, per verified
    ``promotion/v1`` records signed by ``signers`` (the promoters)."""

    minimum: dt.timedelta = dt.timedelta(0)
    signers: tuple[KeySet, ...] = ()
    kind: str = dataclasses.field(default="soak", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        summary = f"{format_duration(self.minimum)} in {ctx.from_stage}"
        if ctx.from_stage == BUILD_STAGE:
            return self.result(False, "soak needs a previous stage; this stage takes builds", summary)
        entered: list[dt.datetime] = []
        notes: list[str] = []
        for a in ctx.evidence.attestations:
            if a.predicate_type != PROMOTION_V1:
                continue
            p = a.predicate
            if p.get("stage") != ctx.from_stage or p.get("digest") != ctx.evidence.digest:
                continue
            if not a.verified or ctx.evidence.digest not in a.subject_digests:
                notes.append(f"promotion record does not verify ({a.reason or 'unverifiable'})")
                continue
            if not sets_match(self.signers, a.signer, a.identity):
                notes.append(
                    f"promotion record signed by {signer_text(a.signer, a.identity, ctx.names)}, not a listed promoter"
                )
                continue
            if p.get("action", "promote") != "promote" or p.get("decision", {}).get("allowed") is False:
                continue
            when = parse_time(p.get("time"))
            if when is not None:
                entered.append(when)
        if not entered:
            found = ("; ".join(notes)) if notes else f"no promotion record shows this digest entering {ctx.from_stage}"
            return self.result(False, found + evidence_problems(ctx), summary)
        since = max(entered)
        age = ctx.now - since
        if age < self.minimum:
            left = self.minimum - age
            waiting = self.result(
                False,
                f"in {ctx.from_stage} since {since:%Y-%m-%dT%H:%M:%SZ} ({format_duration(age)}); "
                f"{format_duration(left)} to go",
                summary,
            )
            return dataclasses.replace(waiting, allowed_at=since + self.minimum)
        return self.result(
            True, f"in {ctx.from_stage} since {since:%Y-%m-%dT%H:%M:%SZ} ({format_duration(age)})", summary
        )
