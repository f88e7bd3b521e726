"""A streamed blob is verified before its last byte can leave (issue 19: every byte hashed and
compared before the upload is committed; the registry's check of ``?digest=`` is a second line).

The source is :mod:`tests.corrupt_source` (a real HTTP server answering blob GETs with bytes of
its choosing); tests/integration/test_registry_stream.py copies from it into the real registry."""

from __future__ import annotations

import hashlib
import signal
from typing import TYPE_CHECKING

import pytest

from builder import process
from builder.errors import RegistryError
from builder.registry import Descriptor, RegistryClient, sha256_digest
from builder.registry.stream import AHEAD_CHUNKS, CHUNK_BYTES, BlobStream
from tests.corrupt_source import CorruptSource, corrupt_source

if TYPE_CHECKING:
    from collections.abc import Iterator

LAYER = "application/vnd.oci.image.layer.v1.tar"


@pytest.fixture(params=[True, False], ids=["reader-thread", "inline"])
def ahead(request: pytest.FixtureRequest) -> bool:
    """Both ways a stream reads: a reader thread ahead of the caller (layer summaries), or in the
    caller's thread (copies)."""
    return bool(request.param)


@pytest.fixture
def bad_source() -> Iterator[CorruptSource]:
    with corrupt_source() as server:
        yield server


def blob(size: int) -> tuple[bytes, Descriptor]:
    data = bytes(i % 251 for i in range(size))
    return data, Descriptor(media_type=LAYER, digest=sha256_digest(data), size=size)


def handed_out(stream: BlobStream) -> tuple[int, RegistryError | None]:
    """Bytes ``stream.read`` handed out before it ended, and the error that ended it (None: ``b""``)."""
    n = 0
    try:
        while piece := stream.read():
            n += len(piece)
    except RegistryError as exc:
        return n, exc
    finally:
        stream.close()
    return n, None


@pytest.mark.parametrize("where", [0, CHUNK_BYTES + 5, 3 * CHUNK_BYTES + 16])
def test_bytes_of_the_right_size_but_another_digest_never_reach_the_last_byte(
    where: int, bad_source: CorruptSource, ahead: bool
) -> None:
    """One byte changed (in the first piece, a middle one, the very last byte): the mismatch is
    raised before the piece that completes the blob is handed out, so an upload sent with the
    blob's ``Content-Length`` stops short of it and cannot be committed."""
    data, desc = blob(3 * CHUNK_BYTES + 17)
    corrupt = bytearray(data)
    corrupt[where] ^= 0xFF
    bad_source.body = bytes(corrupt)
    src = RegistryClient(bad_source.address, insecure=True, retries=0)
    n, err = handed_out(BlobStream(src, "x/y", desc, ahead=ahead))
    assert err is not None and f"hashes to {sha256_digest(bytes(corrupt))}" in err.message
    assert err.exit_code == 7 and "do not copy from it" in (err.hint or "")
    assert n == 3 * CHUNK_BYTES  # every piece but the last 17 bytes


def test_a_source_longer_than_its_descriptor_is_refused_before_the_last_piece(
    bad_source: CorruptSource, ahead: bool
) -> None:
    """The blob's own bytes followed by more: the first ``size`` bytes hash right, yet the
    surplus is found before the last piece goes (a blob ending on a chunk boundary, where the
    surplus arrives only with the next receive)."""
    data, desc = blob(2 * CHUNK_BYTES)
    bad_source.body = data + b"extra"
    src = RegistryClient(bad_source.address, insecure=True, retries=0)
    n, err = handed_out(BlobStream(src, "x/y", desc, ahead=ahead))
    assert err is not None and f"is longer than the {2 * CHUNK_BYTES} bytes" in err.message
    assert n == CHUNK_BYTES


@pytest.mark.parametrize("algorithm", ["sha512", "sha384"])
def test_a_blob_of_another_registered_algorithm_is_verified_with_it(
    algorithm: str, bad_source: CorruptSource, ahead: bool
) -> None:
    """A sha512 (OCI-registered) or sha384 descriptor: its own bytes pass, other bytes of the same
    size are refused before the last piece. (Before, only sha256 digests were compared: wrong bytes
    under a sha512 digest were all handed out, checked for their size alone.)"""
    data = bytes(i % 251 for i in range(2 * CHUNK_BYTES + 9))
    digest = f"{algorithm}:{hashlib.new(algorithm, data).hexdigest()}"
    desc = Descriptor(media_type=LAYER, digest=digest, size=len(data))
    src = RegistryClient(bad_source.address, insecure=True, retries=0)
    bad_source.body = data
    assert handed_out(BlobStream(src, "x/y", desc, ahead=ahead)) == (len(data), None)
    bad_source.body = bytes(reversed(data))
    n, err = handed_out(BlobStream(src, "x/y", desc, ahead=ahead))
    assert err is not None and f"hashes to {algorithm}:" in err.message
    assert n == 2 * CHUNK_BYTES


def test_a_digest_algorithm_builder_cannot_verify_hands_out_nothing(bad_source: CorruptSource, ahead: bool) -> None:
    data = b"x" * 100
    bad_source.body = data
    desc = Descriptor(media_type=LAYER, digest="md5:" + hashlib.md5(data).hexdigest(), size=len(data))
    src = RegistryClient(bad_source.address, insecure=True, retries=0)
    n, err = handed_out(BlobStream(src, "x/y", desc, ahead=ahead))
    assert n == 0
    assert err is not None and err.exit_code == 7 and "'md5', which builder cannot verify" in err.message


@pytest.mark.parametrize(("body", "error"), [(b"", None), (b"x", "is longer than the 0 bytes")])
def test_an_empty_blob_is_checked_too(body: bytes, error: str | None, bad_source: CorruptSource, ahead: bool) -> None:
    _, desc = blob(0)
    bad_source.body = body
    src = RegistryClient(bad_source.address, insecure=True, retries=0)
    n, err = handed_out(BlobStream(src, "x/y", desc, ahead=ahead))
    assert n == 0
    if error is None:
        assert err is None
    else:
        assert err is not None and error in err.message


def test_the_right_bytes_are_all_handed_out_then_the_end(bad_source: CorruptSource, ahead: bool) -> None:
    data, desc = blob(2 * CHUNK_BYTES + 3)
    bad_source.body = data
    src = RegistryClient(bad_source.address, insecure=True, retries=0)
    stream = BlobStream(src, "x/y", desc, ahead=ahead)
    assert b"".join(bytes(p) for p in stream) == data
    assert stream.read() == b""


def test_a_signal_stops_the_stream_at_the_next_piece(bad_source: CorruptSource, ahead: bool) -> None:
    """SIGTERM after the first piece (the command line's handler calls ``process.interrupt``):
    the stream raises ``Interrupted`` (exit 143) before it receives another piece, so an upload
    stops short of its ``Content-Length``; a reader thread hands out at most what it had already
    queued. (Before, a copy went on to the blob's last byte.)"""
    data, desc = blob(8 * CHUNK_BYTES)
    bad_source.body = data
    src = RegistryClient(bad_source.address, insecure=True, retries=0)
    stream = BlobStream(src, "x/y", desc, ahead=ahead)
    more = 0
    try:
        assert len(stream.read()) == CHUNK_BYTES
        process.interrupt(signal.SIGTERM)
        with pytest.raises(process.Interrupted) as err:
            while stream.read():
                more += 1
    finally:
        process.reset_interrupt()
        stream.close()
    assert err.value.exit_code == 143
    assert more <= (AHEAD_CHUNKS + 1 if ahead else 0)
