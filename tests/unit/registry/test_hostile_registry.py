"""A hostile registry (a real HTTP server on 127.0.0.1) that answers a manifest GET with a 300 MiB
body, with an endless chunked body, or with a body it trickles out a byte at a time (each byte
within the read timeout): the client refuses each with a RegistryError (exit 7) naming the
registry, having read at most the limit (#20 item 6)."""

from __future__ import annotations

import http.server
import threading
import time
from typing import TYPE_CHECKING

import pytest

from builder.errors import RegistryError
from builder.registry import RegistryClient

if TYPE_CHECKING:
    from collections.abc import Iterator

MANIFEST = "application/vnd.oci.image.manifest.v1+json"


class Hostile(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    sent: dict[str, int] = {}  # noqa: RUF012 - per-path bytes written, read by the tests

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""

    def _write(self, data: bytes) -> bool:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the client stopped reading and closed the connection: what we want
            return False
        Hostile.sent[self.path] = Hostile.sent.get(self.path, 0) + len(data)
        return True

    def do_GET(self) -> None:
        if self.path == "/v2/":
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self._write(b"{}")
            return
        if self.path.endswith("/missing"):
            body = b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}'
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self._write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", MANIFEST)
        if self.path.endswith("/declared"):  # says 300 MiB up front
            self.send_header("Content-Length", str(300 * 1024 * 1024))
            self.end_headers()
            while self._write(b" " * 65536) and Hostile.sent.get(self.path, 0) < 300 * 1024 * 1024:
                pass
        elif self.path.endswith("/endless"):  # chunked, never ends
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b" " * 65536
            while self._write(b"%x\r\n%s\r\n" % (len(chunk), chunk)):
                pass
        else:  # /trickle: a small body, one byte at a time, never finished
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            while self._write(b" "):
                time.sleep(0.05)
        self.close_connection = True


@pytest.fixture
def hostile() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Hostile.sent = {}
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_declared_oversized_manifest_is_refused_unread(hostile: str) -> None:
    client = RegistryClient(hostile, insecure=True, retries=0)
    with pytest.raises(RegistryError, match="over the 16 MiB limit") as err:
        client.get_manifest("x", "declared")
    assert err.value.exit_code == 7 and hostile in err.value.message


def test_an_endless_body_is_read_only_up_to_the_limit(hostile: str) -> None:
    client = RegistryClient(hostile, insecure=True, retries=0)
    client.transport.max_body_bytes = 1024 * 1024
    with pytest.raises(RegistryError, match="sent more than 1 MiB"):
        client.get_manifest("x", "endless")


def test_a_trickled_body_is_given_up_after_the_total_time(hostile: str) -> None:
    client = RegistryClient(hostile, insecure=True, retries=0)
    client.transport.max_body_seconds = 0.5  # each byte arrives well within the read timeout
    with pytest.raises(RegistryError, match="stopped waiting") as err:
        client.get_manifest("x", "trickle")
    assert "took over" in err.value.message and err.value.exit_code == 7


def test_answers_the_client_drops_give_their_connection_back(hostile: str) -> None:
    """Manifests are read as streams (for the limits): a 404 the client turns into None must still
    return its connection to the pool, else the pool blocks after a few of them (it did)."""
    client = RegistryClient(hostile, insecure=True, retries=0)
    done: list[int] = []

    def many() -> None:
        done.extend(1 for _ in range(200) if client.try_get_manifest("x", "missing") is None)

    t = threading.Thread(target=many, daemon=True)
    t.start()
    t.join(120)  # a guard against hanging the suite, not a timing assertion
    assert len(done) == 200
