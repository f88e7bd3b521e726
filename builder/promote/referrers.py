"""Referrers of a digest: the OCI referrers API, or the ``sha256-<hex>`` fallback index on
registries without it (OCI distribution spec 1.1, "Listing Referrers" and the referrers tag
schema: https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#listing-referrers).

Which registries lack the API is remembered per process (distribution 2.8 answers 404): asked
once per registry, not once per promotion. Errors: registry errors (exit 5-7) propagate.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from builder.promote.model import UNSET, Unset
from builder.registry import fallback_tag

if TYPE_CHECKING:
    from builder.promote.context import PromotionContext
    from builder.promote.location import Location
    from builder.registry import Descriptor, Manifest

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
        self.answered: set[str] = set()  # bases whose referrers API answered (or was found missing) here
        self.probes: dict[str, threading.Lock] = {}  # one probe at a time per base until one answers


_MEMORY = _NoReferrersApi()


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
    """Referrers of ``digest`` in ``loc``'s repository: the OCI referrers API, or the fallback index
    when the registry has none. ``known_index``: the fallback index as the plan read it (a Manifest,
    or None: absent). ``seen``: when given, the fallback index read here is put under ``INDEX_KEY``
    (so a later copy in the same run does not read it again)."""
    client = ctx.client(loc.registry)
    if not lacks_referrers_api(ctx, loc.registry):
        with _MEMORY.guard:
            known = client.base in _MEMORY.answered
            probe = None if known else _MEMORY.probes.setdefault(client.base, threading.Lock())
        if probe is None:
            listed = _api_listing(ctx, loc, digest)
        else:
            # rows of a new process (status runs 16 at once) ask the registry once whether it has
            # the API: the first asks, the others wait for its answer instead of asking too
            with probe:
                listed = None if lacks_referrers_api(ctx, loc.registry) else _api_listing(ctx, loc, digest)
        if listed is not None:
            return listed
    index = (
        client.try_get_manifest(loc.repository, fallback_tag(digest)) if isinstance(known_index, Unset) else known_index
    )
    if seen is not None:
        seen[INDEX_KEY] = index
    return index.manifests if index is not None and index.is_index else []


PROBE_DIGEST = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
"""The digest ``learn_referrers_api`` asks the referrers of: SHA-256 of no bytes, a well-formed
digest (a registry with the API answers an existing repository 200 with an empty index for a
digest nothing refers to, never 404: OCI distribution spec v1.1, "Listing Referrers",
https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#listing-referrers)."""


def learn_referrers_api(ctx: PromotionContext, loc: Location) -> None:
    """Make whether ``loc``'s registry has the referrers API known to this context and process, if
    it is not yet: one GET of the referrers of ``PROBE_DIGEST`` in ``loc``'s repository, which must
    exist (a source the caller has read). Threads asking at once send one request: the others wait
    for its answer (the same probe lock ``referrers`` takes, so a plan's own listing and this
    probe never both ask). Used before deciding from a batch's tag listing
    (``builder.promote.evidence``), where an unknown answer costs a request per promotion.
    Raises RegistryError (exit 5-7) / RegistryAuthError as the GET does."""
    client = ctx.client(loc.registry)
    with _MEMORY.guard:
        if client.base in _MEMORY.answered or loc.registry in ctx.no_referrers_api:
            return
        probe = _MEMORY.probes.setdefault(client.base, threading.Lock())
    with probe:
        with _MEMORY.guard:
            known = client.base in _MEMORY.answered or loc.registry in ctx.no_referrers_api
        if not known:
            _api_listing(ctx, loc, PROBE_DIGEST)


def _api_listing(ctx: PromotionContext, loc: Location, digest: str) -> list[Descriptor] | None:
    """The referrers API's listing of ``digest``; None (remembered for the registry, this context
    and this process) when the registry has no referrers API."""
    client = ctx.client(loc.registry)
    listed = client.referrers_api(loc.repository, digest)  # the probe's answer is the listing: one GET
    with _MEMORY.guard:
        _MEMORY.answered.add(client.base)
        if listed is None:
            ctx.no_referrers_api.add(loc.registry)
            _MEMORY.bases.add(client.base)
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
