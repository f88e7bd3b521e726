"""A registry with the OCI referrers API for tests, made of the real registry (distribution 2.8 has
no referrers API and none that has one can be installed here) and a reverse proxy in front of it
(:class:`tests.faultproxy.FaultProxy`, every other request forwarded unchanged) that answers
``GET /v2/<name>/referrers/<digest>`` as distribution-spec v1.1 says
(https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#listing-referrers):
200, ``Content-Type: application/vnd.oci.image.index.v1+json``, an image index whose ``manifests``
are the descriptors of the manifests whose ``subject`` is ``<digest>`` (an empty list when there are
none, never a 404), filtered by ``?artifactType=`` with the ``OCI-Filters-Applied: artifactType``
header. The listing is the real registry's data: the ``sha256-<hex>`` fallback index the writers
keep there (the referrers tag schema of the same spec), read from the upstream registry per request.
"""

from __future__ import annotations

import http.client
import http.server
import json
import re
import urllib.parse

from tests.faultproxy import FaultProxy

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
_DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
_DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
_REFERRERS = re.compile(r"^/v2/(?P<name>.+)/referrers/(?P<alg>sha256):(?P<hex>[0-9a-f]{64})$")


class ReferrersApiProxy(FaultProxy):
    """The real registry ``upstream`` with the referrers API; ``referrers_gets`` counts the
    referrers API requests it answered (each also in ``seen``, outcome ``referrers``)."""

    referrers_gets = 0

    def __enter__(self) -> ReferrersApiProxy:
        self.start()
        return self

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        proxy = self
        base = super()._handler()

        class Handler(base):  # type: ignore[misc,valid-type]
            def handle_one(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                found = _REFERRERS.match(url.path) if self.command == "GET" else None
                if found is None:
                    super().handle_one()
                    return
                wanted = urllib.parse.parse_qs(url.query).get("artifactType", [])
                listed = proxy._fallback_listing(found["name"], f"{found['alg']}-{found['hex']}")
                if wanted:
                    listed = [d for d in listed if d.get("artifactType") in wanted]
                body = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": listed}).encode()
                with proxy._lock:
                    proxy.referrers_gets += 1
                proxy._record("GET", self.path, "referrers", 200)
                self.send_response(200)
                self.send_header("Content-Type", OCI_INDEX)
                if wanted:
                    self.send_header("OCI-Filters-Applied", "artifactType")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = handle_one

        return Handler

    def _fallback_listing(self, name: str, tag: str) -> list[dict[str, object]]:
        conn = http.client.HTTPConnection(self.upstream, timeout=60)
        try:
            conn.request("GET", f"/v2/{name}/manifests/{tag}", headers={"Accept": OCI_INDEX})
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        if resp.status != 200:
            return []
        manifests = json.loads(body).get("manifests") or []
        return [d for d in manifests if isinstance(d, dict)]


class PickyReferrersApiProxy(ReferrersApiProxy):
    """:class:`ReferrersApiProxy` whose referrers API refuses some digests the way registries in the
    field do: ``missing`` (404 or 400) for a digest the repository does not hold (Harbor before 2.11
    answers 404, https://github.com/goharbor/harbor/issues/20014, with the ``MANIFEST_UNKNOWN`` error
    code the ORAS artifacts spec chose for that case,
    https://github.com/oras-project/artifacts-spec/pull/58; Quay 3.12 answers 400,
    https://github.com/quay/quay/pull/3071), or ``always`` for every referrers request (a registry
    whose API is broken or refused). Errors use distribution-spec's error body
    (https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#error-codes); whether
    the digest is held is asked of the real registry (a manifest HEAD) per request."""

    def __init__(self, upstream: str, *, missing: int | None = None, always: int | None = None) -> None:
        super().__init__(upstream)
        self.missing, self.always = missing, always
        self.refused = 0  # referrers requests answered with an error status

    def __enter__(self) -> PickyReferrersApiProxy:
        self.start()
        return self

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        proxy = self
        base = super()._handler()

        class Handler(base):  # type: ignore[misc,valid-type]
            def handle_one(self) -> None:
                found = _REFERRERS.match(urllib.parse.urlsplit(self.path).path) if self.command == "GET" else None
                status = None if found is None else proxy._refusal(found["name"], f"{found['alg']}:{found['hex']}")
                if status is None:
                    super().handle_one()
                    return
                code = "MANIFEST_UNKNOWN" if status == 404 else "UNSUPPORTED"
                body = json.dumps({"errors": [{"code": code, "message": "refused by the test", "detail": None}]})
                with proxy._lock:
                    proxy.refused += 1
                proxy._record("GET", self.path, "refused", status)
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = handle_one

        return Handler

    def _refusal(self, name: str, digest: str) -> int | None:
        if self.always is not None:
            return self.always
        if self.missing is None:
            return None
        conn = http.client.HTTPConnection(self.upstream, timeout=60)
        try:
            kinds = (OCI_INDEX, "application/vnd.oci.image.manifest.v1+json", _DOCKER_MANIFEST, _DOCKER_LIST)
            conn.request("HEAD", f"/v2/{name}/manifests/{digest}", headers={"Accept": ", ".join(kinds)})
            held = conn.getresponse().status == 200
        finally:
            conn.close()
        return None if held else self.missing
