"""One HTTP exchange of the registry transport, redirects followed: each hop goes to its own
origin (``scheme://host[:port]``) the way :class:`builder.registry.transport.Transport` routes it,
directly on that origin's keep-alive ``http.client`` pool (:class:`builder.registry.connections.Pool`)
or, when a proxy applies, through urllib3's ``ProxyManager`` / ``SOCKSProxyManager``
(https://urllib3.readthedocs.io/en/stable/advanced-usage.html#proxies), imported only then.

Redirects are followed as urllib3's ``PoolManager.urlopen`` follows them (its source:
https://github.com/urllib3/urllib3/blob/2.8.0/src/urllib3/poolmanager.py, ``urlopen``): the
``Location`` joined to the URL that answered; a 301, 302, 307 or 308 sends the same method and
body again (RFC 9110 sections 15.4.2-15.4.3, 15.4.8-15.4.9; urllib3 changes no method but a 303's),
a file from where it started (a body that cannot be sent again, a blob streamed from its source,
ends the exchange with the redirect as the answer); a 303 turns the request into a body-less GET
without the headers describing the body (RFC 9110 section 15.4.4,
https://www.rfc-editor.org/rfc/rfc9110#section-15.4.4; the fields urllib3's
``HTTPHeaderDict._prepare_for_method_change`` drops); ``Authorization``, ``Proxy-Authorization``
and ``Cookie`` dropped when the host changes (``Retry.remove_headers_on_redirect``,
https://urllib3.readthedocs.io/en/stable/reference/urllib3.util.html#urllib3.util.Retry); at most
``MAX_REDIRECTS`` hops.

Errors: :func:`send` raises :class:`SendError` when no usable answer came; its ``cause`` is what
failed (``OSError`` / ``http.client`` kinds and :class:`builder.registry.response.ReadError` from a
direct connection, urllib3's ``HTTPError`` kinds through a proxy, :class:`TooManyRedirects`,
:class:`builder.registry.connections.BadURL` for a ``Location`` that cannot be used), named by
:mod:`builder.registry.failures`.
"""

from __future__ import annotations

import functools
import http.client
import re
from typing import IO, TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from builder.errors import RegistryUnavailableError
from builder.registry.connections import (
    BadHeader,
    BadURL,
    Pool,
    Timeout,
    bad_header,
    check_ca,
    seekable_body,
    tls_context,
)
from builder.registry.response import BodyLimit, Headers, ReadError, Response

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Mapping

    import urllib3

    from builder.registry.environment import EnvSettings
    from builder.registry.stream import BlobStream

MAX_REDIRECTS = 30  # redirects followed for one request (requests' limit): blob GETs go to storage
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})  # urllib3's HTTPResponse.REDIRECT_STATUSES

#: The request headers that describe a body, dropped with the body when a 303 turns the request
#: into a GET (RFC 9110 section 15.4.4; the list urllib3 2.x drops, see the module text).
BODY_HEADERS = frozenset(
    {
        "content-encoding",
        "content-language",
        "content-location",
        "content-type",
        "content-length",
        "digest",
        "last-modified",
        "transfer-encoding",
    }
)
#: Dropped on a redirect to another host (urllib3's ``Retry.DEFAULT_REMOVE_HEADERS_ON_REDIRECT``).
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})


class SendError(Exception):
    """No usable answer: ``cause`` is the exception that says why (see the module text)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class TooManyRedirects(Exception):
    """More than ``MAX_REDIRECTS`` redirects for one request."""


def split_url(url: str) -> tuple[str, str, str]:
    """``(origin, target, path)`` of an absolute ``url``: ``scheme://netloc`` (the scheme lower
    case), the request target sent on the origin's connection (path and query, ``/`` when
    empty, no fragment: urllib3's ``request_uri``), characters a request target may not hold
    percent-encoded (:func:`encode_target`), and the path alone (for messages). Raises
    ValueError for a URL ``urllib.parse`` cannot split (``http://[::1``)."""
    parts = urlsplit(url)
    sep = url.find("://")
    target = url[sep + 3 + len(parts.netloc) if sep >= 0 else 0 :].partition("#")[0]
    if not target.startswith("/"):
        target = "/" + target  # "http://host?x" asks for "/?x"
    if _NOT_IN_TARGET.search(target):
        target = encode_target(target)
    return f"{parts.scheme}://{parts.netloc}", target, parts.path


#: A character a request target may not hold as it is (RFC 3986 section 3.3 ``pchar``, ``/`` and
#: ``?``: unreserved, sub-delims, ``:``, ``@``; section 2.1 ``%`` HEXDIG HEXDIG), or a ``%`` that
#: starts no such triplet.
_NOT_IN_TARGET = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:@/?%]|%(?![0-9A-Fa-f]{2})")


