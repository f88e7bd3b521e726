"""One answer of a registry (or of its token service, or of the storage a blob GET was redirected
to), as every module of :mod:`builder.registry` reads it: status, headers, final URL and a body
that is read whole, read with limits, or streamed, through urllib3's ``HTTPResponse``.

Shape: :class:`Response` (frozen) wraps one ``urllib3.BaseHTTPResponse``
(https://urllib3.readthedocs.io/en/stable/reference/urllib3.response.html). ``status_code``,
``headers`` (case-insensitive), ``url`` (absolute, after redirects), ``content``/``text``/``json()``
(the whole body, read once and kept by urllib3), ``iter_content(n)`` (a stream of pieces of up to
``n`` bytes), ``read1(n)`` (whatever has arrived, at most ``n`` bytes) and ``close()``. The names are
those ``requests.Response`` used (https://requests.readthedocs.io/en/latest/api/#requests.Response),
so callers of the registry client read one shape whatever the transport underneath.

Errors: reading the body raises urllib3's ``HTTPError`` subclasses (``ProtocolError``,
``ReadTimeoutError``) or ``OSError``; :class:`builder.registry.transport.Transport` maps them to
builder errors. ``json()`` raises ``ValueError`` for a body that is not JSON.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from urllib3 import BaseHTTPResponse


@dataclasses.dataclass(frozen=True)
class Response:
    """One HTTP answer. ``status_code``: the HTTP status; ``headers``: the answer's headers
    (urllib3's ``HTTPHeaderDict``: case-insensitive, repeated headers joined by ``", "``);
    ``url``: the absolute URL that answered (the last redirect target, when redirects were
    followed); ``raw``: urllib3's response, whose body is read at most once."""

    status_code: int
    headers: Mapping[str, str]
    url: str
    raw: BaseHTTPResponse = dataclasses.field(repr=False)

    @property
    def content(self) -> bytes:
        """The whole body (read on first use, then kept; b"" for none). Unbounded: bodies that
        may be large or hostile are read with :meth:`Transport.read_body`'s limits instead."""
        return bytes(self.raw.data or b"")

    @property
    def encoding(self) -> str | None:
        """The ``charset`` of ``Content-Type`` (None when not given)."""
        for param in self.headers.get("Content-Type", "").split(";")[1:]:
            key, _, value = param.strip().partition("=")
            if key.lower() == "charset" and value:
                return value.strip('"')
        return None

    @property
    def text(self) -> str:
        """The body as text: its declared charset, else UTF-8; undecodable bytes replaced."""
        return decode(self.content, self.encoding)

    def json(self) -> object:
        """The body parsed as JSON. Raises ValueError when it is not JSON (or nests too deeply:
        :func:`builder.registry.manifest.load_json`)."""
        from builder.registry.manifest import load_json

        return load_json(self.content)

    def iter_content(self, chunk_size: int) -> Iterator[bytes]:
        """The body in pieces of ``chunk_size`` bytes (the last may be shorter), as it arrives;
        a compressed ``Content-Encoding`` is decoded (as requests did)."""
        return self.raw.stream(chunk_size, decode_content=True)

    def read1(self, size: int) -> bytes:
        """What has arrived of the body, at most ``size`` bytes, waiting only when nothing has
        (b"" at the end): a trickled body cannot hold one read open for long."""
        return self.raw.read1(size, decode_content=True)

    def close(self) -> None:
        """Give the connection back to its pool: as it is when the body was read to its end
        (keep-alive), closed first when it was not (unread bytes would corrupt the next answer on
        it). Safe to call twice."""
        if not self.raw.closed:
            self.raw.close()
        self.raw.release_conn()


def decode(data: bytes, charset: str | None) -> str:
    """``data`` as text in ``charset`` (else UTF-8), undecodable bytes replaced; an unknown
    charset name falls back to UTF-8."""
    try:
        return data.decode(charset or "utf-8", "replace")
    except LookupError:
        return data.decode("utf-8", "replace")
