"""How a streamed blob's bytes are received into the reader's buffers
(:func:`builder.registry.stream._reader` and ``_fill``), on real responses built from bytes: the
direct connection's (``http.client`` parsing the answer from a socket pair) and urllib3's (the
proxy path). The identity path (``http.client``'s ``readinto`` straight from the socket) runs in
every copy of tests/integration/test_registry_stream.py, where the destination registry checks the
digest."""

from __future__ import annotations

import gzip
import http.client
import io
import socket
from typing import TYPE_CHECKING

import pytest
import urllib3

from builder.registry import connections
from builder.registry.exchange import Urllib3Body
from builder.registry.response import Headers, Response
from builder.registry.stream import _fill, _reader

if TYPE_CHECKING:
    from collections.abc import Callable

URL = "http://127.0.0.1/v2/x/blobs/sha256:0"


def _urllib3(body: bytes, headers: dict[str, str]) -> Response:
    raw = urllib3.HTTPResponse(body=io.BytesIO(body), headers=headers, status=200, preload_content=False)
    return Response(status_code=200, headers=raw.headers, url=URL, body=Urllib3Body(raw))


def _direct(body: bytes, headers: dict[str, str]) -> Response:
    """The answer as a registry sends it, parsed by http.client from one end of a socket pair."""
    ours, theirs = socket.socketpair()
    fields = {**headers, "Content-Length": str(len(body))}
    head = "HTTP/1.1 200 OK\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
    theirs.sendall(head.encode() + body)  # small: fits the socket buffer
    theirs.close()
    resp = http.client.HTTPResponse(ours)
    resp.begin()
    pool = connections.Pool("http", "127.0.0.1", 80, None, 1)
    pool.in_use = 1  # the connection the answer came on is out
    conn = connections._Connection(http.client.HTTPConnection("127.0.0.1"))
    return Response(200, Headers(resp.getheaders()), URL, connections.DirectBody(resp, pool, conn))


KINDS: dict[str, Callable[[bytes, dict[str, str]], Response]] = {"direct": _direct, "urllib3": _urllib3}


@pytest.mark.parametrize("kind", KINDS)
def test_an_encoded_body_is_decoded_into_the_buffers_piece_by_piece(kind: str) -> None:
    data = bytes(range(256)) * 1000  # 256,000 bytes (about 1 KiB compressed)
    resp = KINDS[kind](gzip.compress(data), {"Content-Encoding": "gzip"})
    readinto = _reader(resp)
    buf = memoryview(bytearray(100_000))
    got = []
    while n := _fill(readinto, buf):
        got.append(bytes(buf[:n]))
    assert [len(g) for g in got] == [100_000, 100_000, 56_000]
    assert b"".join(got) == data


@pytest.mark.parametrize("kind", KINDS)
def test_a_short_last_piece_fills_only_what_arrived(kind: str) -> None:
    resp = KINDS[kind](b"abcdef", {})
    buf = memoryview(bytearray(4))
    readinto = _reader(resp)
    assert _fill(readinto, buf) == 4
    assert bytes(buf) == b"abcd"
    assert _fill(readinto, buf) == 2
    assert bytes(buf[:2]) == b"ef"
    assert _fill(readinto, buf) == 0
