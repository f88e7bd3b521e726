"""One answer of a registry (or of its token service, or of the storage a blob GET was redirected
to), as every module of :mod:`builder.registry` reads it: status, headers, final URL and a body
that is read whole, read with limits, or streamed, whichever connection carried it (a direct
``http.client`` one, :mod:`builder.registry.connections`; urllib3's through a proxy,
:mod:`builder.registry.exchange`).

Shape: :class:`Response` (frozen): ``status_code``, ``headers`` (:class:`Headers`:
case-insensitive, repeated fields joined by ``", "`` as urllib3's ``HTTPHeaderDict`` joins them,
https://urllib3.readthedocs.io/en/stable/reference/urllib3._collections.html), ``url`` (absolute,
after redirects), ``content``/``text``/``json()`` (the whole body, read once and kept),
``iter_content(n)`` (a stream of pieces of up to ``n`` bytes), ``read1(n)`` (whatever has arrived,
at most ``n`` bytes) and ``close()``. The names are those ``requests.Response`` used
(https://requests.readthedocs.io/en/latest/api/#requests.Response), so callers of the registry
client read one shape whatever the transport underneath. The body is read through a
:class:`Body` (the interface both connection kinds give).

Errors: reading the body raises :class:`ReadError` (an ``OSError`` whose ``__cause__`` says why:
``http.client.IncompleteRead``, a timeout, ``zlib.error``, urllib3's ``ProtocolError`` or
``DecodeError``) or ``OSError``; :class:`builder.registry.transport.Transport` maps them to
builder errors (:mod:`builder.registry.failures`). ``json()`` raises ``ValueError`` for a body
that is not JSON.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator


class ReadError(OSError):
    """The body of an answer could not be read to its end or decoded; ``__cause__`` is why."""


class BodyLimit(Exception):
    """A body refused by :meth:`Response.read_limited` (not an ``OSError``: nothing was lost, and
    a retry would get the same): ``kind`` ``"declared"`` (its ``Content-Length`` of ``size``
    bytes is over ``limit``, nothing read), ``"bytes"`` (over ``limit`` decoded bytes arrived) or
    ``"seconds"`` (``limit`` seconds passed with ``size`` bytes read)."""

    def __init__(self, kind: str, size: int, limit: float) -> None:
        super().__init__(f"{kind}: {size} over {limit}")
        self.kind, self.size, self.limit = kind, size, limit


class Body(Protocol):
    """An answer's body as :class:`Response` reads it, whatever connection carries it."""

    def read_all(self) -> bytes:
        """The whole (decoded) body; the connection given back. Raises ReadError."""
        ...

    def read1(self, size: int) -> bytes:
        """What has arrived of the (decoded) body, at most about ``size`` bytes; b"" at the end.
        Raises ReadError."""
        ...

    def raw_readinto(self) -> Callable[[memoryview], int] | None:
        """``http.client``'s ``readinto`` of the body when it needs no decoding, else None."""
        ...

    def close(self) -> None:
        """Done: the connection given back when the body was read to its end, else closed."""
        ...


class Headers(Mapping[str, str]):
    """An answer's header fields, looked up case-insensitively; a field sent several times reads
    as its values joined by ``", "`` (RFC 9110 section 5.3,
    https://www.rfc-editor.org/rfc/rfc9110#section-5.3). Iterates the names as first sent."""

    __slots__ = ("_fields",)

    def __init__(self, fields: Iterable[tuple[str, str]]) -> None:
        self._fields: dict[str, tuple[str, str]] = {}
        for name, value in fields:
            key = name.lower()
            got = self._fields.get(key)
            self._fields[key] = (got[0], f"{got[1]}, {value}") if got else (name, value)

    def __getitem__(self, name: str) -> str:
        return self._fields[name.lower()][1]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._fields

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._fields.values())

    def __len__(self) -> int:
        return len(self._fields)

    def __repr__(self) -> str:
        return f"Headers({dict(self.items())!r})"


