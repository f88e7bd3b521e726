"""The direct connection path (builder.registry.connections) against real servers on 127.0.0.1: a
raw socket server that answers each request per connection as a test says (bytes on the wire),
and a real TLS server whose certificate is signed by a CA generated here (``cryptography``).
Nothing is timed: timeouts are checked by their messages (which kind, which seconds) only.

What is checked: one kept-alive connection carries many requests; a kept-alive connection the
server closes as the next request arrives is sent once more on a new connection (urllib3's rule:
only a reused one, only a body that can be sent again), and a fresh one is not; a body not read to
its end is never reused; gzip and deflate (zlib and raw) bodies are decoded, a corrupt one named;
a connect timeout and a read timeout are told apart; TLS trusts a CA file and a hashed CA
directory from the environment and checks the host name; hostile answers (a header line of 1 MiB,
more than 100 header fields) are named as not HTTP and not retried."""

from __future__ import annotations

import datetime as dt
import gzip
import io
import ipaddress
import socket
import ssl
import subprocess
import sys
import threading
import zlib
from typing import TYPE_CHECKING

import pytest

from builder.errors import RegistryError, RegistryUnavailableError
from builder.registry import RegistryClient
from builder.registry.auth import Authenticator
from builder.registry.connections import Pool, Timeout
from builder.registry.transport import Transport

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path


def ok(body: bytes = b"ok", headers: dict[str, str] | None = None, status: str = "200 OK") -> bytes:
    """An answer with ``body`` (its ``Content-Length`` and ``headers``), as bytes on the wire."""
    fields = {"Content-Length": str(len(body)), **(headers or {})}
    head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
    return head.encode() + body


class RawServer:
    """Serves each connection in a thread: reads a request's head and its ``Content-Length``
    body, records the request line, writes what ``answer(request line, body, the connection's
    request number from 1)`` gives (None: closes the connection without answering)."""

    def __init__(
        self, answer: Callable[[bytes, bytes, int], bytes | None], context: ssl.SSLContext | None = None
    ) -> None:
        self.answer = answer
        self.context = context
        self.requests: list[bytes] = []
        self.fields: list[dict[bytes, bytes]] = []  # each request's header fields (names lower case)
        self.connections = 0
        self.alpn: list[str | None] = []  # the protocol each TLS connection agreed by ALPN
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed by the test
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.context is not None:
                conn = self.context.wrap_socket(conn, server_side=True)
                self.alpn.append(conn.selected_alpn_protocol())
            rfile = conn.makefile("rb")
            n = 0
            while True:
                line = rfile.readline(65536)
                if not line:
                    return
                fields = {}
                while (field := rfile.readline(65536)) not in (b"\r\n", b""):
                    name, _, value = field.partition(b":")
                    fields[name.strip().lower()] = value.strip()
                length = int(fields.get(b"content-length", b"0"))
                body = rfile.read(length) if length else b""
                self.fields.append(fields)
                n += 1
                self.requests.append(line.strip())
                reply = self.answer(line, body, n)
                if reply is None:
                    return
                conn.sendall(reply)
        except OSError:
            return  # the client closed (or failed its TLS handshake): what some tests want
        finally:
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., RawServer]]:
    started: list[RawServer] = []

    def start(answer: Callable[[bytes, bytes, int], bytes | None], context: ssl.SSLContext | None = None) -> RawServer:
        s = RawServer(answer, context)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()


def _transport(server: RawServer, retries: int = 0, **kw: object) -> Transport:
    address = f"127.0.0.1:{server.port}"
    return Transport(address, Authenticator(address, None), insecure=True, retries=retries, backoff=0.0, **kw)  # type: ignore[arg-type]


def _pool(t: Transport) -> Pool:
    pool = t.route(t.base + "/")
    assert isinstance(pool, Pool)
    return pool


# -- keep-alive ----------------------------------------------------------------------------------


