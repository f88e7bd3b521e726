"""OCI distribution client (distribution-spec 1.1): the only module that speaks HTTP to registries.

Errors: ``RegistryUnavailableError`` (cannot connect: exit 5), ``RegistryAuthError`` (401/403:
exit 6), ``NotFoundError`` (404 on a named reference: exit 8), ``RegistryError`` (anything else:
exit 7). Every message names the registry, the reference and the HTTP status.
Plain HTTP is used only for loopback or explicitly insecure registries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from builder.errors import (
    NotFoundError,
    RegistryAuthError,
    RegistryError,
    RegistryUnavailableError,
)

if TYPE_CHECKING:
    import requests

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MANIFEST_TYPES = (OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST)
ACCEPT = ", ".join(MANIFEST_TYPES)

DEFAULT_TIMEOUT = (5.0, 60.0)  # connect, read (seconds)


class RegistryClient:
    """Client for one registry host (``host[:port]``)."""

    def __init__(
        self, registry: str, *, insecure: bool = False, timeout: tuple[float, float] = DEFAULT_TIMEOUT
    ) -> None:
        self.registry = registry
        self.scheme = "http" if insecure else "https"
        self.base = f"{self.scheme}://{registry}"
        self.timeout = timeout
        self._session: requests.Session | None = None

    @property
    def session(self) -> requests.Session:
        if self._session is None:
            import requests

            self._session = requests.Session()
        return self._session

    def request(
        self, method: str, path: str, *, ref: str = "", ok: tuple[int, ...] = (200,), **kw: Any
    ) -> requests.Response:
        """One HTTP request to ``/v2/...``; raises the builder error for the status."""
        import requests

        url = f"{self.base}{path}"
        kw.setdefault("timeout", self.timeout)
        try:
            resp = self.session.request(method, url, **kw)
        except requests.ConnectionError as exc:
            raise RegistryUnavailableError(
                f"registry {self.registry} is not reachable ({self.scheme}): {type(exc).__name__}",
                registry=self.registry,
            ) from exc
        except requests.Timeout as exc:
            raise RegistryUnavailableError(
                f"registry {self.registry} timed out on {method} {path}", registry=self.registry
            ) from exc
        if resp.status_code in ok:
            return resp
        where = f"{self.registry}/{ref}" if ref else f"{self.registry}{path}"
        if resp.status_code in (401, 403):
            raise RegistryAuthError(
                f"registry refused {method} {where}: HTTP {resp.status_code}",
                registry=self.registry,
                status=resp.status_code,
            )
        if resp.status_code == 404:
            raise NotFoundError(f"{where} not found (HTTP 404 on {method})", registry=self.registry, status=404)
        raise RegistryError(
            f"registry {self.registry} answered HTTP {resp.status_code} to {method} {path}: {resp.text[:300]}",
            registry=self.registry,
            status=resp.status_code,
        )

    def ping(self) -> None:
        """GET /v2/; RegistryUnavailableError when nothing answers (401 counts as alive)."""
        self.request("GET", "/v2/", ok=(200, 401))

    def resolve(self, repository: str, reference: str) -> str:
        """Tag or digest -> manifest digest (``sha256:<hex>``) via HEAD with every manifest type."""
        resp = self.request(
            "HEAD",
            f"/v2/{repository}/manifests/{reference}",
            ref=f"{repository}:{reference}",
            headers={"Accept": ACCEPT},
        )
        digest = resp.headers.get("Docker-Content-Digest")
        if not digest:
            raise RegistryError(f"registry {self.registry} sent no Docker-Content-Digest for {repository}:{reference}")
        return digest
