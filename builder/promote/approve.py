"""``builder approve``: record a signed ``approval/v1`` of an image digest for one stage, after
judging it against the stage's policy (``builder.policy.approvals``), so that an approval the
policy would never count is reported when it is made, not when a promotion is denied.

Errors: NotFoundError (8) unknown stage or image; SigningKeyError (16) ``--name`` of another
approver; RegistryError / RegistryAuthError from the registry.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from builder.policy.approvals import plan_approval
from builder.registry import parse_reference
from builder.signing.approvals import Approval, ApprovalDocument, approve

if TYPE_CHECKING:
    from builder.promote.context import PromotionContext
    from builder.signing.signer import Signer


class ApproveDocument(ApprovalDocument):
    """``builder approve --json``: the approval written, the policy's name for the key
    (``approver``; None: the key is not a listed approver of the stage) and the ``warnings``
    (why the policy would never count it; empty when it would)."""

    approver: str | None
    warnings: list[str]


@dataclasses.dataclass(frozen=True)
class ApprovalOutcome:
    """The written approval, the policy's name for the key (None: unlisted), the warnings (why
    the policy would never count it) and ``who`` (the approver as shown to the user)."""

    approval: Approval
    listed_name: str | None
    warnings: tuple[str, ...]
    who: str

    def to_json(self) -> ApproveDocument:
        return {**self.approval.to_json(), "approver": self.listed_name, "warnings": list(self.warnings)}


def approve_reference(
    ctx: PromotionContext,
    reference: str,
    stage: str,
    signer: Signer,
    *,
    key_label: str,
    name: str | None = None,
    ticket: str | None = None,
    comment: str | None = None,
) -> ApprovalOutcome:
    """Judge against ``ctx.policy``, then attach the approval of ``reference``'s digest for
    ``stage`` signed by ``signer`` (its key file shown as ``key_label``), through the context's
    registry clients and locks. The policy's name for the key is recorded when it has one, else
    ``name``."""
    plan = plan_approval(ctx.policy, stage, signer.fingerprint, key_label=key_label, name=name, ticket=ticket)
    ref = parse_reference(reference, ctx.registry)
    client = ctx.client(ref.registry)
    digest = ref.digest or client.resolve(ref.repository, ref.ref)
    written = approve(
        client,
        ref.repository,
        digest,
        stage,
        signer,
        lock_dir=ctx.lock_dir,
        name=plan.recorded_name,
        ticket=ticket,
        comment=comment,
    )
    return ApprovalOutcome(written, plan.listed_name, plan.warnings, plan.who)
