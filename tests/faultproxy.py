"""A fault-injecting HTTP reverse proxy for registry tests: a real ``ThreadingHTTPServer`` on
127.0.0.1 that forwards every request to an upstream registry with ``http.client`` (request and
response bodies streamed in 64 KiB pieces, ``Host`` kept so the registry's upload ``Location``
points back at the proxy) unless a fault rule matches first.

Fault kinds (:class:`Fault`):

- ``status``: answer ``status`` (e.g. 500, 429 with ``retry_after``) without forwarding;
- ``lose``: forward the request (the registry acts on it), then drop the client's connection
  without an answer: a lost response;
- ``drop``: drop the connection before forwarding (the registry never sees the request);
- ``cut``: forward, relay the answer's status, headers and first ``CHUNK`` of its body, then drop
  the connection: a download broken off in the middle;
- ``hold``: read the request's body, set the rule's ``held`` event (the test now knows the write is
  in flight), wait for its ``release`` event, then drop the connection without forwarding: a
  write stalled at the registry's door, never stored (the test kills the client meanwhile).

A rule matches by method and a regular expression on the path; ``share`` (0-1, drawn from a
seeded ``random.Random``) picks a fraction of matching requests, ``count`` bounds how many faults
it injects, ``seconds`` keeps it active only that long after its first hit ("500 for N seconds").
Chunked request bodies are forwarded chunked. HTTP/1.1 keep-alive on both sides.
"""

from __future__ import annotations

import dataclasses
import http.client
import http.server
import random
import re
import socket
import threading
import time
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Iterator

CHUNK = 64 * 1024
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}
)


@dataclasses.dataclass
class Fault:
    """One fault rule (see the module docstring). Mutable: ``hits`` counts injected faults."""

    kind: Literal["status", "lose", "drop", "cut", "hold"]
    status: int = 500
    retry_after: str | None = None
    method: str | None = None  # None: any method
    path: str = ""  # regular expression searched in the request path ("" matches all)
    share: float = 1.0
    count: int | None = None
    seconds: float | None = None
    hits: int = 0
    first_hit: float | None = None
    held: threading.Event = dataclasses.field(default_factory=threading.Event)  # ``hold``: a request waits
    release: threading.Event = dataclasses.field(default_factory=threading.Event)  # ``hold``: let it go

    def active(self, now: float) -> bool:
        """Still injecting: under ``count`` and within ``seconds`` of the first hit."""
        if self.count is not None and self.hits >= self.count:
            return False
        return not (self.seconds is not None and self.first_hit is not None and now - self.first_hit > self.seconds)


@dataclasses.dataclass(frozen=True)
class Seen:
    """One request the proxy received and what it did with it (``forwarded``, or a fault kind)."""

    method: str
    path: str
    outcome: str
    status: int | None


