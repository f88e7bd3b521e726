"""Every answer the client refuses or drops gives its connection back (#20: the possible hang).

The registry's keep-alive pool (builder.registry.connections.Pool) counts the connections out with
a request or an unread body (``in_use``): one leaked streamed response keeps a connection (and its
socket) forever. A real HTTP server on 127.0.0.1 answers each kind of refusal (oversized declared,
endless body, endless error body, 401 challenges, retried 503s, a digest mismatch, a blob stream
closed mid-way); after each, no connection may be out (deterministic: the pool's count is
inspected, nothing is timed), and the whole run happens in a thread joined with a generous guard
so a regression fails the test instead of hanging the suite. A control shows the harness catches
a leak: a streamed blob left open keeps its connection out. Each test runs on both paths: direct
(the http.client pool) and through a forward proxy (urllib3's ``ProxyManager``, its pool's free
queue inspected), the server answering the proxy's absolute-form requests itself.
"""

from __future__ import annotations

import hashlib
import http.server
import threading
from typing import TYPE_CHECKING

import pytest

from builder.errors import BuilderError, NotFoundError, RegistryError, RegistryUnavailableError
from builder.registry import Credential, RegistryClient
from builder.registry.connections import Pool
from builder.registry.manifest import Descriptor
from builder.registry.stream import BlobStream

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
BLOB = b"b" * (3 * 1024 * 1024)
BLOB_DIGEST = "sha256:" + hashlib.sha256(BLOB).hexdigest()
GUARD_SECONDS = 120  # a guard against hanging the suite, not a timing assertion


