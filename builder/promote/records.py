"""Promotion records in the registry: the signed ``promotion/v1`` attestations on a digest, which of
them count (verified, signed by a promoter or a listed roll-backer of the stage, naming this
digest and pointer), whether a stage pointer is trusted, and the history chain through the
records' ``previous`` digests.

Reads only the registry, so every query works on a fresh machine. Errors: registry errors
(exit 5-7) propagate; NotFoundError for an unknown stage or a pointer that does not exist.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.errors import NotFoundError
from builder.predicates import PROMOTION_V1
from builder.promote.evidence import keyless_identity
from builder.promote.model import UNSET, Location, PointerTrust, PromotionRecord, Target, Unset, short_signer
from builder.promote.pool import map_parallel
from builder.signing.layer import ATT_SUFFIX, PREDICATE_TYPE_ANNOTATION, signature_tag
from builder.signing.verifiers import verifiers_for
from builder.signing.verify import verify_layer

if TYPE_CHECKING:
    import datetime as dt

    from builder.promote.context import PromotionContext


def read_records(ctx: PromotionContext, loc: Location, digest: str, stage: str) -> list[PromotionRecord]:
    """Trusted ``promotion/v1`` records on ``digest`` in ``loc``'s repository for ``loc`` (the
    stage pointer): verified, signed by a promoter (or a listed roll-backer), naming this digest
    and pointer. Oldest first."""
    return read_records_and_foreign(ctx, loc, digest, stage)[0]


def read_records_and_foreign(
    ctx: PromotionContext, loc: Location, digest: str, stage: str
) -> tuple[list[PromotionRecord], tuple[str, ...]]:
    """``read_records`` plus, for every other ``promotion/v1`` layer on the digest, who signed it
    (as text: ``sha256:…`` with the key set it belongs to, or what the layer claims), deduplicated:
    the records that do not count, for the note on an untrusted pointer."""
    signers = ctx.record_signers(stage)
    client = ctx.client(loc.registry)
    tag = signature_tag(digest, ATT_SUFFIX)
    att = client.try_get_manifest(loc.repository, tag)
    # only layers announcing promotion/v1 are verified (the signed statement must say so too:
    # check_attestation_layer rejects an annotation that differs from the signed type)
    layers = [
        d
        for d in (att.json.get("layers") or [] if att is not None else [])
        if isinstance(d, dict) and (d.get("annotations") or {}).get(PREDICATE_TYPE_ANNOTATION) == PROMOTION_V1
    ]
    verifiers = verifiers_for(ctx.keys, ctx.verifiers)
    items = map_parallel(lambda d: verify_layer(client, loc.repository, digest, d, verifiers, tag=tag), layers)
    out: list[PromotionRecord] = []
    foreign: list[str] = []
    for it in items:
        ident = keyless_identity(it.signer)
        if not it.ok:
            if it.untrusted:
                claim = f"{short_signer(it.signer)} (claimed, unverified)" if it.signer else "an unnamed key"
                foreign.append(f"{claim}, a key this policy does not list")
            else:
                foreign.append(f"{short_signer(it.signer)} (does not verify: {it.reason})")
            continue
        rec = (
            PromotionRecord.from_predicate(it.predicate, signer=it.signer, layer=it.layer_digest)
            if it.predicate
            else None
        )
        if rec is None or rec.stage != stage or rec.digest != digest or rec.reference != str(loc):
            continue
        if not any(s.match(it.signer, ident) for s in signers):
            sets = [s.name for s in ctx.policy.keysets if s.match(it.signer, ident)]
            named = ctx.name_of(it.signer or "")
            where = f"key set {', '.join(sets)}" if sets else (f"approver {named}" if named else "listed")
            foreign.append(f"{short_signer(it.signer)} ({where}, not a promoter of {stage})")
            continue
        out.append(rec)
    out.sort(key=lambda r: r.when)
    return out, tuple(dict.fromkeys(foreign))


def pointer_trust(ctx: PromotionContext, loc: Location, stage: str, digest: str | Unset | None = UNSET) -> PointerTrust:
    """Read the pointer ``loc`` (unless ``digest``, what it names, is given) and its records."""
    if isinstance(digest, Unset):
        digest = ctx.client(loc.registry).try_resolve(loc.repository, loc.pointer_tag)
    if digest is None:
        return PointerTrust(loc, None, None)
    recs, foreign = read_records_and_foreign(ctx, loc, digest, stage)
    return PointerTrust(loc, digest, recs[-1] if recs else None, foreign)


def current_record(
    ctx: PromotionContext, loc: Location, digest: str, stage: str, *, before: dt.datetime | None = None
) -> PromotionRecord | None:
    """The latest trusted record that put ``digest`` into the pointer (before ``before``)."""
    recs = [r for r in read_records(ctx, loc, digest, stage) if before is None or r.when < before]
    return recs[-1] if recs else None


def history(
    ctx: PromotionContext, target: Target, stage: str, *, limit: int = 100
) -> tuple[Location, list[PromotionRecord]]:
    """The stage pointer's chain of records, newest first, read from the registry alone: the record
    on the digest the tag names, then the record on its ``previous`` digest older than it, ...
    Raises NotFoundError when the stage holds no digest for the variant."""
    loc = ctx.stage_location(target, stage)
    digest = ctx.client(loc.registry).try_resolve(loc.repository, loc.pointer_tag)
    if digest is None:
        raise NotFoundError(f"{loc} does not exist: {target.variant} was never promoted to {stage}")
    out: list[PromotionRecord] = []
    before: dt.datetime | None = None
    cur: str | None = digest
    while cur is not None and len(out) < limit:
        rec = current_record(ctx, loc, cur, stage, before=before)
        if rec is None:
            break
        out.append(rec)
        before, cur = rec.when, rec.previous
    return loc, out