def test_one_kept_alive_connection_carries_every_request(serve: Callable[..., RawServer]) -> None:
    server = serve(lambda line, body, n: ok(b"answer %d" % n))
    t = _transport(server)
    for i in range(1, 6):
        assert t.request("GET", "/v2/").content == b"answer %d" % i
    assert t.request("PUT", "/v2/x/blobs/uploads/u", data=b"layer", ok=(200,)).content == b"answer 6"
    assert server.connections == 1 and (_pool(t).opened, _pool(t).in_use) == (1, 0)


def test_every_request_and_token_request_names_builder_as_its_user_agent(serve: Callable[..., RawServer]) -> None:
    from builder import __version__
    from builder.registry.token import TokenRequest

    server = serve(lambda line, body, n: ok(b"{}"))
    t = _transport(server)
    t.request("GET", "/v2/")
    t.request("GET", "/v2/x/tags/list", headers={"Accept": "application/json"})
    realm = f"http://127.0.0.1:{server.port}/token"
    t.send_token_request(TokenRequest(realm, query=(("scope", "repository:x:pull"),)))
    assert [f.get(b"user-agent") for f in server.fields] == [f"builder/{__version__}".encode()] * 3


def test_a_kept_alive_connection_closed_as_the_request_arrives_is_sent_once_more(
    serve: Callable[..., RawServer],
) -> None:
    """The server answers the first request of each connection and closes the connection when
    the second one arrives (an idle timeout racing the request): that request goes out once more
    on a new connection, at once; the transport sees one request, no failure, no retry spent."""
    server = serve(lambda line, body, n: ok(body or b"first") if n == 1 else None)
    t = _transport(server, retries=1)
    t.backoff = 3600.0  # a retry of the transport's would wait an hour: the pool's re-send does not
    assert t.request("GET", "/v2/").content == b"first"
    resp = t.request("PUT", "/v2/x/blobs/uploads/u", data=b"the body, sent twice")
    assert resp.content == b"the body, sent twice"  # the whole body went out again
    assert t.requests_sent == 3 and server.connections == 2 and len(server.requests) == 3  # the re-send counted
    assert _pool(t).in_use == 0


def test_a_delete_re_sent_by_the_pool_after_a_lost_answer_counts_its_404_as_deleted(
    serve: Callable[..., RawServer],
) -> None:
    """The DELETE reaches the registry (which deletes the manifest) and the kept-alive connection
    drops before the answer; the pool re-sends it on a new connection and the registry answers
    404: as after any lost answer, that is success (docs/registry.md), and both DELETEs are
    counted in ``requests_sent``."""
    deletes: list[bytes] = []

    def answer(line: bytes, body: bytes, n: int) -> bytes | None:
        if not line.startswith(b"DELETE"):
            return ok(b"{}")
        deletes.append(line)
        if len(deletes) == 1:
            return None  # deleted, then the connection dropped before the answer went out
        return ok(b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}', status="404 Not Found")

    server = serve(answer)
    client = RegistryClient(f"127.0.0.1:{server.port}", insecure=True, retries=1, backoff=3600.0)  # no retry waits
    client.transport.request("GET", "/v2/")
    client.delete_manifest("x", "sha256:" + "a" * 64)  # no NotFoundError
    assert len(deletes) == 2 and server.connections == 2
    assert client.transport.requests_sent == 3


def test_with_retries_off_a_kept_alive_connection_that_breaks_is_the_callers_failure(
    serve: Callable[..., RawServer],
) -> None:
    """``retries=0`` (BUILDER_REGISTRY_RETRIES=0): nothing is sent twice, the pool's re-send
    included (as urllib3 ran, ``read=0``): the lost connection is named."""
    server = serve(lambda line, body, n: ok() if n == 1 else None)
    t = _transport(server, retries=0)
    assert t.request("GET", "/v2/").content == b"ok"
    with pytest.raises(RegistryUnavailableError) as info:
        t.request("GET", "/v2/")
    assert info.value.message.endswith(": connection reset (1 attempt)"), info.value.message
    assert len(server.requests) == 2 and server.connections == 1 and _pool(t).in_use == 0


