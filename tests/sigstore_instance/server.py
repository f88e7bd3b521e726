"""The Sigstore test instance: OIDC issuer + Fulcio + Rekor v1 on one loopback HTTP server.

Routes (plain HTTP on 127.0.0.1, random port):
- ``GET  /oidc/.well-known/openid-configuration``, ``GET /oidc/jwks``: the test OIDC issuer
  (issuer URL ``http://127.0.0.1:<port>/oidc``); tokens come from :meth:`SigstoreTestInstance.token`.
- ``POST /api/v2/signingCert`` (Fulcio v2 REST): ``{"certificateSigningRequest": b64(PEM CSR)}`` with
  ``Authorization: Bearer <OIDC token>`` -> ``{"signedCertificateEmbeddedSct": {"chain":
  {"certificates": [leaf PEM, intermediate PEM, root PEM]}}}`` (sigstore/fulcio fulcio.proto;
  sigstore-python ``_internal/fulcio/client.py``). The token signature, ``aud=sigstore`` and expiry are
  checked; the CSR signature proves possession of the key.
- ``GET  /api/v2/trustBundle``, ``GET /api/v1/log``, ``GET /api/v1/log/publicKey``,
  ``POST /api/v1/log/entries``, ``GET /api/v1/log/entries?logIndex=N``, ``GET /api/v1/log/entries/<uuid>``,
  ``POST /api/v1/log/entries/retrieve`` (Rekor v1 openapi).

Identity mapping (like Fulcio's issuer types): a token with ``job_workflow_ref`` (GitHub Actions) gets URI
SAN ``https://github.com/<job_workflow_ref>`` and build-signer/ref extensions; one with a verified ``email``
gets an email SAN; otherwise ``sub`` must be a URI and becomes the URI SAN.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.sigstore_instance.ca import OID_BUILD_SIGNER_URI, OID_SOURCE_REPO_REF, Identity, TestCA
from tests.sigstore_instance.rekor import RekorError, TestRekor

AUDIENCE = "sigstore"
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"


class SigstoreTestInstance:
    """Start with :meth:`start`, stop with :meth:`stop` (or use as a context manager)."""

    __test__ = False

    def __init__(self) -> None:
        self.ca = TestCA()
        self.rekor = TestRekor()
        self.oidc_key = ec.generate_private_key(ec.SECP256R1())
        self.oidc_kid = "builder-test-oidc"
        self.gha_request_token = "builder-test-actions-request-token"
        self.gha_workflow_ref = "builder-org/builder/.github/workflows/build.yml@refs/heads/main"
        self.requests: list[tuple[str, str]] = []  # (method, path): what clients asked for
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> SigstoreTestInstance:
        instance = self

        class Handler(_Handler):
            pass

        Handler.instance = instance
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="sigstore-test", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> SigstoreTestInstance:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "instance not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def issuer_url(self) -> str:
        return f"{self.url}/oidc"

    # --- OIDC ------------------------------------------------------------------------------------------
    def token(
        self,
        *,
        email: str | None = None,
        sub: str | None = None,
        job_workflow_ref: str | None = None,
        issuer: str | None = None,
        audience: str = AUDIENCE,
        lifetime_s: int = 300,
        extra: dict[str, Any] | None = None,
    ) -> str:
        """A signed ID token (ES256). ``issuer`` overrides ``iss`` (the token still verifies here)."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": issuer or self.issuer_url,
            "aud": audience,
            "iat": now,
            "nbf": now,
            "exp": now + lifetime_s,
            "sub": sub or email or job_workflow_ref or "anonymous",
        }
        if email:
            claims["email"] = email
            claims["email_verified"] = True
        if job_workflow_ref:
            claims["job_workflow_ref"] = job_workflow_ref
            claims["ref"] = job_workflow_ref.rsplit("@", 1)[-1]
            claims["repository"] = job_workflow_ref.split("/.github/")[0]
        claims.update(extra or {})
        return jwt.encode(claims, self.oidc_key, algorithm="ES256", headers={"kid": self.oidc_kid})

    def github_actions_env(self, job_workflow_ref: str | None = None) -> dict[str, str]:
        """Environment of a GitHub Actions job with ``permissions: id-token: write``: the runner's token
        endpoint is served here (``GET /gha/token?audience=...`` with ``Authorization: bearer <request token>``
        answers ``{"value": <ID token>}``, as actions/toolkit's core.getIDToken expects)."""
        if job_workflow_ref:
            self.gha_workflow_ref = job_workflow_ref
        return {
            "GITHUB_ACTIONS": "true",
            "ACTIONS_ID_TOKEN_REQUEST_URL": f"{self.url}/gha/token?api-version=2.0",
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": self.gha_request_token,
        }

    def jwks(self) -> dict[str, Any]:
        nums = self.oidc_key.public_key().public_numbers()

        def b64(n: int) -> str:
            return base64.urlsafe_b64encode(n.to_bytes(32, "big")).rstrip(b"=").decode()

        return {
            "keys": [
                {
                    "kty": "EC",
                    "crv": "P-256",
                    "x": b64(nums.x),
                    "y": b64(nums.y),
                    "kid": self.oidc_kid,
                    "alg": "ES256",
                    "use": "sig",
                }
            ]
        }

    def identity_from_token(self, raw: str) -> Identity:
        try:
            claims = jwt.decode(
                raw,
                self.oidc_key.public_key(),
                algorithms=["ES256"],
                audience=AUDIENCE,
                options={"require": ["iss", "sub", "aud", "exp", "iat"]},
            )
        except jwt.PyJWTError as exc:
            raise _HTTPError(401, f"invalid identity token: {exc}") from exc
        issuer = str(claims["iss"])
        if "job_workflow_ref" in claims:
            uri = f"https://github.com/{claims['job_workflow_ref']}"
            extra = ((OID_BUILD_SIGNER_URI.dotted_string, uri), (OID_SOURCE_REPO_REF.dotted_string, str(claims["ref"])))
            return Identity(san_email=None, san_uri=uri, issuer=issuer, extra=extra)
        if claims.get("email") and claims.get("email_verified"):
            return Identity(san_email=str(claims["email"]), san_uri=None, issuer=issuer)
        sub = str(claims["sub"])
        if "://" not in sub:
            raise _HTTPError(400, f"token subject {sub!r} is not a URI and the token has no verified email")
        return Identity(san_email=None, san_uri=sub, issuer=issuer)

    # --- Fulcio ----------------------------------------------------------------------------------------
    def signing_cert(self, body: dict[str, Any], authorization: str) -> dict[str, Any]:
        if not authorization.startswith("Bearer "):
            raise _HTTPError(401, "missing bearer token")
        identity = self.identity_from_token(authorization.removeprefix("Bearer ").strip())
        try:
            csr = x509.load_pem_x509_csr(base64.b64decode(body["certificateSigningRequest"]))
        except (KeyError, ValueError) as exc:
            raise _HTTPError(400, f"invalid certificateSigningRequest: {exc}") from exc
        if not csr.is_signature_valid:
            raise _HTTPError(400, "CSR signature does not verify (no proof of possession)")
        key = csr.public_key()
        if not isinstance(key, ec.EllipticCurvePublicKey):
            raise _HTTPError(400, "only ECDSA keys are supported by the test CA")
        leaf = self.ca.issue(key, identity)
        chain = [leaf.public_bytes(serialization.Encoding.PEM).decode(), *self.ca.chain_pem()]
        return {"signedCertificateEmbeddedSct": {"chain": {"certificates": chain}}}

    def signing_cert_v1(self, body: dict[str, Any], authorization: str) -> bytes:
        """Fulcio's legacy v1 API (what cosign 2.x calls): ``{"publicKey": {"content": b64(PEM|DER)},
        "signedEmailAddress": b64(sig over the token subject)}`` or ``{"certificateSigningRequest": b64(PEM)}``
        -> the PEM chain (leaf first) as the body; SCT embedded (``SCT`` header empty)."""
        if not authorization.startswith("Bearer "):
            raise _HTTPError(401, "missing bearer token")
        raw_token = authorization.removeprefix("Bearer ").strip()
        identity = self.identity_from_token(raw_token)
        key: Any
        if body.get("certificateSigningRequest"):
            csr = x509.load_pem_x509_csr(base64.b64decode(body["certificateSigningRequest"]))
            if not csr.is_signature_valid:
                raise _HTTPError(400, "CSR signature does not verify (no proof of possession)")
            key = csr.public_key()
        else:
            try:
                content = base64.b64decode(body["publicKey"]["content"])
                key = (
                    serialization.load_pem_public_key(content)
                    if content.startswith(b"-----")
                    else serialization.load_der_public_key(content)
                )
                proof = base64.b64decode(body["signedEmailAddress"])
            except (KeyError, TypeError, ValueError) as exc:
                raise _HTTPError(400, f"invalid certificate request: {exc}") from exc
            if not isinstance(key, ec.EllipticCurvePublicKey):
                raise _HTTPError(400, "only ECDSA keys are supported by the test CA")
            claims = jwt.decode(raw_token, options={"verify_signature": False})
            subjects = [str(claims.get(c)) for c in ("email", "sub") if claims.get(c)]
            if not any(_proves(key, proof, subj.encode()) for subj in subjects):
                raise _HTTPError(400, "signedEmailAddress is not a signature over the token subject")
        if not isinstance(key, ec.EllipticCurvePublicKey):
            raise _HTTPError(400, "only ECDSA keys are supported by the test CA")
        leaf = self.ca.issue(key, identity)
        return (leaf.public_bytes(serialization.Encoding.PEM).decode() + "".join(self.ca.chain_pem())).encode()


