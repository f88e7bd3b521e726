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
from typing import TYPE_CHECKING

from typing_extensions import TypedDict

from builder.predicates import APPROVAL_V1
from builder.signing.attest import attest_image
from builder.signing.layer import WriteResult, WriteResultDocument

if TYPE_CHECKING:
    from pathlib import Path

    from builder.registry import RegistryClient
    from builder.signing.signer import Signer


class ApproverDocument(TypedDict):
    """Who approves: the signing key's ``fingerprint`` and the recorded ``name`` (None: none)."""

    fingerprint: str
    name: str | None


class ApprovalPredicate(TypedDict):
    """The ``approval/v1`` predicate (see the module docstring); ``time``: RFC 3339 UTC."""

    approver: ApproverDocument
    stage: str
    digest: str
    ticket: str | None
    comment: str | None
    time: str


class ApprovalDocument(TypedDict):
    """An approval written: the ``reference`` approved (``registry/repository@sha256:...``), its
    ``predicate`` and the attestation ``write``."""

    reference: str
    predicate: ApprovalPredicate
    write: WriteResultDocument


@dataclasses.dataclass(frozen=True)
class Approval:
    """What was written: the reference approved, the predicate and the attestation write."""

    reference: str
    predicate: ApprovalPredicate
    write: WriteResult

    def to_json(self) -> ApprovalDocument:
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
) -> ApprovalPredicate:
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
    """Attach a signed approval of ``repository@digest`` for ``stage``: first under the approver's
    own tag (``approval_suffix``: no other approver writes it, so approvers on separate machines
    approving at once never overwrite each other), then in the ``.att`` manifest as well (what
    cosign and other verifiers read; a layer lost there to a concurrent writer is still under the
    approver's tag). The returned write is the approver's tag's (``appended`` False: already
    approved with the same statement)."""
    pred = approval_predicate(
        digest,
        stage,
        signer.fingerprint,
        name=name,
        ticket=ticket,
        comment=comment,
        now=now or dt.datetime.now(dt.UTC),
    )
    own = approval_suffix(signer.fingerprint)
    write = attest_image(client, repository, digest, APPROVAL_V1, pred, signer, lock_dir=lock_dir, suffix=own)
    attest_image(client, repository, digest, APPROVAL_V1, pred, signer, lock_dir=lock_dir)
    return Approval(f"{client.registry}/{repository}@{digest}", pred, write)


def approval_suffix(fingerprint: str) -> str:
    """The tag suffix of one approver's own approvals of a digest: ``.approval-<16 hex of the key
    fingerprint>.att`` (``sha256-<hex>.approval-3f1c….att``, 101 characters: within the 128 a tag
    may have, https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pulling-manifests;
    ending in ``.att``: the same attestation-manifest layout as cosign's ``.att``). Keyless signers
    (an identity, not a fingerprint) use a hash of the identity."""
    import hashlib

    algo, _, hexpart = fingerprint.partition(":")
    if algo != "sha256" or len(hexpart) < 16:
        hexpart = hashlib.sha256(fingerprint.encode()).hexdigest()
    return f".approval-{hexpart[:16]}.att"
