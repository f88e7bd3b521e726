"""Evidence for a promotion decision, read from the registry: every ``.sig``/``.att`` layer on a
digest and every key-pair Sigstore bundle referrer (``builder.signing.bundles``), verified the way
``builder verify`` does (cosign's tag layout:
https://github.com/sigstore/cosign/blob/main/specs/SIGNATURE_SPEC.md), plus fleet verdicts for the
fleets the stage's rules name.

Unreadable pieces become ``Evidence.problems`` (the policy's rules then deny); nothing here
raises for missing evidence.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from builder.errors import BuilderError
from builder.policy import AttestationEvidence, Evidence, FleetEvidence, SignatureEvidence
from builder.promote.model import UNSET
from builder.promote.pool import Task, map_parallel, parallel
from builder.promote.referrers import INDEX_KEY, forget_kept, lacks_referrers_api, learn_referrers_api, referrers
from builder.registry import fallback_tag
from builder.signing.layer import ATT_SUFFIX, SIG_SUFFIX, evidence_layers, signature_tag
from builder.signing.verifiers import verifiers_for
from builder.signing.verify import verify_layer

if TYPE_CHECKING:
    from builder.promote.context import PromotionContext
    from builder.promote.listing import TagLists
    from builder.promote.location import Location
    from builder.promote.verdict_cache import VerdictCache
    from builder.registry import Manifest
    from builder.signing.report import VerifiedItem


def keyless_identity(signer: str | None) -> tuple[str, str] | None:
    """``(issuer, subject)`` of a keyless signer as ``builder.signing.keyless`` reports it
    (``"<SAN> (issuer <issuer>)"``); None for key fingerprints."""
    if not signer or signer.startswith("sha256:"):
        return None
    from builder.signing.keyless.identity import parse_signer

    return parse_signer(signer)


def subject_digests(statement: Mapping[str, Any] | None) -> tuple[str, ...]:
    """``sha256:<hex>`` of every subject of an in-toto statement."""
    if not statement:
        return ()
    out = []
    for s in statement.get("subject") or []:
        if isinstance(s, Mapping) and isinstance(s.get("digest"), Mapping):
            h = s["digest"].get("sha256")
            if isinstance(h, str):
                out.append("sha256:" + h)
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class PlaceRead:
    """The verified ``.sig``/``.att`` layers of a digest in one repository, problems reading them,
    and the manifests as read (suffix or ``INDEX_KEY`` -> manifest, None: absent)."""

    items: tuple[VerifiedItem, ...]
    problems: tuple[str, ...]
    manifests: Mapping[str, Manifest | None]


@dataclasses.dataclass(frozen=True)
class Gathered:
    """``gather`` 's result: the evidence, for each place whether it holds the digest, and the
    source's ``.sig``/``.att`` manifests as read (None when the source could not be read), for the
    copy to reuse."""

    evidence: Evidence
    present: tuple[bool, ...]
    source_manifests: Mapping[str, Manifest | None] | None


def approver_suffixes(ctx: PromotionContext) -> tuple[str, ...]:
    """The tag suffixes of the policy's approvers' own approval manifests
    (``builder.signing.approvals.approval_suffix``: each approver writes only its own, so
    concurrent approvals never overwrite each other); read next to ``.sig``/``.att``."""
    from builder.signing.approvals import approval_suffix  # not at import: queries never need signing.attest

    return tuple(approval_suffix(a.key.fingerprint) for a in ctx.policy.approvers if a.key.fingerprint)


def _nothing_listed(
    ctx: PromotionContext, loc: Location, digest: str, listed: TagLists | None, source: Location | None
) -> bool:
    """True when the batch's listing of ``loc``'s repository shows none of ``digest``'s evidence
    tags (``.sig``, ``.att``, the approvers', the ``sha256-<hex>`` fallback referrers index) and the
    registry is known to have no referrers API: ``loc`` then has no evidence of ``digest`` to read,
    and the ``HEAD`` asking whether it holds the digest (issue 19: one request per cross-repository
    promotion of a batch) answers only whether the copy can be skipped. Taking it as absent copies
    again at worst (mounts of blobs it has and a ``PUT`` of a manifest it has: idempotent, OCI
    distribution spec v1.1 "Pushing Manifests",
    https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pushing-manifests);
    the decision is the same (no evidence either way). False without a listing or with a referrers
    API (Sigstore bundles may refer to an untagged digest there). ``source``: the place the digest
    comes from, known to hold it (None: not known); on the same registry, whether the registry has
    the referrers API is learnt there first, by listing the referrers of ``digest`` itself
    (``learn_referrers_api``, once per process; the listing is the source read's answer) rather
    than found unknown by the first plans of a process, which each asked the ``HEAD`` (16 of a
    batch of 100 on 16 threads). Raises RegistryUnavailableError when the registry cannot be
    reached."""
    tags = listed.tags(loc) if listed is not None else None
    if tags is None:
        return False
    if source is not None and source.registry == loc.registry:
        learn_referrers_api(ctx, source, digest)
    if not lacks_referrers_api(ctx, loc.registry):
        return False
    names = [signature_tag(digest, sfx) for sfx in (SIG_SUFFIX, ATT_SUFFIX, *approver_suffixes(ctx))]
    return not any(t in tags for t in (*names, fallback_tag(digest)))


def read_place(
    ctx: PromotionContext,
    loc: Location,
    digest: str,
    *,
    check_present: bool,
    index: bool = False,
    approvals: bool = True,
    listed: frozenset[str] | None = None,
    verdicts: VerdictCache | None = None,
) -> PlaceRead | None:
    """Every ``.sig``/``.att`` layer of ``digest`` in ``loc``'s repository (and of the approvers' own
    approval tags), verified by
    ``builder.signing.sign``/``builder.signing.attest`` (the same checks as ``verify_image``), manifests and layers
    fetched in parallel. None when ``check_present`` and the repository does not hold the digest.
    ``index``: also read the ``sha256-<hex>`` fallback referrers index (under ``INDEX_KEY``) in the
    same parallel round, when the registry is known to have no referrers API (the copy reuses it).
    ``approvals=False``: the approvers' own tags are not read (``status`` shows ``.sig``/``.att``
    and bundle referrers only). ``listed``: the repository's tags as this run listed them
    (``tags/list``); a tag not among them is taken as absent without asking for it. ``verdicts``:
    layers verified before with the same trust are answered from it
    (``builder.promote.verdict_cache``). Raises registry errors."""
    client = ctx.client(loc.registry)
    if check_present and client.try_resolve(loc.repository, digest) is None:
        return None  # not copied there yet: no evidence there either
    verifiers = verifiers_for(ctx.keys, ctx.verifiers)
    suffixes = (SIG_SUFFIX, ATT_SUFFIX, *(approver_suffixes(ctx) if approvals else ()))
    tags = {sfx: signature_tag(digest, sfx) for sfx in suffixes}
    if index and lacks_referrers_api(ctx, loc.registry):
        tags[INDEX_KEY] = fallback_tag(digest)
    got: dict[str, Manifest | None] = {sfx: None for sfx, t in tags.items() if listed is not None and t not in listed}
    asked = {sfx: t for sfx, t in tags.items() if sfx not in got}
    got.update(
        zip(asked, map_parallel(lambda t: client.try_get_manifest(loc.repository, t), asked.values()), strict=True)
    )
    if INDEX_KEY not in got and listed is not None and fallback_tag(digest) not in listed:
        got[INDEX_KEY] = None  # no fallback referrers index: nothing to read if the registry has no API
    jobs: list[tuple[dict[str, Any], str]] = []
    for sfx, m in got.items():
        if m is None or sfx == INDEX_KEY:
            continue
        jobs.extend((d, tags[sfx]) for d in evidence_layers(m.json, f"{loc.registry}/{loc.repository}:{tags[sfx]}"))
    check = verdicts.verify_layer if verdicts is not None else verify_layer
    items = tuple(map_parallel(lambda j: check(client, loc.repository, digest, j[0], verifiers, tag=j[1]), jobs))
    # Sigstore bundle referrers made with a key pair (cosign 3's format): counted like .att layers
    from builder.signing.bundles import key_bundle_items  # not at import: resolve's record check never reads them

    referring = referrers(ctx, loc, digest, got.get(INDEX_KEY, UNSET), seen=got if index else None)
    items += tuple(
        key_bundle_items(client, loc.repository, digest, verifiers, descriptors=referring, report_keyless=False)
        if verdicts is None
        else verdicts.bundle_items(client, loc.repository, digest, verifiers, referring)  # by content, as layers
    )
    problems = () if verifiers else ("no public key or identity given to verify with",)
    return PlaceRead(items, problems, got)


def gather_evidence(
    ctx: PromotionContext,
    digest: str,
    stage: str,
    places: Sequence[Location],
    *,
    ticket: str | None = None,
) -> Evidence:
    """Read and verify every signature and attestation on ``digest`` in each of ``places`` (source
    first; the same layer seen in two places counts once; places after the first are skipped when
    they do not hold the digest), plus fleet verdicts for the fleets the stage's rules name.
    Unreadable pieces become ``Evidence.problems`` (rules then deny)."""
    return gather(ctx, digest, stage, places, ticket=ticket).evidence


def _fleet_rows(
    ctx: PromotionContext, stage: str, source: Location, digest: str
) -> tuple[list[FleetEvidence], list[str]]:
    rows: list[FleetEvidence] = []
    probs: list[str] = []
    for fleet in ctx.policy.fleets(stage):
        if ctx.fleet_checker is None:
            probs.append(f"no compatibility checker available for fleet {fleet}")
            continue
        try:
            rows.extend(ctx.fleet_checker(ctx.client(source.registry), source.repository, digest, fleet))
        except BuilderError as exc:
            probs.append(f"fleet {fleet}: {exc.message}")
    return rows, probs


def gather(
    ctx: PromotionContext,
    digest: str,
    stage: str,
    places: Sequence[Location],
    *,
    ticket: str | None = None,
    source_known: bool = False,
    listed: TagLists | None = None,
) -> Gathered:
    """``gather_evidence`` plus, for each place, whether it holds the digest, and the source's
    manifests as read. ``source_known``: the source is known to hold the digest (not re-checked;
    its fallback referrers index is read too). ``listed``: the batch's tag listings (tags they
    show absent are not read)."""

    def read(i: int, loc: Location) -> PlaceRead | BuilderError | None:
        try:
            if i > 0 and _nothing_listed(ctx, loc, digest, listed, places[0] if source_known else None):
                return None  # read as "does not hold the digest": the only difference is a copy made again
            return read_place(
                ctx,
                loc,
                digest,
                check_present=i > 0 or not source_known,
                index=i == 0 and source_known,
                listed=listed.tags(loc) if listed is not None else None,
            )
        except BuilderError as exc:  # reported as a problem of this place: rules then deny
            return exc

    fleet_t = Task(lambda: _fleet_rows(ctx, stage, places[0], digest)) if places and ctx.policy.fleets(stage) else None
    try:
        reports = parallel([functools.partial(read, i, loc) for i, loc in enumerate(places)])
    finally:
        if places and source_known:  # a listing the destination's probe kept and the source's read never took
            forget_kept(ctx, places[0], digest)
    fleet_evidence, fleet_problems = fleet_t.result() if fleet_t else ([], [])
    sigs: list[SignatureEvidence] = []
    atts: list[AttestationEvidence] = []
    problems: list[str] = []
    seen: set[tuple[str, str, str, str]] = set()
    source_manifests: Mapping[str, Manifest | None] | None = None
    for i, (loc, report) in enumerate(zip(places, reports, strict=True)):
        if report is None:
            if i == 0:  # signatures about a digest the registry no longer holds are not evidence
                problems.append(f"{digest} does not resolve in {loc.name}")
            continue
        if isinstance(report, BuilderError):
            problems.append(f"{loc.name}: {report.message}")
            continue
        if i == 0:
            problems.extend(report.problems)
            source_manifests = report.manifests
        for it in report.items:
            # signature layers of one payload share the blob digest: tell them apart by signer
            key = (it.kind, it.layer_digest, it.signer or "", it.reason)
            if key in seen:
                continue
            seen.add(key)
            if it.kind == "signature":
                ident = keyless_identity(it.signer)
                sigs.append(SignatureEvidence(it.signer, it.ok, it.reason, ident, it.untrusted, it.role))
            else:
                atts.append(_attestation(it))
    problems.extend(fleet_problems)
    evidence = Evidence(
        repository=places[0].name if places else "",
        digest=digest,
        stage=stage,
        signatures=tuple(sigs),
        attestations=tuple(atts),
        fleet=tuple(fleet_evidence),
        ticket=ticket,
        problems=tuple(problems),
    )
    return Gathered(evidence, tuple(r is not None for r in reports), source_manifests)


def _attestation(it: VerifiedItem) -> AttestationEvidence:
    return AttestationEvidence(
        it.predicate_type or "",
        dict(it.predicate or {}),
        it.signer,
        it.ok,
        it.reason,
        keyless_identity(it.signer),
        subject_digests(it.statement),
        it.untrusted,
    )


def with_baseline(ctx: PromotionContext, stage: str, dst: Location, held: str | None, evidence: Evidence) -> Evidence:
    """``evidence`` with what the target stage holds (``held``, read from ``dst``) and its verified
    attestations, when a ``benchmark`` rule of ``stage`` compares against the stage; else unchanged.
    A read that fails becomes a problem (the rule then finds no baseline and denies)."""
    rules = [r for r in ctx.policy.stage(stage).require.walk() if r.kind == "benchmark"]
    if held is None or not rules:  # the benchmark rules' module only for a stage that has one
        return evidence
    from builder.policy.rules_benchmark import BenchmarkRule

    if not any(isinstance(r, BenchmarkRule) and r.against == "stage" for r in rules):
        return evidence
    if held == evidence.digest:
        return dataclasses.replace(evidence, baseline_digest=held)
    try:
        report = read_place(ctx, dst, held, check_present=False)
    except BuilderError as exc:
        problem = f"{stage}'s {held}: {exc.message}"
        return dataclasses.replace(evidence, baseline_digest=held, problems=(*evidence.problems, problem))
    items = report.items if report is not None else ()
    atts = tuple(_attestation(it) for it in items if it.kind != "signature")
    return dataclasses.replace(evidence, baseline_digest=held, baseline=atts)
