"""Keep-alive connections to the origins (``scheme://host[:port]``) the registry transport reaches
DIRECTLY (no proxy applies), on the standard library's ``http.client``
(https://docs.python.org/3/library/http.client.html): one thread-safe :class:`Pool` per origin,
one exchange (:meth:`Pool.exchange`) and the body of its answer (:class:`DirectBody`).

Why not urllib3 here: ``import urllib3`` costs about 40 ms of every registry command's start-up
(``urllib3.http2`` alone imports ``importlib.metadata``, ``zipfile``, ``shutil``, ``email``...) and
0.38-0.52 ms of client CPU per request against 0.21-0.24 ms for ``http.client`` (benchmarks/
registry_requests.py, docs/benchmarks.md, #19 rounds 5 and 8). urllib3 stays for proxies
(:mod:`builder.registry.exchange`), imported only when one applies.

What this keeps of urllib3's ``HTTPConnectionPool``
(https://github.com/urllib3/urllib3/blob/2.8.0/src/urllib3/connectionpool.py): idle connections
kept up to ``maxsize`` per origin, a thread finding none idle opens another (never waits, as
``block=False``); an idle connection the server has closed is found before use (its socket reads
as ready: urllib3's ``is_connection_dropped``) and dropped; a REUSED connection that breaks before
any byte of the answer (``RemoteDisconnected``, ``BrokenPipeError``, ``ConnectionResetError``: the
server closed it while it was idle) is sent once more on a fresh connection when the body can be
sent again (none, bytes, or a seekable file) and the caller allows retries (with retries off, as
urllib3 ran with ``read=0``, the failure is the caller's); the connect timeout bounds the TCP and TLS
handshakes, the read timeout every later wait on the socket (``sock.settimeout`` after connecting);
``TCP_NODELAY`` set (as urllib3 and curl set it); a connection goes back to its pool only when its
answer's body was read to the end, and is closed otherwise. TLS: one ``ssl.SSLContext`` per CA
setting (a CA file, a directory of hashed certificates, else certifi's Mozilla bundle), the host
name checked (``ssl.create_default_context``,
https://docs.python.org/3/library/ssl.html#ssl.create_default_context). ``Content-Encoding`` gzip
and deflate are decoded with ``zlib`` (RFC 9110 section 8.4.1,
https://www.rfc-editor.org/rfc/rfc9110#section-8.4.1; deflate as zlib data, else raw deflate, as
urllib3's ``DeflateDecoder`` reads it); other codings are handed on as they are (as urllib3 does).

Errors: :meth:`Pool.exchange` raises ``OSError`` kinds (``ConnectionRefusedError``,
``socket.gaierror``, ``ssl.SSLError``, ``TimeoutError``; :class:`ConnectTimeout` when no connection
came within the connect timeout), ``http.client.HTTPException`` kinds (``BadStatusLine``,
``RemoteDisconnected``, ``LineTooLong``); body reads raise
:class:`builder.registry.response.ReadError` (an ``OSError``) wrapping the cause
(``IncompleteRead``, ``zlib.error``, a timeout). :mod:`builder.registry.failures` names them.
"""

from __future__ import annotations

import functools
import http.client
import re
import select
import socket
import threading
from typing import IO, TYPE_CHECKING, NamedTuple

from builder.errors import RegistryUnavailableError
from builder.registry.response import ReadError

if TYPE_CHECKING:
    import ssl
    import zlib
    from collections.abc import Callable, Mapping

    from builder.registry.environment import EnvSettings
    from builder.registry.stream import BlobStream

#: Bytes http.client reads from a file body per ``send`` (its default is 8 KiB; urllib3 sends 16 KiB);
#: a :class:`builder.registry.stream.BlobStream` hands out its own pieces whatever is asked.
BLOCK_BYTES = 64 * 1024

#: Bytes of a redirect's body read to keep its connection; a longer one closes the connection.
DRAIN_BYTES = 64 * 1024

#: What a kept-alive connection the server closed while it was idle raises before any byte of the
#: answer (urllib3 retries these on a reused connection; http.client's RemoteDisconnected is a
#: ConnectionResetError).
_STALE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class Timeout(NamedTuple):
    """Seconds to wait: ``connect`` for the TCP and TLS handshakes, ``read`` for each later wait on
    the socket (the answer's head, each piece of its body)."""

    connect: float
    read: float


