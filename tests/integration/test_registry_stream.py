"""Streamed blob copies between registries (issue 19 item 1) against the real local registry,
seen under two names (``127.0.0.1`` and ``localhost``: two registries to builder, so every blob
takes the cross-registry path), with the fault proxy in front of the source or the destination."""

from __future__ import annotations

import signal
import tracemalloc
from typing import Literal

import pytest

from builder import process
from builder.errors import RegistryError
from builder.registry import (
    CopyStats,
    Descriptor,
    DockerCredentials,
    RegistryClient,
    copy_image,
    sha256_digest,
    verify_complete,
)
from builder.registry.stream import CHUNK_BYTES, BlobStream
from tests import registries
from tests.corrupt_source import corrupt_source
from tests.faultproxy import Fault, FaultProxy
from tests.integration.test_registry import push_image

MIB = 1024 * 1024
#: What one copy stream holds: the one buffer it receives a piece into and sends it from (a copy
#: reads in the uploading thread, ``BlobStream(ahead=False)``; a reader thread would hold
#: ``AHEAD_CHUNKS + 2`` of them).
PER_STREAM = CHUNK_BYTES


@pytest.fixture
def source(registry_address: str) -> RegistryClient:
    return RegistryClient(registry_address, insecure=True)


@pytest.fixture
def other(registry_address: str) -> RegistryClient:
    """The same registry under another name: a second registry to builder."""
    host, port = registry_address.rsplit(":", 1)
    if host != "127.0.0.1":
        pytest.skip("needs the registry on 127.0.0.1 to address it as localhost too")
    return RegistryClient(f"localhost:{port}", insecure=True, retries=2, backoff=0.05)


def test_a_copy_holds_one_chunk_per_stream_not_the_blob(
    source: RegistryClient, other: RegistryClient, unique_repo: str
) -> None:
    """Three 8 MiB layers copied at once: Python's peak allocation stays near the streams' chunks
    (``PER_STREAM`` each), below the 24 MiB a whole-blob buffer per layer (as the spooled copy held
    up to 64 MiB) would take."""
    digest = push_image(source, unique_repo, layers=3, size=8 * MIB)
    stats = CopyStats()
    tracemalloc.start()
    try:
        copy_image(source, unique_repo, digest, other, unique_repo + "-s", tag="s", stats=stats)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert stats.copied == 4 and stats.copied_bytes > 24 * MIB
    assert peak < 3 * PER_STREAM + 2 * MIB, f"peak Python allocation {peak / MIB:.1f} MiB"
    assert other.resolve(unique_repo + "-s", "s") == digest
    assert verify_complete(other, unique_repo + "-s", digest) == []


def test_copy_streams_bounds_the_streams_at_once(
    source: RegistryClient, registry_address: str, unique_repo: str
) -> None:
    """``copy_streams=1``: the layers are streamed one after another, so one stream's chunks are
    the most a copy holds (four 4 MiB layers held whole would be 16 MiB)."""
    host, port = registry_address.rsplit(":", 1)
    if host != "127.0.0.1":
        pytest.skip("needs the registry on 127.0.0.1 to address it as localhost too")
    one = RegistryClient(f"localhost:{port}", insecure=True, copy_streams=1)
    digest = push_image(source, unique_repo, layers=4, size=4 * MIB)
    tracemalloc.start()
    try:
        copy_image(source, unique_repo, digest, one, unique_repo + "-1", tag="one")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PER_STREAM + 2 * MIB, f"peak Python allocation {peak / MIB:.1f} MiB"
    assert one.resolve(unique_repo + "-1", "one") == digest


