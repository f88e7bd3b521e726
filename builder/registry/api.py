"""What the registry client's operation modules (:mod:`builder.registry.uploads`,
:mod:`builder.registry.tag_list`, :mod:`builder.registry.referrers`) use of a client: the
structural type :class:`RegistryApi`, which :class:`builder.registry.client.RegistryClient`
satisfies (PEP 544 protocols: https://peps.python.org/pep-0544/). Those modules name this type,
never the client class, so the client can reach them through its methods without an import
cycle between the modules of the package (pyproject ``[tool.importlinter]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Unpack

if TYPE_CHECKING:
    from collections.abc import Mapping

    from builder.registry.cache import ContentCache
    from builder.registry.manifest import Manifest
    from builder.registry.response import Response
    from builder.registry.transport import RequestOptions, Transport


class RegistryApi(Protocol):
    """One registry host's client: ``registry`` (``host[:port]``), its ``transport`` (retries,
    body limits, backoff delays), the blobs it read (``content``) and the requests below, each
    raising the builder error for the registry's answer (``RegistryUnavailableError`` exit 5,
    ``RegistryAuthError`` 6, ``NotFoundError`` 8, ``RegistryError`` 7)."""

    registry: str
    transport: Transport
    content: ContentCache

    def request(
        self,
        method: str,
        path: str,
        *,
        ref: str = "",
        ok: tuple[int, ...] = (200,),
        scopes: tuple[str, ...] = (),
        headers: Mapping[str, str] | None = None,
        **kw: Unpack[RequestOptions],
    ) -> Response:
        """One HTTP request to ``path`` (``/v2/...`` or an upload location)."""
        ...

    def blob_exists(self, repository: str, digest: str) -> bool:
        """HEAD a blob: True when the repository has it."""
        ...

    def get_manifest(self, repository: str, reference: str) -> Manifest:
        """GET a manifest or index, bytes as served."""
        ...

    def try_get_manifest(self, repository: str, reference: str) -> Manifest | None:
        """Like :meth:`get_manifest`; None when it does not exist."""
        ...

    def put_manifest(self, repository: str, reference: str, raw: bytes, media_type: str) -> str:
        """PUT a manifest byte for byte; returns its digest."""
        ...
