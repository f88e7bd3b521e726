"""How a streamed blob's bytes are received into the reader's buffers
(:func:`builder.registry.stream._reader` and ``_fill``), on real urllib3 responses built from bytes.
The identity path (``http.client``'s ``readinto`` straight from the socket) runs in every copy of
tests/integration/test_registry_stream.py, where the destination registry checks the digest."""

from __future__ import annotations

import gzip
import io

import urllib3

from builder.registry.response import Response
from builder.registry.stream import _fill, _reader


def _response(body: bytes, headers: dict[str, str]) -> Response:
    raw = urllib3.HTTPResponse(body=io.BytesIO(body), headers=headers, status=200, preload_content=False)
    return Response(status_code=200, headers=raw.headers, url="http://127.0.0.1/v2/x/blobs/sha256:0", raw=raw)


def test_an_encoded_body_is_decoded_into_the_buffers_piece_by_piece() -> None:
    data = bytes(range(256)) * 1000  # 256,000 bytes
    resp = _response(gzip.compress(data), {"Content-Encoding": "gzip"})
    readinto = _reader(resp)
    buf = memoryview(bytearray(100_000))
    got = []
    while n := _fill(readinto, buf):
        got.append(bytes(buf[:n]))
    assert [len(g) for g in got] == [100_000, 100_000, 56_000]
    assert b"".join(got) == data


def test_a_short_last_piece_fills_only_what_arrived() -> None:
    resp = _response(b"abcdef", {})
    buf = memoryview(bytearray(4))
    readinto = _reader(resp)
    assert _fill(readinto, buf) == 4
    assert bytes(buf) == b"abcd"
    assert _fill(readinto, buf) == 2
    assert bytes(buf[:2]) == b"ef"
    assert _fill(readinto, buf) == 0
