"""Planning a promotion (the dry run): which digest moves from where to which stage pointer, and
whether policy allows it. Writes nothing.

The decision holds a ``source`` result (the digest exists and, for a stage that takes from
another stage, is what that stage holds), a failing ``chain`` row when the pointer names a digest
no trusted promotion record explains, then the stage's policy rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.policy import BUILD_STAGE, Decision, RuleResult, evaluate
from builder.promote.evidence import gather, with_baseline
from builder.promote.model import UNSET, Plan, PointerTrust, short_signer
from builder.promote.pool import Task
from builder.promote.records import pointer_trust
from builder.signing.layer import ATT_SUFFIX

if TYPE_CHECKING:
    from builder.promote.context import PromotionContext
    from builder.promote.listing import TagLists
    from builder.promote.location import Location, Target
    from builder.registry import Manifest


def source_digest(
    ctx: PromotionContext, target: Target, st_from: str, src: Location
) -> tuple[str | None, RuleResult, Manifest | None]:
    """(digest, the ``source`` rule result, the manifest as stored) of what is to be promoted from
    ``src`` (the previous stage's pointer, or the build's variant tag). Raises registry errors."""
    client = ctx.client(src.registry)
    if target.explicit:
        at = target.reference_location  # the reference names the digest; the stages are the variant's
        ref = target.digest or target.tag or ""
        manifest = ctx.client(at.registry).try_get_manifest(at.repository, ref)
        given = target.given or ref
        if manifest is None:
            return None, RuleResult("source", False, f"{given} does not exist"), None
        digest = manifest.digest
        if st_from == BUILD_STAGE:
            return digest, RuleResult("source", True, f"{given} is {digest}"), manifest
        held = client.try_resolve(src.repository, src.pointer_tag)
        if held != digest:
            return (
                digest,
                RuleResult(
                    "source",
                    False,
                    f"{digest} is not in stage {st_from} ({src} holds {held or 'nothing'}): promote it there first",
                ),
                manifest,
            )
        return digest, RuleResult("source", True, f"{given} is what {st_from} holds ({src})"), manifest
    manifest = client.try_get_manifest(src.repository, src.pointer_tag)
    if manifest is None:
        what = "no build pushed the variant tag" if st_from == BUILD_STAGE else f"not promoted to {st_from} yet"
        return None, RuleResult("source", False, f"{src} does not exist: {what}"), None
    return manifest.digest, RuleResult("source", True, f"{src} -> {manifest.digest}"), manifest


def chain_rows(ctx: PromotionContext, stage: str, trust: PointerTrust) -> tuple[RuleResult, ...]:
    """A failing ``chain`` row when the pointer names a digest no trusted promotion record explains
    (the promotion could only be refused at apply time: show it in the dry run)."""
    if trust.trusted:
        return ()
    return (RuleResult("chain", False, trust.note(ctx.promoter_names(stage))),)


def promoter_problem(ctx: PromotionContext) -> str | None:
    """Why the context's signing key cannot sign a trusted promotion record (None: it can, or no
    key is loaded): its fingerprint is in none of the policy's ``promoters`` key sets, so status,
    history and rollback would not trust what it signs. The one wording of the dry run's
    ``promoter`` row and of the apply's SigningKeyError (exit 16)."""
    signer = ctx.signer
    if signer is None or any(s.match(signer.fingerprint, None) for s in ctx.policy.promoters):
        return None
    listed = ", ".join(s.name for s in ctx.policy.promoters) or "none"
    return (
        f"key {short_signer(signer.fingerprint)} is not a promoter in {ctx.policy.path} (promoters: {listed}); "
        "records it signs would not be trusted by status, history and rollback"
    )


def promoter_rows(ctx: PromotionContext) -> tuple[RuleResult, ...]:
    """A failing ``promoter`` row when the dry run was given a key (``--key``) that is not a
    promoter: ``--confirm`` would refuse it (exit 16), so the plan must not read 'would promote'."""
    why = promoter_problem(ctx)
    return () if why is None else (RuleResult("promoter", False, f"{why}: sign with a promoter key (--key)"),)


Source = tuple["str | None", RuleResult, "Manifest | None"]
"""``source_digest``'s answer: (digest, the ``source`` rule result, the manifest as stored)."""


def plan_promotion(
    ctx: PromotionContext,
    target: Target,
    stage: str,
    *,
    ticket: str | None = None,
    listed: TagLists | None = None,
    source: Source | None = None,
) -> Plan:
    """Decide (without writing anything) the promotion of ``target`` into ``stage``.

    ``listed``: the tags of the batch's repositories (``promote_many``): a stage pointer or
    ``.sig``/``.att``/fallback index tag they show absent is not asked for (the pointer is read
    again under the stage lock before it moves). ``source``: ``source_digest`` as the caller
    already read it. Never raises for denied promotions; NotFoundError for an unknown stage;
    registry errors propagate."""
    st = ctx.policy.stage(stage)
    src = ctx.stage_location(target, st.source)
    dst = ctx.stage_location(target, stage)
    digest, source_result, manifest = source or source_digest(ctx, target, st.source, src)
    same = src.name == dst.name
    if digest is None:
        trust = pointer_trust(ctx, dst, stage)
        decision = Decision(stage, "", False, (source_result, *chain_rows(ctx, stage, trust)))
        return Plan(
            target,
            stage,
            st.source,
            src,
            None,
            dst,
            trust.digest,
            decision,
            ticket,
            trusted=trust.trusted,
            untrusted_signers=trust.foreign,
        )
    # the pointer and the records on what it names, read while the evidence is gathered; a source
    # stage's pointer must itself be trusted (the rule resolve applies), or a tag pushed onto the
    # previous stage by hand would choose what enters this one
    no_pointer = listed is not None and listed.absent(dst, dst.pointer_tag)
    trust_t = Task(lambda: pointer_trust(ctx, dst, stage, None if no_pointer else UNSET))
    try:
        got = gather(ctx, digest, stage, [src] if same else [src, dst], ticket=ticket, source_known=True, listed=listed)
    finally:
        trust = trust_t.result()
    # the source stage's records are on the digest's .att the evidence read just fetched (and its
    # layers' blobs are in the client's blob cache): verified from those, not fetched again
    src_att = got.source_manifests.get(ATT_SUFFIX, UNSET) if got.source_manifests is not None else UNSET
    src_trust = pointer_trust(ctx, src, st.source, digest, att=src_att) if st.source != BUILD_STAGE else None
    if src_trust is not None and not src_trust.trusted and source_result.passed:
        source_result = RuleResult(
            "source",
            False,
            f"{st.source} is not trusted: {src_trust.note(ctx.promoter_names(st.source))}; "
            f"`builder resolve {target.variant} --stage {st.source}` refuses it too",
        )
    present = same or got.present[-1]
    evidence = with_baseline(ctx, stage, dst, trust.digest, got.evidence)  # benchmark: {against: stage}
    policy_decision = evaluate(ctx.policy, stage, evidence, ctx.now())
    chain = chain_rows(ctx, stage, trust)
    signer_rows = promoter_rows(ctx)
    reasons = (source_result, *chain, *signer_rows, *policy_decision.reasons)
    allowed = source_result.passed and not chain and not signer_rows and policy_decision.allowed
    return Plan(
        target,
        stage,
        st.source,
        src,
        digest,
        dst,
        trust.digest,
        Decision(stage, digest, allowed, reasons),
        ticket,
        present,
        manifest,
        got.source_manifests,
        trust.trusted,
        trust.foreign,
    )