class Refusing(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self._write(body)

    def _write(self, data: bytes) -> bool:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the client closed the connection: what a refusal should do
            return False
        return True

    def _endless(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b'{"errors":[]}' + b" " * 65536
        while self._write(b"%x\r\n%s\r\n" % (len(chunk), chunk)):
            pass
        self.close_connection = True

    def do_HEAD(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        name = self.path.rsplit("/", 1)[-1]
        if "/blobs/" in self.path:
            self._send(200, BLOB, {"Content-Type": "application/octet-stream"})
        elif name == "declared":  # 300 MiB said up front, refused unread
            self.send_response(200)
            self.send_header("Content-Type", MANIFEST)
            self.send_header("Content-Length", str(300 * 1024 * 1024))
            self.end_headers()
            while self._write(b" " * 65536):
                pass
            self.close_connection = True
        elif name == "endless":
            self._endless(200)
        elif name == "endless-404":  # an error answer whose body never ends
            self._endless(404)
        elif name == "busy":
            self._send(503, b'{"errors":[{"code":"UNAVAILABLE"}]}', {"Retry-After": "0"})
        elif name == "challenge":  # asks for Basic credentials, then refuses them
            self._send(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', {"WWW-Authenticate": 'Basic realm="r"'})
        elif name == "missing":
            self._send(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}')
        else:  # any digest asked for: a manifest that hashes to something else
            self._send(200, b'{"schemaVersion":2}', {"Content-Type": MANIFEST})


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        """Quiet: the client closing a refused answer's connection is what the tests want."""


@pytest.fixture
def server() -> Iterator[str]:
    srv = _Server(("127.0.0.1", 0), Refusing)
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture(params=["direct", "proxy"])
def route(request: pytest.FixtureRequest) -> str:
    """How the client reaches the registry: ``direct`` (the http.client pool) or ``proxy``
    (urllib3's ``ProxyManager``: the server is then addressed as the forward proxy of a registry
    named ``registry.example``, and answers the absolute-form requests a proxy gets)."""
    return str(request.param)


def _one_connection_client(address: str, route: str = "direct") -> tuple[RegistryClient, Callable[[], int]]:
    """A client of the registry at ``address`` (``route``: :func:`route`); and a function
    returning 1 when none of its pool's connections is out (nothing leaked), else 0."""
    if route == "proxy":
        client = RegistryClient(
            "registry.example",
            insecure=True,
            retries=2,
            backoff=0.0,
            auth=Credential("u", "p"),
            environ={"HTTP_PROXY": f"http://{address}"},
        )
        manager = client.transport.route(client.transport.base + "/")
        assert not isinstance(manager, Pool)  # through the proxy: urllib3's pools

        def free_proxied() -> int:  # urllib3's pool holds its free connections (or None slots) in a queue
            pools = [manager.pools[key] for key in manager.pools.keys()]  # noqa: SIM118 - no __iter__
            return int(all(p.pool is not None and p.pool.qsize() == p.pool.maxsize for p in pools))

        return client, free_proxied
    client = RegistryClient(address, insecure=True, retries=2, backoff=0.0, auth=Credential("u", "p"))
    pool = client.transport.route(client.transport.base + "/")
    assert isinstance(pool, Pool)  # reached directly: the http.client pool

    def free_slots() -> int:
        assert pool.in_use >= 0
        return int(pool.in_use == 0)

    return client, free_slots


def _in_thread(work: Callable[[], None]) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(GUARD_SECONDS)
    assert not t.is_alive(), "a request waited for a connection a refused answer never gave back"
    if errors:
        raise errors[0]


def _streamed_blob_closed_midway(client: RegistryClient) -> None:
    stream = BlobStream(
        client, "x", Descriptor(media_type="application/octet-stream", digest=BLOB_DIGEST, size=len(BLOB))
    )
    assert stream.read()  # the first chunk arrived; the rest is abandoned
    stream.close()


REFUSALS: dict[str, tuple[type[BuilderError] | None, Callable[[RegistryClient], object]]] = {
    "declared oversized": (RegistryError, lambda c: c.get_manifest("x", "declared")),
    "endless body": (RegistryError, lambda c: c.get_manifest("x", "endless")),
    "endless error body": (NotFoundError, lambda c: c.get_manifest("x", "endless-404")),
    "retried 503s": (RegistryUnavailableError, lambda c: c.get_manifest("x", "busy")),
    "401 challenge refused": (BuilderError, lambda c: c.get_manifest("x", "challenge")),
    "404 dropped": (None, lambda c: c.try_get_manifest("x", "missing")),
    "digest mismatch": (RegistryError, lambda c: c.get_manifest("x", "sha256:" + "0" * 64)),
    "blob HEAD 404": (None, lambda c: c.blob_exists("x", BLOB_DIGEST)),
    "blob stream closed mid-way": (None, _streamed_blob_closed_midway),
}


@pytest.mark.parametrize("kind", sorted(REFUSALS))
def test_a_refused_answer_gives_its_only_connection_back(server: str, kind: str, route: str) -> None:
    client, free_slots = _one_connection_client(server, route)
    client.transport.max_body_bytes = 1024 * 1024
    error, call = REFUSALS[kind]

    def many() -> None:
        for _ in range(5):
            if error is None:
                call(client)
            else:
                with pytest.raises(error):
                    call(client)
            for _ in range(100):  # a blob stream's reader thread closes its response as it stops
                if free_slots() == 1:
                    break
                threading.Event().wait(0.05)
            assert free_slots() == 1, f"{kind}: the connection was not given back"

    _in_thread(many)


def test_every_refusal_in_a_row_on_one_connection(server: str, route: str) -> None:
    client, free_slots = _one_connection_client(server, route)
    client.transport.max_body_bytes = 1024 * 1024

    def all_kinds() -> None:
        for _ in range(3):
            for error, call in REFUSALS.values():
                if error is None:
                    call(client)
                else:
                    with pytest.raises(error):
                        call(client)
        client.ping()  # still served: the one connection is free

    _in_thread(all_kinds)
    assert free_slots() == 1


def test_the_probe_sees_a_leaked_response(server: str, route: str) -> None:
    """Control: a streamed blob nobody closes keeps the pool's only connection."""
    client, free_slots = _one_connection_client(server, route)
    leaked = client.open_blob("x", BLOB_DIGEST)
    assert free_slots() == 0
    leaked.close()
    assert free_slots() == 1
