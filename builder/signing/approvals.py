"""Approvals: a signed ``approval/v1`` in-toto attestation on one digest for one stage.

Predicate (docs/promotion.md): ``{"approver": {"fingerprint": "sha256:<hex of the signing key's
DER SPKI>", "name": <str|null>}, "stage": <stage>, "digest": "sha256:<hex>", "ticket": <str|null>,
"comment": <str|null>, "time": <RFC 3339 UTC>}``. The statement's subject is the digest too; a
policy counts an approval only when the subject, ``digest`` and ``stage`` all match the
promotion being decided (a replay onto another digest or stage does not count) and the signing
key belongs to a listed approver (``builder.policy.ApprovalRule``).

Errors: ``SigningError``/registry errors from ``builder.signing.attest.attest_image``. Judging an
approval against a policy before it is written: ``builder.policy.approvals``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.predicates import APPROVAL_V1
from builder.signing.attest import attest_image
from builder.signing.layer import WriteResult

if TYPE_CHECKING:
    from builder.registry import RegistryClient
    from builder.signing.signer import Signer


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
