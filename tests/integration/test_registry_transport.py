"""The registry transport (http.client directly, urllib3 through proxies) keeps what users set
and what registries do, against real peers: a TLS registry (a real distribution process with a
certificate made here) trusted through REQUESTS_CA_BUNDLE / SSL_CERT_FILE, ``.netrc`` credentials
on the htpasswd registry, a forwarding proxy with credentials in HTTP_PROXY in front of the real
registry, a blob GET redirected to storage on another host (``Authorization`` dropped there, kept
on the same host), and a ``Retry-After`` waited for. The tiny ``http.server`` peers stand in where
the real registry has no such behaviour (it never redirects with filesystem storage); they speak plain HTTP/1.1."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import http.client
import http.server
import ipaddress
import socket
import subprocess
import threading
import time
from typing import TYPE_CHECKING

import pytest

from builder.errors import RegistryAuthError, RegistryUnavailableError
from builder.registry import Credential, RegistryClient
from tests import registries

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

USER, PASSWORD = "netrc-user", "netrc-pass"
BLOB = b"blob bytes kept in storage"
BLOB_DIGEST = "sha256:" + hashlib.sha256(BLOB).hexdigest()


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """Quiet: a client closing its connection is not a test failure."""


def _serve(handler: type[http.server.BaseHTTPRequestHandler]) -> tuple[_Server, int]:
    srv = _Server(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, int(srv.server_address[1])


class _Quiet(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""

    def send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


# -- TLS: the CA bundle variables ------------------------------------------------------------


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and ``PROXIED`` (its own CA) and its key, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "builder test registry")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName(PROXIED)]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "registry.pem", directory / "registry.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.fixture(scope="module")
def tls_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(``127.0.0.1:PORT``, its CA bundle): a real distribution registry serving HTTPS only."""
    directory = tmp_path_factory.mktemp("tlsreg")
    cert, key = _self_signed(directory)
    port = registries.free_port()
    (directory / "config.yml").write_text(
        "version: 0.1\nlog:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {directory / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n  tls:\n    certificate: {cert}\n    key: {key}\n"
    )
    log_path = directory / "registry.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [registries._registry_binary(), "serve", str(directory / "config.yml")], stdout=log, stderr=log
        )
        try:
            registries.wait_for_port(port, proc, log_path)
            yield f"127.0.0.1:{port}", cert
        finally:
            proc.terminate()
            proc.wait(timeout=10)


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"])
def test_a_tls_registry_is_trusted_through_the_ca_variables(
    tls_registry: tuple[str, Path], variable: str, unique_repo: str
) -> None:
    address, bundle = tls_registry
    client = RegistryClient(address, environ={variable: str(bundle)})
    digest = client.put_blob(unique_repo, b"over TLS")
    assert client.get_blob(unique_repo, digest) == b"over TLS"


def test_a_tls_registry_not_trusted_names_tls_and_what_to_do(tls_registry: tuple[str, Path]) -> None:
    address, _ = tls_registry
    with pytest.raises(RegistryUnavailableError) as info:
        RegistryClient(address, retries=3).ping()  # certifi's bundle: not this certificate; never retried
    assert info.value.message.startswith(f"TLS to registry {address} failed on GET"), info.value.message
    assert "REQUESTS_CA_BUNDLE" in info.value.hint and "insecure_registries" in info.value.hint


def test_a_ca_bundle_that_does_not_exist_is_named(tls_registry: tuple[str, Path], tmp_path: Path) -> None:
    address, _ = tls_registry
    missing = tmp_path / "nowhere.pem"
    with pytest.raises(RegistryUnavailableError) as info:
        RegistryClient(address, environ={"REQUESTS_CA_BUNDLE": str(missing)}).ping()
    assert str(missing) in info.value.message and "REQUESTS_CA_BUNDLE" in info.value.hint


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"])
@pytest.mark.parametrize("content", [b"not a certificate\n", b"", b"-----BEGIN CERTIFICATE-----\nbroken\n"])
def test_a_ca_bundle_that_is_no_bundle_names_the_file_and_variable(
    tls_registry: tuple[str, Path], tmp_path: Path, variable: str, content: bytes
) -> None:
    """A newcomer's report: REQUESTS_CA_BUNDLE=<a file that is no PEM bundle> gave "TLS ...
    NO_CERTIFICATE_OR_CRL_FOUND" naming neither the file nor the variable."""
    address, _ = tls_registry
    garbage = tmp_path / "bundle.pem"
    garbage.write_bytes(content)
    client = RegistryClient(address, retries=3, environ={variable: str(garbage)})
    with pytest.raises(RegistryUnavailableError) as info:
        client.ping()
    message, hint = info.value.message, info.value.hint or ""
    assert f"the CA certificates {garbage} (from {variable})" in message and "cannot be used" in message, message
    assert not message.startswith("TLS to registry"), message
    assert f"point {variable} at a PEM file" in hint, hint
    assert client.transport.requests_sent <= 1  # not retried (refused before any connection)