def _proves(key: ec.EllipticCurvePublicKey, signature: bytes, message: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes

    try:
        key.verify(signature, message, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


class _HTTPError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Handler(BaseHTTPRequestHandler):
    instance: SigstoreTestInstance
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(
        self, code: int, payload: Any, content_type: str = "application/json", headers: dict[str, str] | None = None
    ) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError as exc:
            raise _HTTPError(400, f"request body is not JSON: {exc}") from exc

    def _dispatch(self, method: str) -> None:  # noqa: PLR0912 - one branch per Fulcio/Rekor/OIDC endpoint
        inst = self.instance
        url = urlsplit(self.path)
        path = url.path.rstrip("/")
        inst.requests.append((method, path))
        try:
            if method == "GET" and path == "/oidc/.well-known/openid-configuration":
                self._send(
                    200,
                    {
                        "issuer": inst.issuer_url,
                        "jwks_uri": f"{inst.issuer_url}/jwks",
                        "id_token_signing_alg_values_supported": ["ES256"],
                    },
                )
            elif method == "GET" and path == "/oidc/jwks":
                self._send(200, inst.jwks())
            elif method == "GET" and path == "/gha/token":
                if self.headers.get("Authorization", "").lower() != f"bearer {inst.gha_request_token}":
                    raise _HTTPError(401, "bad runner request token")
                audience = parse_qs(url.query).get("audience", [AUDIENCE])[0]
                token = inst.token(job_workflow_ref=inst.gha_workflow_ref, audience=audience, issuer=GITHUB_ISSUER)
                self._send(200, {"value": token})
            elif method == "POST" and path == "/api/v2/signingCert":
                self._send(200, inst.signing_cert(self._body(), self.headers.get("Authorization", "")))
            elif method == "POST" and path == "/api/v1/signingCert":
                chain = inst.signing_cert_v1(self._body(), self.headers.get("Authorization", ""))
                self._send(201, chain, "application/pem-certificate-chain", {"SCT": ""})
            elif method == "GET" and path == "/api/v1/rootCert":
                self._send(200, "".join(inst.ca.chain_pem()).encode(), "application/pem-certificate-chain")
            elif method == "GET" and path == "/api/v2/trustBundle":
                self._send(200, {"chains": [{"certificates": inst.ca.chain_pem()}]})
            elif method == "GET" and path == "/api/v1/log":
                self._send(200, inst.rekor.log_info())
            elif method == "GET" and path == "/api/v1/log/publicKey":
                pem = inst.rekor.key.public_key().public_bytes(
                    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
                )
                self._send(200, pem, "application/x-pem-file")
            elif method == "POST" and path == "/api/v1/log/entries":
                self._send(201, inst.rekor.add(self._body()))
            elif method == "GET" and path == "/api/v1/log/entries":
                q = parse_qs(url.query)
                index = int(q.get("logIndex", ["-1"])[0])
                if not 1 <= index < len(inst.rekor.entries):
                    raise _HTTPError(404, f"no entry at index {index}")
                self._send(200, inst.rekor.render(index))
            elif method == "GET" and path.startswith("/api/v1/log/entries/"):
                found = inst.rekor.find_uuid(path.rsplit("/", 1)[-1])
                if found is None:
                    raise _HTTPError(404, "entry not found")
                self._send(200, inst.rekor.render(found))
            elif method == "POST" and path == "/api/v1/log/entries/retrieve":
                self._send(404, {"code": 404, "message": "search is not supported by the test log"})
            else:
                raise _HTTPError(404, f"no route for {method} {path}")
        except (_HTTPError, RekorError) as exc:
            self._send(exc.code, {"code": exc.code, "message": exc.message})

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")
