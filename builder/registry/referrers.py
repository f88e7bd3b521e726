"""Referrers of a manifest (manifests whose ``subject`` names it: signatures, attestations,
SBOMs): the referrers API, and the ``sha256-<hex>`` fallback tag index for registries without
it, read and written (concurrent writers in one process serialised, across processes on one
machine by a file lock, and any lost entry detected by re-reading).

Sources: OCI distribution-spec v1.1, "Listing Referrers" and "Referrers Tag Schema"
(https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#listing-referrers,
https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#referrers-tag-schema),
OCI image-spec v1.1 (``artifactType``, ``subject``;
https://github.com/opencontainers/image-spec/blob/v1.1.0/manifest.md).

Errors: those of :class:`builder.registry.client.RegistryClient` (``RegistryUnavailableError``
exit 5, ``RegistryAuthError`` exit 6, ``NotFoundError`` exit 8, ``RegistryError`` exit 7);
``RegistryError`` also when the fallback tag holds something else or an entry does not stick.
"""

from __future__ import annotations

import hashlib
import random
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from builder import process
from builder.errors import RegistryError
from builder.lockfile import held
from builder.registry.manifest import Descriptor
from builder.registry.media import OCI_INDEX, canonical_json, parse_json_object
from builder.registry.reference import fallback_tag

if TYPE_CHECKING:
    from pathlib import Path

    from builder.registry.api import RegistryApi


def referrers(client: RegistryApi, repository: str, digest: str, artifact_type: str | None = None) -> list[Descriptor]:
    """Manifests whose ``subject`` is ``digest``: the referrers API when it answers a 200 OCI
    index (:func:`referrers_api`), else the ``sha256-<hex>`` fallback tag index (none: empty
    list). Filtered by ``artifact_type`` when given."""
    try:
        descs = referrers_api(client, repository, digest, artifact_type)
    except RegistryError:  # an answer other than 200/404 (e.g. 400, 405): treated as no API
        descs = None
    if descs is None:
        index = client.try_get_manifest(repository, fallback_tag(digest))
        descs = index.manifests if index is not None and index.is_index else []
    if artifact_type:
        descs = [d for d in descs if d.artifact_type == artifact_type]
    return descs


def referrers_api(
    client: RegistryApi, repository: str, digest: str, artifact_type: str | None = None
) -> list[Descriptor] | None:
    """One GET of the referrers API (``/v2/<name>/referrers/<digest>``, ``?artifactType=`` when
    given; OCI distribution-spec v1.1, "Listing Referrers":
    https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#listing-referrers):
    the descriptors of its OCI index, as the registry filtered them; None when the registry has
    no referrers API (404, as distribution 2.8 answers, or a 200 that is not an OCI index).
    Raises RegistryError (NotFoundError excluded) for other answers, RegistryAuthError."""
    path = f"/v2/{repository}/referrers/{digest}"
    if artifact_type:
        path += "?" + urlencode({"artifactType": artifact_type})
    where = f"{repository}@{digest} (referrers)"
    resp = client.request("GET", path, ref=where, ok=(200, 404), stream=True)
    if resp.status_code != 200 or resp.headers.get("Content-Type", "").split(";")[0].strip() != OCI_INDEX:
        resp.close()  # not read: the connection goes back to the pool
        return None
    # read with the body limits: a referrers answer is a document, never a stream to fill memory with
    body = parse_json_object(client.transport.read_body(resp, where), f"referrers of {repository}@{digest}")
    return [Descriptor.from_json(d, where="referrers") for d in body.get("manifests") or []]


def add_referrer_to_fallback_index(
    client: RegistryApi,
    repository: str,
    subject_digest: str,
    descriptor: Descriptor,
    *,
    attempts: int = 6,
    lock_dir: Path | None = None,
    lock_timeout: float = 60.0,
) -> str:
    """Add ``descriptor`` (with ``artifactType``) to the ``sha256-<hex>`` fallback index of
    ``subject_digest``: GET-or-create, add (an entry with the same digest is replaced), sort
    by digest, PUT, re-read; when a concurrent writer dropped our entry, start over (bounded).
    The referrer manifest itself must already be pushed. Returns the index digest.
    Writers in one process are serialised per index; ``lock_dir`` adds a file lock there
    (one per registry/repository/tag) so processes on one machine are serialised too.
    Raises RegistryError when the entry does not stick after ``attempts`` tries (or the file
    lock is not acquired within ``lock_timeout`` seconds)."""
    if not descriptor.artifact_type:
        raise ValueError("a fallback-index entry needs artifactType (consumers filter on it)")
    tag = fallback_tag(subject_digest)
    with _index_lock(client.registry, repository, tag):
        if lock_dir is None:
            return _add_to_fallback_index(client, repository, tag, descriptor, attempts)
        key = hashlib.sha256(f"{client.registry}/{repository}:{tag}".encode()).hexdigest()[:32]
        with held(
            lock_dir / f"referrers-{key}.lock",
            lock_timeout,
            lambda path: RegistryError(
                f"another process holds the lock of {client.registry}/{repository}:{tag} for {lock_timeout:.0f} s",
                hint=f"wait for it to finish, or remove a stale lock file {path}",
            ),
            what=f"the referrers index {client.registry}/{repository}:{tag}",
        ):
            return _add_to_fallback_index(client, repository, tag, descriptor, attempts)


def _add_to_fallback_index(
    client: RegistryApi, repository: str, tag: str, descriptor: Descriptor, attempts: int
) -> str:
    for attempt in range(attempts):
        current = client.try_get_manifest(repository, tag)
        if current is not None and not current.is_index:
            raise RegistryError(
                f"{client.registry}/{repository}:{tag} exists but is not an OCI index ({current.media_type})",
                hint="the referrers fallback tag is reserved for the index of referrers; remove what is there",
            )
        doc: dict[str, Any] = (
            dict(current.json) if current is not None else {"schemaVersion": 2, "mediaType": OCI_INDEX}
        )
        entries = [d for d in (doc.get("manifests") or []) if d.get("digest") != descriptor.digest]
        if current is not None and any(
            d.get("digest") == descriptor.digest and d.get("artifactType") == descriptor.artifact_type
            for d in doc.get("manifests") or []
        ):
            return current.digest
        entries.append(descriptor.to_json())
        entries.sort(key=lambda d: str(d.get("digest")))
        doc["manifests"] = entries
        doc.setdefault("schemaVersion", 2)
        doc["mediaType"] = OCI_INDEX
        raw = canonical_json(doc)
        client.put_manifest(repository, tag, raw, OCI_INDEX)
        process.backoff(random.uniform(0.0, 0.02) * attempt)  # writers spread out; ends at SIGTERM/SIGINT
        after = client.get_manifest(repository, tag)
        if any(d.digest == descriptor.digest for d in after.manifests):
            return after.digest
    raise RegistryError(
        f"could not add {descriptor.digest} to the referrers index {client.registry}/{repository}:{tag} "
        f"after {attempts} attempts (concurrent writers)",
        hint="retry; if it persists, something keeps rewriting the fallback index",
    )


_INDEX_LOCKS: dict[tuple[str, str, str], threading.Lock] = {}
_INDEX_LOCKS_GUARD = threading.Lock()


def _index_lock(registry: str, repository: str, tag: str) -> threading.Lock:
    """One lock per fallback index in this process: writers in one process never lose each
    other's entries; across processes the re-read after each write detects a lost entry."""
    with _INDEX_LOCKS_GUARD:
        return _INDEX_LOCKS.setdefault((registry, repository, tag), threading.Lock())