def test_a_tls_failure_names_the_bundle_used_and_the_variable_that_won(
    tls_registry: tuple[str, Path], tmp_path: Path
) -> None:
    """REQUESTS_CA_BUNDLE outranks SSL_CERT_FILE (as requests reads them): with both set, the
    hint names the bundle actually used, its variable, and the one it outranked."""
    import certifi

    address, right = tls_registry
    env = {"REQUESTS_CA_BUNDLE": certifi.where(), "SSL_CERT_FILE": str(right)}
    with pytest.raises(RegistryUnavailableError) as info:
        RegistryClient(address, retries=0, environ=env).ping()
    hint = info.value.hint or ""
    assert info.value.message.startswith(f"TLS to registry {address} failed"), info.value.message
    assert f"the certificates trusted were {certifi.where()} from REQUESTS_CA_BUNDLE" in hint, hint
    assert "(it outranks SSL_CERT_FILE, also set but not read)" in hint, hint
    with pytest.raises(RegistryUnavailableError) as default:
        RegistryClient(address, retries=0, environ={}).ping()
    assert "certifi's Mozilla bundle" in (default.value.hint or ""), default.value.hint


# -- .netrc ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def basic_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with registries.auth_registry(tmp_path_factory.mktemp("netrcreg"), "basic", USER, PASSWORD) as reg:
        yield reg.address


