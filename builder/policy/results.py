"""What a policy decides: each rule's ``RuleResult`` and the ``Decision`` for one promotion."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, NotRequired

from typing_extensions import TypedDict

if TYPE_CHECKING:
    import datetime as dt
    from collections.abc import Iterator


class RuleResultDocument(TypedDict):
    """One rule's result in ``--json``: ``rule`` (kind and summary), ``passed``, ``reason`` (for
    people), ``location`` (``file:line:col`` in the policy file, may be empty); ``notes``: evidence
    that did not count and why; ``children``: a group's rules."""

    rule: str
    passed: bool
    reason: str
    location: str
    notes: NotRequired[list[str]]
    children: NotRequired[list[RuleResultDocument]]


class DecisionDocument(TypedDict):
    """A policy decision for promoting ``digest`` (``sha256:<hex>``) into ``stage``."""

    stage: str
    digest: str
    allowed: bool
    reasons: list[RuleResultDocument]


@dataclasses.dataclass(frozen=True)
class RuleResult:
    """One rule's outcome. ``rule``: its kind and summary (``signature by build``); ``reason``: why
    it passed or failed, for people; ``location``: ``file:line:col`` of the rule in its policy file;
    ``children``: the results of a group's rules; ``notes``: every piece of evidence that did not
    count and why (JSON only); ``allowed_at``: for a rule that fails only because time has not
    passed yet (``soak``), the moment (UTC) from which it passes."""

    rule: str
    passed: bool
    reason: str
    location: str = ""
    children: tuple[RuleResult, ...] = ()
    notes: tuple[str, ...] = ()
    allowed_at: dt.datetime | None = None

    def to_json(self) -> RuleResultDocument:
        """``{"rule", "passed", "reason", "location"}`` plus ``notes`` and ``children`` when present."""
        out: RuleResultDocument = {
            "rule": self.rule,
            "passed": self.passed,
            "reason": self.reason,
            "location": self.location,
        }
        if self.notes:
            out["notes"] = list(self.notes)
        if self.children:
            out["children"] = [c.to_json() for c in self.children]
        return out

    def lines(self, indent: int = 0) -> Iterator[str]:
        """The result tree as text, one ``[pass]``/``[FAIL]`` line per rule, two spaces per level."""
        mark = "pass" if self.passed else "FAIL"
        yield f"{'  ' * indent}[{mark}] {self.rule}: {self.reason}" + (f"  ({self.location})" if self.location else "")
        for c in self.children:
            yield from c.lines(indent + 1)


@dataclasses.dataclass(frozen=True)
class Decision:
    """The verdict for promoting ``digest`` into ``stage``: ``allowed`` and each rule's result."""

    stage: str
    digest: str
    allowed: bool
    reasons: tuple[RuleResult, ...]

    def failed(self) -> list[RuleResult]:
        """The leaf rules that failed (for error messages)."""
        out: list[RuleResult] = []

        def walk(r: RuleResult) -> None:
            if r.passed:
                return
            leaves = [c for c in r.children if not c.passed]
            if not leaves:
                out.append(r)
            for c in leaves:
                walk(c)

        for r in self.reasons:
            walk(r)
        return out

    def allowed_at(self) -> dt.datetime | None:
        """When only time is missing (every failed rule is one that passes later, ``soak``): the
        moment (UTC) from which all of them pass; None when the promotion is allowed or some
        failed rule needs more than time (evidence, approvals, a ticket)."""
        failed = self.failed()
        times = [r.allowed_at for r in failed]
        if not failed or any(t is None for t in times):
            return None
        return max(t for t in times if t is not None)

    def to_json(self) -> DecisionDocument:
        """``{"stage", "digest", "allowed", "reasons": [RuleResult.to_json(), ...]}``."""
        return {
            "stage": self.stage,
            "digest": self.digest,
            "allowed": self.allowed,
            "reasons": [r.to_json() for r in self.reasons],
        }
