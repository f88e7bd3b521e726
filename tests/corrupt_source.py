"""A source registry that serves other bytes than a blob's digest names: a real HTTP server on
127.0.0.1 whose every blob GET (``/v2/<name>/blobs/<digest>``) answers ``body`` with its
``Content-Length`` (``/v2/`` answers ``{}``). It stands in for a registry with corrupted storage
or a tampering proxy, the one thing a real registry never lets a test reach: it stores and serves
blobs by their digest."""

from __future__ import annotations

import contextlib
import http.server
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator


class CorruptSource(http.server.ThreadingHTTPServer):
    """The server; ``body`` is what every blob GET answers (set it before the copy),
    ``address`` its ``127.0.0.1:PORT``."""

    body: bytes = b""

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: CorruptSource

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""

    def do_GET(self) -> None:
        body = b"{}" if self.path == "/v2/" else self.server.body
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:  # the client stopped reading: what a refused blob looks like from here
            self.close_connection = True


@contextlib.contextmanager
def corrupt_source() -> Iterator[CorruptSource]:
    """A running :class:`CorruptSource`, stopped on exit."""
    server = CorruptSource(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