def test_netrc_credentials_are_used_when_nothing_else_authenticates(
    basic_registry: str, tmp_path: Path, unique_repo: str
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login {USER} password {PASSWORD}\n")
    netrc.chmod(0o600)
    client = RegistryClient(basic_registry, insecure=True, environ={"NETRC": str(netrc)})
    client.check_auth()
    digest = client.put_blob(unique_repo, b"netrc")
    assert client.get_blob(unique_repo, digest) == b"netrc"
    with pytest.raises(RegistryAuthError):  # control: the same client without the file is refused
        RegistryClient(basic_registry, insecure=True, environ={"NETRC": str(tmp_path / "none")}).check_auth()


# -- proxies ---------------------------------------------------------------------------------


#: The name the test proxies resolve to 127.0.0.1: a registry on this machine named by its own
#: address is never proxied (Go's ProxyFromEnvironment rule, builder.registry.environment), so
#: the proxied registry goes by a name only the proxy knows (.test never resolves: RFC 2606).
PROXIED = "registry.test"


def _upstream(host: str) -> str:
    """Where the proxy connects for ``host`` (``name[:port]``): ``PROXIED`` is 127.0.0.1."""
    name, sep, port = host.partition(":")
    return ("127.0.0.1" if name == PROXIED else name) + sep + port


class _ForwardingProxy(_Quiet):
    """An HTTP forward proxy (absolute-form requests, RFC 9112 section 3.2.2) that requires
    ``Proxy-Authorization: Basic proxy-user:proxy pass`` and records what it forwarded."""

    seen: list[tuple[str, str]]

    def _forward(self) -> None:
        want = "Basic " + base64.b64encode(b"proxy-user:proxy pass").decode()
        self.seen.append((self.command, self.path))
        if self.headers.get("Proxy-Authorization") != want:
            self.send(407, b"proxy credentials needed", {"Proxy-Authenticate": 'Basic realm="p"'})
            return
        target = self.path.split("://", 1)[1]
        host, _, path = target.partition("/")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        conn = http.client.HTTPConnection(_upstream(host), timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-authorization", "connection")}
        conn.request(self.command, "/" + path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        hop = ("connection", "transfer-encoding", "content-length", "keep-alive")
        self.send(resp.status, data, {k: v for k, v in resp.getheaders() if k.lower() not in hop})
        conn.close()

    do_GET = do_HEAD = do_PUT = do_POST = _forward

    def do_CONNECT(self) -> None:
        """A tunnel (RFC 9110 section 9.3.6) to ``host:port``: bytes piped both ways until either
        side closes; what goes through (TLS) is not read."""
        want = "Basic " + base64.b64encode(b"proxy-user:proxy pass").decode()
        self.seen.append((self.command, self.path))
        if self.headers.get("Proxy-Authorization") != want:
            self.send(407, b"", {"Proxy-Authenticate": 'Basic realm="p"'})
            return
        host, _, port = _upstream(self.path).rpartition(":")
        upstream = socket.create_connection((host, int(port)), timeout=30)
        self.send_response(200, "Connection established")
        self.end_headers()
        self.wfile.flush()

        def pipe(src: socket.socket, dst: socket.socket) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                return  # the other side closed: the tunnel ends
            finally:
                dst.close()

        back = threading.Thread(target=pipe, args=(upstream, self.connection), daemon=True)
        back.start()
        pipe(self.connection, upstream)
        back.join(30)
        self.close_connection = True


def test_a_proxy_with_credentials_in_http_proxy_carries_the_requests(registry_address: str, unique_repo: str) -> None:
    seen: list[tuple[str, str]] = []
    handler = type("Proxy", (_ForwardingProxy,), {"seen": seen})
    srv, port = _serve(handler)
    try:
        env = {"HTTP_PROXY": f"http://proxy-user:proxy%20pass@127.0.0.1:{port}", "NO_PROXY": "example.org"}
        proxied = PROXIED + ":" + registry_address.rsplit(":", 1)[1]
        client = RegistryClient(proxied, insecure=True, environ=env)
        digest = client.put_blob(unique_repo, b"through the proxy")
        assert client.get_blob(unique_repo, digest) == b"through the proxy"
        assert ("GET", f"http://{proxied}/v2/{unique_repo}/blobs/{digest}") in seen, seen
        # NO_PROXY naming the registry: straight there (a name only the proxy knows: DNS fails),
        # and the registry by its loopback address: never proxied; the proxy sees nothing more
        before = len(seen)
        with pytest.raises(RegistryUnavailableError, match="does not resolve"):
            RegistryClient(proxied, insecure=True, retries=0, environ={**env, "NO_PROXY": PROXIED}).ping()
        RegistryClient(registry_address, insecure=True, environ=env).ping()
        assert len(seen) == before
    finally:
        srv.shutdown()
        srv.server_close()


def test_https_through_a_proxy_tunnel_with_the_ca_bundle(tls_registry: tuple[str, Path], unique_repo: str) -> None:
    """HTTPS_PROXY in front of a TLS registry: a CONNECT tunnel with the proxy's credentials, the
    registry's certificate checked end to end against REQUESTS_CA_BUNDLE."""
    address, bundle = tls_registry
    seen: list[tuple[str, str]] = []
    srv, port = _serve(type("Proxy", (_ForwardingProxy,), {"seen": seen}))
    try:
        env = {"HTTPS_PROXY": f"http://proxy-user:proxy%20pass@127.0.0.1:{port}", "REQUESTS_CA_BUNDLE": str(bundle)}
        proxied = PROXIED + ":" + address.rsplit(":", 1)[1]
        client = RegistryClient(proxied, environ=env)
        digest = client.put_blob(unique_repo, b"tunnelled")
        assert client.get_blob(unique_repo, digest) == b"tunnelled"
        assert ("CONNECT", proxied) in seen, seen
    finally:
        srv.shutdown()
        srv.server_close()


# -- redirects -------------------------------------------------------------------------------


def _storage() -> tuple[_Server, int, list[dict[str, str]]]:
    """A blob store that records the headers of each request it gets."""
    got: list[dict[str, str]] = []

    class Storage(_Quiet):
        def do_GET(self) -> None:
            got.append(dict(self.headers.items()))
            self.send(200, BLOB, {"Content-Type": "application/octet-stream"})

    srv, port = _serve(Storage)
    return srv, port, got


CREDENTIALS = "Basic " + base64.b64encode(b"reg-user:reg-pass").decode()


def _redirecting_registry(location: Callable[[], str], status: int = 307) -> tuple[_Server, int, list[dict[str, str]]]:
    """A registry that wants Basic credentials and answers a blob GET with ``status`` to
    ``location()``; a path outside ``/v2/`` (a relative redirect's target) is the blob."""
    got: list[dict[str, str]] = []

    class Registry(_Quiet):
        def do_GET(self) -> None:
            got.append(dict(self.headers.items()))
            if self.headers.get("Authorization") != CREDENTIALS:
                self.send(401, b"{}", {"WWW-Authenticate": 'Basic realm="registry"'})
            elif "/blobs/" in self.path:
                self.send(status, b"", {"Location": location()})
            else:
                self.send(200, b"{}" if self.path.startswith("/v2/") else BLOB)

    srv, port = _serve(Registry)
    return srv, port, got


def test_a_blob_redirected_to_another_host_is_fetched_without_our_credentials() -> None:
    storage, storage_port, at_storage = _storage()
    # another host name for the same machine: "localhost" is not "127.0.0.1" to a client
    registry, port, at_registry = _redirecting_registry(lambda: f"http://localhost:{storage_port}/data?sig=abc")
    try:
        client = RegistryClient(f"127.0.0.1:{port}", insecure=True, auth=Credential("reg-user", "reg-pass"))
        assert client.get_blob("repo", BLOB_DIGEST) == BLOB
        stream = client.open_blob("repo", BLOB_DIGEST)
        assert stream.url == f"http://localhost:{storage_port}/data?sig=abc"  # where the bytes came from
        assert b"".join(stream.iter_content(8)) == BLOB
        stream.close()
        assert any("Authorization" in h for h in at_registry)
        assert len(at_storage) == 2 and not any("Authorization" in h for h in at_storage), at_storage
    finally:
        for srv in (storage, registry):
            srv.shutdown()
            srv.server_close()


def test_a_redirect_on_the_same_host_keeps_the_credentials() -> None:
    srv, port, got = _redirecting_registry(lambda: "/storage/blob", status=302)  # relative: the same host
    try:
        client = RegistryClient(f"127.0.0.1:{port}", insecure=True, auth=Credential("reg-user", "reg-pass"))
        assert client.get_blob("repo", BLOB_DIGEST) == BLOB
        assert got[-1].get("Authorization") == CREDENTIALS
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_redirect_loop_ends_with_a_registry_error() -> None:
    class Loop(_Quiet):
        def do_GET(self) -> None:
            self.send(302, b"", {"Location": self.path})

    srv, port = _serve(Loop)
    try:
        with pytest.raises(Exception) as info:
            RegistryClient(f"127.0.0.1:{port}", insecure=True).get_blob("repo", BLOB_DIGEST)
        assert type(info.value).__name__ == "RegistryError"
        assert "redirected GET" in info.value.args[0] and "more than 30 times" in info.value.args[0]
    finally:
        srv.shutdown()
        srv.server_close()


# -- Retry-After -----------------------------------------------------------------------------


def test_retry_after_is_waited_for_before_the_next_attempt() -> None:
    """The registry asks for 1 s; the client's own backoff is 0: the second attempt arrives at
    least 1 s after the first (a lower bound, which load cannot break)."""
    arrivals: list[float] = []

    class Busy(_Quiet):
        def do_HEAD(self) -> None:
            arrivals.append(time.monotonic())
            if len(arrivals) == 1:
                self.send(503, b"", {"Retry-After": "1"})
            else:
                self.send(200, b"", {"Docker-Content-Digest": BLOB_DIGEST})

    srv, port = _serve(Busy)
    try:
        client = RegistryClient(f"127.0.0.1:{port}", insecure=True, backoff=0.0, retries=2)
        assert client.resolve("repo", "tag") == BLOB_DIGEST
        assert len(arrivals) == 2 and arrivals[1] - arrivals[0] >= 1.0
    finally:
        srv.shutdown()
        srv.server_close()


def test_retry_after_as_an_http_date_is_read() -> None:
    from builder.registry.backoff import retry_after_seconds

    now = dt.datetime(2026, 12, 2, 3, 0, 0, tzinfo=dt.UTC).timestamp()
    assert retry_after_seconds("Wed, 02 Dec 2026 03:00:07 GMT", now) == 7.0
    assert retry_after_seconds("Wed, 02 Dec 2026 02:59:00 GMT", now) == 0.0  # already past
    assert retry_after_seconds("12", now) == 12.0
    assert retry_after_seconds("soon", now) is None and retry_after_seconds(None, now) is None
    client = RegistryClient("127.0.0.1:1", insecure=True, backoff=0.0, max_delay=5.0)
    far = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert client.transport.delay(1, far) == 5.0  # an hour asked for, capped at max_delay


def test_talking_to_a_registry_imports_neither_requests_nor_its_helpers(registry_address: str) -> None:
    """A registry reached directly is spoken to with http.client alone: a HEAD, a GET and a PUT in a
    fresh interpreter leave ``requests`` (and what it pulls in: charset_normalizer, http.cookiejar,
    urllib.request) and urllib3 (only for proxies) unloaded."""
    import sys

    code = (
        "import sys\n"
        "from builder.registry import RegistryClient\n"
        f"c = RegistryClient({registry_address!r}, insecure=True)\n"
        "c.ping(); c.try_resolve('demo/none', 'missing'); c.put_blob('test/transport-imports', b'x')\n"
        "heavy = ('requests', 'charset_normalizer', 'http.cookiejar', 'urllib.request', 'urllib3')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
