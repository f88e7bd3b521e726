"""Blobs read by digest once per client (issue 19 item 2, fewer requests): a blob named by its
digest never changes, so a client answers a second read from memory, and threads asking for the
same blob at once share one request; manifests are always asked for. Against the real local
registry."""

from __future__ import annotations

import os
import threading

from builder.registry import RegistryClient, sha256_digest
from builder.registry.cache import ContentCache
from tests.integration.test_registry import push_image


def test_a_blob_is_read_once_per_client_and_repository(registry_address: str, unique_repo: str) -> None:
    setup = RegistryClient(registry_address, insecure=True)
    data = os.urandom(50_000)
    digest = setup.put_blob(unique_repo, data)
    setup.put_blob(unique_repo + "-b", data)
    client = RegistryClient(registry_address, insecure=True)
    assert client.get_blob(unique_repo, digest) == data
    sent = client.requests_sent
    assert client.get_blob(unique_repo, digest) == data
    assert client.requests_sent == sent  # answered from memory
    assert client.get_blob(unique_repo + "-b", digest) == data
    assert client.requests_sent == sent + 1  # another repository is asked on its own


def test_threads_asking_for_one_blob_share_one_request(registry_address: str, unique_repo: str) -> None:
    setup = RegistryClient(registry_address, insecure=True)
    data = os.urandom(300_000)
    digest = setup.put_blob(unique_repo, data)
    client = RegistryClient(registry_address, insecure=True)
    client.ping()
    before = client.requests_sent
    got: list[bytes] = []
    start = threading.Barrier(8)

    def read() -> None:
        start.wait()
        got.append(client.get_blob(unique_repo, digest))

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [data] * 8
    assert client.requests_sent == before + 1


def test_manifests_are_always_asked_for(registry_address: str, unique_repo: str) -> None:
    """A manifest by digest is read to learn whether it still exists (gc, completeness): never
    answered from memory, even after a delete by the same client."""
    setup = RegistryClient(registry_address, insecure=True)
    digest = push_image(setup, unique_repo, layers=1, tag="t")
    client = RegistryClient(registry_address, insecure=True)
    client.get_manifest(unique_repo, digest)
    sent = client.requests_sent
    client.get_manifest(unique_repo, digest)
    assert client.requests_sent == sent + 1
    client.delete_manifest(unique_repo, digest)
    assert client.try_get_manifest(unique_repo, digest) is None


def test_the_cache_is_bounded_and_keeps_only_matching_bytes() -> None:
    cache = ContentCache(item_bytes=10, total_bytes=15)
    small, large = b"x" * 8, b"y" * 11
    d_small, d_large = sha256_digest(small), sha256_digest(large)
    assert cache.blob_once("r", d_small, lambda: small) == small
    assert cache.blob("r", d_small) == small
    assert cache.blob_once("r", d_large, lambda: large) == large
    assert cache.blob("r", d_large) is None  # over the item bound
    other = b"z" * 8
    cache.blob_once("r", sha256_digest(other), lambda: other)
    assert cache.blob("r", sha256_digest(other)) is None  # over the total bound
    wrong = sha256_digest(b"what the digest names")
    assert cache.blob_once("r", wrong, lambda: b"other bytes") == b"other bytes"
    assert cache.blob("r", wrong) is None  # bytes that do not match their digest are never kept
    assert cache.size == len(small)