class FaultProxy:
    """The proxy in front of ``upstream`` (``host:port``); ``address`` is its own ``host:port``.
    Use as a context manager (or :meth:`start` / :meth:`stop`)."""

    def __init__(self, upstream: str, *, seed: int = 14, host: str = "127.0.0.1", port: int = 0) -> None:
        self.upstream = upstream
        self.faults: list[Fault] = []
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._random = random.Random(seed)
        self._server = http.server.ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self.address = f"{host}:{self._server.server_address[1]}"
        self._thread: threading.Thread | None = None

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        self._server.shutdown()
        self._server.server_close()

    def add(self, fault: Fault) -> Fault:
        """Add a rule (rules are tried in order; the first active match applies)."""
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        """Remove every rule and forget what was seen."""
        with self._lock:
            self.faults.clear()
            self.seen.clear()

    def injected(self, kind: str | None = None) -> int:
        """How many faults were injected (of ``kind``, or all)."""
        with self._lock:
            return sum(1 for s in self.seen if s.outcome != "forwarded" and (kind is None or s.outcome == kind))

    def _pick(self, method: str, path: str) -> Fault | None:
        now = time.monotonic()
        with self._lock:
            for f in self.faults:
                if f.method is not None and f.method != method:
                    continue
                if f.path and not re.search(f.path, path):
                    continue
                if not f.active(now):
                    continue
                if f.share < 1.0 and self._random.random() >= f.share:
                    continue
                f.hits += 1
                if f.first_hit is None:
                    f.first_hit = now
                return f
        return None

    def _record(self, method: str, path: str, outcome: str, status: int | None) -> None:
        with self._lock:
            self.seen.append(Seen(method, path, outcome, status))

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # a TLS hello is answered with an HTTP status line (not HTTP/0.9's bare body), so a
            # client that tries TLS first (BuildKit) sees "server gave HTTP response to HTTPS
            # client" and falls back to plain HTTP, as with the registry itself
            default_request_version = "HTTP/1.0"

            def handle_one(self) -> None:
                fault = proxy._pick(self.command, self.path)
                if fault is not None and fault.kind == "drop":
                    proxy._record(self.command, self.path, "drop", None)
                    self._drop()
                    return
                if fault is not None and fault.kind == "status":
                    proxy._record(self.command, self.path, "status", fault.status)
                    self._drain_body()
                    self._answer(fault)
                    return
                if fault is not None and fault.kind == "hold":
                    proxy._record(self.command, self.path, "hold", None)
                    self._drain_body()
                    fault.held.set()
                    fault.release.wait(300)  # a test that never releases does not keep the thread
                    self._drop()
                    return
                kind = fault.kind if fault is not None else None
                self._forward(lose=kind == "lose", cut=kind == "cut")

            do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = handle_one

            def log_message(self, format: str, *args: object) -> None:
                del format, args  # quiet: the test reads proxy.seen instead

            def _drop(self) -> None:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

            def _answer(self, fault: Fault) -> None:
                body = b'{"errors":[{"code":"UNAVAILABLE","message":"injected by the fault proxy"}]}'
                if fault.status == 429:
                    body = b'{"errors":[{"code":"TOOMANYREQUESTS","message":"injected by the fault proxy"}]}'
                self.send_response(fault.status)
                if fault.retry_after is not None:
                    self.send_header("Retry-After", fault.retry_after)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _body(self) -> Iterator[bytes]:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass  # trailers: none expected, read up to the blank line
                            return
                        yield self.rfile.read(size)
                        self.rfile.readline()
                left = int(self.headers.get("Content-Length") or 0)
                while left > 0:
                    piece = self.rfile.read(min(CHUNK, left))
                    if not piece:
                        return
                    left -= len(piece)
                    yield piece

            def _drain_body(self) -> None:
                for _ in self._body():
                    continue

            def _forward(self, *, lose: bool, cut: bool = False) -> None:
                conn = http.client.HTTPConnection(proxy.upstream, timeout=60)
                chunked = self.headers.get("Transfer-Encoding", "").lower() == "chunked"
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for k, v in self.headers.items():
                    if k.lower() not in _HOP_BY_HOP:
                        conn.putheader(k, v)
                if chunked:
                    conn.putheader("Transfer-Encoding", "chunked")
                conn.endheaders()
                for piece in self._body():
                    conn.send(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                if chunked:
                    conn.send(b"0\r\n\r\n")
                resp = conn.getresponse()
                # recorded before the client hears: a test reading ``seen`` after a call sees it
                proxy._record(self.command, self.path, "lose" if lose else "cut" if cut else "forwarded", resp.status)
                if lose:  # the registry acted on it; the client never hears
                    resp.read()
                    conn.close()
                    self._drop()
                    return
                self.send_response(resp.status, resp.reason)
                length = resp.getheader("Content-Length")
                for k, v in resp.getheaders():
                    if k.lower() not in _HOP_BY_HOP:
                        self.send_header(k, v)
                has_body = self.command != "HEAD" and resp.status not in (204, 304)
                if length is None and has_body:
                    self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                while has_body:
                    piece = resp.read(CHUNK)
                    if not piece:
                        break
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if length is None else piece)
                    if cut:  # the rest of the body never comes
                        self.wfile.flush()
                        conn.close()
                        self._drop()
                        return
                if length is None and has_body:
                    self.wfile.write(b"0\r\n\r\n")
                conn.close()

        return Handler