@dataclasses.dataclass(frozen=True)
class Response:
    """One HTTP answer. ``status_code``: the HTTP status; ``headers``: the answer's headers
    (:class:`Headers`); ``url``: the absolute URL that answered (the last redirect target, when
    redirects were followed); ``body``: its :class:`Body`, read at most once."""

    status_code: int
    headers: Mapping[str, str]
    url: str
    body: Body = dataclasses.field(repr=False)

    @functools.cached_property
    def content(self) -> bytes:
        """The whole body (read on first use, then kept; b"" for none). Unbounded: the transport
        reads every body it does not stream with :meth:`read_limited` first. Raises ReadError."""
        return self.body.read_all()

    def read_limited(self, max_bytes: int, max_seconds: float, *, bodiless: bool = False) -> bytes:
        """The whole body, read as it arrives (``read1``: a trickled body cannot hold one read open
        past the deadline) with limits: at most ``max_bytes`` DECODED bytes (a larger declared
        ``Content-Length`` refused before reading; a compressed body is counted as it decodes, so
        a small gzip bomb stops at the limit) within ``max_seconds`` in total; kept as
        :attr:`content`. ``bodiless``: an answer that has no body whatever its ``Content-Length``
        says (to a HEAD, a 204 or 304: RFC 9110 section 8.6, the length of what a GET would get).
        Raises :class:`BodyLimit` (the connection then closed) or ReadError."""
        import time

        declared = None if bodiless else self.headers.get("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            self.close()
            raise BodyLimit("declared", int(declared), max_bytes)
        deadline = time.monotonic() + max_seconds
        body = bytearray()
        while chunk := self.body.read1(64 * 1024):
            body += chunk
            if len(body) > max_bytes:
                self.close()
                raise BodyLimit("bytes", len(body), max_bytes)
            if time.monotonic() > deadline:
                self.close()
                raise BodyLimit("seconds", len(body), max_seconds)
        data = self.__dict__["content"] = bytes(body)  # what cached_property keeps (frozen: not setattr)
        return data

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

    def excerpt(self, max_bytes: int, max_seconds: float) -> str:
        """At most ``max_bytes`` of the (unread) body as text, what arrived within ``max_seconds``
        ("" up to where the connection broke): an error answer's message, never waiting on an
        endless or trickled body. The caller closes the response."""
        import time

        got = bytearray()
        deadline = time.monotonic() + max_seconds
        try:
            while len(got) < max_bytes and time.monotonic() < deadline:
                chunk = self.body.read1(max_bytes - len(got))
                if not chunk:
                    break
                got += chunk
        except OSError:  # ReadError included
            return decode(bytes(got), None)  # the message says what arrived; the status says the rest
        return decode(bytes(got), self.encoding)

    def iter_content(self, chunk_size: int) -> Iterator[bytes]:
        """The body in pieces of ``chunk_size`` bytes (the last may be shorter), as it arrives;
        a compressed ``Content-Encoding`` is decoded (as requests did). Raises ReadError."""
        pending = bytearray()
        while piece := self.body.read1(chunk_size):
            pending += piece
            while len(pending) >= chunk_size:
                yield bytes(pending[:chunk_size])
                del pending[:chunk_size]
        if pending:
            yield bytes(pending)

    def read1(self, size: int) -> bytes:
        """What has arrived of the body, at most ``size`` bytes, waiting only when nothing has
        (b"" at the end): a trickled body cannot hold one read open for long. Raises ReadError."""
        return self.body.read1(size)

    def close(self) -> None:
        """Give the connection back to its pool: as it is when the body was read to its end
        (keep-alive), closed first when it was not (unread bytes would corrupt the next answer on
        it). Safe to call twice."""
        self.body.close()


def decode(data: bytes, charset: str | None) -> str:
    """``data`` as text in ``charset`` (else UTF-8), undecodable bytes replaced; an unknown
    charset name falls back to UTF-8."""
    try:
        return data.decode(charset or "utf-8", "replace")
    except LookupError:
        return data.decode("utf-8", "replace")