def encode_target(target: str) -> str:
    """``target`` (a path and query) with every character a request target may not hold (a
    space, a control character, a non-ASCII letter, ``"<>\\^`{|}``, a ``%`` that starts no
    ``%XX``) percent-encoded as its UTF-8 bytes (RFC 3986 section 2.1,
    https://www.rfc-editor.org/rfc/rfc3986#section-2.1), an existing ``%XX`` kept as it is: what
    urllib3's ``_encode_invalid_chars`` does to a ``Location``
    (https://github.com/urllib3/urllib3/blob/2.8.0/src/urllib3/util/url.py). A target read from a
    header (``http.client`` decodes header bytes as Latin-1) whose bytes are UTF-8 is taken as the
    UTF-8 it was sent as, as requests' ``get_redirect_target`` does
    (https://github.com/psf/requests/blob/v2.32.3/src/requests/sessions.py). Pure."""
    try:
        text = target.encode("latin-1").decode("utf-8")
    except UnicodeError:  # characters beyond Latin-1 (not from a header), or Latin-1 bytes that are no UTF-8
        text = target
    return _NOT_IN_TARGET.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8", "surrogatepass")), text)


def origin_pool(origin: str, context_for: Callable[[], ssl.SSLContext], maxsize: int) -> Pool:
    """A new :class:`Pool` for ``origin`` (``http://`` or ``https://`` and a host; the TLS
    context from ``context_for()`` for https). Raises BadURL for an origin that has no host, an
    unknown scheme or a port that is no number (urllib3's words for them)."""
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https"):
        raise BadURL(f"Not supported URL scheme {parts.scheme}")
    try:
        port = parts.port
    except ValueError as exc:
        raise BadURL(str(exc)) from exc
    if not parts.hostname:
        raise BadURL(f"No host specified in {origin}")
    tls = parts.scheme == "https"
    context = context_for() if tls else None
    return Pool(parts.scheme, parts.hostname, port or (443 if tls else 80), context, maxsize)


def send(
    route: Callable[[str], Pool | urllib3.PoolManager],
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes | IO[bytes] | BlobStream | None,
    timeout: Timeout,
    stream: bool,
    *,
    resend: bool = True,
    on_resend: Callable[[], None] | None = None,
    limits: tuple[int, float] = (16 * 1024 * 1024, 120.0),
) -> Response:
    """One exchange for ``url``, redirects followed (see the module text), no retries (the
    caller's loop decides). ``route(origin)``: how an origin is reached. ``stream``: the body is
    left for the caller; otherwise it is read (and the connection given back) before returning,
    within ``limits`` (decoded bytes, seconds: :meth:`Response.read_limited`; a body over them is
    a SendError whose cause is :class:`builder.registry.response.BodyLimit`).
    ``resend``: a direct pool may replace a kept-alive connection that broke before the answer
    (:meth:`builder.registry.connections.Pool.exchange`), calling ``on_resend()`` each time it
    does. Raises SendError."""
    hops = 0
    start = body.tell() if seekable_body(body) else None  # type: ignore[union-attr]  # a file: where it starts
    try:
        while True:
            origin, target, _ = split_url(url)
            via = route(origin)
            if isinstance(via, Pool):
                status, fields, got = via.exchange(
                    method, target, headers, body, timeout, resend=resend, on_resend=on_resend
                )
                resp = Response(status, Headers(fields), url, got)
            else:
                resp = _proxied(via, method, url, headers, body, timeout)
            location = resp.headers.get("Location") if resp.status_code in REDIRECT_STATUSES else None
            if resp.status_code != 303 and not (body is None or isinstance(body, bytes) or start is not None):
                location = None  # the body (a blob streamed from its source) cannot be sent again: the answer
            if not location:
                if not stream:
                    bodiless = method == "HEAD" or resp.status_code in (204, 304)  # Content-Length: a GET's
                    resp.read_limited(*limits, bodiless=bodiless)  # read now: a failure is the exchange's
                return resp
            if hops >= MAX_REDIRECTS:
                resp.close()
                raise TooManyRedirects(f"more than {MAX_REDIRECTS} redirects")
            hops += 1
            _drain(resp)
            nxt = urljoin(url, location)
            if resp.status_code == 303:
                method, body = "GET", None
                headers = {k: v for k, v in headers.items() if k.lower() not in BODY_HEADERS}
            elif start is not None:  # 301, 302, 307, 308 keep the method and body here
                body.seek(start)  # type: ignore[union-attr]  # the same body again, from its first byte
            if _host_key(nxt) != _host_key(url):
                headers = {k: v for k, v in headers.items() if k.lower() not in CREDENTIAL_HEADERS}
            url = nxt
    except SendError:
        raise
    except (OSError, http.client.HTTPException, TooManyRedirects, BadURL, BadHeader, BodyLimit) as exc:  # ssl: OSError
        raise SendError(exc) from exc
    except ValueError as exc:  # UnicodeError included
        unsendable = _unsendable(exc, url, headers)
        if unsendable is None:
            raise
        raise SendError(unsendable) from exc
    except Exception as exc:
        if type(exc).__module__.startswith("urllib3."):  # the proxy path's HTTPError kinds
            raise SendError(_unwrap(exc)) from exc
        raise


