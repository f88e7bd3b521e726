"""Which failed exchanges the registry client sends again (``failures.is_transient``): a real
socket server on 127.0.0.1 answers every request the same way, raw bytes on the wire, and counts
the requests it read. A lost connection (reset, closed without an answer, a body broken off) is
retried; an answer that came but cannot be read (not HTTP, a body that does not decode, a redirect
to a URL that does not parse or has an unknown scheme) is sent once and named as what it is
(RegistryError, exit 7), never "not reachable" (5) after pointless retries."""

from __future__ import annotations

import socket
import struct
import threading
from typing import TYPE_CHECKING

import pytest

from builder.errors import NotFoundError, RegistryError, RegistryUnavailableError
from builder.registry import RegistryClient

if TYPE_CHECKING:
    from collections.abc import Iterator

RESET = b"<reset>"  # close with SO_LINGER 0: the peer gets a TCP RST
RETRIES = 2


class RawServer:
    """Accepts connections one at a time; reads each request's head, records its request line,
    then writes ``answer`` (or resets) and closes the connection."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = int(self.sock.getsockname()[1])
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed by the test
                return
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    data = conn.recv(4096)
                    if not data:
                        break
                    head += data
                self.requests.append(head.split(b"\r\n", 1)[0])
                if self.answer == RESET:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:
                    conn.sendall(self.answer)

    def client(self) -> RegistryClient:
        return RegistryClient(f"127.0.0.1:{self.port}", insecure=True, retries=RETRIES, backoff=0.0)


@pytest.fixture
def serve() -> Iterator[list[RawServer]]:
    started: list[RawServer] = []
    yield started
    for s in started:
        s.sock.close()


def _server(serve: list[RawServer], answer: bytes) -> RawServer:
    s = RawServer(answer)
    serve.append(s)
    return s


LOST = {
    "reset": (RESET, "connection reset"),
    "closed without an answer": (b"", "connection reset"),  # http.client's RemoteDisconnected
    "body broken off": (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", "the connection broke off"),
    "chunked body broken off": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nshort\r\n",
        "the connection broke off",
    ),
}

UNUSABLE = {
    "not HTTP": (b"SSH-2.0-OpenSSH_9.6\r\n", "an answer that is not HTTP"),
    "gzip that is not": (
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 10\r\n\r\nnot gzip!!",
        "a body that does not decode as its Content-Encoding says",
    ),
    "Location that does not parse": (
        b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://[::1\r\nContent-Length: 0\r\n\r\n",
        "a URL that cannot be used (Invalid IPv6 URL)",
    ),
    # urllib.parse checks a bracketed host with ipaddress (Python >= 3.11.4): raised a frame deeper
    "Location whose bracketed host is no address": (
        b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://[zz::1]/v2/x\r\nContent-Length: 0\r\n\r\n",
        "a URL that cannot be used ('zz::1' does not appear to be an IPv4 or IPv6 address)",
    ),
    "Location with an unknown scheme": (
        b"HTTP/1.1 307 Temporary Redirect\r\nLocation: gopher://example.org/x\r\nContent-Length: 0\r\n\r\n",
        "a URL that cannot be used (Not supported URL scheme gopher)",
    ),
}


@pytest.mark.parametrize("answer,cause", LOST.values(), ids=LOST.keys())
def test_a_lost_connection_is_retried(serve: list[RawServer], answer: bytes, cause: str) -> None:
    server = _server(serve, answer)
    with pytest.raises(RegistryUnavailableError) as info:
        server.client().ping()
    assert len(server.requests) == RETRIES + 1, server.requests
    assert info.value.message.endswith(f": {cause} ({RETRIES + 1} attempts)"), info.value.message


@pytest.mark.parametrize("answer,what", UNUSABLE.values(), ids=UNUSABLE.keys())
def test_an_answer_that_cannot_be_read_is_sent_once_and_named(serve: list[RawServer], answer: bytes, what: str) -> None:
    server = _server(serve, answer)
    with pytest.raises(RegistryError) as info:
        server.client().ping()
    assert len(server.requests) == 1, server.requests  # no retry of what would only fail again
    assert type(info.value) is RegistryError and info.value.exit_code == 7
    assert f"127.0.0.1:{server.port}/v2/ (http) with {what}; not retried" in info.value.message, info.value.message


def test_a_streamed_manifest_that_does_not_decode_is_named(serve: list[RawServer]) -> None:
    """The manifest GET reads its body itself (size and time limits): the same kind, the same error."""
    server = _server(
        serve,
        b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\n"
        b"Content-Encoding: gzip\r\nContent-Length: 10\r\n\r\nnot gzip!!",
    )
    with pytest.raises(RegistryError) as info:
        server.client().get_manifest("demo/jax", "latest")
    assert type(info.value) is RegistryError and len(server.requests) == 1
    assert "demo/jax:latest (http) with a body that does not decode" in info.value.message, info.value.message


def test_an_unexpected_status_without_a_body_says_so(serve: list[RawServer]) -> None:
    """A redirect without ``Location`` (or any unexpected status with an empty body) is named with
    its status and "(no body)", not a message ending in a bare colon."""
    server = _server(serve, b"HTTP/1.1 302 Found\r\nContent-Length: 0\r\n\r\n")
    with pytest.raises(RegistryError) as info:
        server.client().ping()
    message = info.value.message
    assert message.endswith(f"answered HTTP 302 to GET 127.0.0.1:{server.port}/v2/: (no body)"), message


# distribution 2.8's answer to GET /v2/<name>/manifests/<missing tag> (recorded from the registry
# scripts/setup starts); the document format: "Error Codes", https://github.com/opencontainers/
# distribution-spec/blob/v1.1.0/spec.md#error-codes
MANIFEST_UNKNOWN = b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Tag":"nope"}}]}\n'


def test_a_registry_error_document_reads_as_code_and_message(serve: list[RawServer]) -> None:
    answer = b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(MANIFEST_UNKNOWN),
        MANIFEST_UNKNOWN,
    )
    server = _server(serve, answer)
    with pytest.raises(NotFoundError) as info:
        server.client().get_manifest("demo/jax", "nope")
    assert info.value.exit_code == 8
    assert "MANIFEST_UNKNOWN: manifest unknown" in info.value.message and "{" not in info.value.message
