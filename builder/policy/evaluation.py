"""Evaluating a policy: ``evaluate(policy, stage, evidence, now) -> Decision``.

Pure: the evidence is a frozen value gathered from the registry by ``builder.promote`` (signatures
and attestations already verified against the policy's keys; the rules only bind them to who may
sign what). Fail closed: missing, unreadable or unverifiable evidence denies, and each
``RuleResult`` names the rule, its location in the policy file and why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.policy.evidence import Context, Evidence
from builder.policy.results import Decision, RuleResult
from builder.policy.signers import key_names

if TYPE_CHECKING:
    import datetime as dt

    from builder.policy.model import Policy

_ODD_EVIDENCE = (LookupError, TypeError, ValueError, AttributeError)
"""What a rule raises on evidence of an unexpected shape (e.g. a list where a predicate has an
object): the rule denies with the error instead. Anything else propagates (and allows nothing)."""


def evaluate(policy: Policy, stage: str, evidence: Evidence, now: dt.datetime) -> Decision:
    """Evaluate the promotion of ``evidence.digest`` into ``stage`` at ``now`` (aware datetime).

    Returns a Decision whose ``reasons`` hold the stage's rule tree with each result. Never
    raises for missing or oddly shaped evidence: it denies (fail closed). Raises NotFoundError
    for an unknown stage, ValueError for a naive ``now``."""
    st = policy.stage(stage)
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    names = key_names(policy.keysets, policy.approvers)
    ctx = Context(stage=stage, from_stage=st.source, now=now, evidence=evidence, names=names)
    try:
        top = st.require.evaluate(ctx)
    except _ODD_EVIDENCE as exc:  # a rule failing on odd evidence must deny, not allow
        top = RuleResult(
            st.require.kind, False, f"rule failed on the evidence: {type(exc).__name__}: {exc}", st.require.location
        )
    return Decision(stage=stage, digest=evidence.digest, allowed=top.passed, reasons=(top,))
