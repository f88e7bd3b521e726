"""One exchange on the origin's own keep-alive pool (builder.registry.exchange): an absolute URL
sent as its path and query, a 303 after an upload followed as a body-less GET, a pool whose idle
connections were closed serving the next request on a new one without losing it. Real sockets: a
small HTTP/1.1 server on 127.0.0.1 that records what arrives."""

from __future__ import annotations

import http.server
import threading
from typing import TYPE_CHECKING

import pytest

from builder.registry.auth import Authenticator
from builder.registry.connections import Pool
from builder.registry.exchange import split_url
from builder.registry.transport import Transport

if TYPE_CHECKING:
    from collections.abc import Iterator


class _Recorder(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as registries answer
    seen: list[tuple[str, str, dict[str, str], bytes]]

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""

    def _answer(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(size) if size else b""
        self.seen.append((self.command, self.path, dict(self.headers.items()), body))
        if self.path.startswith("/v2/r/blobs/uploads/"):
            self.send_response(303)
            self.send_header("Location", "/v2/r/blobs/sha256:done")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        if self.command != "HEAD":  # a HEAD answer has no body (RFC 9110 section 9.3.2)
            self.wfile.write(b"ok")

    do_GET = do_PUT = do_HEAD = _answer


@pytest.fixture
def server() -> Iterator[tuple[str, list[tuple[str, str, dict[str, str], bytes]]]]:
    seen: list[tuple[str, str, dict[str, str], bytes]] = []
    handler = type("Handler", (_Recorder,), {"seen": seen})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{srv.server_address[1]}", seen
    finally:
        srv.shutdown()
        srv.server_close()


def _transport(address: str) -> Transport:
    return Transport(address, Authenticator(address, None), insecure=True, retries=0)


def test_split_url_gives_origin_target_and_path() -> None:
    url = "http://r.example:5000/v2/a/b/blobs/uploads/u?_state=x%2Fy%3D%3D#frag"
    assert split_url(url) == (
        "http://r.example:5000",
        "/v2/a/b/blobs/uploads/u?_state=x%2Fy%3D%3D",
        "/v2/a/b/blobs/uploads/u",
    )
    assert split_url("https://auth.example/token?service=s") == ("https://auth.example", "/token?service=s", "/token")
    assert split_url("HTTP://h?q=1") == ("http://h", "/?q=1", "")  # urllib3's request_uri: "/" and the query
    assert split_url("http://h") == ("http://h", "/", "")


def test_an_absolute_url_is_sent_as_its_path_and_query_on_one_connection(
    server: tuple[str, list[tuple[str, str, dict[str, str], bytes]]],
) -> None:
    address, seen = server
    transport = _transport(address)
    url = f"http://{address}/v2/r/manifests/t?_state=a%2Fb%3D%3D&n=1#not-sent"
    for _ in range(3):
        assert transport.request("GET", url).content == b"ok"
        assert transport.request("HEAD", "/v2/r/manifests/t").status_code == 200
    assert [(m, p) for m, p, _, _ in seen] == [
        ("GET", "/v2/r/manifests/t?_state=a%2Fb%3D%3D&n=1"),
        ("HEAD", "/v2/r/manifests/t"),
    ] * 3
    assert {h["Host"] for _, _, h, _ in seen} == {address}
    pool = transport.route(url)
    assert isinstance(pool, Pool) and pool is transport.route(transport.url("/v2/"))  # one pool per origin
    assert (pool.opened, pool.in_use) == (1, 0)  # one keep-alive connection for all six


def test_a_303_after_an_upload_is_followed_as_a_get_without_the_body(
    server: tuple[str, list[tuple[str, str, dict[str, str], bytes]]],
) -> None:
    """RFC 9110 section 15.4.4: the answer to a 303 is fetched with GET; the body and the headers
    describing it are not sent again (urllib3's PoolManager does the same)."""
    address, seen = server
    transport = _transport(address)
    resp = transport.request(
        "PUT",
        f"http://{address}/v2/r/blobs/uploads/u?_state=s",
        data=b"layer bytes",
        headers={"Content-Type": "application/octet-stream", "X-Kept": "1"},
    )
    assert resp.status_code == 200 and resp.content == b"ok"
    assert resp.url == f"http://{address}/v2/r/blobs/sha256:done"  # where the answer came from
    (put, put_path, put_headers, put_body), (get, get_path, get_headers, get_body) = seen
    assert (put, put_path, put_body, put_headers["Content-Type"]) == (
        "PUT",
        "/v2/r/blobs/uploads/u?_state=s",
        b"layer bytes",
        "application/octet-stream",
    )
    assert (get, get_path, get_body) == ("GET", "/v2/r/blobs/sha256:done", b"")
    assert "Content-Type" not in get_headers and "Content-Length" not in get_headers
    assert get_headers["X-Kept"] == "1"
    assert transport.requests_sent == 1  # one request of builder's, its redirect followed inside it


def test_a_pool_whose_idle_connections_were_closed_does_not_lose_the_request(
    server: tuple[str, list[tuple[str, str, dict[str, str], bytes]]],
) -> None:
    """Closing a pool closes its idle connections (those a process ending or a caller gives up);
    the next request goes out on a new connection of the same pool, nothing lost, nothing sent
    twice."""
    address, seen = server
    transport = _transport(address)
    assert transport.request("GET", "/v2/r/manifests/t").content == b"ok"
    pool = transport.route(transport.base + "/")
    assert isinstance(pool, Pool)
    pool.close()
    for _ in range(2):
        assert transport.request("GET", "/v2/r/manifests/t").content == b"ok"
    assert len(seen) == 3 and transport.requests_sent == 3
    assert (pool.opened, pool.in_use) == (2, 0) and transport.route(transport.base + "/") is pool
