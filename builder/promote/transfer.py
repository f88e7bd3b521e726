"""Moving a digest and its evidence between repositories and registries, never rebuilding: blobs
mounted across repositories of one registry (OCI distribution spec "Mounting a blob from another
repository": https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#mounting-a-blob-from-another-repository)
or copied only when missing on another registry; manifests PUT by digest, children first (the
registry verifies each digest); ``.sig``/``.att`` manifests byte for byte (merged layer by layer
when the destination already has some); referrers copied and the destination's fallback
referrers index rebuilt.

Errors: registry errors (exit 5-7) propagate; SigningError (17) when another writer holds a
``.sig``/``.att`` lock longer than ``ctx.lock_timeout`` (``builder.signing.layer.signature_lock``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from builder.promote.evidence import approver_suffixes
from builder.promote.model import UNSET, Unset
from builder.promote.pool import map_parallel, parallel
from builder.promote.referrers import INDEX_KEY, copyable, lacks_referrers_api, referrers
from builder.registry import CopyStats, copy_image, put_manifest_repairing
from builder.signing.layer import (
    ATT_SUFFIX,
    SIG_SUFFIX,
    SIGNATURE_CONFIG_DIGEST,
    HeldRead,
    SignatureLayer,
    append_layer,
    put_signature_config,
    signature_lock,
    signature_tag,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from builder.promote.context import PromotionContext
    from builder.promote.location import Location
    from builder.registry import Descriptor, Manifest

_COUNTERS = ("mounted", "present", "copied", "copied_bytes", "manifests")


def add_stats(into: CopyStats, *more: CopyStats) -> None:
    """Add the counters of ``more`` to ``into``."""
    for st in more:
        for name in _COUNTERS:
            setattr(into, name, getattr(into, name) + getattr(st, name))


def copy_manifest(
    ctx: PromotionContext,
    src: Location,
    dst: Location,
    manifest: Manifest,
    stats: CopyStats,
    *,
    known_absent: bool = False,
    tagged_later: bool = False,
) -> None:
    """Manifest-level copy of ``manifest`` (and its index children) from ``src`` to ``dst``: every
    blob mounted (same registry) or copied only when missing (another registry), in parallel;
    then the manifests PUT by digest, children first. ``known_absent``: ``dst`` is known not to
    hold the manifest (not re-checked). Counts go into ``stats``.

    ``tagged_later``: ``manifest`` itself is not PUT by digest: the caller PUTs the same bytes under
    a tag (the stage pointer) once everything else is written, and that one PUT stores it (a
    manifest PUT by tag stores the manifest and points the tag at it: OCI distribution spec v1.1,
    "Pushing Manifests",
    https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pushing-manifests);
    its index children and every blob are still in place first (the registry refuses a manifest
    naming a missing one). Counted in ``stats.manifests`` here. One request fewer per promotion
    into a repository that does not hold the digest (issue 19), and the digest is not pullable
    from ``dst`` before the tag moves. Only on a registry known to have no referrers API
    (``lacks_referrers_api``): on one with it, the referrers the evidence copy stores alongside
    find their ``subject`` in place, as before."""
    sc, dc = ctx.client(src.registry), ctx.client(dst.registry)
    manifests: list[Manifest] = []
    blobs: dict[str, Descriptor] = {}

    def collect(m: Manifest) -> None:
        if m.is_index:
            for child in m.manifests:
                if dc.try_resolve(dst.repository, child.digest) is None:
                    collect(sc.get_manifest(src.repository, child.digest))
        else:
            for b in m.blobs:
                blobs.setdefault(b.digest, b)
        manifests.append(m)

    if not known_absent and dc.try_resolve(dst.repository, manifest.digest) == manifest.digest:
        return  # a manifest in the registry implies its blobs and children are there
    collect(manifest)
    tagged_later = tagged_later and lacks_referrers_api(ctx, dst.registry)
    transfer_blobs(ctx, src, dst, list(blobs.values()), stats)
    for m in manifests:  # a blob a mount did not keep is copied again (MANIFEST_BLOB_UNKNOWN)
        if not (tagged_later and m is manifest):
            put_manifest_repairing(sc, src.repository, dc, dst.repository, m.digest, m, stats)
        stats.manifests += 1


def transfer_blobs(
    ctx: PromotionContext, src: Location, dst: Location, blobs: Sequence[Descriptor], stats: CopyStats
) -> None:
    """Make ``blobs`` exist in ``dst``, in parallel: one cross-repository mount each within a
    registry (a mount of a blob already there also answers 201), else copy only missing ones."""
    sc, dc = ctx.client(src.registry), ctx.client(dst.registry)
    same = sc.registry == dc.registry and sc.base == dc.base

    def one(desc: Descriptor) -> CopyStats:
        st = CopyStats()
        if same and src.repository == dst.repository:
            st.present += 1
        elif same and dc.mount_blob(dst.repository, desc.digest, src.repository):
            st.mounted += 1
        elif dc.blob_exists(dst.repository, desc.digest):
            st.present += 1
        else:
            st.copied_bytes += dc.copy_blob_from(sc, src.repository, dst.repository, desc)
            st.copied += 1
        return st

    if blobs:
        add_stats(stats, *map_parallel(one, blobs))


def put_shared_config(ctx: PromotionContext, src: Location, dst: Location, source_sig: Manifest | None) -> str:
    """Put ``SIGNATURE_CONFIG`` (the config of every ``.sig``/``.att`` manifest builder writes) into
    ``dst``'s repository; returns its digest. Mounted from ``src``'s repository when both are on
    one registry and ``source_sig`` (the source's ``.sig`` as read; None: absent) names it: the
    copy of that ``.sig`` mounts the same blob, and a client mounts a blob into a repository once
    (``RegistryClient.mount_blob``: threads asking at once share one request), so a promotion
    pays one mount for it, not a mount and an upload (issue 19: two requests fewer for a build
    promoted into another repository). Otherwise, or when the registry does not mount it,
    uploaded once per client and repository (``put_signature_config``). Registry errors propagate."""
    sc, dc = ctx.client(src.registry), ctx.client(dst.registry)
    config = source_sig.config if source_sig is not None else None
    same_registry = sc.registry == dc.registry and sc.base == dc.base and src.repository != dst.repository
    if (
        same_registry
        and config is not None
        and config.digest == SIGNATURE_CONFIG_DIGEST
        and dc.mount_blob(dst.repository, SIGNATURE_CONFIG_DIGEST, src.repository)
    ):
        return SIGNATURE_CONFIG_DIGEST
    return put_signature_config(dc, dst.repository)


def copy_evidence(
    ctx: PromotionContext,
    src: Location,
    dst: Location,
    digest: str,
    stats: CopyStats,
    *,
    known: Mapping[str, Manifest | None] | None = None,
    then: Mapping[str, Callable[[HeldRead | None], object]] | None = None,
) -> None:
    """Copy ``.sig``/``.att`` manifests (byte for byte when the destination has none; otherwise
    every missing layer is appended under the same lock writers use) and referrers (manifest
    copied, destination fallback index rebuilt with each referrer's ``artifactType``).
    ``known``: the source's ``.sig``/``.att`` manifests already read (suffix -> manifest or None).

    ``then``: suffix -> the caller's own append to that tag in ``dst`` (a signature of the copy, a
    promotion record), called once whatever the copy found. When the destination has no such
    manifest yet, the copy and that append are one read-modify-write: the callback gets the source
    manifest as the read under the destination's lock (still held), so the source's layers and
    the caller's are written in one ``PUT`` (and re-read once); otherwise it gets None (the copy
    is done or merged, the lock released: it takes the lock itself)."""
    sc, dc = ctx.client(src.registry), ctx.client(dst.registry)
    after = dict(then or {})

    def one_suffix(suffix: str) -> CopyStats:
        st = CopyStats()
        follow = after.get(suffix)
        tag = signature_tag(digest, suffix)
        sm = known[suffix] if known is not None and suffix in known else sc.try_get_manifest(src.repository, tag)
        if sm is None:
            if follow is not None:
                follow(None)
            return st
        with signature_lock(ctx.lock_dir, dc.registry, dst.repository, tag, ctx.lock_timeout):
            dm = dc.try_get_manifest(dst.repository, tag)
            if dm is None:
                if follow is not None:
                    # the copy and the caller's layer: one write, naming the source's layers and the
                    # shared config (builder.signing.layer.SIGNATURE_CONFIG), not the source's own
                    # config (cosign's lists the layers: the new manifest does not name it)
                    cfg = sm.config
                    shared = [cfg] if cfg is not None and cfg.digest == SIGNATURE_CONFIG_DIGEST else []
                    transfer_blobs(ctx, src, dst, [*shared, *sm.layers], st)
                    # stored=False: the read is what to write, not yet there (a layer of ours already
                    # in it saves no write: the manifest is written as it is)
                    follow(HeldRead({**sm.json, "config": cfg.to_json() if shared and cfg else None}, stored=False))
                else:
                    transfer_blobs(ctx, src, dst, sm.blobs, st)
                    dc.put_manifest(dst.repository, tag, sm.raw, sm.media_type)
                st.manifests += 1
                return st
        transfer_blobs(ctx, src, dst, sm.blobs, st)
        if dm.digest != sm.digest:
            have = {(d.digest, d.annotations) for d in dm.layers}
            for layer in sm.layers:
                if (layer.digest, layer.annotations) in have:
                    continue
                blob = sc.get_blob(src.repository, layer.digest)
                append_layer(
                    dc,
                    dst.repository,
                    digest,
                    suffix,
                    SignatureLayer(layer.media_type, blob, layer.annotation_map),
                    lock_dir=ctx.lock_dir,
                    lock_timeout=ctx.lock_timeout,  # each append takes the tag's lock itself
                )
                st.manifests += 1
        if follow is not None:
            follow(None)
        return st

    def copy_referrers() -> CopyStats:
        st = CopyStats()
        index: Manifest | Unset | None = known[INDEX_KEY] if known is not None and INDEX_KEY in known else UNSET
        for desc in referrers(ctx, src, digest, index):
            listed = sc.try_get_manifest(src.repository, desc.digest)
            if listed is None or copyable(listed, digest) is not None:
                continue  # only referrers whose subject is the digest and whose type builder knows
            copy_image(sc, src.repository, desc.digest, dc, dst.repository, stats=st)
            if desc.artifact_type:
                dc.add_referrer_to_fallback_index(dst.repository, digest, desc)
        return st

    jobs: list[Callable[[], CopyStats]] = [
        lambda: one_suffix(SIG_SUFFIX),
        lambda: one_suffix(ATT_SUFFIX),
        copy_referrers,
        *(functools.partial(one_suffix, sfx) for sfx in approver_suffixes(ctx)),  # approvers' own tags
    ]
    add_stats(stats, *parallel(jobs))
