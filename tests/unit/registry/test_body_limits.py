"""Every answer the transport reads whole (not streamed: pings, token answers, error bodies) is
read with the same limits as ``Transport.read_body``: decoded bytes (a small gzip body that
decodes to 64 MiB stops at the limit, memory bounded), a declared ``Content-Length`` over the
limit (not read), seconds in total. Real servers on 127.0.0.1 (the raw socket server of
test_connections); nothing is timed (the seconds limit is set below zero)."""

from __future__ import annotations

import gzip
import tracemalloc
from typing import TYPE_CHECKING

import pytest

from builder.errors import RegistryError
from tests.unit.registry.test_connections import RawServer, _pool, _transport, ok, serve

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["serve"]  # the fixture, imported for its name

MIB = 1024 * 1024
BOMB = gzip.compress(b"\0" * (64 * MIB), 9)  # about 64 KiB on the wire


def _bomb(status: str = "200 OK", headers: dict[str, str] | None = None) -> bytes:
    return ok(BOMB, {"Content-Encoding": "gzip", "Content-Type": "application/json", **(headers or {})}, status)


def test_a_token_answer_that_decodes_past_the_limit_is_refused_with_memory_bounded(
    serve: Callable[..., RawServer],
) -> None:
    """The registry asks for a token; its token service answers 64 KiB of gzip that would decode
    to 64 MiB: refused at the limit (exit 7), the process never holding much more than it."""

    def answer(line: bytes, body: bytes, n: int) -> bytes:
        if line.startswith(b"GET /token"):
            return _bomb()
        realm = f'Bearer realm="http://127.0.0.1:{server.port}/token",service="s"'
        return ok(b"{}", {"WWW-Authenticate": realm}, "401 Unauthorized")

    server = serve(answer)
    t = _transport(server)
    t.max_body_bytes = 4 * MIB
    tracemalloc.start()
    try:
        with pytest.raises(RegistryError) as info:
            t.request("GET", "/v2/x/manifests/latest")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.exit_code == 7
    assert "sent more than 4 MiB for the token request to http://127.0.0.1:" in info.value.message
    assert peak < 16 * MIB, peak  # urllib3's whole-body decode held all 64 MiB
    assert _pool(t).in_use == 0


@pytest.mark.parametrize("status", ["404 Not Found", "500 Internal Server Error", "200 OK"])
def test_an_answer_read_whole_that_decodes_past_the_limit_is_refused(
    serve: Callable[..., RawServer], status: str
) -> None:
    """An error body (or a ping's) read for its message: the same limit, the same error."""
    server = serve(lambda line, body, n: _bomb(status))
    t = _transport(server, retries=2)
    t.max_body_bytes = 4 * MIB
    with pytest.raises(RegistryError) as info:
        t.request("GET", "/v2/")
    assert info.value.exit_code == 7 and "; stopped reading" in info.value.message
    assert f"registry 127.0.0.1:{server.port} sent more than 4 MiB for " in info.value.message
    assert len(server.requests) == 1 and _pool(t).in_use == 0  # not retried: it would only come again


def test_a_declared_length_over_the_limit_is_not_read(serve: Callable[..., RawServer]) -> None:
    server = serve(lambda line, body, n: ok(b"x" * 2048))
    t = _transport(server)
    t.max_body_bytes = 1024
    with pytest.raises(RegistryError) as info:
        t.request("GET", "/v2/")
    assert "answered 127.0.0.1:" in info.value.message and "with 2048 bytes, over the" in info.value.message
    assert info.value.message.endswith("; not read")


def test_an_answer_read_whole_past_its_seconds_is_refused(serve: Callable[..., RawServer]) -> None:
    server = serve(lambda line, body, n: ok(b'{"errors":[]}', status="404 Not Found"))
    t = _transport(server)
    t.max_body_seconds = -1.0  # already past: no clock is raced
    with pytest.raises(RegistryError) as info:
        t.request("GET", "/v2/x/manifests/latest")
    assert "took over -1 s to send" in info.value.message and "stopped waiting" in info.value.message



@pytest.mark.parametrize(
    ("method", "status"), [("HEAD", "200 OK"), ("GET", "304 Not Modified"), ("HEAD", "404 Not Found")]
)
def test_an_answer_without_a_body_is_not_judged_by_its_content_length(
    serve: Callable[..., RawServer], method: str, status: str
) -> None:
    """A HEAD of a 64 MiB blob says ``Content-Length: 67108864`` and sends no body (RFC 9110
    section 8.6), as a 304 may: nothing over the limit is read, so nothing is refused."""
    server = serve(lambda line, body, n: f"HTTP/1.1 {status}\r\nContent-Length: {64 * MIB}\r\n\r\n".encode())
    t = _transport(server)
    t.max_body_bytes = 1024
    code = int(status.split(maxsplit=1)[0])
    resp = t.request(method, "/v2/x/blobs/sha256:1", ok=(code,))
    assert resp.status_code == code and resp.content == b"" and resp.headers["Content-Length"] == str(64 * MIB)
    assert _pool(t).in_use == 0 and server.connections == 1
