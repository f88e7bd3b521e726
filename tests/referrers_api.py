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
