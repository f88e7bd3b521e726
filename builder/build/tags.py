"""Registry look-ups of a build and its tag steps: content tags (write-once) and variant tags (moving).

Only the digest the registry returns is trusted: the write-once step re-reads the tag after its
write, so two builds racing for one content tag never overwrite each other (docs/build.md).
"""

from __future__ import annotations

import concurrent.futures
from typing import TYPE_CHECKING

from builder.build.plan import content_key
from builder.errors import TagConflictError
from builder.registry.manifest import OCI_MANIFEST, Descriptor, canonical_json, parse_json_object
from builder.registry.reference import sha256_digest

#: buildx's attestation-manifest annotation naming the platform manifest it describes
#: (https://docs.docker.com/build/metadata/attestations/attestation-storage/).
REFERENCE_DIGEST = "vnd.docker.reference.digest"

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

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
    """The digest of the pushed image ``digest`` carrying ``annotations`` on its top-level document
    and, for an index, on each runnable platform manifest (the index's and every manifest's own
    ``annotations``, OCI image-spec v1.1:
    https://github.com/opencontainers/image-spec/blob/v1.1.0/annotations.md). buildx writes them
    itself (``--annotation index:KEY=VALUE --annotation manifest:KEY=VALUE``,
    :func:`builder.engine.build_command`); where the builder did not (a BuildKit that does not
    export annotations, or a driver that drops one level), each document missing a key is written
    again with them (compact, key-sorted JSON, so the same push always gives the same digests):

    - each OCI platform manifest (``application/vnd.oci.image.manifest.v1+json``) missing a key is
      PUT by its new digest (config and layers unchanged); Docker schema 2 manifests, which define
      no ``annotations``, are left as they are;
    - the index then names the new digests and sizes, and a buildx attestation manifest's
      ``vnd.docker.reference.digest`` follows its platform manifest to the new digest (BuildKit's
      own unsigned SLSA v0.2 statement inside still names the digest BuildKit pushed: same config
      and layers, without the annotations;
      https://docs.docker.com/build/metadata/attestations/attestation-storage/);
    - the index (or a single-platform image's manifest) is PUT by its new digest.

    Nothing is tagged here: the caller writes the content tag and signs the returned digest, so
    signatures (index and platform manifests) cover the final digests. Returns ``digest`` when
    nothing is missing. Raises the registry's errors."""
    wanted = dict(annotations)
    if not wanted:
        return digest
    manifest = client.get_manifest(repository, digest)
    doc = dict(parse_json_object(manifest.raw, f"{client.registry}/{repository}@{digest}"))
    children = doc.get("manifests")
    if manifest.is_index and isinstance(children, list):
        doc["manifests"] = _annotated_children(client, repository, children, wanted)
    if doc.get("manifests") == children and _carries(doc, wanted):
        return digest
    return _put_annotated(client, repository, doc, wanted, manifest.media_type)


def _carries(doc: Mapping[str, object], wanted: Mapping[str, str]) -> bool:
    """Whether ``doc``'s own ``annotations`` hold every key of ``wanted`` with its value."""
    found = doc.get("annotations")
    return isinstance(found, dict) and all(found.get(k) == v for k, v in wanted.items())


def _put_annotated(
    client: RegistryClient, repository: str, doc: dict[str, object], wanted: Mapping[str, str], media_type: str
) -> str:
    """PUT ``doc`` with ``wanted`` merged into its ``annotations`` (compact, key-sorted JSON) by its
    digest; returns that digest."""
    found = doc.get("annotations")
    doc["annotations"] = {**(found if isinstance(found, dict) else {}), **wanted}
    raw = canonical_json(doc)
    return client.put_manifest(repository, sha256_digest(raw), raw, media_type)


def _annotated_children(
    client: RegistryClient, repository: str, manifests: list[object], wanted: Mapping[str, str]
) -> list[object]:
    """The index's ``manifests`` with each runnable OCI platform manifest missing a key of
    ``wanted`` rewritten with it (PUT by digest; descriptor digest and size updated) and buildx
    attestation manifests' ``vnd.docker.reference.digest`` following it to its new digest."""
    renamed: dict[str, str] = {}
    out: list[object] = []
    for entry in manifests:
        if not isinstance(entry, dict) or entry.get("mediaType") != OCI_MANIFEST:
            out.append(entry)
            continue
        descriptor = Descriptor.from_json(entry, where=f"{client.registry}/{repository}")
        if descriptor.is_attestation:
            out.append(entry)
            continue
        child = client.get_manifest(repository, descriptor.digest)
        child_doc = dict(parse_json_object(child.raw, f"{client.registry}/{repository}@{descriptor.digest}"))
        if _carries(child_doc, wanted):
            out.append(entry)
            continue
        new_digest = _put_annotated(client, repository, child_doc, wanted, OCI_MANIFEST)
        renamed[descriptor.digest] = new_digest
        out.append({**entry, "digest": new_digest, "size": len(canonical_json(child_doc))})
    return [_follow(entry, renamed) for entry in out]


def _follow(entry: object, renamed: Mapping[str, str]) -> object:
    """An index entry whose ``vnd.docker.reference.digest`` names a renamed platform manifest,
    naming the new digest; any other entry as is."""
    refs = entry.get("annotations") if isinstance(entry, dict) else None
    if not isinstance(entry, dict) or not isinstance(refs, dict) or refs.get(REFERENCE_DIGEST) not in renamed:
        return entry
    return {**entry, "annotations": {**refs, REFERENCE_DIGEST: renamed[str(refs[REFERENCE_DIGEST])]}}