def test_a_source_download_broken_off_is_streamed_again(
    source: RegistryClient, other: RegistryClient, registry_address: str, unique_repo: str
) -> None:
    """The source's answer stops after its first piece (twice): the upload is abandoned before
    the registry stores anything, a HEAD finds the blob missing and a new session streams it
    again from a new GET."""
    digest = push_image(source, unique_repo, layers=1, size=3 * MIB)
    layer = source.get_manifest(unique_repo, digest).layers[0]
    with FaultProxy(registry_address) as proxy:
        src = RegistryClient(proxy.address, insecure=True, retries=2, backoff=0.05)
        proxy.add(Fault("cut", method="GET", path=f"/blobs/{layer.digest}", count=2))
        stats = CopyStats()
        copy_image(src, unique_repo, digest, other, unique_repo + "-c", tag="c", stats=stats)
        cut = [s for s in proxy.seen if s.outcome == "cut"]
        gets = [s for s in proxy.seen if s.method == "GET" and "/blobs/" in s.path]
    assert len(cut) == 2
    assert sum(layer.digest in s.path for s in gets) == 3  # two broken, one whole
    assert other.resolve(unique_repo + "-c", "c") == digest
    assert verify_complete(other, unique_repo + "-c", digest) == []


@pytest.mark.parametrize("kind", ["drop", "lose"])
def test_a_failed_upload_is_checked_with_head_then_resumed(
    kind: Literal["drop", "lose"], source: RegistryClient, registry_address: str, unique_repo: str
) -> None:
    """``drop``: the destination's connection drops before the PUT is forwarded (nothing stored:
    a new session streams it again). ``lose``: the registry stored the blob and the answer was
    lost (the HEAD finds it: nothing is sent twice)."""
    digest = push_image(source, unique_repo, layers=1, size=2 * MIB)
    layer = source.get_manifest(unique_repo, digest).layers[0]
    with FaultProxy(registry_address) as proxy:
        dst = RegistryClient(proxy.address, insecure=True, retries=2, backoff=0.05)
        proxy.add(Fault(kind, method="PUT", path=r"/blobs/uploads/", count=1))
        sent = dst.copy_blob_from(source, unique_repo, unique_repo + "-r", layer)
        puts = [s for s in proxy.seen if s.method == "PUT" and "/blobs/uploads/" in s.path]
        heads = [s for s in proxy.seen if s.method == "HEAD" and layer.digest in s.path]
    assert heads, "the destination was asked whether the blob arrived"
    if kind == "drop":
        assert (sent, len(puts)) == (layer.size, 2)
    else:
        assert (sent, len(puts)) == (0, 1)
    assert source.blob_exists(unique_repo + "-r", layer.digest)


def test_a_descriptor_longer_than_the_blob_stores_nothing(
    source: RegistryClient, other: RegistryClient, unique_repo: str
) -> None:
    """A manifest that names a wrong size: the stream ends short, the copy fails naming the blob
    and the sizes, and the destination holds nothing under that digest."""
    digest = push_image(source, unique_repo, layers=1, size=MIB)
    layer = source.get_manifest(unique_repo, digest).layers[0]
    lying = Descriptor(media_type=layer.media_type, digest=layer.digest, size=layer.size + 10)
    with pytest.raises(RegistryError, match=r"ended after 1048576 of the 1048586 bytes"):
        other.copy_blob_from(source, unique_repo, unique_repo + "-l", lying)
    assert not other.blob_exists(unique_repo + "-l", layer.digest)


def test_a_source_serving_other_bytes_stores_nothing(source: RegistryClient, unique_repo: str) -> None:
    """A source whose bytes have the descriptor's size but not its digest (the last byte changed):
    builder's own comparison stops the upload (exit 7, naming the digest the bytes have, never
    retried: one GET), and the real registry holds nothing under the digest."""
    data = bytes(i % 251 for i in range(2 * MIB + 9))
    desc = Descriptor(media_type="application/vnd.oci.image.layer.v1.tar", digest=sha256_digest(data), size=len(data))
    with corrupt_source() as bad:
        bad.body = data[:-1] + bytes([data[-1] ^ 1])
        src = RegistryClient(bad.address, insecure=True, retries=0)
        with pytest.raises(RegistryError, match=f"hashes to {sha256_digest(bad.body)}") as err:
            source.copy_blob_from(src, "x/y", unique_repo + "-v", desc)
        assert src.requests_sent == 1
    assert err.value.exit_code == 7
    assert not source.blob_exists(unique_repo + "-v", desc.digest)


