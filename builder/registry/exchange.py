"""One HTTP exchange through urllib3 (https://urllib3.readthedocs.io/en/stable/), at the least
CPU per request that keeps what the registry transport promises: for each
``scheme://host[:port]`` (an *origin*) reached directly, the transport keeps that host's one
keep-alive ``HTTPConnectionPool`` (:func:`direct_pool`, resolved on the origin's first request)
and a request names only its path on it (:func:`split_url` splits an absolute URL once): nothing
is parsed again per request (``PoolManager.urlopen`` parses the full URL, looks its pool up by a
normalised key and has the pool parse the path once more; with the transport's own URL splits
that was a sixth of the client's instructions per request: 946 k before, 787 k after, a bare
``HTTPConnectionPool`` 751 k; docs/benchmarks.md, benchmarks/registry_requests.py). Requests
through a proxy take ``PoolManager.urlopen`` with the full URL (``ProxyManager`` decides between
the absolute form and a CONNECT tunnel).

Redirects are followed as ``PoolManager.urlopen`` follows them (its source:
https://github.com/urllib3/urllib3/blob/2.8.0/src/urllib3/poolmanager.py, ``urlopen``): the
``Location`` joined to the URL that answered; a 303 turns the request into a body-less GET
without the headers describing the body (RFC 9110 section 15.4.4,
https://www.rfc-editor.org/rfc/rfc9110#section-15.4.4; the fields urllib3's
``HTTPHeaderDict._prepare_for_method_change`` drops); ``Authorization``, ``Proxy-Authorization``
and ``Cookie`` dropped when the host changes (``Retry.remove_headers_on_redirect``,
https://urllib3.readthedocs.io/en/stable/reference/urllib3.util.html#urllib3.util.Retry); each
hop counted against ``MAX_REDIRECTS``. The first hop goes through the origin's pool, the next
ones through the manager (they may go anywhere).

Errors: urllib3's ``HTTPError`` kinds (a ``MaxRetryError`` wraps the cause in ``.reason``; a URL
that cannot be split is a ``LocationValueError``); the transport maps them to builder errors.
"""

from __future__ import annotations

import functools
from typing import IO, TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from builder.registry.response import Response

if TYPE_CHECKING:
    from collections.abc import Mapping

    import urllib3

    from builder.registry.stream import BlobStream

MAX_REDIRECTS = 30  # redirects followed for one request (requests' limit): blob GETs go to storage

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


def split_url(url: str) -> tuple[str, str, str]:
    """``(origin, target, path)`` of an absolute ``url``: ``scheme://netloc`` (the scheme lower
    case), the request target sent on the origin's connection (path and query, ``/`` when
    empty, no fragment: urllib3's ``request_uri``) and the path alone (for messages). Raises
    ValueError for a URL ``urllib.parse`` cannot split (``http://[::1``)."""
    parts = urlsplit(url)
    sep = url.find("://")  # none: no host to route by (the manager names the URL's fault)
    target = url[sep + 3 + len(parts.netloc) if sep >= 0 else 0 :].partition("#")[0]
    if not target.startswith("/"):
        target = "/" + target  # "http://host?x" asks for "/?x"
    return f"{parts.scheme}://{parts.netloc}", target, parts.path


def direct_pool(origin: str, manager: urllib3.PoolManager) -> urllib3.HTTPConnectionPool | None:
    """The keep-alive pool of ``origin`` (``scheme://netloc``, reached directly) in ``manager``:
    the one ``manager.urlopen`` would pick (``PoolManager.connection_from_host`` with urllib3's
    own parse of the origin). None for an origin urllib3 cannot serve (no host, an unknown
    scheme, a bad port): requests then take ``manager.urlopen``, which raises the error that
    names the URL, with the request that needs it."""
    import urllib3

    try:
        u = urllib3.util.parse_url(origin)
        if u.scheme not in ("http", "https") or not u.host:
            return None
        return manager.connection_from_host(u.host, port=u.port, scheme=u.scheme)
    except (ValueError, urllib3.exceptions.HTTPError):
        return None  # see above: the manager's urlopen raises it for the request


