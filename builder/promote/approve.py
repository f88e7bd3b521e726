"""``builder approve``: record a signed ``approval/v1`` of an image digest for one stage, after
judging it against the stage's policy (``builder.policy.approvals``), so that an approval the
policy would never count is reported when it is made, not when a promotion is denied.

Errors: NotFoundError (8) unknown stage or image; SigningKeyError (16) ``--name`` of another
approver; RegistryError / RegistryAuthError from the registry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.policy.approvals import plan_approval
from builder.registry import parse_reference
from builder.signing.approvals import Approval, approve

if TYPE_CHECKING:
    from builder.policy import Policy
    from builder.registry import RegistryClient
    from builder.signing.signer import Signer


@dataclasses.dataclass(frozen=True)
class ApprovalOutcome:
    """The written approval, the policy's name for the key (None: unlisted), the warnings (why
    the policy would never count it) and ``who`` (the approver as shown to the user)."""

    approval: Approval
    listed_name: str | None
    warnings: tuple[str, ...]
    who: str

    def to_json(self) -> dict[str, Any]:
        return {**self.approval.to_json(), "approver": self.listed_name, "warnings": list(self.warnings)}


def approve_reference(
    reference: str,
    stage: str,
    signer: Signer,
    *,
    policy: Policy,
    clients: Callable[[str], RegistryClient],
    default_registry: str,
    lock_dir: Path,
    key_label: str,
    name: str | None = None,
    ticket: str | None = None,
    comment: str | None = None,
) -> ApprovalOutcome:
    """Judge, then attach the approval of ``reference``'s digest for ``stage`` signed by
    ``signer`` (its key file shown as ``key_label``). The policy's name for the key is recorded
    when it has one, else ``name``."""
    plan = plan_approval(policy, stage, signer.fingerprint, key_label=key_label, name=name, ticket=ticket)
    ref = parse_reference(reference, default_registry)
    client = clients(ref.registry)
    digest = ref.digest or client.resolve(ref.repository, ref.ref)
    written = approve(
        client,
        ref.repository,
        digest,
        stage,
        signer,
        lock_dir=lock_dir,
        name=plan.recorded_name,
        ticket=ticket,
        comment=comment,
    )
    return ApprovalOutcome(written, plan.listed_name, plan.warnings, plan.who)
