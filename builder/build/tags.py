"""Registry look-ups of a build and its tag steps: content tags (write-once) and variant tags (moving).

Only the digest the registry returns is trusted: the write-once step re-reads the tag after its
write, so two builds racing for one content tag never overwrite each other (docs/build.md).
"""

from __future__ import annotations

import concurrent.futures
from typing import TYPE_CHECKING

from builder.build.plan import content_key
from builder.errors import TagConflictError
from builder.registry.reference import sha256_digest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from builder.models import RenderedImage
    from builder.registry import RegistryClient


def resolve_many(
    client: RegistryClient, refs: Iterable[tuple[str, str]], *, workers: int = 16
) -> dict[tuple[str, str], str | None]:
    """HEAD many ``(repository, tag)`` pairs in parallel -> digest or None (missing).
    Raises RegistryUnavailableError / RegistryAuthError (the first one met)."""
    keys = list(dict.fromkeys(refs))
    if not keys:
        return {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(workers, len(keys)))) as pool:
        digests = list(pool.map(lambda k: client.try_resolve(k[0], k[1]), keys))
    return dict(zip(keys, digests, strict=True))


def lookup_content_tags(
    client: RegistryClient,
    rendered: Sequence[RenderedImage],
    *,
    workers: int = 16,
    repository: Callable[[RenderedImage], str] | None = None,
) -> dict[str, str | None]:
    """HEAD every content tag (in parallel): :func:`content_key` -> digest or None. ``repository``:
    the registry repository of a render (:meth:`BuildOptions.repository`, under the checkout's
    prefix; default the matrix repository). Raises RegistryUnavailableError / RegistryAuthError
    (the first one met)."""
    name = repository or (lambda r: r.variant.repository)
    found = resolve_many(client, ((name(r), r.content_tag) for r in rendered), workers=workers)
    return {content_key(repo, tag): d for (repo, tag), d in found.items()}


def publish_content_tag(client: RegistryClient, repository: str, content_tag: str, digest: str) -> bool:
    """Write-once: PUT the manifest ``digest`` under ``content_tag`` only when the tag does not
    exist; re-read after the write. Returns True when written, False when the tag already held
    ``digest``. Raises TagConflictError (never overwrites) when the tag holds another digest,
    before or after our write."""
    where = f"{client.registry}/{repository}:{content_tag}"
    current = client.try_resolve(repository, content_tag)
    if current == digest:
        return False
    if current is not None:
        raise TagConflictError(
            f"content tag {where} already points at {current}; the build produced {digest}. Nothing was "
            "overwritten (content tags are write-once)",
            reference=where,
            existing=current,
            built=digest,
        )
    manifest = client.get_manifest(repository, digest)
    client.put_manifest(repository, content_tag, manifest.raw, manifest.media_type)
    after = client.try_resolve(repository, content_tag)
    if after != digest:
        raise TagConflictError(
            f"content tag {where} changed under us: it now points at {after}, we wrote {digest} "
            "(another build wrote it at the same time)",
            reference=where,
            existing=after,
            built=digest,
        )
    return True


def move_tag(client: RegistryClient, repository: str, tag: str, digest: str) -> None:
    """Point a moving tag (the variant tag) at ``digest``; no-op when it already does."""
    if client.try_resolve(repository, tag) == digest:
        return
    m = client.get_manifest(repository, digest)
    client.put_manifest(repository, tag, m.raw, m.media_type)


def platforms_of(client: RegistryClient, repository: str, digest: str, fallback: tuple[str, ...]) -> tuple[str, ...]:
    """The platforms of the image ``digest`` (an index: its platforms; else ``fallback``)."""
    from builder.registry import platform_names

    m = client.get_manifest(repository, digest)
    if m.is_index:
        return platform_names(m) or fallback
    return fallback


def annotate_image(client: RegistryClient, repository: str, digest: str, annotations: Iterable[tuple[str, str]]) -> str:
    """The digest of the pushed image ``digest`` carrying ``annotations`` at its top level: the
    index's (or, for a single-platform image without an index, the manifest's) own
    ``annotations``. buildx writes them itself where BuildKit exports annotations
    (``--annotation index,manifest:...``: docker-container and remote builders); the ``docker``
    driver on the classic image store drops them (seen with Docker Engine 26, buildx 0.13), so the
    document is written again with them (compact, key-sorted JSON): platform manifests, layers and
    attestation manifests are unchanged, only the top-level document gets a new digest. Returns
    ``digest`` when nothing is missing. Raises the registry's errors."""
    from builder.registry.manifest import canonical_json, parse_json_object

    wanted = dict(annotations)
    if not wanted:
        return digest
    manifest = client.get_manifest(repository, digest)
    doc = dict(parse_json_object(manifest.raw, f"{client.registry}/{repository}@{digest}"))
    found = doc.get("annotations")
    have: dict[str, object] = dict(found) if isinstance(found, dict) else {}
    if all(have.get(k) == v for k, v in wanted.items()):
        return digest
    doc["annotations"] = {**have, **wanted}
    raw = canonical_json(doc)
    return client.put_manifest(repository, sha256_digest(raw), raw, manifest.media_type)
