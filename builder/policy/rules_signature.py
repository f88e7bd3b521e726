"""The ``signature`` policy rule: at least ``count`` verified image signatures on the digest by keys
of the listed key sets (docs/policies.md). In a module of its own because it is the rule most
stages have, often alone (``dev: require: signature``): a stage's rules are imported when it is
decided (``builder.policy.cache.StoredRule``), and a signature-only stage then creates none of the
other evidence rules' classes (``builder.policy.rules_evidence``: attestation, provenance, device
check, fleet; a frozen dataclass costs about 0.6 ms to create on Python 3.11, issue 19).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from builder.labels import PROMOTION_ROLE
from builder.policy.rules import Notes, Rule, evidence_problems
from builder.policy.signers import KeySet, key_problems, sets_match, sets_names, signer_text

if TYPE_CHECKING:
    from builder.policy.evidence import Context
    from builder.policy.results import RuleResult


@dataclasses.dataclass(frozen=True)
class SignatureRule(Rule):
    """At least ``count`` verified image signatures on the digest by keys of ``signers``. A
    promotion signature (its signed payload names the promotion role,
    ``builder.labels.PROMOTION_ROLE``: written when a promotion copied the digest into another
    repository) never counts, whoever's key made it: it says where the digest was promoted, not
    who built it (the promotion itself is evidenced by its record: ``soak``/``promoted`` rules)."""

    signers: tuple[KeySet, ...] = ()
    count: int = 1
    kind: str = dataclasses.field(default="signature", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        summary = f"by {sets_names(self.signers)}"
        good: set[str] = set()
        notes = Notes(self.signers, "signature")
        for s in ctx.evidence.signatures:
            who = signer_text(s.signer, s.identity, ctx.names)
            if not s.verified and s.untrusted:
                notes.add_foreign(f"signature by {who} does not verify ({s.reason or 'unverifiable'})")
            elif not s.verified:
                notes.add(f"signature by {who} does not verify ({s.reason or 'unverifiable'})", s.signer, s.identity)
            elif s.role == PROMOTION_ROLE:
                notes.add(
                    f"signature by {who} is a promotion signature (written when the digest was promoted into "
                    "this repository), not an image signature: not counted",
                    s.signer,
                    s.identity,
                )
            elif not sets_match(self.signers, s.signer, s.identity):
                notes.add(f"signature by {who} is not from a listed key", s.signer, s.identity)
            else:
                good.add(s.signer or repr(s.identity))
        if len(good) >= self.count:
            return self.result(
                True, f"{len(good)} verified signature(s) by {sets_names(self.signers)}", summary, notes=notes
            )
        found = notes.text() if notes else "no signature found on the digest"
        return self.result(
            False,
            f"needs {self.count} verified signature(s) by {sets_names(self.signers)}, has {len(good)}: {found}"
            + key_problems(self.signers)
            + evidence_problems(ctx),
            summary,
            notes=notes,
        )


__all__ = ["SignatureRule"]
