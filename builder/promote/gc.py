"""``builder gc``: retention of a project's build repositories, read from the registry alone.

What may go (docs/promotion.md, Retention):

- ``pending-<variant-id>`` tags (what an interrupted build left) older than the policy's
  ``retention.pending_tags`` (default 1 h: a younger one may belong to a build still pushing);
- content tags ``<variant-id>-<hash12>`` older than ``retention.content_tags`` (default 30 d)
  whose digest no stage holds, no stage's history names (each trusted record's ``digest`` and
  ``previous``, so every rollback target) and no kept tag names;
- with each deleted digest, its evidence tags ``sha256-<hex>.sig`` / ``.att`` (any
  ``sha256-<hex>.<kind>``: ``.sbom``, approvals), the referrers
  fallback index ``sha256-<hex>`` and the referrer manifests it (or the referrers API) lists
  (Sigstore bundles, cosign 3's format); with a deleted index, the same evidence of each of its
  platform manifests (each is signed: ``builder.signing.sign.sign_image``) unless a kept manifest
  (a kept tag, or a kept index sharing that platform) still names it.

Only tags of the matrices' variants (``--select`` narrows them) are candidates; every other tag
(variant tags, stage pointers, tags builder does not know) is kept, and so is every digest it
names. The OCI distribution API (https://distribution.github.io/distribution/spec/api/, "Deleting
an Image"; https://github.com/opencontainers/distribution-spec/blob/main/spec.md#deleting-manifests)
deletes manifests by digest, which removes every tag naming them: a manifest is deleted only when
all its tags go, so a candidate whose digest a kept tag also names stays (reported).

The age of a tag is its image config's ``created`` time (an index: that of its ``linux/amd64``
platform, else its first runnable one); an image without one is never deleted. Each manifest is read
once per repository sweep. Bytes reclaimable: the sizes of the unique
blobs (configs and layers) of the deleted manifests that no kept manifest of the same
repository references; the registry frees them when its garbage collector runs
(``registry garbage-collect``), and only when no other repository links them.

Errors: registry errors (5-7) propagate; a registry that refuses deletes (405, no
``storage.delete.enabled``) raises RegistryError; NotFoundError (8) for a glob selecting nothing.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import re
import threading
from typing import TYPE_CHECKING, Literal

from typing_extensions import TypedDict

from builder.errors import NotFoundError, RegistryError
from builder.labels import CREATED, own
from builder.policy.durations import format_duration, parse_time
from builder.promote.pool import map_parallel
from builder.promote.records import history
from builder.promote.targets import CONTENT_SUFFIX, resolve_targets, scope_of
from builder.registry import OCI_EMPTY, OCI_MANIFEST, canonical_json
from builder.registry.copy import index_platform, manifest_config

if TYPE_CHECKING:
    import datetime as dt
    from collections.abc import Sequence

    from builder.promote.context import PromotionContext
    from builder.promote.location import Target
    from builder.registry import Descriptor, Manifest, RegistryClient

PENDING_PREFIX = "pending-"
"""The prefix of a build's pending tag (``builder.build.plan.PENDING_PREFIX``)."""

EVIDENCE_TAG = re.compile(r"^sha256-([0-9a-f]{64})(\.[\w.-]+)?$")
"""A tag about a digest by cosign's naming (``sha256-<hex>.<kind>``,
https://github.com/sigstore/cosign/blob/main/specs/SIGNATURE_SPEC.md): ``sha256-<hex>`` (referrers
fallback index), ``.sig`` (signatures), ``.att`` (attestations), ``.sbom``, and any other kind such
as an approver's own ``.approval-<key16>.att`` (``builder.signing.approvals``)."""

Kind = Literal["pending", "content", "evidence"]


class GcTagDocument(TypedDict):
    """One candidate tag: ``kind``, ``digest``, image ``created`` (RFC 3339 or null), ``age_s``
    (seconds or null), ``delete`` (deleted, or would be in a dry run), ``manifest_kept`` (only the
    tag goes: another tag, a stage or a history still names the digest) and why (``reason``)."""

    tag: str
    kind: str
    digest: str
    created: str | None
    age_s: float | None
    delete: bool
    manifest_kept: bool
    reason: str


