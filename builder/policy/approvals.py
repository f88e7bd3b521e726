"""Judge an approval against a promotion policy before it is written (pure).

Which listed approver a signing key is, whether ``--name`` may be recorded for it, and why the
policy would never count the approval (``builder.policy.ApprovalRule`` / ``ChangeTicketRule`` of
the stage; docs/promotion.md).

Errors: ``NotFoundError`` (8) for a stage the policy does not define; ``SigningKeyError`` (16)
when ``name`` is a listed approver whose key is not the signing key.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from builder.errors import SigningKeyError
from builder.policy.rules_change import ApprovalRule, ChangeTicketRule
from builder.signing.fingerprints import short_fingerprint

if TYPE_CHECKING:
    from builder.policy.model import Policy


@dataclasses.dataclass(frozen=True)
class ApproverCheck:
    """What a policy makes of an approval before it is written. ``name``: the listed approver
    whose key signs it (None: an unlisted key); ``warnings``: why it would never count (the key is
    no approver of the stage's approvals rules, the ticket does not match the stage's
    ``change_ticket`` pattern or is missing where a rule needs the same ticket)."""

    name: str | None
    warnings: tuple[str, ...]


def check_approver(policy: Policy, stage: str, fingerprint: str, ticket: str | None) -> ApproverCheck:
    """Pure: judge an approval of ``stage`` signed by ``fingerprint`` with ``ticket`` against
    ``policy`` (``builder.policy.ApprovalRule``/``ChangeTicketRule`` of the stage). Raises
    NotFoundError for an unknown stage."""
    rules = list(policy.stage(stage).require.walk())
    name = next((a.name for a in policy.approvers if a.key.fingerprint == fingerprint), None)
    who = name or f"key {short_fingerprint(fingerprint)}"
    warnings: list[str] = []
    approvals = [r for r in rules if isinstance(r, ApprovalRule)]
    if not approvals:
        warnings.append(f"stage {stage} has no approvals rule in {policy.path}: this approval changes no decision")
    for r in approvals:
        if not any(a.key.fingerprint == fingerprint for a in r.approvers):
            listed = ", ".join(a.name for a in r.approvers)
            warnings.append(
                f"{who} is not a listed approver of stage {stage} ({listed}; {r.location}): "
                "this approval will never count"
            )
        if r.same_ticket and not ticket:
            warnings.append(
                f"stage {stage} counts only approvals naming the change ticket ({r.location}): pass --ticket"
            )
    for t in (r for r in rules if isinstance(r, ChangeTicketRule)):
        if ticket and re.fullmatch(t.pattern, ticket) is None:
            warnings.append(
                f"ticket {ticket!r} does not match stage {stage}'s change_ticket pattern {t.pattern} ({t.location})"
            )
    return ApproverCheck(name, tuple(dict.fromkeys(warnings)))


@dataclasses.dataclass(frozen=True)
class ApprovalPlan:
    """What ``builder approve`` records and says: ``recorded_name`` (the name written into the
    predicate: the policy's name for the key, else the ``--name`` given), ``listed_name`` (the
    policy's name for the key; None: an unlisted key), ``warnings`` (why the policy would never
    count it, and an ignored ``--name``) and ``who`` (the approver as shown to the user)."""

    recorded_name: str | None
    listed_name: str | None
    warnings: tuple[str, ...]
    who: str


def plan_approval(
    policy: Policy, stage: str, fingerprint: str, *, key_label: str, name: str | None, ticket: str | None
) -> ApprovalPlan:
    """Pure: the approval of ``stage`` signed by the key ``fingerprint`` (read from ``key_label``, a
    path as the user gave it) claiming ``name`` with ``ticket``, judged against ``policy``.

    Raises NotFoundError for a stage ``policy`` does not define, SigningKeyError when ``name`` is a
    listed approver whose key is not ``fingerprint`` (the listed name only for that approver's key)."""
    policy.stage(stage)
    check = check_approver(policy, stage, fingerprint, ticket)
    claimed = next((a for a in policy.approvers if a.name == name), None) if name else None
    if claimed is not None and claimed.key.fingerprint != fingerprint:
        raise SigningKeyError(
            f"--name {name}: {key_label} ({short_fingerprint(fingerprint)}) is not {name}'s key in {policy.path} "
            f"({short_fingerprint(claimed.key.fingerprint or 'unusable')})",
            hint=f"sign with {name}'s key, or drop --name",
        )
    warnings = list(check.warnings)
    if check.name is not None and name is not None and name != check.name:
        warnings.append(f"--name {name} ignored: the policy lists this key as {check.name}")
    short = short_fingerprint(fingerprint)
    who = check.name or (f"{short} (unlisted key, calls itself {name!r})" if name else f"{short} (unlisted key)")
    return ApprovalPlan(check.name or name, check.name, tuple(warnings), who)
