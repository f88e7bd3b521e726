"""Retries with backoff on 429/5xx and dropped connections, against a flaky HTTP front on loopback
that forwards to the real registry (the client's retry logic is what is tested)."""

from __future__ import annotations

import http.server
import threading
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

import pytest

from builder.errors import RegistryError, RegistryUnavailableError
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


@pytest.mark.parametrize("status", [502, 503, 504])
def test_retries_are_bounded_and_a_gateway_error_is_unavailable(flaky: tuple[str, Flaky], status: int) -> None:
    """Still 502/503/504 after the retries: the registry is unavailable (exit 5, as a connection
    that cannot be made), the message says how many attempts over how long, the hint which
    settings decide the retries."""
    address, state = flaky
    client = RegistryClient(address, insecure=True, retries=2, backoff=0.01)
    state.failures, state.status = 10, status
    with pytest.raises(RegistryUnavailableError) as err:
        client.resolve("mirror/debian", "bookworm")
    assert err.value.exit_code == 5 and err.value.kind == "registry-unavailable"
    message, hint = err.value.message, err.value.hint
    assert f"HTTP {status}" in message and "mirror/debian:bookworm" in message and "unavailable" in message
    assert "3 attempts over " in message and err.value.details["attempts"] == 3
    assert "registry_retries" in hint and "BUILDER_REGISTRY_RETRIES, now 2" in hint and "registry_backoff_ms" in hint
    assert len(state.seen) == 3  # the first attempt + 2 retries


def test_rate_limited_beyond_the_retries_says_so(flaky: tuple[str, Flaky]) -> None:
    address, state = flaky
    client = RegistryClient(address, insecure=True, retries=1, backoff=0.01)
    state.failures, state.status = 10, 429
    with pytest.raises(RegistryUnavailableError) as err:
        client.get_manifest("mirror/debian", "bookworm")
    assert err.value.exit_code == 5
    assert "rate-limits" in err.value.message and "2 attempts over " in err.value.message
    assert "Retry-After" in err.value.message and "UNAVAILABLE" in err.value.message  # the body's error code
    assert "registry_max_delay_ms" in err.value.hint and "BUILDER_REGISTRY_RETRIES, now 1" in err.value.hint
    assert len(state.seen) == 2


def test_a_500_stays_the_registrys_error_naming_the_attempts(flaky: tuple[str, Flaky]) -> None:
    address, state = flaky
    client = RegistryClient(address, insecure=True, retries=1, backoff=0.01)
    state.failures, state.status = 10, 500
    with pytest.raises(RegistryError) as err:
        client.resolve("mirror/debian", "bookworm")
    assert err.value.exit_code == 7 and "HTTP 500" in err.value.message and "2 attempts over " in err.value.message
    state.failures, state.status = 10, 418  # not retried: unchanged
    with pytest.raises(RegistryError) as once:
        client.resolve("mirror/debian", "bookworm")
    assert once.value.exit_code == 7 and "attempt" not in once.value.message


def test_dropped_connection_is_retried(flaky: tuple[str, Flaky], registry_address: str) -> None:
    address, state = flaky
    digest = RegistryClient(registry_address, insecure=True).resolve("mirror/debian", "bookworm")
    client = RegistryClient(address, insecure=True, backoff=0.01)
    state.failures, state.status = 1, 0
    assert client.resolve("mirror/debian", "bookworm") == digest
    assert len(state.seen) == 2