def test_an_interrupted_copy_stores_nothing(source: RegistryClient, other: RegistryClient, unique_repo: str) -> None:
    """A signal (SIGTERM: the command line's handler calls ``process.interrupt``) stops a streamed
    copy at its next piece: the upload ends short of its ``Content-Length`` and the real registry
    stores nothing under the digest; the same copy afterwards stores it whole."""
    digest = push_image(source, unique_repo, layers=1, size=3 * MIB)
    layer = source.get_manifest(unique_repo, digest).layers[0]
    process.interrupt(signal.SIGTERM)
    try:
        with pytest.raises(process.Interrupted):
            other.copy_blob_from(source, unique_repo, unique_repo + "-i", layer)
    finally:
        process.reset_interrupt()
    assert not other.blob_exists(unique_repo + "-i", layer.digest)
    assert other.copy_blob_from(source, unique_repo, unique_repo + "-i", layer) == layer.size
    assert other.blob_exists(unique_repo + "-i", layer.digest)


def test_blobs_already_there_are_not_sent_again(
    source: RegistryClient, other: RegistryClient, unique_repo: str
) -> None:
    """3 of 4 layers present in the destination: one layer and the config move, nothing else."""
    digest = push_image(source, unique_repo, layers=4, size=256 * 1024)
    dst_repo = unique_repo + "-p"
    for layer in source.get_manifest(unique_repo, digest).layers[:3]:
        other.put_blob(dst_repo, source.get_blob(unique_repo, layer.digest))
    stats = CopyStats()
    copy_image(source, unique_repo, digest, other, dst_repo, tag="p", stats=stats)
    assert (stats.present, stats.copied, stats.mounted) == (3, 2, 0)
    assert other.resolve(dst_repo, "p") == digest


@pytest.mark.parametrize("kind", ["basic", "token"])
def test_a_streamed_copy_into_a_password_protected_registry(
    kind: str, source: RegistryClient, unique_repo: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Into a registry that wants a password (htpasswd Basic, or Bearer tokens from a token
    service), with the credentials only in a Docker config: the upload PUT carries the source's
    stream after the challenge was answered."""
    digest = push_image(source, unique_repo, layers=2, size=3 * MIB)
    with registries.auth_registry(tmp_path_factory.mktemp(f"stream-{kind}"), kind) as reg:
        config = reg.docker_config(tmp_path_factory.mktemp("docker-config"))
        dst = RegistryClient(reg.address, insecure=True, auth=DockerCredentials.from_file(config))
        stats = CopyStats()
        copy_image(source, unique_repo, digest, dst, unique_repo, tag="pw", stats=stats)
        assert stats.copied == 3
        assert dst.resolve(unique_repo, "pw") == digest
        assert verify_complete(dst, unique_repo, digest) == []


@pytest.mark.parametrize("ahead", [True, False], ids=["reader-thread", "inline"])
def test_a_stream_ends_once_and_restarts_from_its_first_byte(
    ahead: bool, source: RegistryClient, unique_repo: str
) -> None:
    """What a sender relies on: ``b""`` after the last byte (and after that), ``seek(0)`` starts
    over with a new GET, and closing in the middle stops the reading (and closes the GET)."""
    digest = push_image(source, unique_repo, layers=1, size=3 * MIB + 17)
    layer = source.get_manifest(unique_repo, digest).layers[0]
    stream = BlobStream(source, unique_repo, layer, ahead=ahead)
    first = b"".join(bytes(piece) for piece in stream)  # a piece is valid until the next read
    assert sha256_digest(first) == layer.digest and len(stream) == layer.size == len(first)
    assert stream.read() == b"" and stream.read() == b""
    stream.seek(0)
    assert b"".join(bytes(piece) for piece in stream) == first
    stream.seek(0)
    assert len(stream.read()) > 0
    stream.close()
    with pytest.raises(ValueError, match="first byte"):
        stream.seek(5)