class GcRepositoryDocument(TypedDict):
    """One repository: its candidate ``tags``, the manifest digests deleted (or that would be),
    and ``reclaimable_bytes`` (unique blobs only they reference)."""

    repository: str
    tags: list[GcTagDocument]
    manifests: list[str]
    reclaimable_bytes: int


class GcDocument(TypedDict):
    """``builder gc --json``: ``confirm`` (false: a dry run, nothing deleted), the retention
    applied (seconds), each repository and the totals."""

    confirm: bool
    content_retention_s: float
    pending_retention_s: float
    repositories: list[GcRepositoryDocument]
    deleted_tags: int
    deleted_manifests: int
    reclaimable_bytes: int


@dataclasses.dataclass(frozen=True)
class GcTag:
    """A candidate tag: ``kind`` (pending, content or evidence of a deleted digest), the
    ``digest`` it names, its image's ``created`` time and age in seconds (None: unknown),
    ``delete``: it goes (with ``--confirm``), ``manifest_kept``: only the tag goes (a pending tag
    whose digest something else needs), and ``reason`` (why it goes or stays)."""

    tag: str
    kind: Kind
    digest: str
    created: str | None
    age_s: float | None
    delete: bool
    reason: str
    manifest_kept: bool = False

    def to_json(self) -> GcTagDocument:
        return {
            "tag": self.tag,
            "kind": self.kind,
            "digest": self.digest,
            "created": self.created,
            "age_s": self.age_s,
            "delete": self.delete,
            "manifest_kept": self.manifest_kept,
            "reason": self.reason,
        }


@dataclasses.dataclass(frozen=True)
class GcRepository:
    """One repository (``registry/repository``): its candidate ``tags``, the manifest digests
    deleted (or to delete), and ``reclaimable_bytes``."""

    repository: str
    tags: tuple[GcTag, ...]
    manifests: tuple[str, ...]
    reclaimable_bytes: int

    @property
    def deleted(self) -> tuple[GcTag, ...]:
        return tuple(t for t in self.tags if t.delete)

    def to_json(self) -> GcRepositoryDocument:
        return {
            "repository": self.repository,
            "tags": [t.to_json() for t in self.tags],
            "manifests": list(self.manifests),
            "reclaimable_bytes": self.reclaimable_bytes,
        }


@dataclasses.dataclass(frozen=True)
class GcReport:
    """``builder gc``: ``confirm`` (False: dry run), the ``retention`` applied and each repository."""

    confirm: bool
    content_retention: dt.timedelta
    pending_retention: dt.timedelta
    repositories: tuple[GcRepository, ...]

    @property
    def deleted_tags(self) -> int:
        return sum(len(r.deleted) for r in self.repositories)

    @property
    def deleted_manifests(self) -> int:
        return sum(len(r.manifests) for r in self.repositories)

    @property
    def reclaimable_bytes(self) -> int:
        return sum(r.reclaimable_bytes for r in self.repositories)

    def to_json(self) -> GcDocument:
        return {
            "confirm": self.confirm,
            "content_retention_s": self.content_retention.total_seconds(),
            "pending_retention_s": self.pending_retention.total_seconds(),
            "repositories": [r.to_json() for r in self.repositories],
            "deleted_tags": self.deleted_tags,
            "deleted_manifests": self.deleted_manifests,
            "reclaimable_bytes": self.reclaimable_bytes,
        }


