"""The policy rule: the ``Rule`` base class and the helpers the evidence rules share to read signed
evidence and say why it did not count.

The rules that read no evidence, the groups ``all_of`` / ``any_of`` and ``unconditional``, live in
``rules_groups``; the rule kinds that read evidence in ``rules_evidence`` (signature, attestation,
provenance, device check, fleet) and ``rules_change`` (approvals, change ticket, freeze, soak).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from builder.policy.signers import KeySet, sets_match, sets_names, signer_text
from builder.signing.fingerprints import short_fingerprint

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from builder.policy.evidence import AttestationEvidence, Context
    from builder.policy.results import RuleResult


@dataclasses.dataclass(frozen=True)
class Rule:
    """Base class of every policy rule: ``location`` is ``file:line:col`` of the rule in its policy
    file; ``kind`` the rule's name in YAML. Subclasses implement ``evaluate``."""

    location: str

    kind: str = dataclasses.field(default="rule", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:  # pragma: no cover - abstract
        """This rule's result for ``ctx``; never raises for missing evidence (it fails)."""
        raise NotImplementedError

    def result(
        self,
        passed: bool,
        reason: str,
        summary: str = "",
        children: Iterable[RuleResult] = (),
        notes: Notes | None = None,
    ) -> RuleResult:
        """A ``RuleResult`` of this rule (``kind`` + ``summary``, its location, every note)."""
        from builder.policy.results import RuleResult  # evaluation only: reading a policy never builds results

        rule = f"{self.kind}" + (f" {summary}" if summary else "")
        return RuleResult(rule, passed, reason, self.location, tuple(children), notes.all() if notes else ())

    def walk(self) -> Iterator[Rule]:
        """This rule and, for groups, every rule below it (depth first)."""
        yield self


class Notes:
    """Why evidence did not count, for a rule's reason, people first: notes about evidence signed
    by the rule's own key sets, then by other keys the policy lists, each line once; evidence by
    keys the policy does not list is summarised as a count. ``all()`` keeps every line (JSON).

    ``what`` names the evidence in the count (``signature``, ``device check``)."""

    def __init__(self, signers: Sequence[KeySet], what: str) -> None:
        self.signers, self.what = signers, what
        self.own: list[str] = []
        self.other: list[str] = []
        self.foreign: list[str] = []

    def add(self, text: str, signer: str | None = None, identity: tuple[str, str] | None = None) -> None:
        """A note about evidence by ``signer`` (None: about the rule's own evidence)."""
        mine = (signer is None and identity is None) or sets_match(self.signers, signer, identity)
        (self.own if mine else self.other).append(text)

    def add_foreign(self, text: str) -> None:
        """A note about evidence by a key the policy does not list (shown as a count)."""
        self.foreign.append(text)

    def __bool__(self) -> bool:
        return bool(self.own or self.other or self.foreign)

    def lines(self) -> list[str]:
        """The notes for people: own, then other listed signers, then the count of foreign ones."""
        out = list(dict.fromkeys([*self.own, *self.other]))
        n = len(self.foreign)
        if n:
            keys = [short_fingerprint(k.fingerprint) for s in self.signers for k in s.keys if k.fingerprint]
            keys += [f"{k.issuer} {k.subject}" for s in self.signers for k in s.keys if k.issuer]
            given = f"{sets_names(self.signers)}: {', '.join(keys) or 'no usable key'}"
            if out:
                out.append(f"+{n} {self.what}(s) by keys this policy does not list")
            else:
                out.append(f"{n} {self.what}(s) by keys this policy does not list (none of {given} made them)")
        return out

    def text(self) -> str:
        """``lines()`` joined with ``; ``."""
        return "; ".join(self.lines())

    def all(self) -> tuple[str, ...]:
        """Every note, each once, foreign ones included (for ``RuleResult.notes``)."""
        return tuple(dict.fromkeys([*self.own, *self.other, *self.foreign]))


def signed_by(
    ctx: Context, predicate_type: str, signers: Sequence[KeySet], what: str, unlisted: str, notes: Notes
) -> Iterator[tuple[AttestationEvidence, str]]:
    """Each verified ``predicate_type`` attestation about the digest by one of ``signers``, with its
    signer as text. Why each other one does not count goes to ``notes``: ``what`` names them in the
    note (``provenance``); ``unlisted`` is the note for a valid one by another signer (``{who}``)."""
    for a in ctx.evidence.attestations:
        if a.predicate_type != predicate_type:
            continue
        who = signer_text(a.signer, a.identity, ctx.names)
        if not a.verified and a.untrusted:
            notes.add_foreign(f"{what} by {who} does not verify ({a.reason or 'unverifiable'})")
        elif not a.verified:
            notes.add(f"{what} by {who} does not verify ({a.reason or 'unverifiable'})", a.signer, a.identity)
        elif ctx.evidence.digest not in a.subject_digests:
            notes.add(f"{what} by {who} is about another digest", a.signer, a.identity)
        elif not sets_match(signers, a.signer, a.identity):
            notes.add(unlisted.format(who=who), a.signer, a.identity)
        else:
            yield a, who


def evidence_problems(ctx: Context) -> str:
    """``"; evidence unreadable: ..."`` when some evidence could not be read, else empty."""
    return ("; evidence unreadable: " + "; ".join(ctx.evidence.problems)) if ctx.evidence.problems else ""
