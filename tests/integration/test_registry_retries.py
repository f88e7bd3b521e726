"""Retries with backoff on 429/5xx and dropped connections, against a flaky HTTP front on loopback
that forwards to the real registry (the client's retry logic is what is tested)."""

from __future__ import annotations

import http.server
import threading
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

import pytest

from builder.errors import RegistryError
from builder.registry import RegistryClient

if TYPE_CHECKING:
    from collections.abc import Iterator


class Flaky:
    """Answers the first ``failures`` requests with ``status`` (or drops the connection when
    status is 0), then forwards every request to the real registry."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.failures = 0
        self.status = 503
        self.seen: list[str] = []


@pytest.fixture
def flaky(registry_address: str) -> Iterator[tuple[str, Flaky]]:
    state = Flaky(registry_address)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _handle(self) -> None:
            state.seen.append(f"{self.command} {self.path}")
            if state.failures > 0:
                state.failures -= 1
                if state.status == 0:
                    self.close_connection = True
                    self.connection.shutdown(2)  # drop it mid-request: a connection reset
                    return
                body = b'{"errors":[{"code":"UNAVAILABLE"}]}'
                self.send_response(state.status)
                self.send_header("Retry-After", "0")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
                return
            length = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
            req = urllib.request.Request(
                f"http://{state.upstream}{self.path}", data=data, method=self.command, headers=headers
            )
            try:
                resp: Any = urllib.request.urlopen(req, timeout=30)
            except urllib.error.HTTPError as err:
                resp = err
            payload = resp.read()
            self.send_response(resp.status if hasattr(resp, "status") else resp.code)
            for k, v in resp.headers.items():
                if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_HEAD = do_PUT = do_POST = _handle

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()


def test_5xx_and_429_are_retried(flaky: tuple[str, Flaky], registry_address: str) -> None:
    address, state = flaky
    direct = RegistryClient(registry_address, insecure=True)
    digest = direct.resolve("mirror/debian", "bookworm")
    client = RegistryClient(address, insecure=True, backoff=0.01)
    state.failures, state.status = 2, 503
    assert client.resolve("mirror/debian", "bookworm") == digest
    assert len(state.seen) == 3
    state.seen.clear()
    state.failures, state.status = 1, 429
    assert client.get_manifest("mirror/debian", digest).digest == digest
    assert len(state.seen) == 2


def test_retries_are_bounded_and_the_error_names_the_status(flaky: tuple[str, Flaky]) -> None:
    address, state = flaky
    client = RegistryClient(address, insecure=True, retries=2, backoff=0.01)
    state.failures, state.status = 10, 502
    with pytest.raises(RegistryError) as err:
        client.resolve("mirror/debian", "bookworm")
    assert "502" in err.value.message and "mirror/debian:bookworm" in err.value.message
    assert len(state.seen) == 3  # the first attempt + 2 retries


def test_dropped_connection_is_retried(flaky: tuple[str, Flaky], registry_address: str) -> None:
    address, state = flaky
    digest = RegistryClient(registry_address, insecure=True).resolve("mirror/debian", "bookworm")
    client = RegistryClient(address, insecure=True, backoff=0.01)
    state.failures, state.status = 1, 0
    assert client.resolve("mirror/debian", "bookworm") == digest
    assert len(state.seen) == 2