class ConnectTimeout(TimeoutError):
    """No TCP or TLS connection to the origin within the connect timeout (a plain ``TimeoutError``
    is a read timeout: the connection was there, the answer was not)."""


class BadURL(ValueError):
    """A URL the transport cannot send to (no host, an unknown scheme, a port that is no number)."""


class BadHeader(ValueError):
    """A request header ``field`` whose value cannot be sent: ``problem`` says why (``a line
    break``, ``characters outside Latin-1``). http.client's ``putheader`` refuses both (RFC 9110
    section 5.5, https://www.rfc-editor.org/rfc/rfc9110#section-5.5: a field value is visible
    ASCII, spaces and obs-text). The value itself is not kept (it may be a token)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"the {field} header holds {problem}")
        self.field = field
        self.problem = problem


#: What http.client's ``putheader`` refuses in a value (its ``_is_illegal_header_value``): a line
#: break not followed by a space or tab (obs-fold).
_ILLEGAL_VALUE = re.compile(r"\n(?![ \t])|\r(?![ \t\n])")


def bad_header(headers: Mapping[str, str]) -> BadHeader | None:
    """The first of ``headers`` that ``http.client`` cannot send (a value with a line break or a
    character outside Latin-1, a name that is no token), as a :class:`BadHeader`; None when all
    can be sent. Called after a send failed (not on every request)."""
    for name, value in headers.items():
        if not name or any(c in name for c in ":\r\n ") or not name.isascii():
            return BadHeader(repr(name[:40]), "a name that is no header name")
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            return BadHeader(name, "characters outside Latin-1")
        if _ILLEGAL_VALUE.search(value):
            return BadHeader(name, "a line break")
    return None


@functools.cache
def tls_context(ca: str | None) -> ssl.SSLContext:
    """The TLS settings for one CA setting, built once: ``ca`` a PEM bundle file or a directory of
    hashed certificates (OpenSSL's ``SSL_CTX_load_verify_locations``); None: certifi's bundle
    (https://github.com/certifi/python-certifi). Certificates and host names are checked; ALPN
    offers ``http/1.1`` (RFC 7301, https://www.rfc-editor.org/rfc/rfc7301; urllib3's
    ``ALPN_PROTOCOLS``), so a server or load balancer choosing by ALPN answers HTTP/1.1. The one
    CA choice of the registry transport (direct and through a proxy). Raises
    ``OSError`` / ``ssl.SSLError`` for a CA path that cannot be read."""
    import os.path
    import ssl

    if ca and os.path.isdir(ca):
        ctx = ssl.create_default_context(capath=ca)
    elif ca:
        ctx = ssl.create_default_context(cafile=ca)
    else:
        import certifi

        ctx = ssl.create_default_context(cafile=certifi.where())
    ctx.set_alpn_protocols(["http/1.1"])  # as urllib3 offers it (ssl_.py ALPN_PROTOCOLS); RFC 7301
    return ctx


def check_ca(env: EnvSettings, registry: str) -> None:
    """Raise RegistryUnavailableError naming the file and the variable it came from
    (``env.ca_variable``) when the CA path ``env.ca`` does not exist, or is a file OpenSSL cannot
    read as a PEM bundle of certificates (``SSL_CTX_load_verify_locations`` fails:
    ``NO_CERTIFICATE_OR_CRL_FOUND`` for a file holding none,
    https://docs.openssl.org/3.0/man3/SSL_CTX_load_verify_locations/), for ``registry``
    (``host[:port]``). The bundle is loaded through :func:`tls_context`, once per path."""
    import os.path
    import ssl

    if not env.ca:
        return
    named = f"the CA certificates {env.ca} (from {env.ca_variable or 'the environment'}) named for registry {registry}"
    fix = (
        f"point {env.ca_variable or 'the variable'} at a PEM file of CA certificates (-----BEGIN CERTIFICATE-----) "
        "or a directory of hashed certificates, or unset it"
    )
    if env.ca_outranked:
        fix += f" ({env.ca_variable} outranks {', '.join(env.ca_outranked)}, also set: only one is read)"
    if not os.path.exists(env.ca):
        raise RegistryUnavailableError(f"{named} do not exist", hint=fix, registry=registry)
    try:
        tls_context(env.ca)
    except (ssl.SSLError, OSError) as exc:
        why = getattr(exc, "reason", None) or exc.strerror or type(exc).__name__
        raise RegistryUnavailableError(
            f"{named} cannot be used: OpenSSL reads no certificate bundle from it ({why})", hint=fix, registry=registry
        ) from exc


class Resends:
    """Counts a :meth:`Pool.exchange`'s re-sends (pass it as ``on_resend``): ``count`` so far,
    ``also()`` called for each (the transport counts every request that went out)."""

    __slots__ = ("also", "count")

    def __init__(self, also: Callable[[], None]) -> None:
        self.also = also
        self.count = 0

    def __call__(self) -> None:
        self.count += 1
        self.also()


class _Connection:
    """One ``http.client`` connection and what the pool knows of it: whether it served an answer
    before (``reused``) and the read timeout its socket has."""

    __slots__ = ("http", "read_timeout", "reused")

    def __init__(self, conn: http.client.HTTPConnection) -> None:
        self.http = conn
        self.read_timeout: float | None = None
        self.reused = False


class Pool:
    """Keep-alive ``http.client`` connections to one origin: ``scheme`` (``http`` or ``https``),
    ``host``, ``port``; ``context``: the TLS settings for ``https`` (:func:`tls_context`), None for
    ``http``. Up to ``maxsize`` idle connections are kept. Thread-safe. ``opened``: connections
    opened so far; ``in_use``: connections out with a request or an unread body."""

    def __init__(self, scheme: str, host: str, port: int, context: ssl.SSLContext | None, maxsize: int) -> None:
        self.scheme, self.host, self.port = scheme, host, port
        self.context = context
        self.maxsize = maxsize
        self.opened = 0
        self.in_use = 0
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def _take(self) -> _Connection | None:
        """An idle connection the server has not closed, or None."""
        while True:
            with self._lock:
                if not self._idle:
                    self.in_use += 1
                    return None
                conn = self._idle.pop()
                self.in_use += 1
            sock = conn.http.sock
            if sock is not None and not _readable(sock):
                return conn
            conn.http.close()  # closed by the server while idle (or sent something unasked)
            with self._lock:
                self.in_use -= 1

    def _open(self, timeout: Timeout) -> _Connection:
        """A new connection, connected within ``timeout.connect`` (:class:`ConnectTimeout`)."""
        if self.context is not None:
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout.connect, context=self.context, blocksize=BLOCK_BYTES
            )
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout.connect, blocksize=BLOCK_BYTES)
        try:
            conn.connect()
        except TimeoutError as exc:
            conn.close()
            raise ConnectTimeout(f"no connection to {self.host}:{self.port} within {timeout.connect:g} s") from exc
        except BaseException:
            conn.close()
            raise
        assert conn.sock is not None  # connected
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self.opened += 1
        return _Connection(conn)

    def give_back(self, conn: _Connection) -> None:
        """``conn`` is free again: kept (up to ``maxsize`` idle) when it can carry another request."""
        conn.reused = True
        with self._lock:
            self.in_use -= 1
            if conn.http.sock is not None and len(self._idle) < self.maxsize:
                self._idle.append(conn)
                return
        conn.http.close()

    def discard(self, conn: _Connection) -> None:
        """``conn`` is closed and forgotten (its answer was not read to the end, or it broke)."""
        conn.http.close()
        with self._lock:
            self.in_use -= 1

    def close(self) -> None:
        """Close the idle connections (those in use close when their answers are done)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.http.close()

    def exchange(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str],
        body: bytes | IO[bytes] | BlobStream | None,
        timeout: Timeout,
        *,
        resend: bool = True,
        on_resend: Callable[[], None] | None = None,
    ) -> tuple[int, list[tuple[str, str]], DirectBody]:
        """Send ``method target`` (the path and query) with ``headers`` and ``body`` (bytes, a file
        or a stream with ``read``, sent with the ``Content-Length`` the caller gives); the answer's
        status, header fields (in order, repeated ones repeated) and unread body. ``resend``: a
        kept-alive connection that breaks before any byte of the answer may be replaced once (the
        caller allows retries; the body must be able to go back to its start too); ``on_resend()``
        is called before each such re-send (the request went out once more, and the first may
        have reached the server: the caller counts it and judges the answer as after a lost
        connection). Raises the errors of the module text."""
        conn = self._take()
        resend = resend and (body is None or isinstance(body, bytes) or seekable_body(body))
        while True:
            if conn is None:
                try:
                    conn = self._open(timeout)
                except BaseException:
                    with self._lock:
                        self.in_use -= 1
                    raise
            reused = conn.reused
            try:
                if conn.read_timeout != timeout.read:
                    assert conn.http.sock is not None
                    conn.http.sock.settimeout(timeout.read)
                    conn.read_timeout = timeout.read
                broke = _send_request(conn.http, method, target, headers, body)
                if broke is not None and conn.http.sock is None:
                    raise broke  # no socket left to read an answer from
                resp = conn.http.getresponse()
            except _STALE:
                self.discard(conn)
                if not (reused and resend):
                    raise
                # the server closed the kept-alive connection as we sent: once more on a new one
                if body is not None and not isinstance(body, bytes):
                    body.seek(0)
                with self._lock:
                    self.in_use += 1
                conn = None
                if on_resend is not None:
                    on_resend()
                continue
            except BaseException:
                self.discard(conn)
                raise
            return resp.status, resp.msg.items(), DirectBody(resp, self, conn)


def _send_request(
    conn: http.client.HTTPConnection,
    method: str,
    target: str,
    headers: Mapping[str, str],
    body: bytes | IO[bytes] | BlobStream | None,
) -> OSError | None:
    """Send the request (a body with ``read``, a file or a BlobStream, piece by piece, each with
    ``sendall``). The ``BrokenPipeError`` / ``ConnectionResetError`` of a server that closed while
    the body went out is returned, not raised: it may have answered first (a 401 or 413 before
    reading the body), and that answer is read next, as urllib3 reads it
    (``HTTPConnectionPool._make_request``); when it did not, reading raises."""
    try:
        conn.request(method, target, body=body, headers=headers)
    except (BrokenPipeError, ConnectionResetError) as exc:
        return exc
    return None


def body_size(data: IO[bytes] | BlobStream) -> int:
    """The bytes an upload body holds (its ``Content-Length``: the pool never sends one chunked):
    ``len()`` when it has one, else a seekable file's size from its current position."""
    if hasattr(data, "__len__"):
        return len(data)
    pos = data.tell()
    end = data.seek(0, 2)
    data.seek(pos)
    return end - pos


def _readable(sock: socket.socket) -> bool:
    """``sock`` has something to read, or is closed (an idle keep-alive connection: the server
    closed it): urllib3's ``wait_for_read(sock, timeout=0)``, with ``poll`` (no descriptor limit)."""
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True  # closed underneath: not usable either


def seekable_body(body: object) -> bool:
    """Whether ``body`` is a file that can go back to its start (a :class:`BlobStream` restarts with a new GET: not
    sent twice by the pool; the transport's retry loop decides that)."""
    seekable = getattr(body, "seekable", None)
    return bool(seekable is not None and seekable())


class DirectBody:
    """The body of one answer on a pooled ``http.client`` connection (the interface
    :class:`builder.registry.response.Response` reads: ``read_all``, ``read1``, ``raw_readinto``,
    ``close``). Decodes ``Content-Encoding`` gzip/deflate; the connection goes back to the pool
    when the body was read to its end, and is closed when it is closed before that."""

    def __init__(self, resp: http.client.HTTPResponse, pool: Pool, conn: _Connection) -> None:
        self._resp = resp
        self._pool = pool
        self._conn: _Connection | None = conn
        coding = (resp.getheader("Content-Encoding") or "").strip().lower()
        self._coding = coding if coding in ("gzip", "x-gzip", "deflate") else ""
        self._decoder: zlib._Decompress | None = None
        self._pending = b""  # decoded bytes not handed out yet
        if resp.length == 0 and not resp.chunked:
            self._finish()  # a HEAD, 204 or 304 answer, or an empty body: nothing to read

    def raw_readinto(self) -> Callable[[memoryview], int] | None:
        """``http.client``'s ``readinto`` (from the socket straight into the caller's buffer) when
        the body is sent as it is (no ``Content-Encoding`` to decode); else None. Bytes read so
        are the caller's: :meth:`close` gives the connection back only when they reached the end."""
        return None if self._coding else self._resp.readinto

    def read_all(self) -> bytes:
        """The whole (decoded) body; the connection given back. Raises ReadError."""
        try:
            data = self._decode(self._resp.read(), final=True)
        except (http.client.HTTPException, OSError, _zlib_error()) as exc:
            self.close()
            raise ReadError(f"the answer's body could not be read: {type(exc).__name__}") from exc
        self._finish()
        return data

    def read1(self, size: int) -> bytes:
        """What has arrived of the (decoded) body, at most ``size`` bytes; b"" at the end (the
        connection then given back). Raises ReadError."""
        size = size if size > 0 else DRAIN_BYTES
        try:
            data = self._decoded(size) if self._coding else self._raw_read1(size)
        except (http.client.HTTPException, OSError, _zlib_error()) as exc:
            self.close()
            raise ReadError(f"the answer's body could not be read: {type(exc).__name__}") from exc
        if not data:
            self._finish()
        return data

    def _decoded(self, size: int) -> bytes:
        """At most ``size`` decoded bytes, reading what has arrived as needed; b"" at the end.
        A piece never decodes to more than ``size`` bytes at once (zlib's ``max_length``: a
        small piece of a hostile body cannot expand to gigabytes in memory)."""
        while not self._pending:
            d = self._decoder
            if d is not None and d.unconsumed_tail:
                self._pending = d.decompress(d.unconsumed_tail, size)
                continue
            raw = self._raw_read1(size)
            if not raw:
                self._pending = self._decode(b"", final=True, limit=0)
                break
            self._pending = self._decode(raw, final=False, limit=size)
        out, self._pending = self._pending[:size], self._pending[size:]
        return out

    def _raw_read1(self, size: int) -> bytes:
        """``http.client``'s ``read1``, which ends a body cut short quietly (b"" with bytes of its
        ``Content-Length`` still to come: CPython's ``HTTPResponse.read1``, unlike ``read``):
        raised here as ``IncompleteRead``, as ``read`` raises it."""
        data = self._resp.read1(size)
        if not data and self._resp.length:
            raise http.client.IncompleteRead(b"", self._resp.length)
        return data

    def _decode(self, data: bytes, *, final: bool, limit: int = 0) -> bytes:
        """``data`` decoded as the ``Content-Encoding`` says, at most ``limit`` bytes (0: all; the
        rest of the input is then the decoder's ``unconsumed_tail``); ``final``: the body ended,
        so the compressed data must have too. Raises ``zlib.error`` for data that does not decode."""
        if not self._coding:
            return data
        import zlib

        if self._decoder is None:
            if not data:
                return b""  # an empty body: nothing to decode (urllib3 decodes none either)
            wbits = 16 + zlib.MAX_WBITS if self._coding != "deflate" else zlib.MAX_WBITS
            if self._coding == "deflate" and (data[0] & 0x0F) != 8:
                wbits = -zlib.MAX_WBITS  # raw deflate, without the zlib header (RFC 1951)
            self._decoder = zlib.decompressobj(wbits)
        out = self._decoder.decompress(data, limit) if data else b""
        if final and not self._decoder.eof:
            out += self._decoder.flush()
            if not self._decoder.eof:
                raise zlib.error("the compressed body ended before its end marker")
        return out

    def _finish(self) -> None:
        """The body was read to its end: the connection goes back to the pool."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._resp.length == 0 and not self._resp.isclosed():
            self._resp.read()  # http.client marks an empty body read only once read
        if self._resp.isclosed() and not self._resp.will_close:
            self._pool.give_back(conn)
        else:
            self._pool.discard(conn)

    def drain(self) -> None:
        """Read a short rest of the body (a redirect's) so the connection can be reused; a long
        one (over ``DRAIN_BYTES``) closes it instead."""
        if self._conn is None:
            return
        length = self._resp.length
        if length is not None and length <= DRAIN_BYTES and not self._resp.chunked:
            try:
                self._resp.read()
            except (http.client.HTTPException, OSError):
                self.close()
                return
            self._finish()
        else:
            self.close()

    def close(self) -> None:
        """Done with the body: the connection goes back to the pool when it was read to its end
        (or :meth:`raw_readinto` reached it), else it is closed. Safe to call twice."""
        conn = self._conn
        if conn is None:
            return
        if self._resp.isclosed() or (self._resp.length == 0 and not self._resp.chunked):
            self._finish()
            return
        self._conn = None
        self._resp.close()
        self._pool.discard(conn)


def _zlib_error() -> type[Exception]:
    import zlib

    return zlib.error