def _drain(resp: Response) -> None:
    """Let a redirect's connection go: its short body read (kept alive), else closed."""
    drain = getattr(resp.body, "drain", None)
    if drain is not None:
        drain()
    else:
        resp.close()


def _host_key(url: str) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` of ``url``, the default port filled in (urllib3's
    ``is_same_host``)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def _unwrap(exc: BaseException) -> BaseException:
    """What a urllib3 ``MaxRetryError`` wraps (its ``reason``), else ``exc``."""
    reason = getattr(exc, "reason", None)
    return reason if type(exc).__name__ == "MaxRetryError" and isinstance(reason, BaseException) else exc


def _unsendable(exc: ValueError, url: str, headers: Mapping[str, str]) -> BaseException | None:
    """What a ``ValueError`` (``UnicodeError`` included) raised while sending to ``url`` with
    ``headers`` says, or None when it is none of these (a defect: raised on): urllib3's own kinds
    (``LocationValueError``...) as they are; a :class:`BadURL` when ``urllib.parse`` could not
    split the URL (a ``Location`` such as ``http://[::1``) or ``http.client`` / ``socket`` /
    ``encodings`` could not encode its host (``UnicodeError`` of a non-ASCII host name that is no
    IDNA name); a :class:`BadHeader` when a header value cannot be sent (``putheader``'s
    ``ValueError`` / ``UnicodeEncodeError``)."""
    if type(exc).__module__.startswith("urllib3."):
        return _unwrap(exc)
    if _raised_in(exc, ("urllib.parse",)):
        return BadURL(str(exc))
    if not _raised_in(exc, ("http.client", "socket", "encodings.idna", "urllib3.", "ssl")):
        return None
    return bad_header(headers) or BadURL(f"{urlsplit(url).netloc!r} cannot be sent: {type(exc).__name__}: {exc}")


def _raised_in(exc: BaseException, modules: tuple[str, ...]) -> bool:
    """``exc`` was raised inside one of ``modules`` (a frame of its traceback whose module name
    is one of them, or starts with one ending in "."): ``urllib.parse`` may call on (a bracketed
    host is checked by ``ipaddress``, Python >= 3.11.4), so any frame counts."""
    tb = exc.__traceback__
    while tb is not None:
        name = str(tb.tb_frame.f_globals.get("__name__", ""))
        if any(name == m or (m.endswith(".") and name.startswith(m)) for m in modules):
            return True
        tb = tb.tb_next
    return False


def _proxied(
    manager: urllib3.PoolManager,
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes | IO[bytes] | BlobStream | None,
    timeout: Timeout,
) -> Response:
    """One hop through a proxy: ``manager.urlopen`` with the full URL (``ProxyManager`` decides
    between the absolute form and a CONNECT tunnel), redirects left to :func:`send`, the body
    unread. Raises urllib3's HTTPError kinds."""
    raw = manager.urlopen(
        method,
        url,
        body=body,  # urllib3 sends anything with .read() (a BlobStream) in pieces
        headers=headers,
        timeout=_urllib3_timeout(timeout),
        retries=_one_attempt(),
        redirect=False,
        preload_content=False,
        decode_content=True,
    )
    return Response(raw.status, raw.headers, url, Urllib3Body(raw))


class Urllib3Body:
    """The body of an answer through a proxy (urllib3's ``BaseHTTPResponse``), as
    :class:`builder.registry.response.Body` reads it; urllib3's errors raised as ReadError."""

    def __init__(self, raw: urllib3.BaseHTTPResponse) -> None:
        self.raw = raw

    def read_all(self) -> bytes:
        """The whole decoded body. Raises ReadError."""
        import urllib3

        try:
            return bytes(self.raw.data or b"")
        except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as exc:
            raise ReadError(f"the answer's body could not be read: {type(exc).__name__}") from exc
        finally:
            self.close()

    def read1(self, size: int) -> bytes:
        """What has arrived, decoded, at most ``size`` bytes. Raises ReadError."""
        import urllib3

        try:
            return self.raw.read1(size, decode_content=True)
        except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as exc:
            raise ReadError(f"the answer's body could not be read: {type(exc).__name__}") from exc

    def raw_readinto(self) -> Callable[[memoryview], int] | None:
        """The ``readinto`` of the ``http.client`` response under urllib3's (its ``_fp``, 1.x and
        2.x) when there is no ``Content-Encoding`` to decode; else None."""
        fp = getattr(self.raw, "_fp", None)
        if isinstance(fp, http.client.HTTPResponse) and not self.raw.headers.get("Content-Encoding"):
            return fp.readinto
        return None

    def close(self) -> None:
        """Give the connection back (urllib3 closes it first when the body was not read out)."""
        if not self.raw.closed:
            self.raw.close()
        self.raw.release_conn()


@functools.cache
def _urllib3_timeout(timeout: Timeout) -> urllib3.Timeout:
    """urllib3's (connect, read) timeout for ``timeout`` (kept: urllib3 clones it per use)."""
    import urllib3

    return urllib3.Timeout(connect=timeout.connect, read=timeout.read)


@functools.cache
def _one_attempt() -> urllib3.Retry:
    """urllib3's policy for one attempt: no retry, no redirect followed (:func:`send` follows them)."""
    import urllib3

    return urllib3.Retry(total=None, connect=0, read=0, status=0, other=0, redirect=0)


def proxy_manager(env: EnvSettings, tls: bool, registry: str, maxsize: int) -> urllib3.PoolManager:
    """urllib3's connection pools through the proxy ``env`` names: up to ``maxsize`` idle keep-alive
    connections per host; ``block=False``: a thread finding every pooled connection in use opens
    another instead of waiting (a blocking pool without a timeout would hang the process on one
    leaked response; https://urllib3.readthedocs.io/en/stable/reference/urllib3.poolmanager.html).
    ``tls``: for ``https`` URLs, with :func:`builder.registry.connections.tls_context`'s TLS
    settings (``env.ca``, a file or a directory, else certifi's bundle: one definition for both
    paths; urllib3 takes it as ``ssl_context``).
    Raises RegistryUnavailableError for a CA path that does not exist or a proxy URL that cannot
    be used, naming the variable to fix."""
    import urllib3

    kw: dict[str, object] = {"num_pools": 8, "maxsize": maxsize, "block": False}
    if tls:
        check_ca(env, registry)
        kw["ssl_context"] = tls_context(env.ca)  # the one CA choice (and ALPN) of the direct path
    try:
        if env.proxy.startswith("socks"):
            from urllib3.contrib.socks import SOCKSProxyManager

            user, _, password = (env.proxy_auth or "").partition(":")
            return SOCKSProxyManager(env.proxy, username=user or None, password=password or None, **kw)  # type: ignore[arg-type]
        headers = urllib3.make_headers(proxy_basic_auth=env.proxy_auth) if env.proxy_auth else None
        return urllib3.ProxyManager(env.proxy, proxy_headers=headers, **kw)  # type: ignore[arg-type]
    except (ImportError, ValueError, AssertionError, urllib3.exceptions.HTTPError) as exc:
        raise RegistryUnavailableError(
            f"the proxy {env.proxy} named for registry {registry} (HTTPS_PROXY / HTTP_PROXY / ALL_PROXY) "
            f"cannot be used: {exc}",
            hint="use an http:// or https:// proxy URL (socks:// needs the PySocks package), or unset the variable",
            registry=registry,
        ) from exc
