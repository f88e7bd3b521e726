"""Approvals: a signed ``approval/v1`` in-toto attestation on one digest for one stage.

Predicate (docs/promotion.md): ``{"approver": {"fingerprint": "sha256:<hex of the signing key's
DER SPKI>", "name": <str|null>}, "stage": <stage>, "digest": "sha256:<hex>", "ticket": <str|null>,
"comment": <str|null>, "time": <RFC 3339 UTC>}``. The statement's subject is the digest too; a
policy counts an approval only when the subject, ``digest`` and ``stage`` all match the
promotion being decided (a replay onto another digest or stage does not count) and the signing
key belongs to a listed approver (``builder.policy.ApprovalRule``).

Errors: ``SigningError``/registry errors from ``builder.attest.attest_image``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.predicates import APPROVAL_V1

if TYPE_CHECKING:
    from builder.policy import Policy
    from builder.registry import RegistryClient
    from builder.sign import Signer, WriteResult


@dataclasses.dataclass(frozen=True)
class Approval:
    """What was written: the reference approved, the predicate and the attestation write."""

    reference: str
    predicate: dict[str, Any]
    write: WriteResult

    def to_json(self) -> dict[str, Any]:
        return {"reference": self.reference, "predicate": self.predicate, "write": self.write.to_json()}


def approval_predicate(
    digest: str,
    stage: str,
    fingerprint: str,
    *,
    name: str | None = None,
    ticket: str | None = None,
    comment: str | None = None,
    now: dt.datetime,
) -> dict[str, Any]:
    """The ``approval/v1`` predicate for ``digest`` and ``stage`` (see module docstring)."""
    return {
        "approver": {"fingerprint": fingerprint, "name": name},
        "stage": stage,
        "digest": digest,
        "ticket": ticket,
        "comment": comment,
        "time": now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }


def approve(
    client: RegistryClient,
    repository: str,
    digest: str,
    stage: str,
    signer: Signer,
    *,
    lock_dir: Path,
    name: str | None = None,
    ticket: str | None = None,
    comment: str | None = None,
    now: dt.datetime | None = None,
) -> Approval:
    """Attach a signed approval of ``repository@digest`` for ``stage`` (in ``repository``'s ``.att``)."""
    from builder.attest import attest_image

    pred = approval_predicate(
        digest,
        stage,
        signer.fingerprint,
        name=name,
        ticket=ticket,
        comment=comment,
        now=now or dt.datetime.now(dt.UTC),
    )
    write = attest_image(client, repository, digest, APPROVAL_V1, pred, signer, lock_dir=lock_dir)
    return Approval(f"{client.registry}/{repository}@{digest}", pred, write)


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
    import re

    from builder.policy import ApprovalRule, ChangeTicketRule

    rules = list(policy.stage(stage).require.walk())
    name = next((a.name for a in policy.approvers if a.key.fingerprint == fingerprint), None)
    who = name or f"key {fingerprint[:19]}…"
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
