"""Tag listing of one repository (``GET /v2/<name>/tags/list``), following the ``Link`` header's
``rel="next"`` pages and bounded against a registry whose pages never end.

Sources: OCI distribution-spec v1.1, "Listing Tags" (``?n=``, the ``Link`` header;
https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#listing-tags), RFC 8288
(``Link: <url>; rel="next"``, https://www.rfc-editor.org/rfc/rfc8288).

Errors: those of :meth:`builder.registry.client.RegistryClient.request` (``RegistryUnavailableError``
exit 5, ``RegistryAuthError`` exit 6); ``RegistryError`` (exit 7) for a list that never ends or
is not a JSON object.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import urljoin

from builder.errors import NotFoundError, RegistryError
from builder.registry.media import parse_json_object

if TYPE_CHECKING:
    from builder.registry.api import RegistryApi

MAX_LISTED_TAGS = 1_000_000
"""The most tags :func:`list_tags` collects from one repository (a registry whose pages never
end is refused past it). The shipped matrices' largest repository holds a few thousand variants,
each with a handful of tags (variant, content, stages, ``.sig``/``.att``)."""


def list_tags(client: RegistryApi, repository: str, *, page_size: int = 1000) -> list[str]:
    """Every tag of a repository, following ``Link: <...>; rel="next"`` pages. A repository
    that does not exist has no tags (empty list). Bounded against a registry that never
    stops: each page is read with the body limits (``Transport.read_body``), and a page
    linking back to one already read, or more than :data:`MAX_LISTED_TAGS` tags in all, is a
    RegistryError (7) naming the repository."""
    tags: list[str] = []
    url: str | None = f"/v2/{repository}/tags/list?n={page_size}"
    seen: set[str] = set()
    where = f"{repository} (tags)"
    while url:
        try:
            resp = client.request("GET", url, ref=where, stream=True)
        except NotFoundError:
            return tags
        seen.add(resp.url)
        body = parse_json_object(client.transport.read_body(resp, where), f"{client.registry}/{repository} tag list")
        tags.extend(str(t) for t in body.get("tags") or [])
        url = next_link(resp.headers.get("Link"), resp.url)
        if (url is not None and url in seen) or len(tags) > MAX_LISTED_TAGS:
            raise RegistryError(
                f"registry {client.registry} listed over {min(len(tags), MAX_LISTED_TAGS):,} tags of {repository}"
                + (" and links back to a page already read" if url in seen else "")
                + "; stopped listing",
                hint="a registry or proxy whose tag list never ends is broken or hostile",
                registry=client.registry,
            )
    return tags


_LINK_RE = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


def next_link(header: str | None, current_url: str) -> str | None:
    """The absolute URL of a ``Link: <...>; rel="next"`` header (RFC 8288), or None."""
    if not header:
        return None
    m = _LINK_RE.search(header)
    return urljoin(current_url, m.group(1)) if m else None
