"""Bearer-token authentication against a real distribution registry configured with
``auth.token``: the registry verifies ES256 JWTs (x5c chain to its root bundle) issued by a small
token service written here (the token service stands in for Docker Hub's/Harbor's; the registry
and the client are the real things under test)."""

from __future__ import annotations

import base64
import datetime as dt
import http.server
import json
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from builder.errors import RegistryAuthError
from builder.registry import Credential, RegistryClient, copy_image, sha256_digest

USER, PASSWORD = "token-user", "token-pass"
SERVICE, ISSUER = "builder-test-registry", "builder-test-issuer"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TokenIssuer:
    """Signs registry tokens (ES256 JWT with an x5c header), per the Docker token spec."""

    def __init__(self, directory: Path) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

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
            "sub": USER,
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


def _serve_tokens(issuer: TokenIssuer, port: int) -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = parse_qs(urlsplit(self.path).query)
            auth = self.headers.get("Authorization", "")
            issuer.requests.append({"query": query, "auth": auth.split(" ")[0]})
            expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
            if auth != expected or query.get("service") != [SERVICE]:
                self.send_response(401)
                self.end_headers()
                return
            body = json.dumps({"token": issuer.token(query.get("scope", [])), "expires_in": 300}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def token_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, TokenIssuer]]:
    registry_bin = shutil.which("docker-registry") or shutil.which("registry")
    if registry_bin is None:
        import os

        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("docker-registry is needed (CI=true: must not skip)")
        pytest.skip("docker-registry not installed")
    d = tmp_path_factory.mktemp("tokenreg")
    issuer = TokenIssuer(d)
    token_port, port = _free_port(), _free_port()
    server = _serve_tokens(issuer, token_port)
    (d / "config.yml").write_text(
        "version: 0.1\nlog:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {d / 'data'}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
        "auth:\n  token:\n"
        f"    realm: http://127.0.0.1:{token_port}/token\n    service: {SERVICE}\n    issuer: {ISSUER}\n"
        f"    rootcertbundle: {issuer.bundle}\n"
    )
    log = (d / "registry.log").open("w")
    proc = subprocess.Popen([registry_bin, "serve", str(d / "config.yml")], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((d / "registry.log").read_text()) from None
                time.sleep(0.1)
        yield f"127.0.0.1:{port}", issuer
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        server.shutdown()
        log.close()


def test_bearer_token_flow_push_pull_mount(token_registry: tuple[str, TokenIssuer], unique_repo: str) -> None:
    address, issuer = token_registry
    client = RegistryClient(address, insecure=True, auth=Credential(USER, PASSWORD))
    data = b"bearer blob"
    digest = client.put_blob(unique_repo, data)
    assert client.get_blob(unique_repo, digest) == data
    scopes = [s for r in issuer.requests for s in r["query"].get("scope", [])]
    # distribution words the challenge's actions in either order
    granted = {(s.rpartition(":")[0], frozenset(s.rpartition(":")[2].split(","))) for s in scopes}
    assert (f"repository:{unique_repo}", frozenset({"pull", "push"})) in granted
    assert all(r["auth"] == "Basic" for r in issuer.requests)
    # a cross-repository mount asks for pull on the source repository too, and mounts
    other = unique_repo + "-b"
    assert client.mount_blob(other, digest, unique_repo) is True
    assert any(f"repository:{unique_repo}:pull" in r["query"].get("scope", []) for r in issuer.requests)
    # the token is cached per repository: more requests on it fetch no new token
    before = len(issuer.requests)
    assert client.blob_exists(unique_repo, digest) and client.blob_exists(unique_repo, sha256_digest(b"x")) is False
    assert len(issuer.requests) == before


def test_bearer_without_credentials_fails_clearly(token_registry: tuple[str, TokenIssuer], unique_repo: str) -> None:
    address, _ = token_registry
    with pytest.raises(RegistryAuthError) as err:
        RegistryClient(address, insecure=True).resolve(unique_repo, "v1")
    assert "refused anonymous access" in err.value.message and address in err.value.hint
    with pytest.raises(RegistryAuthError, match="token-user"):
        RegistryClient(address, insecure=True, auth=Credential(USER, "wrong")).resolve(unique_repo, "v1")


def test_copy_into_token_registry(
    token_registry: tuple[str, TokenIssuer], registry_address: str, unique_repo: str
) -> None:
    from tests.integration.test_registry import push_image

    src = RegistryClient(registry_address, insecure=True)
    digest = push_image(src, unique_repo, layers=2)
    dst = RegistryClient(token_registry[0], insecure=True, auth=Credential(USER, PASSWORD))
    assert copy_image(src, unique_repo, digest, dst, unique_repo, tag="copied") == digest
    assert dst.resolve(unique_repo, "copied") == digest
