"""Why a request to a registry failed, in words and in kinds, from what a direct
``http.client`` connection raises (socket, TLS and ``http.client`` errors, the ``ConnectTimeout``
and ``BadURL`` of :mod:`builder.registry.connections`, ``ReadError`` of
:mod:`builder.registry.response`;
https://docs.python.org/3/library/http.client.html#http.client.HTTPException) and from what urllib3
raises through a proxy (https://urllib3.readthedocs.io/en/stable/reference/urllib3.exceptions.html)
with the socket and TLS errors it wraps; both are filed under the same kinds: what
:class:`builder.registry.transport.Transport` retries (:func:`is_transient`), what it calls a TLS
failure or a timeout, and the cause its messages name (:func:`connection_cause`), and the proxy
and timeout notes its messages and hints carry (:func:`proxy_note`, :func:`proxy_hint`,
:func:`timeout_seconds`). Pure: nothing here sends or reads anything. urllib3 is imported only to
classify an exception of its own (``type(exc).__module__``), never for a direct connection's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

    from builder.registry.environment import EnvSettings


def _urllib3_kinds(chain: list[BaseException]) -> ModuleType | None:
    """``urllib3.exceptions`` when one of ``chain`` is urllib3's (it is then imported already),
    else None (nothing imported)."""
    if not any(type(e).__module__.startswith("urllib3") for e in chain):
        return None
    import urllib3.exceptions

    return urllib3.exceptions


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps (causes, contexts, exceptions among its args), outermost first."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen:
        seen.append(cur)
        inner = getattr(cur, "reason", None)
        if not isinstance(inner, BaseException):
            inner = cur.__cause__ or cur.__context__
        if inner is None:
            inner = next((a for a in cur.args if isinstance(a, BaseException)), None)
        cur = inner
    return seen


def tls_failed(exc: BaseException) -> bool:
    """The TLS handshake or a TLS record failed (``ssl.SSLError``, urllib3's ``SSLError``)."""
    chain = _chain(exc)
    if any(type(e).__module__ == "ssl" or type(e).__name__ == "SSLError" for e in chain):
        import ssl

        e = _urllib3_kinds(chain)
        kinds = (ssl.SSLError, e.SSLError) if e else (ssl.SSLError,)
        return any(isinstance(x, kinds) for x in chain)
    return False


def timed_out(exc: BaseException) -> bool:
    """A read timeout or a connect timeout (``TimeoutError``, the direct connection's
    ``ConnectTimeout`` included; urllib3's timeouts, not a refused or unresolvable connection,
    which urllib3 also files under ``ConnectTimeoutError``)."""
    chain = _chain(exc)
    e = _urllib3_kinds(chain)
    for x in chain:
        if e is not None and isinstance(x, e.NewConnectionError):
            continue
        if isinstance(x, TimeoutError) or (e is not None and isinstance(x, e.ReadTimeoutError | e.ConnectTimeoutError)):
            return True
    return False


def tunnel_status(exc: BaseException) -> str:
    """The status line a proxy answered a ``CONNECT`` tunnel with when it did not open it
    (http.client's and urllib3's ``OSError("Tunnel connection failed: 503 Service Unavailable")``;
    RFC 9110 section 9.3.6, https://www.rfc-editor.org/rfc/rfc9110#section-9.3.6: any status
    outside 2xx means no tunnel), or "" when ``exc`` is no such failure."""
    marker = "Tunnel connection failed:"
    for e in _chain(exc):
        text = str(e)
        if isinstance(e, OSError) and marker in text:
            return text.split(marker, 1)[1].strip()
    return ""


def proxy_refusal(exc: BaseException) -> str:
    """:func:`tunnel_status` when the proxy refused the tunnel: ``403 Forbidden`` (its policy) or
    ``407 Proxy Authentication Required`` (it wants credentials; RFC 9110 section 15.5.8); ""
    otherwise (a 5xx is the proxy being unavailable: :func:`proxy_unavailable`)."""
    status = tunnel_status(exc)
    return status if status.startswith(("403", "407")) else ""


def proxy_unavailable(exc: BaseException) -> str:
    """:func:`tunnel_status` when the proxy could not serve the tunnel: a 5xx (``502 Bad
    Gateway``, ``503 Service Unavailable``, ``504 Gateway Timeout``: the proxy is overloaded, or
    cannot reach the registry; RFC 9110 section 15.6, https://www.rfc-editor.org/rfc/rfc9110#section-15.6);
    transient, so retried like a lost connection. "" otherwise."""
    status = tunnel_status(exc)
    return status if status[:1] == "5" else ""


def connect_timed_out(exc: BaseException) -> bool:
    """:func:`timed_out` while connecting (no TCP or TLS connection in time), not while waiting
    for the answer: the direct connection's ``ConnectTimeout``, urllib3's ``ConnectTimeoutError``)."""
    from builder.registry.connections import ConnectTimeout

    chain = _chain(exc)
    e = _urllib3_kinds(chain)
    return any(
        isinstance(x, ConnectTimeout)
        or (e is not None and isinstance(x, e.ConnectTimeoutError) and not isinstance(x, e.NewConnectionError))
        for x in chain
    )


def is_transient(exc: BaseException) -> bool:
    """Whether a failed exchange is worth sending again: only a connection lost or a timeout is
    (urllib3 raises its ``HTTPError`` kinds for both and for answers it cannot read).
    Transient (:func:`lost_connection`): a connection reset or aborted, a broken pipe, the peer
    closing a kept-alive connection without an answer (``RemoteDisconnected``), a body broken off
    (``IncompleteRead``, urllib3's ``ProtocolError`` "Response ended prematurely"), a connect or
    read timeout, a proxy answering a tunnel with a 5xx (:func:`proxy_unavailable`). Not transient
    (retrying only delays the error): a refused connection, a DNS failure, an unreachable network,
    a TLS error, a proxy refusing the tunnel (403/407) or answering it otherwise, and whatever is
    wrong with the answer or the URL itself rather than with the connection
    (:func:`unusable_answer`: a ``Location`` that does not parse or has an unknown scheme, a body
    that does not decode, an answer that is not HTTP). Kinds from urllib3's exception reference
    (https://urllib3.readthedocs.io/en/stable/reference/urllib3.exceptions.html) and http.client's
    (https://docs.python.org/3/library/http.client.html#http.client.HTTPException). Pure."""
    import errno
    import socket

    if proxy_unavailable(exc):
        return True
    if tls_failed(exc) or tunnel_status(exc) or unusable_answer(exc):
        return False
    chain = _chain(exc)
    for e in chain:
        if isinstance(e, ConnectionRefusedError | socket.gaierror):
            return False
        if isinstance(e, OSError) and e.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
            return False
    return any(lost_connection(e) for e in chain)


def unusable_answer(exc: BaseException) -> str:
    """What was wrong with the answer (or the URL it sent us to) rather than with the connection,
    in words, or "" when ``exc`` is no such failure: ``a body that does not decode as its
    Content-Encoding says`` (``zlib.error`` on a direct connection, urllib3 ``DecodeError``),
    ``an answer that is not HTTP``
    (http.client ``BadStatusLine`` other than ``RemoteDisconnected``, ``LineTooLong``, urllib3
    ``ResponseNotChunked``, ``HeaderParsingError``, ``InvalidHeader``), ``an invalid chunk length``
    (urllib3 ``InvalidChunkLength`` with a length line that is not empty: an empty one is a
    connection lost between chunks; http.client, which reads preloaded bodies, reports both as
    ``IncompleteRead``: retried), ``a URL that cannot be used (...)`` (urllib3
    ``LocationValueError``, the direct connection's ``BadURL`` and ``http.client.InvalidURL``: a
    ``Location`` that does not parse or names an unknown scheme)."""
    import http.client
    import zlib

    from builder.registry.connections import BadURL

    chain = _chain(exc)
    e = _urllib3_kinds(chain)
    for x in chain:
        if isinstance(x, zlib.error) or (e is not None and isinstance(x, e.DecodeError)):
            return "a body that does not decode as its Content-Encoding says"
        if isinstance(x, BadURL | http.client.InvalidURL) or (e is not None and isinstance(x, e.LocationValueError)):
            return f"a URL that cannot be used ({x})"
        if e is not None and isinstance(x, e.InvalidChunkLength) and x.length.strip():
            return f"an invalid chunk length ({x.length[:40]!r})"
        if isinstance(x, http.client.BadStatusLine) and not isinstance(x, http.client.RemoteDisconnected):
            return "an answer that is not HTTP"  # RemoteDisconnected: it closed without answering
        if isinstance(x, http.client.LineTooLong) or type(x) is http.client.HTTPException:
            return "an answer that is not HTTP"  # the bare kind: "got more than 100 headers"
        if e is not None and isinstance(x, e.ResponseNotChunked | e.HeaderParsingError | e.InvalidHeader):
            return "an answer that is not HTTP"
    return ""


def lost_connection(exc: BaseException) -> bool:
    """``exc`` itself (not what it wraps) says the connection was lost or timed out: a reset, an
    abort, a broken pipe, ``TimeoutError``, an incomplete body, urllib3's ``ProtocolError``, a read
    timeout or a connect timeout (not ``NewConnectionError``, which urllib3 files under connect
    timeouts too: whether it is transient depends on the socket error it wraps)."""
    import http.client

    if isinstance(
        exc, ConnectionResetError | ConnectionAbortedError | BrokenPipeError | TimeoutError | http.client.IncompleteRead
    ):
        return True
    e = _urllib3_kinds([exc])
    if e is None or isinstance(exc, e.NewConnectionError):
        return False
    return isinstance(exc, e.ProtocolError | e.ReadTimeoutError | e.ConnectTimeoutError)


def connection_cause(exc: BaseException, proxy: str = "") -> str:
    """Why a connection failed, in words, from the innermost cause of ``exc`` (urllib3 wraps the
    socket error): ``the host name does not resolve (DNS)`` (``socket.gaierror``), ``connection
    refused``, ``connection reset``, ``no answer in time``, else the OS error's text or the
    exception's type name; `` (through the proxy PROXY)`` added when the request went through
    one (``proxy``: its URL and the variable naming it, such as ``http://p:3128 from
    HTTPS_PROXY``; without it, a generic note when urllib3 says a proxy was in the way). Pure."""
    seen = _chain(exc)
    if proxy:
        via = f" (through the proxy {proxy})"
    elif any(type(e).__name__ == "ProxyError" for e in seen):
        via = " (through the proxy: HTTPS_PROXY / HTTP_PROXY)"
    else:
        via = ""
    return _innermost_cause(exc, seen) + via


def _innermost_cause(exc: BaseException, seen: list[BaseException]) -> str:
    """:func:`connection_cause` without the proxy note: ``seen`` is ``exc``'s chain, outermost first."""
    import socket

    for e in reversed(seen):  # innermost first
        if isinstance(e, socket.gaierror):
            return "the host name does not resolve (DNS)"
        if isinstance(e, ConnectionRefusedError):
            return "connection refused"
        if isinstance(e, ConnectionResetError | BrokenPipeError):
            return "connection reset"
        if isinstance(e, TimeoutError):
            return "no answer in time"
    if timed_out(exc):
        return "no answer in time"
    if any(isinstance(e, OSError) and e.strerror for e in seen):
        return next(str(e.strerror) for e in reversed(seen) if isinstance(e, OSError) and e.strerror)
    names = {type(e).__name__ for e in seen}
    broke = any(n in names for n in ("ProtocolError", "RemoteDisconnected", "IncompleteRead"))
    return "the connection broke off" if broke else type(exc).__name__


def timeout_seconds(value: object) -> str:
    """A timeout's seconds for messages: ``60``, ``0.5``; ``?`` when urllib3 has none."""
    return f"{value:g}" if isinstance(value, int | float) else "?"


def ca_note(env: EnvSettings) -> str:
    """Which CA certificates a TLS connection trusted, for hints: ``FILE from VARIABLE`` (and the
    CA variables it outranks, which were not read: REQUESTS_CA_BUNDLE, then CURL_CA_BUNDLE, then
    SSL_CERT_FILE, then SSL_CERT_DIR), or certifi's Mozilla bundle when none is set."""
    if env.ca:
        note = f"the certificates trusted were {env.ca} from {env.ca_variable}"
        if env.ca_outranked:
            note += f" (it outranks {', '.join(env.ca_outranked)}, also set but not read)"
        return note
    import certifi

    return (
        f"the certificates trusted were certifi's Mozilla bundle {certifi.where()} (none of REQUESTS_CA_BUNDLE, "
        "CURL_CA_BUNDLE, SSL_CERT_FILE, SSL_CERT_DIR is set)"
    )


def proxy_note(env: EnvSettings) -> str:
    """``PROXY from VARIABLE`` for messages ("" for a direct connection)."""
    return f"{env.proxy} from {env.proxy_variable}" if env.proxy else ""


def proxy_hint(env: EnvSettings, host: str) -> str | None:
    """The hint for a request through a proxy that got no answer: the proxy's variable and
    NO_PROXY (None without a proxy: the error's default hint applies)."""
    if not env.proxy:
        return None
    return (
        f"the request went through the proxy {env.proxy} ({env.proxy_variable}): check that the proxy runs "
        f"and can reach {host}, fix or unset {env.proxy_variable}, or list {host} in NO_PROXY to connect directly"
    )


def error_text(body: str) -> str:
    """A registry's error answer as a person reads it: the OCI distribution error document
    (``{"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown", "detail": ...}]}``,
    "Error Codes" in https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#error-codes)
    as ``MANIFEST_UNKNOWN: manifest unknown`` (several joined by ``; ``); any other body as it is."""
    from builder.registry.manifest import load_json

    try:
        errors = load_json(body).get("errors") if body.lstrip().startswith("{") else None
    except (ValueError, AttributeError):
        return body
    if not isinstance(errors, list) or not errors or not all(isinstance(e, dict) for e in errors):
        return body
    parts = [": ".join(str(e[k]) for k in ("code", "message") if e.get(k)) for e in errors]
    return "; ".join(p for p in parts if p) or body
