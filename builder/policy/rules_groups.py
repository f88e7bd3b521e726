"""The rules that read no evidence: the groups ``all_of`` (every rule passes) and ``any_of`` (one
of them does), and ``unconditional`` (every digest may enter the stage), on the ``Rule`` base of
:mod:`builder.policy.rules`.

A module of their own: a stage's rules are built when first used (``builder.policy.cache``), so a
command that reads the policy but evaluates no rule (``builder resolve``, ``status``, ``history``)
creates none of these classes (each frozen dataclass costs about 1 ms of start-up; issue 19).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from builder.policy.rules import Rule

if TYPE_CHECKING:
    from collections.abc import Iterator

    from builder.policy.evidence import Context
    from builder.policy.results import RuleResult


@dataclasses.dataclass(frozen=True)
class AllOf(Rule):
    """Passes when every rule of ``rules`` passes. Raises ValueError when ``rules`` is empty."""

    rules: tuple[Rule, ...] = ()
    kind: str = dataclasses.field(default="all_of", init=False)

    def __post_init__(self) -> None:
        if not self.rules:
            raise ValueError("an empty all_of would allow everything; list at least one rule")

    def evaluate(self, ctx: Context) -> RuleResult:
        results = [r.evaluate(ctx) for r in self.rules]
        failed = [r for r in results if not r.passed]
        reason = f"all {len(results)} rules pass" if not failed else f"{len(failed)} of {len(results)} rules fail"
        return self.result(not failed, reason, children=results)

    def walk(self) -> Iterator[Rule]:
        yield self
        for r in self.rules:
            yield from r.walk()


@dataclasses.dataclass(frozen=True)
class AnyOf(Rule):
    """Passes when at least one rule of ``rules`` passes. Raises ValueError when ``rules`` is empty."""

    rules: tuple[Rule, ...] = ()
    kind: str = dataclasses.field(default="any_of", init=False)

    def __post_init__(self) -> None:
        if not self.rules:
            raise ValueError("an empty any_of can never pass; list at least one rule")

    def evaluate(self, ctx: Context) -> RuleResult:
        results = [r.evaluate(ctx) for r in self.rules]
        passed = [r for r in results if r.passed]
        reason = f"{len(passed)} of {len(results)} alternatives pass" if passed else "no alternative passes"
        return self.result(bool(passed), reason, children=results)

    def walk(self) -> Iterator[Rule]:
        yield self
        for r in self.rules:
            yield from r.walk()


@dataclasses.dataclass(frozen=True)
class Unconditional(Rule):
    """Explicitly lets every digest in (e.g. ``dev`` takes every build); ``why`` is shown."""

    why: str = ""
    kind: str = dataclasses.field(default="unconditional", init=False)

    def evaluate(self, _ctx: Context) -> RuleResult:
        return self.result(True, self.why or "unconditional")
