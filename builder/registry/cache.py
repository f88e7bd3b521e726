"""Blobs named by their digest, read once per client: a blob addressed by ``sha256:<hex>`` can
never change (OCI image-spec v1.1 "Descriptors", digests identify content:
https://github.com/opencontainers/image-spec/blob/v1.1.0/descriptor.md#digests), so a second
read of it in the same invocation (``status`` looks at the same evidence for every stage a digest
is in; a promotion reads the signature blobs it verified while planning) is answered from memory.

Keyed by repository and digest (a blob readable in one repository says nothing about another;
a cross-repository mount that answered 201 is the exception: ``RegistryClient.mount_blob`` keeps
the bytes it holds for the source under the destination too).
Only bytes whose sha256 was checked are kept. Bounded: items up to ``item_bytes``, at most
``total_bytes`` in all (beyond that nothing more is kept; nothing is evicted). Thread-safe.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from builder.registry.reference import sha256_digest

if TYPE_CHECKING:
    from collections.abc import Callable

ITEM_BYTES = 4 * 1024 * 1024
TOTAL_BYTES = 64 * 1024 * 1024


class ContentCache:
    """Blobs by (repository, digest), within the size bounds. A blob deleted after this client
    read it is still answered from here: a client lives for one invocation, and whether a blob
    exists is asked with ``HEAD`` (``blob_exists``), never from here. Manifests are not kept:
    commands read a manifest by digest to learn whether it still exists (``gc``, completeness)."""

    def __init__(self, *, item_bytes: int = ITEM_BYTES, total_bytes: int = TOTAL_BYTES) -> None:
        self.item_bytes = item_bytes
        self.total_bytes = total_bytes
        self.size = 0
        self.hits = 0
        self._blobs: dict[tuple[str, str], bytes] = {}
        self._loading: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()

    def blob(self, repository: str, digest: str) -> bytes | None:
        """The blob's bytes when kept, else None."""
        with self._lock:
            got = self._blobs.get((repository, digest))
            self.hits += got is not None
            return got

    def blob_once(self, repository: str, digest: str, load: Callable[[], bytes]) -> bytes:
        """The blob's bytes: kept ones, else ``load()`` (what the registry served), kept when
        their sha256 is ``digest``. Threads asking for the same blob at once wait for the first
        one's read instead of sending their own. ``load``'s errors propagate."""
        key = (repository, digest)
        with self._lock:
            if (got := self._blobs.get(key)) is not None:
                self.hits += 1
                return got
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:
            if (got := self.blob(repository, digest)) is not None:
                return got
            data = load()
            if sha256_digest(data) == digest:
                self.keep_blob(repository, digest, data)
            return data

    def keep_blob(self, repository: str, digest: str, data: bytes) -> None:
        """Keep ``data`` (its sha256 already checked against ``digest``) when it fits."""
        with self._lock:
            if self._fits(len(data)) and (repository, digest) not in self._blobs:
                self._blobs[(repository, digest)] = data
                self.size += len(data)

    def _fits(self, n: int) -> bool:
        return n <= self.item_bytes and self.size + n <= self.total_bytes