def collect_garbage(ctx: PromotionContext, globs: Sequence[str] = (), *, confirm: bool = False) -> GcReport:
    """``builder gc``: the variants ``globs`` select (default: all) are the candidates, and only
    the repositories holding one are swept and reported; every variant of the matrices protects
    what its stages and their histories name (in any repository). With ``confirm``
    the manifests are deleted (each tag re-read first: one that moved since is kept), else
    nothing is written. Raises NotFoundError (8) for a glob selecting nothing, registry errors;
    MatrixError (10) when any matrix does not load: the lookups other commands make leave such a
    matrix out (a warning), but its variants' stages protect digests, so gc decides on all of
    them or on none."""
    if ctx.matrices_dir is not None:
        from builder.matrix.files import matrix_paths
        from builder.matrix.index import cached_variants

        cached_variants(matrix_paths(ctx.matrices_dir), ctx.cache_dir, skip_broken=False)
    scope = scope_of(ctx)
    everyone = resolve_targets(scope, (), ("*",))
    chosen = {t.variant for t in resolve_targets(scope, (), globs)} if globs else {t.variant for t in everyone}
    protected = _protection(ctx, everyone)
    retention = ctx.policy.retention
    now = ctx.now()
    repos: dict[tuple[str, str], list[str]] = {}
    for t in everyone:
        repos.setdefault((t.registry, t.repository), []).append(t.variant)
    out = []
    for (registry, repository), variants in sorted(repos.items()):
        mine = frozenset(v for v in variants if v in chosen)
        if not mine:  # no selected variant lives here: nothing in it is a candidate, not listed or read
            continue
        sweep = _Sweep(
            ctx.client(registry),
            repository,
            mine,
            protected,
            (retention.content_tags, retention.pending_tags),
            now,
        )
        out.append(sweep.run(confirm=confirm))
    return GcReport(confirm, retention.content_tags, retention.pending_tags, tuple(out))


HISTORY_LIMIT = 1000
"""Records read per stage pointer for the protected set; a longer chain leaves the variant unsure."""


@dataclasses.dataclass(frozen=True)
class _Protection:
    """``digests`` never deleted; ``unsure``: variant -> why its history could not be read in full
    (a pointer no trusted record explains, a chain that breaks before its first promotion): such
    a variant's manifests are all kept, since a rollback target may be unknown."""

    digests: frozenset[str]
    unsure: dict[str, str]


def _protection(ctx: PromotionContext, targets: Sequence[Target]) -> _Protection:
    """Every digest a stage holds for ``targets`` and every ``digest``/``previous`` of the trusted
    records in its history (rollback targets): in any repository, never deleted anywhere."""

    def one(pair: tuple[Target, str]) -> tuple[set[str], str | None]:
        t, stage = pair
        loc = ctx.stage_location(t, stage)
        found: set[str] = set()
        pointer = ctx.client(loc.registry).try_resolve(loc.repository, loc.pointer_tag)
        if pointer is None:
            return found, None
        found.add(pointer)
        try:
            _, records = history(ctx, t, stage, limit=HISTORY_LIMIT)
        except NotFoundError:  # the pointer went away since: what it named is already protected
            return found, None
        for r in records:
            found.add(r.digest)
            if r.previous:
                found.add(r.previous)
        if not records:
            return found, f"no trusted promotion record explains {loc}"
        if records[-1].previous is not None:
            return found, f"the history of {loc} breaks before its first promotion"
        return found, None

    pairs = [(t, s) for t in targets for s in ctx.policy.stage_names]
    results = map_parallel(one, pairs)
    unsure: dict[str, str] = {}
    for (t, _), (_, why) in zip(pairs, results, strict=True):
        if why is not None:
            unsure.setdefault(t.variant, why)
    return _Protection(frozenset(d for found, _ in results for d in found), unsure)


@dataclasses.dataclass(frozen=True)
class _Candidate:
    tag: str
    variant: str
    kind: Kind
    digest: str