def send(
    manager: urllib3.PoolManager,
    pool: urllib3.HTTPConnectionPool | None,
    method: str,
    url: str,
    target: str,
    headers: Mapping[str, str],
    body: bytes | IO[bytes] | BlobStream | None,
    timeout: urllib3.Timeout,
    stream: bool,
) -> Response:
    """One exchange for ``url``: ``target`` on ``pool`` (:func:`direct_pool`), else (None: a
    proxy, or no pool for the origin) the full URL through ``manager``; redirects followed (see
    the module text), no retries (the caller's loop decides). ``stream``: the body is left for
    the caller; otherwise it is read and the connection given back. Raises urllib3's HTTPError
    kinds."""
    import urllib3

    try:
        raw = None
        if pool is not None:
            try:
                raw = pool.urlopen(
                    method,
                    target,
                    body=body,  # type: ignore[arg-type]  # urllib3 sends anything with .read() (a BlobStream) in pieces
                    headers=headers,
                    timeout=timeout,
                    retries=redirects_only(),
                    redirect=False,
                    assert_same_host=False,
                    preload_content=not stream,
                    decode_content=True,
                )
            except urllib3.exceptions.ClosedPoolError:
                # evicted and closed by the manager (it keeps `num_pools` hosts; urllib3 releases
                # with a `dispose_func` close what they evict): raised before anything was sent,
                # so the manager's new pool for the host serves this request
                raw = None
            else:
                raw = _follow(manager, pool, raw, method, url, headers, body, timeout, stream)
        if raw is None:
            raw = manager.urlopen(
                method,
                url,
                body=body,
                headers=headers,
                timeout=timeout,
                retries=redirects_only(),
                preload_content=not stream,
                decode_content=True,
            )
    except ValueError as exc:
        if isinstance(exc, urllib3.exceptions.HTTPError) or not _raised_in_url_parsing(exc):
            raise
        # urllib.parse's own ValueError (urljoin of a redirect's Location such as "http://[::1"),
        # raised past urllib3: the URL kind of its errors
        raise urllib3.exceptions.LocationValueError(str(exc)) from exc
    return Response(raw.status, raw.headers, _final_url(url, raw), raw)


def _follow(
    manager: urllib3.PoolManager,
    pool: urllib3.HTTPConnectionPool,
    raw: urllib3.BaseHTTPResponse,
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes | IO[bytes] | BlobStream | None,
    timeout: urllib3.Timeout,
    stream: bool,
) -> urllib3.BaseHTTPResponse:
    """``raw`` when it is no redirect; else the answer at the end of the redirects it starts,
    the first one taken here as ``PoolManager.urlopen`` takes it, the next ones by the manager."""
    location = raw.get_redirect_location()
    if not location:
        return raw
    location = urljoin(url, location)
    retries = redirects_only()
    if raw.status == 303:
        method, body = "GET", None
        headers = {k: v for k, v in headers.items() if k.lower() not in BODY_HEADERS}
    if not pool.is_same_host(location):
        drop = retries.remove_headers_on_redirect
        headers = {k: v for k, v in headers.items() if k.lower() not in drop}
    retries = retries.increment(method, url, response=raw)
    raw.drain_conn()
    return manager.urlopen(
        method,
        location,
        body=body,
        headers=headers,
        timeout=timeout,
        retries=retries,
        preload_content=not stream,
        decode_content=True,
    )


def _raised_in_url_parsing(exc: BaseException) -> bool:
    """``exc`` was raised inside ``urllib.parse`` (any frame of its traceback, as it may call on:
    a bracketed host is checked by ``ipaddress``, Python >= 3.11.4): a URL it cannot split."""
    import urllib.parse

    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == urllib.parse.__file__:
            return True
        tb = tb.tb_next
    return False


def _final_url(url: str, raw: urllib3.BaseHTTPResponse) -> str:
    """The absolute URL that answered: the last redirect target, else ``url``."""
    history = raw.retries.history if raw.retries is not None else ()
    for step in reversed(history):
        if step.redirect_location and step.url:
            return urljoin(step.url, step.redirect_location)
    return url


@functools.cache
def redirects_only() -> urllib3.Retry:
    """urllib3's retry policy for one attempt: redirects followed (at most ``MAX_REDIRECTS``), no
    retry of anything else (the transport's loop decides those). Immutable: urllib3 derives a
    new one per redirect."""
    import urllib3

    return urllib3.Retry(total=None, connect=0, read=0, status=0, other=0, redirect=MAX_REDIRECTS)
