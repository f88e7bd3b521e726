"""Referrers of a digest: the OCI referrers API, or the ``sha256-<hex>`` fallback index on
registries without it (OCI distribution spec 1.1, "Listing Referrers" and the referrers tag
schema: https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#listing-referrers).

Which registries lack the API is remembered per process (distribution 2.8 answers 404): asked
once per registry, not once per promotion, always about a digest the repository holds (Harbor
before 2.11 answers 404 for one it does not hold: https://github.com/goharbor/harbor/issues/20014).
An answer other than 200/404 (Quay 3.12's 400: https://github.com/quay/quay/pull/3071) leaves it
unknown and that read uses the tag schema. Errors: the fallback index's registry errors (exit
5-7) propagate.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

from builder.errors import RegistryAuthError, RegistryError
from builder.promote.model import UNSET, Unset
from builder.registry import fallback_tag

if TYPE_CHECKING:
    from builder.promote.context import PromotionContext
    from builder.promote.location import Location
    from builder.registry import Descriptor, Manifest, RegistryClient

KNOWN_REFERRER_TYPES = (
    "application/vnd.dev.sigstore.bundle.v0.3+json",
    "application/vnd.in-toto+json",
    "application/spdx+json",
    "application/vnd.cyclonedx+json",
)
"""Artifact types of the referrers a promotion copies (the evidence builder and its verifiers read):
Sigstore bundles (https://github.com/sigstore/cosign/blob/main/specs/BUNDLE_SPEC.md), in-toto
envelopes (https://github.com/in-toto/attestation/blob/main/spec/v1/envelope.md), SPDX and
CycloneDX SBOMs (https://www.iana.org/assignments/media-types/application/spdx+json,
https://www.iana.org/assignments/media-types/application/vnd.cyclonedx+json). Any other type is
not copied: a referrers listing is data anyone with push rights can write."""

INDEX_KEY = "index"
"""Key of the source's ``sha256-<hex>`` fallback referrers index in ``Plan.evidence_manifests``."""


class _NoReferrersApi:
    """Registry bases (``scheme://host``) that answered the referrers API with 404 in this process."""

    def __init__(self) -> None:
        self.bases: set[str] = set()
        self.guard = threading.Lock()
        self.answered: set[str] = set()  # bases whose referrers API answered 200 or 404 here
        self.probes: dict[str, threading.Lock] = {}  # one probe at a time per base until one answers
        # listings a probe (``learn_referrers_api``) read, kept for the read of the same digest
        # that follows (``referrers``): client -> (repository, digest) -> descriptors
        self.kept: weakref.WeakKeyDictionary[RegistryClient, dict[tuple[str, str], list[Descriptor]]] = (
            weakref.WeakKeyDictionary()
        )


_MEMORY = _NoReferrersApi()

_UNKNOWN = object()
"""``_api_listing`` 's answer when the registry answered neither 200 nor 404 (whether it has the
API stays unknown; this read falls back to the tag schema)."""


def lacks_referrers_api(ctx: PromotionContext, registry: str) -> bool:
    """True when ``registry`` is known (this context or this process) to have no referrers API."""
    base = ctx.client(registry).base
    with _MEMORY.guard:
        return registry in ctx.no_referrers_api or base in _MEMORY.bases


def referrers(
    ctx: PromotionContext,
    loc: Location,
    digest: str,
    known_index: Manifest | Unset | None = UNSET,
    *,
    seen: dict[str, Manifest | None] | None = None,
) -> list[Descriptor]:
    """Referrers of ``digest`` in ``loc``'s repository, which must hold it (a 404 then means "no
    referrers API", never "no such manifest"): the OCI referrers API, or the fallback index when
    the registry has none or answered the API with neither 200 nor 404 (Quay 3.12 answers 400 to
    some referrers requests: https://github.com/quay/quay/pull/3071). ``known_index``: the fallback
    index as the plan read it (a Manifest, or None: absent). ``seen``: when given, the fallback
    index read here is put under ``INDEX_KEY`` (so a later copy in the same run does not read it
    again). Raises RegistryError / RegistryAuthError / RegistryUnavailableError as the fallback
    index's GET does; the referrers API's GET never raises them here."""
    client = ctx.client(loc.registry)
    listed = _listing(ctx, loc, digest)
    if isinstance(listed, list):
        return listed
    index = (
        client.try_get_manifest(loc.repository, fallback_tag(digest)) if isinstance(known_index, Unset) else known_index
    )
    if seen is not None:
        seen[INDEX_KEY] = index
    return index.manifests if index is not None and index.is_index else []


def _listing(ctx: PromotionContext, loc: Location, digest: str) -> list[Descriptor] | object:
    """The referrers API's listing of ``digest`` (a list), a listing a probe kept for it, None (no
    API) or ``_UNKNOWN``. Rows of a new process (status runs 16 at once) ask the registry once
    whether it has the API: the first asks, the others wait for its answer instead of asking too."""
    client = ctx.client(loc.registry)
    key = (loc.repository, digest)
    with _MEMORY.guard:
        kept = _MEMORY.kept.get(client, {}).pop(key, None)
        if kept is not None:
            return kept
        if loc.registry in ctx.no_referrers_api or client.base in _MEMORY.bases:
            return None
        probe = None if client.base in _MEMORY.answered else _MEMORY.probes.setdefault(client.base, threading.Lock())
    if probe is None:
        return _api_listing(ctx, loc, digest)
    with probe:
        with _MEMORY.guard:
            kept = _MEMORY.kept.get(client, {}).pop(key, None)
            if kept is not None:
                return kept
            if loc.registry in ctx.no_referrers_api or client.base in _MEMORY.bases:
                return None
        return _api_listing(ctx, loc, digest)


def learn_referrers_api(ctx: PromotionContext, loc: Location, digest: str) -> None:
    """Make whether ``loc``'s registry has the referrers API known to this context and process, if
    it is not yet: one GET of the referrers of ``digest`` in ``loc``'s repository, which must hold
    it (the source being promoted: a registry with the API answers 200 for a manifest it holds,
    OCI distribution spec v1.1, "Listing Referrers",
    https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#listing-referrers;
    a digest it does not hold may get a 404 from one with the API, as Harbor before 2.11 answers:
    https://github.com/goharbor/harbor/issues/20014). The listing is kept as ``digest`` 's answer
    for the ``referrers`` call of the same read (no second GET; ``forget_kept`` drops it when that
    read did not come). Threads asking at once send one request: the others wait for its answer
    (the same probe lock ``referrers`` takes). An answer other than 200/404 leaves it unknown.
    Used before deciding from a batch's tag listing (``builder.promote.evidence``), where an
    unknown answer costs a request per promotion. Raises RegistryUnavailableError only when the
    registry cannot be reached (no answer)."""
    client = ctx.client(loc.registry)
    with _MEMORY.guard:
        if client.base in _MEMORY.answered or loc.registry in ctx.no_referrers_api:
            return
        probe = _MEMORY.probes.setdefault(client.base, threading.Lock())
    with probe:
        with _MEMORY.guard:
            known = client.base in _MEMORY.answered or loc.registry in ctx.no_referrers_api
        if known:
            return
        _api_listing(ctx, loc, digest, keep=True)


def forget_kept(ctx: PromotionContext, loc: Location, digest: str) -> None:
    """Drop the listing ``learn_referrers_api`` kept for ``digest`` in ``loc`` when no
    ``referrers`` call took it (its read failed first): a later read asks the registry again."""
    client = ctx.client(loc.registry)
    with _MEMORY.guard:
        _MEMORY.kept.get(client, {}).pop((loc.repository, digest), None)


def _api_listing(ctx: PromotionContext, loc: Location, digest: str, *, keep: bool = False) -> list[Descriptor] | object:
    """The referrers API's listing of ``digest`` (which ``loc`` holds); None (remembered for the
    registry, this context and this process) when the registry has no referrers API (404, or a
    200 that is not an OCI index); ``_UNKNOWN`` (nothing remembered) for any other answer.
    ``keep``: a listing is also kept for the next ``referrers`` call about ``digest`` (under the
    same lock that makes the API known, so that call cannot miss it and ask again)."""
    client = ctx.client(loc.registry)
    try:
        listed = client.referrers_api(loc.repository, digest)  # the probe's answer is the listing: one GET
    except (RegistryError, RegistryAuthError):  # 400 (Quay 3.12), 401/403, 405, an invalid index...
        return _UNKNOWN
    with _MEMORY.guard:
        _MEMORY.answered.add(client.base)
        if listed is None:
            ctx.no_referrers_api.add(loc.registry)
            _MEMORY.bases.add(client.base)
        elif keep:
            _MEMORY.kept.setdefault(client, {})[(loc.repository, digest)] = listed
    return listed


def copyable(manifest: Manifest, digest: str) -> str | None:
    """Why the referrer ``manifest`` listed for ``digest`` must not be copied (None: it may be):
    its ``subject`` must be ``digest`` (a fallback index is a tag anyone can push, so it can list
    foreign manifests) and its artifact type one of ``KNOWN_REFERRER_TYPES``."""
    subject = manifest.json.get("subject")
    if not isinstance(subject, dict) or subject.get("digest") != digest:
        named = subject.get("digest") if isinstance(subject, dict) else None
        return f"{manifest.digest}: its subject is {named or 'missing'}, not {digest}"
    if manifest.artifact_type not in KNOWN_REFERRER_TYPES:
        return f"{manifest.digest}: artifact type {manifest.artifact_type or 'none'} is not one builder copies"
    return None
