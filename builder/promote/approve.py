"""``builder approve``: record a signed ``approval/v1`` of an image digest for one stage, after
judging it against the stage's policy (``builder.policy.approvals``), so that an approval the
policy would never count is reported when it is made, not when a promotion is denied.

Decisions (#20): a key the policy does not list as an approver is refused (SigningKeyError,
exit 16) unless ``allow_unlisted`` (``--unlisted``: an approver whose listing is not merged yet),
since its approval would never count; approving by tag resolves the tag and says which digest
was approved (the approval is for the digest, never the tag), or with ``strict`` refuses a tag
(ConfigError, exit 2); a digest promote never promotes (a platform manifest of an indexed build,
whose index's approvals promote reads; an attestation manifest or another artifact:
``builder.promote.targets.never_promoted``) is approved with a warning naming the index;
approving a digest the key already approved for the stage writes the new approval and notes that it counts once.

Errors: NotFoundError (8) unknown stage or image; SigningKeyError (16) ``--name`` of another
approver, or an unlisted key; ConfigError (2) a tag with ``strict``; RegistryError /
RegistryAuthError from the registry.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from builder.errors import BuilderError, ConfigError, SigningKeyError
from builder.policy.approvals import plan_approval
from builder.promote.targets import never_promoted, scope_of
from builder.registry import parse_reference
from builder.signing.approvals import Approval, ApprovalDocument, approve

if TYPE_CHECKING:
    from builder.promote.context import PromotionContext
    from builder.registry import RegistryClient
    from builder.signing.signer import Signer


class ApproveDocument(ApprovalDocument):
    """``builder approve --json``: the approval written, the policy's name for the key
    (``approver``; None: the key is not a listed approver of the stage) and the ``warnings``
    (why the policy would never count it; empty when it would)."""

    approver: str | None
    warnings: list[str]
    digest: str
    notes: list[str]


@dataclasses.dataclass(frozen=True)
class ApprovalOutcome:
    """The written approval, the policy's name for the key (None: unlisted), the warnings (why
    the policy would never count it) and ``who`` (the approver as shown to the user)."""

    approval: Approval
    listed_name: str | None
    warnings: tuple[str, ...]
    who: str
    digest: str = ""
    notes: tuple[str, ...] = ()  # the digest a tag named; an earlier approval by the same key

    def to_json(self) -> ApproveDocument:
        return {
            **self.approval.to_json(),
            "approver": self.listed_name,
            "warnings": list(self.warnings),
            "digest": self.digest,
            "notes": list(self.notes),
        }


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
    allow_unlisted: bool = False,
    strict: bool = False,
) -> ApprovalOutcome:
    """Judge against ``ctx.policy``, then attach the approval of ``reference``'s digest for
    ``stage`` signed by ``signer`` (its key file shown as ``key_label``), through the context's
    registry clients and locks. The policy's name for the key is recorded when it has one, else
    ``name``."""
    ref = parse_reference(reference, ctx.registry)  # what the user typed is checked first (exit 2)
    if ref.digest is None and strict and ref.ref:  # ``ref.ref`` raises for neither tag nor digest
        raise ConfigError(
            f"{reference} is a tag: --strict approves only a digest (a tag can move after review)",
            hint=f"approve {ref.registry}/{ref.repository}@sha256:… (`builder status` shows the digest)",
        )
    plan = plan_approval(ctx.policy, stage, signer.fingerprint, key_label=key_label, name=name, ticket=ticket)
    if plan.listed_name is None and not allow_unlisted:
        raise SigningKeyError(
            f"key {key_label} is not an approver in {ctx.policy.path}: its approval of {stage} would never count",
            hint="approve with your listed key (--key), or pass --unlisted to record it anyway (e.g. the policy "
            "change listing you is not merged yet)",
        )
    client = ctx.client(ref.registry)
    notes: list[str] = []
    if ref.digest is None:
        digest = client.resolve(ref.repository, ref.ref)
        notes.append(f"{reference} names {digest} now: that digest is approved, not the tag")
    else:
        digest = ref.digest
    never = never_promoted(scope_of(ctx), ref, digest)  # an attestation, a platform manifest of an index
    earlier = earlier_approvals(client, ref.repository, digest, stage, signer.fingerprint)
    if earlier:
        notes.append(
            f"this key already approved {digest[:19]}… for {stage} ({', '.join(earlier)}): "
            "the new approval is recorded too and counts once"
        )
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
    warnings = (*plan.warnings, never) if never is not None else plan.warnings
    return ApprovalOutcome(written, plan.listed_name, warnings, plan.who, digest, tuple(notes))


def earlier_approvals(client: RegistryClient, repository: str, digest: str, stage: str, fingerprint: str) -> list[str]:
    """Times of the approvals of ``digest`` for ``stage`` already under this key's own tag
    (``builder.signing.approvals.approval_suffix``; read for a note only, not verified: the
    policy verifies every approval it counts). Each layer's envelope is read as status and
    promote read it (``builder.signing.layer.fetch_blob``): the copy its descriptor carries in
    ``dev.builder-project/envelope`` when its size and sha256 are the layer's, else the blob:
    one request (the manifest) for approvals builder wrote."""
    import base64

    from builder.registry.manifest import load_json
    from builder.signing.approvals import approval_suffix
    from builder.signing.layer import evidence_layers, fetch_blob, signature_tag

    tag = signature_tag(digest, approval_suffix(fingerprint))
    m = client.try_get_manifest(repository, tag)
    times: list[str] = []
    for d in evidence_layers(m.json if m is not None else None, f"{client.registry}/{repository}:{tag}"):
        try:
            blob = fetch_blob(client, repository, d) if isinstance(d, dict) else None
            if blob is None:  # no blob under that digest: no note
                continue
            envelope = load_json(blob)
            pred = load_json(base64.b64decode(envelope["payload"])).get("predicate") or {}
        except (ValueError, KeyError, TypeError, BuilderError):
            continue  # unreadable: no note, nothing else depends on it
        if pred.get("stage") == stage and pred.get("digest") == digest:
            times.append(str(pred.get("time")))
    return times