class _Sweep:
    """One repository: classify its tags, decide, then (with ``confirm``) delete. Each manifest is read
    once per sweep (:meth:`manifest`): its age, the platforms of an index and the blobs it references
    all come from that one read."""

    def __init__(
        self,
        client: RegistryClient,
        repository: str,
        variants: frozenset[str],
        protected: _Protection,
        retention: tuple[dt.timedelta, dt.timedelta],
        now: dt.datetime,
    ) -> None:
        self.client = client
        self.repository = repository
        self.variants = variants
        self.protected = protected
        self.content_retention, self.pending_retention = retention
        self.now = now
        self._manifests: dict[str, concurrent.futures.Future[Manifest | None]] = {}
        self._lock = threading.Lock()

    def manifest(self, digest: str) -> Manifest | None:
        """The manifest ``digest`` names (None: gone), read from the registry once per sweep - a digest's
        bytes never change - even when several workers ask for it at once."""
        with self._lock:
            pending = self._manifests.get(digest)
            reader = pending is None
            if pending is None:
                pending = self._manifests[digest] = concurrent.futures.Future()
        if reader:
            try:
                pending.set_result(self.client.try_get_manifest(self.repository, digest))
            except BaseException as exc:  # every waiter sees the reader's error
                pending.set_exception(exc)
                raise
        return pending.result()

    def kind_of(self, tag: str) -> tuple[Kind, str] | None:
        """(pending or content, the variant) for a candidate tag of a chosen variant, None for a tag to keep."""
        if tag.startswith(PENDING_PREFIX) and tag[len(PENDING_PREFIX) :] in self.variants:
            return "pending", tag[len(PENDING_PREFIX) :]
        if CONTENT_SUFFIX.search(tag) and CONTENT_SUFFIX.sub("", tag) in self.variants:
            return "content", CONTENT_SUFFIX.sub("", tag)
        return None

    def run(self, *, confirm: bool) -> GcRepository:
        tags = self.client.list_tags(self.repository)
        evidence = [t for t in tags if EVIDENCE_TAG.match(t)]
        others = [t for t in tags if not EVIDENCE_TAG.match(t)]
        digests = self.resolve_all(others)
        kept_tags = {t: d for t, d in digests.items() if d is not None and self.kind_of(t) is None}
        kept_digests = set(kept_tags.values())
        candidates = [
            _Candidate(t, kind[1], kind[0], d)
            for t, d in digests.items()
            if d is not None and (kind := self.kind_of(t)) is not None
        ]
        judged = map_parallel(lambda c: self.judge(c, kept_tags), candidates)
        # a manifest goes only when every tag naming it goes
        pairs = list(zip(candidates, judged, strict=True))
        going = {c.digest for c, g in pairs if g.delete and not g.manifest_kept}
        stays_under = {c.digest: c.tag for c, g in pairs if not g.delete or g.manifest_kept}
        staying = set(stays_under)
        for i, (c, g) in enumerate(pairs):
            if g.delete and not g.manifest_kept and c.digest in staying:
                other = stays_under[c.digest]
                judged[i] = (
                    dataclasses.replace(g, manifest_kept=True, reason=f"tag only: its digest stays under {other}")
                    if c.kind == "pending"
                    else dataclasses.replace(
                        g, delete=False, reason=f"its digest is also under {other}, which stays (manifest kept)"
                    )
                )
        going -= staying
        kept_digests |= staying
        subjects = self.evidence_subjects(going, kept_digests)
        ev_tags = [t for t in evidence if _subject_of(t) in subjects]
        ev_digests = self.resolve_all(ev_tags)
        evidence_items = [
            GcTag(t, "evidence", d, None, None, True, _evidence_reason(_subject_of(t), subjects))
            for t, d in ev_digests.items()
            if d is not None
        ]
        kept_evidence = self.resolve_all([t for t in evidence if t not in ev_digests])
        kept_digests |= {d for d in kept_evidence.values() if d is not None}
        owners = {i.digest: subjects[_subject_of(i.tag)] for i in evidence_items if i.digest not in kept_digests}
        owners.update(self.referrer_manifests(subjects, kept_digests | set(owners)))
        manifests = sorted(going) + sorted(owners)
        reclaimable = self.reclaimable(manifests, kept_digests)
        items = tuple(sorted([*judged, *evidence_items], key=lambda g: (g.kind, g.tag)))
        if confirm:
            self.delete(candidates, judged, manifests, owners)
        return GcRepository(f"{self.client.registry}/{self.repository}", items, tuple(manifests), reclaimable)

    def children(self, digest: str) -> list[str]:
        """The manifests an index lists (platforms and buildx attestation manifests); [] for an
        image manifest or a digest that is gone."""
        m = self.manifest(digest)
        return [d.digest for d in m.manifests] if m is not None and m.is_index else []

    def evidence_subjects(self, going: set[str], kept: set[str]) -> dict[str, str]:
        """Every digest whose evidence goes -> the deleted digest it belongs to: each deleted
        digest itself, and the platform manifests of a deleted index (signed one by one since
        containers/image verifies the platform it pulls, ``builder.signing.sign.sign_image``)
        unless a kept manifest names them too (a kept tag, or a kept index sharing that platform
        manifest): their signatures still serve it."""
        subjects = {d: d for d in going}
        below = {d: kids for d, kids in zip(sorted(going), map_parallel(self.children, sorted(going)), strict=True)}
        if not any(below.values()):
            return subjects
        shared = set(kept)
        for kids in map_parallel(self.children, sorted(kept)):
            shared.update(kids)
        for top, kids in below.items():
            for child in kids:
                if child not in shared and child not in subjects:
                    subjects[child] = top
        return subjects

    def referrer_manifests(self, subjects: dict[str, str], known: set[str]) -> dict[str, str]:
        """Referrer manifests (Sigstore bundles, SBOMs: OCI 1.1 ``subject``) of each digest in
        ``subjects``, listed by the referrers API or the fallback index, -> the deleted digest
        they belong to; those in ``known`` (kept, or already going as a tag) are left out."""
        order = sorted(subjects)
        found: dict[str, str] = {}
        for subject, descs in zip(order, map_parallel(self.referrers, order), strict=True):
            for d in descs:
                if d.digest not in known:
                    found.setdefault(d.digest, subjects[subject])
        return found

    def referrers(self, subject: str) -> list[Descriptor]:
        return self.client.referrers(self.repository, subject)

    def resolve_all(self, tags: Sequence[str]) -> dict[str, str | None]:
        """tag -> the digest it names now (None: gone), read in parallel."""
        found = map_parallel(lambda t: self.client.try_resolve(self.repository, t), tags)
        return dict(zip(tags, found, strict=True))

    def judge(self, c: _Candidate, kept_tags: dict[str, str]) -> GcTag:
        created, age = self.age(c.digest)
        retention = self.pending_retention if c.kind == "pending" else self.content_retention

        def item(delete: bool, reason: str) -> GcTag:
            return GcTag(c.tag, c.kind, c.digest, created, age, delete, reason)

        needed = ""
        if c.digest in self.protected.digests:
            needed = "a stage or its history (a rollback target) names this digest"
        elif c.variant in self.protected.unsure:
            needed = f"a rollback target may be unknown: {self.protected.unsure[c.variant]}"
        elif c.digest in kept_tags.values():
            other = next(t for t, d in kept_tags.items() if d == c.digest)
            needed = f"its digest is also under {other}, which stays (manifest kept)"
        if needed and c.kind == "content":
            return item(False, needed)
        if age is None:
            return item(False, "age unknown (the image config has no created time)")
        if age < retention.total_seconds():
            return item(False, f"younger than the retention ({format_duration(retention)})")
        if needed:  # an old pending tag of a build that finished: the tag goes, the manifest stays
            return dataclasses.replace(item(True, f"tag only: {needed}"), manifest_kept=True)
        what = "left by an interrupted build" if c.kind == "pending" else "in no stage or history"
        return item(True, f"{what}, older than {format_duration(retention)}")

    def age(self, digest: str) -> tuple[str | None, float | None]:
        """The image config's ``created`` time and the age in seconds (None, None: unknown, or the
        manifest is gone); an index: that of the platform :func:`builder.registry.copy.platform_manifest`
        reads. Raises RegistryError for an index without runnable platforms or a manifest without config."""
        top = self.manifest(digest)
        if top is not None and top.is_index:
            where = f"{self.client.registry}/{self.repository}@{digest}"
            top = self.manifest(index_platform(top, None, where).digest)
        if top is None:
            return None, None
        created = manifest_config(self.client, self.repository, top).get("created")
        when = parse_time(created)
        if when is None:
            return None, None
        return when.isoformat().replace("+00:00", "Z"), (self.now - when).total_seconds()

    def blobs(self, digest: str) -> dict[str, int]:
        """Blob digest -> size of everything ``digest`` references (an index: its children's too)."""
        m = self.manifest(digest)
        if m is None:
            return {}
        out = {b.digest: b.size for b in m.blobs}
        for child in m.manifests if m.is_index else []:
            out.update(self.blobs(child.digest))
        return out

    def reclaimable(self, manifests: Sequence[str], kept: set[str]) -> int:
        if not manifests:
            return 0
        gone: dict[str, int] = {}
        for part in map_parallel(self.blobs, manifests):
            gone.update(part)
        still: set[str] = set()
        for part in map_parallel(self.blobs, sorted(kept)):
            still.update(part)
        return sum(size for b, size in gone.items() if b not in still)

    def delete(
        self,
        candidates: Sequence[_Candidate],
        judged: Sequence[GcTag],
        manifests: Sequence[str],
        owners: dict[str, str],
    ) -> None:
        """Delete ``manifests``: subjects first (each of its tags re-read: one that moved since
        keeps its new manifest), then the evidence and referrers in ``owners`` (manifest -> the
        deleted digest it belongs to) of those deleted. Raises RegistryError on a refused delete."""
        moved = {
            c.digest
            for c, g in zip(candidates, judged, strict=True)
            if g.delete and self.client.try_resolve(self.repository, c.tag) != c.digest
        }
        for c, g in zip(candidates, judged, strict=True):
            if g.manifest_kept and g.delete and self.client.try_resolve(self.repository, c.tag) == c.digest:
                self.untag(c.tag)
        for d in manifests:
            if d not in owners and d not in moved:
                self.delete_one(d)
        for d in manifests:
            if d in owners and owners[d] not in moved:
                self.delete_one(d)

    def untag(self, tag: str) -> None:
        """Remove ``tag`` alone (the distribution API deletes manifests, not tags): point it at a
        placeholder manifest made for it (an empty OCI config, annotated with the tag), then delete
        that placeholder by digest, as regclient's ``regctl tag delete`` does
        (https://github.com/regclient/regclient/blob/main/docs/regctl.md). The manifest the tag
        named is untouched."""
        empty = self.client.put_blob(self.repository, b"{}")
        placeholder = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_EMPTY, "digest": empty, "size": 2},
            "layers": [{"mediaType": OCI_EMPTY, "digest": empty, "size": 2}],
            "annotations": {own("gc.untag"): tag, CREATED: self.now.isoformat()},
        }
        digest = self.client.put_manifest(self.repository, tag, canonical_json(placeholder), OCI_MANIFEST)
        self.delete_one(digest)

    def delete_one(self, digest: str) -> None:
        try:
            self.client.delete_manifest(self.repository, digest)
        except NotFoundError:  # deleted by a concurrent gc, or already gone with an index
            return
        except RegistryError as exc:
            raise RegistryError(
                f"{self.client.registry}/{self.repository}@{digest} could not be deleted: {exc.message}",
                hint="the registry must allow deletes (distribution: storage.delete.enabled: true, "
                "REGISTRY_STORAGE_DELETE_ENABLED=true); scripts/setup configures the local one",
                registry=self.client.registry,
            ) from exc


def _evidence_reason(subject: str, subjects: dict[str, str]) -> str:
    top = subjects.get(subject, subject)
    if top == subject:
        return f"evidence of deleted {subject[:19]}"
    return f"evidence of platform {subject[:19]} of deleted index {top[:19]}"


def _subject_of(evidence_tag: str) -> str:
    """``sha256-<hex>[.<kind>]`` -> ``sha256:<hex>``."""
    m = EVIDENCE_TAG.match(evidence_tag)
    return f"sha256:{m.group(1)}" if m else ""
