"""Password-protected registries for tests: real CNCF distribution processes on loopback.

- ``basic``: ``auth.htpasswd`` (bcrypt), as a self-hosted registry or Artifactory answers.
- ``token``: ``auth.token``: the registry verifies ES256 JWTs (x5c chain to its root bundle)
  issued by a small token service written here, which speaks the Docker token protocol
  (https://distribution.github.io/distribution/spec/auth/token/) as Docker Hub, GHCR and Harbor
  do. The registry and builder's client are the real things under test; the token service stands
  in for the vendor's.

``AuthRegistry.docker_config(dir)`` writes a Docker ``config.json`` with the credentials: tests
hand credentials to builder only that way, as users do.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime as dt
import http.server
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

SERVICE, ISSUER = "builder-test-registry", "builder-test-issuer"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclasses.dataclass
class AuthRegistry:
    """A running registry: ``address`` (``127.0.0.1:PORT``), its user and password, ``kind``
    (``basic`` | ``token``) and, for ``token``, the issuer that saw every token request."""

    address: str
    user: str
    password: str
    kind: str
    issuer: TokenIssuer | None = None

    def docker_config(self, directory: Path, *, password: str | None = None) -> Path:
        """A Docker config directory holding ``config.json`` with this registry's credentials."""
        directory.mkdir(parents=True, exist_ok=True)
        auth = base64.b64encode(f"{self.user}:{password or self.password}".encode()).decode()
        (directory / "config.json").write_text(json.dumps({"auths": {self.address: {"auth": auth}}}))
        return directory


class TokenIssuer:
    """Signs registry tokens (ES256 JWT with an x5c header), per the Docker token spec."""

    def __init__(self, directory: Path, user: str) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.user = user
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "builder test token signer")])
        now = dt.datetime.now(dt.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.bundle = directory / "root.pem"
        self.bundle.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        self.der = self.cert.public_bytes(serialization.Encoding.DER)
        self.requests: list[dict[str, Any]] = []

    def token(self, scopes: list[str]) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        access = []
        for scope in scopes:
            rest, _, actions = scope.rpartition(":")
            typ, _, name = rest.partition(":")
            access.append({"type": typ, "name": name, "actions": [a for a in actions.split(",") if a]})
        now = int(time.time())
        header = {"typ": "JWT", "alg": "ES256", "x5c": [base64.b64encode(self.der).decode()]}
        claims = {
            "iss": ISSUER,
            "sub": self.user,
            "aud": SERVICE,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": uuid.uuid4().hex,
            "access": access,
        }
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        r, s = decode_dss_signature(self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signing_input}.{_b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def serve(self, port: int, password: str) -> http.server.ThreadingHTTPServer:
        """The token endpoint on ``127.0.0.1:port`` (Basic auth with the user and ``password``)."""
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                auth = self.headers.get("Authorization", "")
                issuer.requests.append({"query": query, "auth": auth.split(" ")[0]})
                expected = "Basic " + base64.b64encode(f"{issuer.user}:{password}".encode()).decode()
                if auth != expected or query.get("service") != [SERVICE]:
                    self.send_response(401)
                    self.end_headers()
                    return
                self._send({"token": issuer.token(query.get("scope", [])), "expires_in": 300})

            def do_POST(self) -> None:
                """The OAuth2 password grant BuildKit/containerd try first
                (https://distribution.github.io/distribution/spec/auth/oauth/)."""
                length = int(self.headers.get("Content-Length") or 0)
                form = parse_qs(self.rfile.read(length).decode())
                issuer.requests.append({"query": form, "auth": "oauth2-" + form.get("grant_type", ["?"])[0]})
                ok = form.get("grant_type") == ["password"] and form.get("username") == [issuer.user]
                if not ok or form.get("password") != [password] or form.get("service") != [SERVICE]:
                    self.send_response(401)
                    self.end_headers()
                    return
                scopes = [s for value in form.get("scope", []) for s in value.split(" ") if s]
                self._send({"access_token": issuer.token(scopes), "expires_in": 300})

            def _send(self, doc: dict[str, Any]) -> None:
                body = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                return

        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server


def _registry_binary() -> str:
    path = shutil.which("docker-registry") or shutil.which("registry")
    if path is None or shutil.which("htpasswd") is None:
        msg = "docker-registry and htpasswd (apache2-utils) are needed: run `bash scripts/setup`"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + " (CI=true: must not skip)")
        pytest.skip(msg)
    return path


@contextlib.contextmanager
def auth_registry(directory: Path, kind: str, user: str = "builder-user", password: str = "s3cret-pass") -> Iterator[
    AuthRegistry
]:
    """Start a ``basic`` or ``token`` registry with its data under ``directory``; stop it after."""
    registry_bin = _registry_binary()
    port = free_port()
    issuer: TokenIssuer | None = None
    server: http.server.ThreadingHTTPServer | None = None
    if kind == "basic":
        subprocess.run(
            ["htpasswd", "-Bbc", str(directory / "htpasswd"), user, password], check=True, capture_output=True
        )
        auth = f"auth:\n  htpasswd:\n    realm: builder-test\n    path: {directory / 'htpasswd'}\n"
    elif kind == "token":
        issuer = TokenIssuer(directory, user)
        token_port = free_port()
        server = issuer.serve(token_port, password)
        auth = (
            "auth:\n  token:\n"
            f"    realm: http://127.0.0.1:{token_port}/token\n    service: {SERVICE}\n    issuer: {ISSUER}\n"
            f"    rootcertbundle: {issuer.bundle}\n"
        )
    else:
        raise ValueError(f"unknown registry auth kind {kind!r}")
    (directory / "config.yml").write_text(
        "version: 0.1\nlog:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {directory / 'data'}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n" + auth
    )
    log_path = directory / "registry.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([registry_bin, "serve", str(directory / "config.yml")], stdout=log, stderr=log)
        try:
            wait_for_port(port, proc, log_path)
            yield AuthRegistry(f"127.0.0.1:{port}", user, password, kind, issuer)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            if server is not None:
                server.shutdown()


def wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path | None = None) -> None:
    """Return once ``127.0.0.1:port`` accepts a connection; RuntimeError (with the ``log`` file's text)
    when ``proc`` exits first or 15 s pass."""
    deadline = time.monotonic() + 15
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                why = log.read_text() if log is not None else f"exit status {proc.poll()}"
                raise RuntimeError(f"the test registry did not start: {why}") from None
            time.sleep(0.1)