def test_a_fresh_connection_closed_without_an_answer_is_not_sent_again_by_the_pool(
    serve: Callable[..., RawServer],
) -> None:
    server = serve(lambda line, body, n: None)
    t = _transport(server)
    with pytest.raises(RegistryUnavailableError) as info:
        t.request("GET", "/v2/")
    assert info.value.message.endswith(": connection reset (1 attempt)"), info.value.message
    assert len(server.requests) == 1 and _pool(t).in_use == 0


class OneWay:
    """A body read once, front to back (no ``seek``/``seekable``), of a known size."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)
        self.size = len(data)

    def read(self, size: int = -1) -> bytes:
        return self._data.read(size)

    def __len__(self) -> int:
        return self.size


def test_a_body_that_cannot_be_sent_again_is_not(serve: Callable[..., RawServer]) -> None:
    """A body that cannot go back to its start is not re-sent on a new connection, re-sends
    allowed or not: the pool raises the lost connection for its caller to judge."""
    server = serve(lambda line, body, n: ok() if n == 1 else None)
    t = _transport(server, retries=1)
    assert t.request("GET", "/v2/").content == b"ok"
    pool = _pool(t)
    with pytest.raises(ConnectionResetError):  # http.client's RemoteDisconnected
        pool.exchange("PUT", "/v2/x/blobs/uploads/u", {"Content-Length": "5"}, OneWay(b"12345"), Timeout(5, 5))  # type: ignore[arg-type]
    assert len(server.requests) == 2 and (pool.opened, pool.in_use) == (1, 0)


def test_a_body_not_read_to_its_end_is_not_reused(serve: Callable[..., RawServer]) -> None:
    big = bytes(range(256)) * 4096  # 1 MiB
    server = serve(lambda line, body, n: ok(big))
    t = _transport(server)
    resp = t.request("GET", "/v2/x/blobs/sha256:0", stream=True)
    assert len(resp.read1(1024)) <= 1024
    assert _pool(t).in_use == 1
    resp.close()  # most of it unread: the connection is closed, not kept
    assert _pool(t).in_use == 0
    assert t.request("GET", "/v2/x/blobs/sha256:0").content == big  # on a new connection
    assert server.connections == 2 and _pool(t).opened == 2
    assert t.request("GET", "/v2/x/blobs/sha256:0").content == big  # that one was read out: kept
    assert server.connections == 2


# -- Content-Encoding ----------------------------------------------------------------------------

DATA = b'{"schemaVersion":2,"layers":[' + b'{"size":1},' * 5000 + b"{}]}"
ENCODED = {
    "gzip": gzip.compress(DATA),
    "x-gzip": gzip.compress(DATA),
    "deflate": zlib.compress(DATA),  # zlib data, as RFC 9110 section 8.4.1.2 says
}


@pytest.mark.parametrize("coding", [*ENCODED, "deflate (raw)"])
def test_an_encoded_body_is_decoded_whole_streamed_and_in_pieces(serve: Callable[..., RawServer], coding: str) -> None:
    if coding == "deflate (raw)":  # raw deflate without the zlib header, as some servers send it
        c = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        payload, name = c.compress(DATA) + c.flush(), "deflate"
    else:
        payload, name = ENCODED[coding], coding
    server = serve(lambda line, body, n: ok(payload, {"Content-Encoding": name}))
    t = _transport(server)
    assert t.request("GET", "/v2/").content == DATA
    assert t.read_body(t.request("GET", "/v2/", stream=True), "x") == DATA
    pieces = list(t.request("GET", "/v2/", stream=True).iter_content(1000))
    assert b"".join(pieces) == DATA and {len(p) for p in pieces[:-1]} == {1000}
    assert server.connections == 1 and _pool(t).in_use == 0  # each read out, each kept


@pytest.mark.parametrize(
    "payload",
    [b"not gzip at all", gzip.compress(DATA)[:-40]],
    ids=["not gzip", "gzip cut short"],
)
def test_a_body_that_does_not_decode_is_named_and_not_retried(serve: Callable[..., RawServer], payload: bytes) -> None:
    server = serve(lambda line, body, n: ok(payload, {"Content-Encoding": "gzip"}))
    t = _transport(server, retries=2)
    with pytest.raises(RegistryError) as info:
        t.request("GET", "/v2/")
    assert "with a body that does not decode as its Content-Encoding says; not retried" in info.value.message
    assert len(server.requests) == 1 and _pool(t).in_use == 0


# -- timeouts ------------------------------------------------------------------------------------


def test_a_read_timeout_says_no_answer_within_the_read_seconds(serve: Callable[..., RawServer]) -> None:
    gate = threading.Event()
    server = serve(lambda line, body, n: (gate.wait(30), None)[1])  # reads the request, never answers
    t = _transport(server, retries=3, timeout=(7.0, 0.2))
    try:
        with pytest.raises(RegistryUnavailableError) as info:
            t.request("GET", "/v2/")
    finally:
        gate.set()
    message = info.value.message
    assert "timed out (http) on GET" in message and message.endswith(": no answer within 0.2 s (2 attempts)"), message


def test_a_connect_timeout_says_no_connection_within_the_connect_seconds() -> None:
    """A listening socket nobody serves: TCP connects (the kernel's backlog) and the TLS
    handshake never gets an answer, so the connection is not there within the connect timeout."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        client = RegistryClient(address, retries=1, backoff=0.0, timeout=(0.2, 9.0))
        with pytest.raises(RegistryUnavailableError) as info:
            client.ping()
    message = info.value.message
    assert "timed out (https) on GET" in message and message.endswith(": no connection within 0.2 s (2 attempts)")


# -- TLS -----------------------------------------------------------------------------------------


def _certificates(directory: Path) -> tuple[Path, ssl.SSLContext]:
    """A CA (PEM file) and a server context whose certificate that CA signed for 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "builder test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_path, cert_path, key_path = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    ca_path.write_bytes(ca.public_bytes(pem))
    cert_path.write_bytes(leaf.public_bytes(pem))
    key_path.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    return ca_path, context


@pytest.mark.parametrize("variable", ["SSL_CERT_FILE", "SSL_CERT_DIR"])
def test_tls_trusts_the_ca_the_environment_names(
    serve: Callable[..., RawServer], tmp_path: Path, variable: str
) -> None:
    ca, context = _certificates(tmp_path)
    server = serve(lambda line, body, n: ok(b"over TLS"), context)
    if variable == "SSL_CERT_DIR":  # a directory of certificates named by their subject hash
        hashed = tmp_path / "certs"
        hashed.mkdir()
        (hashed / "ca.pem").write_bytes(ca.read_bytes())
        subprocess.run(["openssl", "rehash", str(hashed)], check=True, capture_output=True)
        where = str(hashed)
    else:
        where = str(ca)
    address = f"127.0.0.1:{server.port}"
    t = Transport(address, Authenticator(address, None), retries=0, environ={variable: where})
    assert t.base.startswith("https://")
    for _ in range(3):
        assert t.request("GET", "/v2/").content == b"over TLS"
    assert server.connections == 1  # kept alive over TLS too


def test_tls_offers_http_1_1_by_alpn(serve: Callable[..., RawServer], tmp_path: Path) -> None:
    """A server (or load balancer) that picks the protocol by ALPN (RFC 7301) hears ``http/1.1``
    offered, as urllib3 offered it; one offering h2 first still agrees on http/1.1."""
    ca, context = _certificates(tmp_path)
    context.set_alpn_protocols(["h2", "http/1.1"])
    server = serve(lambda line, body, n: ok(b"over TLS"), context)
    address = f"127.0.0.1:{server.port}"
    t = Transport(address, Authenticator(address, None), retries=0, environ={"SSL_CERT_FILE": str(ca)})
    assert t.request("GET", "/v2/").content == b"over TLS"
    assert server.alpn == ["http/1.1"]


def test_tls_without_the_ca_is_named_and_not_retried(serve: Callable[..., RawServer], tmp_path: Path) -> None:
    _, context = _certificates(tmp_path)
    server = serve(lambda line, body, n: ok(), context)
    address = f"127.0.0.1:{server.port}"
    t = Transport(address, Authenticator(address, None), retries=3, backoff=0.0)  # certifi's bundle
    with pytest.raises(RegistryUnavailableError) as info:
        t.request("GET", "/v2/")
    assert info.value.message.startswith(f"TLS to registry {address} failed on GET"), info.value.message
    assert "CERTIFICATE_VERIFY_FAILED" in info.value.message and server.connections == 1


def test_tls_checks_the_host_name(serve: Callable[..., RawServer], tmp_path: Path) -> None:
    """The certificate names 127.0.0.1; reached as ``localhost`` it is refused."""
    ca, context = _certificates(tmp_path)
    server = serve(lambda line, body, n: ok(), context)
    address = f"localhost:{server.port}"
    t = Transport(address, Authenticator(address, None), retries=0, environ={"SSL_CERT_FILE": str(ca)})
    with pytest.raises(RegistryUnavailableError) as info:
        t.request("GET", "/v2/")
    assert "TLS to registry" in info.value.message and "match" in info.value.message, info.value.message


# -- hostile answers -----------------------------------------------------------------------------

HOSTILE = {
    "a header line of 1 MiB": b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (1024 * 1024) + b"\r\n\r\n",
    "101 header fields": b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(101)) + b"\r\n",
    "a status line of 1 MiB": b"HTTP/1.1 200 " + b"O" * (1024 * 1024) + b"\r\n\r\n",
}


@pytest.mark.parametrize("answer", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_head_is_named_not_http_and_not_retried(serve: Callable[..., RawServer], answer: bytes) -> None:
    server = serve(lambda line, body, n: answer)
    t = _transport(server, retries=2)
    with pytest.raises(RegistryError) as info:
        t.request("GET", "/v2/")
    assert type(info.value) is RegistryError
    assert "with an answer that is not HTTP; not retried" in info.value.message, info.value.message
    assert len(server.requests) == 1 and _pool(t).in_use == 0


# -- URLs that cannot be used --------------------------------------------------------------------


def test_a_registry_name_whose_port_is_no_port_is_named_before_anything_is_sent() -> None:
    t = Transport("127.0.0.1:99999", Authenticator("127.0.0.1:99999", None), insecure=True, retries=0)
    with pytest.raises(RegistryError) as info:
        t.request("HEAD", "/v2/demo/jax/manifests/latest")
    assert type(info.value) is RegistryError and t.requests_sent == 0
    assert info.value.message == (
        "registry 127.0.0.1:99999: the URL http://127.0.0.1:99999/v2/demo/jax/manifests/latest cannot be "
        "used (Port out of range 0-65535); nothing was sent"
    )


def test_a_redirect_to_a_port_that_is_no_port_is_an_unusable_answer(serve: Callable[..., RawServer]) -> None:
    server = serve(lambda line, body, n: ok(b"", {"Location": "http://127.0.0.1:99999/v2/"}, "307 Temporary Redirect"))
    t = _transport(server, retries=2)
    with pytest.raises(RegistryError) as info:
        t.request("GET", "/v2/")
    assert "with a URL that cannot be used (Port out of range 0-65535); not retried" in info.value.message
    assert len(server.requests) == 1 and _pool(t).in_use == 0


# -- each hop routed by its own origin -----------------------------------------------------------


def test_a_redirect_to_a_proxied_host_goes_through_the_proxy_the_registry_directly(
    serve: Callable[..., RawServer],
) -> None:
    """The registry (loopback: never proxied) sends a blob GET to storage on another host, which
    HTTP_PROXY covers: the first hop goes directly, the second through the proxy (urllib3's
    ``ProxyManager``, absolute-form request line), without the registry's credentials."""
    proxy = serve(lambda line, body, n: ok(b"blob bytes"))
    registry = serve(
        lambda line, body, n: ok(b"", {"Location": "http://storage.example/b/1?sig=x"}, "307 Temporary Redirect")
    )
    address = f"127.0.0.1:{registry.port}"
    t = Transport(
        address,
        Authenticator(address, None),
        insecure=True,
        retries=0,
        environ={"HTTP_PROXY": f"http://127.0.0.1:{proxy.port}"},
    )
    resp = t.request("GET", "/v2/x/blobs/sha256:1", headers={"Authorization": "Basic dTpw"})
    assert resp.content == b"blob bytes" and resp.url == "http://storage.example/b/1?sig=x"
    assert registry.requests == [b"GET /v2/x/blobs/sha256:1 HTTP/1.1"]
    assert proxy.requests == [b"GET http://storage.example/b/1?sig=x HTTP/1.1"]
    assert registry.fields[0][b"authorization"] == b"Basic dTpw" and b"authorization" not in proxy.fields[0]
    assert isinstance(t.route(t.base + "/"), Pool) and not isinstance(t.route("http://storage.example/"), Pool)


def test_naming_a_direct_connections_failure_imports_no_urllib3() -> None:
    """failures.py files a direct connection's exceptions under the same kinds as urllib3's without
    importing urllib3 (it is imported only to classify an exception of its own)."""
    code = """
import http.client, ssl, sys, zlib
from builder.registry import failures
from builder.registry.connections import BadURL, ConnectTimeout
from builder.registry.response import ReadError
def read_error(cause):
    try:
        raise ReadError("x") from cause
    except ReadError as exc:
        return exc
cases = [ConnectionRefusedError(111, "Connection refused"), ConnectTimeout("c"), TimeoutError("r"),
         http.client.RemoteDisconnected("gone"), http.client.BadStatusLine("SSH-2.0"), ssl.SSLError(1, "bad"),
         read_error(zlib.error("bad")), read_error(http.client.IncompleteRead(b"", 5)), BadURL("Not supported")]
for exc in cases:
    print(type(exc).__name__, failures.is_transient(exc), failures.timed_out(exc), failures.connect_timed_out(exc),
          failures.tls_failed(exc), repr(failures.unusable_answer(exc)), repr(failures.connection_cause(exc)))
print("urllib3" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[-1] == "False", out
    assert out[:-1] == [
        "ConnectionRefusedError False False False False '' 'connection refused'",
        "ConnectTimeout True True True False '' 'no answer in time'",
        "TimeoutError True True False False '' 'no answer in time'",
        "RemoteDisconnected True False False False '' 'connection reset'",
        "BadStatusLine False False False False 'an answer that is not HTTP' 'BadStatusLine'",
        "SSLError False False False True '' 'bad'",
        "ReadError False False False False 'a body that does not decode as its Content-Encoding says' 'ReadError'",
        "ReadError True False False False '' 'the connection broke off'",
        "BadURL False False False False 'a URL that cannot be used (Not supported)' 'BadURL'",
    ]


@pytest.mark.parametrize(
    "status", ["301 Moved Permanently", "302 Found", "307 Temporary Redirect", "308 Permanent Redirect"]
)
def test_a_307_or_308_upload_sends_the_whole_file_again_to_the_new_location(
    serve: Callable[..., RawServer], status: str, tmp_path: Path
) -> None:
    """307 and 308 keep the method and the body (RFC 9110 sections 15.4.8, 15.4.9), and so do 301 and 302
    for a PUT here (as urllib3 does): a blob PUT from a
    file that the registry sends to its storage is sent there from the file's first byte, not from
    where the first hop left the file (its end)."""
    got: list[bytes] = []

    def answer(line: bytes, body: bytes, n: int) -> bytes:
        got.append(body)
        return ok(b"", {"Location": "/storage/blob"}, status) if n == 1 else ok(b"", status="201 Created")

    server = serve(answer)
    blob = tmp_path / "blob"
    blob.write_bytes(b"layer bytes" * 1000)
    with blob.open("rb") as f:
        resp = _transport(server).request("PUT", "/v2/x/blobs/uploads/1?digest=sha256:1", data=f, ok=(201,))
    assert resp.status_code == 201
    assert server.requests[1].startswith(b"PUT /storage/blob ")
    assert got == [blob.read_bytes(), blob.read_bytes()]
