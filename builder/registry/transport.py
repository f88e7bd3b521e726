"""HTTP to one registry host: per-thread sessions on one shared connection pool, the
environment's proxy/CA/netrc settings resolved once per host, bounded retries, the 401
challenge round trip (answered by :class:`builder.registry.auth.Authenticator`) and the mapping
of HTTP answers to builder errors.

Sources: requests' environment handling (``Session.merge_environment_settings``,
``utils.get_netrc_auth``; https://requests.readthedocs.io/en/latest/api/#requests.Session),
``Retry-After`` (RFC 9110 section 10.2.3), distribution-spec v1.1 error statuses
(https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#error-codes).

Errors: ``RegistryUnavailableError`` (cannot connect or TLS fails: exit 5), ``RegistryAuthError``
(401/403: exit 6), ``NotFoundError`` (404: exit 8), ``RegistryError`` (anything else: exit 7).
Every message names the registry, the request and the HTTP status. 429 and 5xx answers and
connection resets are retried with exponential backoff a bounded number of times.
"""

from __future__ import annotations

import dataclasses
import random
import re
import threading
import time
from typing import IO, TYPE_CHECKING, TypedDict, Unpack
from urllib.parse import urlsplit

from builder.errors import BuilderError, NotFoundError, RegistryAuthError, RegistryError, RegistryUnavailableError

if TYPE_CHECKING:
    from collections.abc import Mapping

    import requests
    from requests.adapters import HTTPAdapter, _HostParams, _PoolKwargs  # the stubs' names for the pool key
    from requests.models import PreparedRequest

    from builder.registry.auth import Authenticator, TokenRequest
    from builder.registry.stream import BlobStream

MAX_BODY_BYTES = 16 * 1024 * 1024
"""The largest response body read into memory (manifests, configs, signature layers, tag lists,
referrers): distribution-spec asks clients not to push manifests over 4 MiB
(https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pushing-manifests); a
hostile or broken registry sending more (300 MiB) is refused without reading the rest."""

MAX_BODY_SECONDS = 120.0
"""The longest a response body may take to arrive in total: the read timeout bounds one silent
gap, this bounds a registry that trickles a byte at a time to stay under it."""

DEFAULT_TIMEOUT = (5.0, 60.0)  # connect, read (seconds)
DEFAULT_RETRIES = 4  # extra attempts after the first one on 429/5xx/connection reset
DEFAULT_BACKOFF = 0.25  # seconds before the first retry; doubled for each next one (plus up to 25 % jitter)
DEFAULT_MAX_DELAY = 30.0  # seconds: the longest wait between attempts (a longer Retry-After is capped)
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class RequestOptions(TypedDict, total=False):
    """What :meth:`Transport.request` passes on to ``requests.Session.request`` (same names and
    meanings: https://requests.readthedocs.io/en/latest/api/#requests.Session.request); ``timeout``,
    ``proxies``, ``verify`` and ``auth`` default to this transport's settings for the host."""

    data: bytes | IO[bytes] | BlobStream
    stream: bool
    timeout: float | tuple[float, float]
    proxies: dict[str, str]
    verify: bool | str
    auth: tuple[str, str]


_REPO_PATH_RE = re.compile(r"^/v2/(.+?)/(?:manifests|blobs|tags|referrers)/")


@dataclasses.dataclass(frozen=True)
class EnvSettings:
    """What ``requests`` would take from the environment for one ``scheme://host``: ``proxies``
    (scheme -> proxy URL), ``verify`` (True or a CA-bundle path) and ``netrc`` (user, password)."""

    proxies: tuple[tuple[str, str], ...]
    verify: bool | str
    netrc: tuple[str, str] | None = None

    @property
    def proxy_map(self) -> dict[str, str]:
        """``proxies`` as the dict requests takes."""
        return dict(self.proxies)


class Transport:
    """HTTP to ``registry`` (``host[:port]``) over ``https``, or plain ``http`` when
    ``insecure`` (only for loopback or explicitly insecure registries). Thread-safe.

    ``timeout``: (connect, read) seconds; ``retries``: extra attempts on 429/5xx/connection
    reset with exponential backoff starting at ``backoff`` seconds (doubling, plus up to 25 %
    jitter), a ``Retry-After`` honoured; no wait is longer than ``max_delay`` seconds."""

    def __init__(
        self,
        registry: str,
        auth: Authenticator,
        *,
        insecure: bool = False,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        backoff: float = DEFAULT_BACKOFF,
        max_delay: float = DEFAULT_MAX_DELAY,
    ) -> None:
        self.registry = registry
        self.auth = auth
        self.scheme = "http" if insecure else "https"
        host = "registry-1.docker.io" if registry in ("docker.io", "index.docker.io") else registry
        self.base = f"{self.scheme}://{host}"
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_delay = max_delay
        self._local = threading.local()
        self._lock = threading.Lock()
        self._adapter: HTTPAdapter | None = None
        self._env_cache: dict[str, EnvSettings] = {}
        self.requests_sent = 0  # HTTP requests sent, retries and auth round trips included
        self.max_body_bytes = MAX_BODY_BYTES  # bodies read into memory: at most this many bytes ...
        self.max_body_seconds = MAX_BODY_SECONDS  # ... arriving within this many seconds

    @property
    def session(self) -> requests.Session:
        """One ``requests.Session`` per thread, all sharing this transport's connection pool (one
        ``HTTPAdapter``: urllib3 pools are thread-safe), so a thread started later reuses the
        keep-alive connections of earlier ones instead of opening its own. ``trust_env`` is off:
        the environment's proxy, CA-bundle and netrc settings are resolved once per host
        (:meth:`env_settings`) rather than on every request."""
        s: requests.Session | None = getattr(self._local, "session", None)
        if s is None:
            import requests

            s = requests.Session()
            s.trust_env = False
            s.mount("http://", self.adapter)
            s.mount("https://", self.adapter)
            self._local.session = s
        return s

    @property
    def adapter(self) -> HTTPAdapter:
        """The one ``HTTPAdapter`` (connection pools) every thread's session uses."""
        with self._lock:
            if self._adapter is None:
                self._adapter = _new_adapter()
            return self._adapter

    def env_settings(self, url: str) -> EnvSettings:
        """What ``requests`` would take from the environment for ``url``'s host (``HTTP(S)_PROXY``
        / ``NO_PROXY``, ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE``, ``~/.netrc``), read once per
        ``scheme://host`` and cached: the same values ``Session.trust_env`` looks up per request
        (requests' ``merge_environment_settings`` and ``get_netrc_auth``)."""
        parts = urlsplit(url)
        key = f"{parts.scheme}://{parts.netloc}"
        with self._lock:
            got = self._env_cache.get(key)
        if got is None:
            import requests
            from requests.utils import get_netrc_auth

            probe = requests.Session()  # trust_env on: resolve as requests would
            merged = probe.merge_environment_settings(key + "/", {}, None, None, None)
            probe.close()
            verify = merged.get("verify", True)
            got = EnvSettings(
                proxies=tuple(sorted((str(k), str(v)) for k, v in (merged.get("proxies") or {}).items())),
                verify=verify if isinstance(verify, str) else bool(verify),
                netrc=get_netrc_auth(key + "/"),
            )
            with self._lock:
                self._env_cache[key] = got
        return got

    def url(self, path: str) -> str:
        """``path`` (``/v2/...``) on this registry; an absolute URL (an upload location) as is."""
        return path if "://" in path else f"{self.base}{path}"

    def request(
        self,
        method: str,
        path: str,
        *,
        ref: str = "",
        ok: tuple[int, ...] = (200,),
        scopes: tuple[str, ...] = (),
        headers: Mapping[str, str] | None = None,
        ok_after_loss: tuple[int, ...] = (),
        retry: bool = True,
        **kw: Unpack[RequestOptions],
    ) -> requests.Response:
        """One HTTP request to ``/v2/...`` (or an absolute upload URL); raises the builder error
        for the status. Answers auth challenges once, retries 429/5xx/connection resets.
        ``scopes``: extra token scopes (e.g. ``repository:other:pull`` for a mount); ``ref``
        names the request in messages; ``ok_after_loss``: statuses that also count as success
        when an earlier attempt's connection dropped before its answer (the registry may have
        acted on it: a repeated DELETE then finds nothing, 404); ``headers`` and ``kw`` go to
        ``requests.Session.request``. ``retry=False``: no retry of a dropped connection or a
        429/5xx (the caller starts over itself: a streamed upload cannot be sent twice into one
        upload session)."""
        import requests

        url = self.url(path)
        where = f"{self.registry}/{ref}" if ref else f"{self.registry}{urlsplit(url).path}"
        kw.setdefault("timeout", self.timeout)
        env = self.env_settings(url)
        kw.setdefault("proxies", env.proxy_map)
        kw.setdefault("verify", env.verify)
        sent = dict(headers or {})
        key = self._scope_key(url, scopes)
        authed_once = False
        attempt = 0
        lost = False  # an attempt's connection dropped before its answer
        retries = self.retries if retry else 0
        while True:
            auth_header = self.auth.header_for(key)
            if auth_header:
                sent["Authorization"] = auth_header
                kw.pop("auth", None)
            elif env.netrc is not None and "Authorization" not in sent:
                kw["auth"] = env.netrc  # as trust_env would: netrc only when nothing else authenticates
            data = kw.get("data")
            if data is not None and hasattr(data, "seek"):
                data.seek(0)
            with self._lock:
                self.requests_sent += 1
            try:
                resp = self.session.request(method, url, headers=sent, **kw)
            except (requests.ConnectionError, requests.Timeout) as exc:
                if attempt < retries and is_transient(exc):
                    attempt += 1
                    lost = True
                    self._sleep(attempt, None)
                    continue
                raise self._unavailable(exc, method, where, attempt) from exc
            if resp.status_code == 401 and not authed_once:
                challenge = resp.headers.get("WWW-Authenticate", "")
                if challenge:
                    authed_once = True
                    resp.close()  # a streamed answer we drop must give its connection back to the pool
                    self.auth.answer(challenge, key, scopes, where, self.send_token_request)
                    continue
            if resp.status_code in RETRY_STATUSES and resp.status_code not in ok and attempt < retries:
                attempt += 1
                resp.close()
                self._sleep(attempt, resp.headers.get("Retry-After"))
                continue
            break
        if resp.status_code in ok or (lost and resp.status_code in ok_after_loss):
            return resp
        try:
            raise self._error_for(resp, method, where, streamed=bool(kw.get("stream")))
        finally:
            resp.close()  # the body was read into the message (or not needed): free the connection

    def read_body(self, resp: requests.Response, where: str) -> bytes:
        """The body of ``resp`` (requested with ``stream=True``) read with the limits: at most
        ``max_body_bytes`` (a larger ``Content-Length`` is refused before reading) within
        ``max_body_seconds`` in total. RegistryError (7) naming the registry and the request
        otherwise; the connection is closed either way."""
        import requests
        import urllib3

        limit, deadline = self.max_body_bytes, time.monotonic() + self.max_body_seconds
        try:
            declared = resp.headers.get("Content-Length")
            if declared is not None and declared.isdigit() and int(declared) > limit:
                raise RegistryError(
                    f"registry {self.registry} answered {where} with {int(declared)} bytes, over the "
                    f"{limit // (1024 * 1024)} MiB limit for a manifest or document; not read",
                    hint="a registry or proxy that sends oversized documents is broken or hostile",
                    registry=self.registry,
                )
            body = bytearray()
            try:
                # read1: whatever has arrived (up to 64 KiB), so a trickled body cannot hold one read
                # open past the deadline (iter_content's read waits for the whole chunk)
                while chunk := resp.raw.read1(64 * 1024, decode_content=True):
                    body += chunk
                    if len(body) > limit:
                        raise RegistryError(
                            f"registry {self.registry} sent more than {limit // (1024 * 1024)} MiB for {where}; "
                            "stopped reading",
                            hint="a registry or proxy that sends oversized documents is broken or hostile",
                            registry=self.registry,
                        )
                    if time.monotonic() > deadline:
                        raise RegistryError(
                            f"registry {self.registry} took over {self.max_body_seconds:.0f} s to send {where} "
                            f"({len(body)} bytes so far); stopped waiting",
                            hint="the registry or a proxy stalls responses; retry later or check it",
                            registry=self.registry,
                        )
            except (requests.ConnectionError, requests.Timeout, urllib3.exceptions.HTTPError) as exc:
                raise self._unavailable(exc, "GET", where, 0) from exc
            return bytes(body)
        finally:
            resp.close()

    def send_token_request(self, req: TokenRequest) -> requests.Response:
        """Send ``req`` to its token service (the environment's proxy/CA/netrc apply); returns the
        response whatever its status. Raises RegistryUnavailableError when it is unreachable."""
        import requests

        env = self.env_settings(req.realm)
        try:
            if req.method == "POST":
                return self.session.post(
                    req.url, data=dict(req.form), timeout=self.timeout, proxies=env.proxy_map, verify=env.verify
                )
            return self.session.get(
                req.url,
                auth=req.basic or env.netrc,
                timeout=self.timeout,
                proxies=env.proxy_map,
                verify=env.verify,
            )
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise RegistryUnavailableError(
                f"token service {req.realm} of registry {self.registry} is not reachable: {connection_cause(exc)}",
                registry=self.registry,
            ) from exc

    def _scope_key(self, url: str, extra_scopes: tuple[str, ...]) -> str:
        m = _REPO_PATH_RE.match(urlsplit(url).path)
        repo = m.group(1) if m else ""
        return " ".join((repo, *extra_scopes))

    def delay(self, attempt: int, retry_after: str | None) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based): ``backoff * 2**(attempt-1)``
        plus up to 25 % random jitter (so parallel clients spread out), at least a
        ``Retry-After`` given in seconds (RFC 9110 section 10.2.3; an HTTP date is not used), at
        most ``max_delay``."""
        delay = self.backoff * (2.0 ** (attempt - 1)) * (1 + random.random() / 4)
        if retry_after and retry_after.strip().isdigit():
            delay = max(delay, float(retry_after))
        return min(delay, self.max_delay)

    def _sleep(self, attempt: int, retry_after: str | None) -> None:
        time.sleep(self.delay(attempt, retry_after))

    def _unavailable(self, exc: Exception, method: str, where: str, attempt: int) -> RegistryUnavailableError:
        import requests

        if isinstance(exc, requests.exceptions.SSLError):
            return RegistryUnavailableError(
                f"TLS to registry {self.registry} failed on {method} {where}: {exc}",
                hint="if the registry speaks plain HTTP, list it in builder.toml `insecure_registries`; "
                "otherwise install its CA certificate",
                registry=self.registry,
            )
        kind = "timed out" if isinstance(exc, requests.Timeout) else "is not reachable"
        tries = f"{attempt + 1} attempt" + ("s" if attempt else "")
        return RegistryUnavailableError(
            f"registry {self.registry} {kind} ({self.scheme}) on {method} {where}: {connection_cause(exc)} ({tries})",
            registry=self.registry,
        )

    def _error_for(self, resp: requests.Response, method: str, where: str, *, streamed: bool) -> BuilderError:
        status = resp.status_code
        body = "" if method == "HEAD" else (_error_excerpt(resp) if streamed else resp.text)[:300]
        if status in (401, 403):
            cred = self.auth.credential()
            who = f"as user {cred.username!r}" if cred else "without credentials"
            return RegistryAuthError(
                f"registry {self.registry} refused {method} {where} {who}: HTTP {status} {body}".rstrip(),
                hint=self.auth.login_hint("for 403, ask for push/pull rights on the repository"),
                registry=self.registry,
                status=status,
            )
        if status == 404:
            return NotFoundError(
                f"{where} not found (HTTP 404 on {method}) {body}".rstrip(),
                hint="check the repository, tag or digest; `builder status` lists what exists",
                registry=self.registry,
                status=404,
            )
        return RegistryError(
            f"registry {self.registry} answered HTTP {status} to {method} {where}: {body}",
            registry=self.registry,
            status=status,
        )


#: Bytes of a streamed error answer read for its message, and the seconds they may take: a
#: hostile registry's endless or trickled error body is never waited for.
ERROR_EXCERPT_BYTES = 4096
ERROR_EXCERPT_SECONDS = 5.0


def _error_excerpt(resp: requests.Response) -> str:
    """At most ``ERROR_EXCERPT_BYTES`` of a streamed error answer's body, as text (what arrived
    within ``ERROR_EXCERPT_SECONDS``; "" when the connection broke). The caller closes ``resp``."""
    import requests
    import urllib3

    got = bytearray()
    deadline = time.monotonic() + ERROR_EXCERPT_SECONDS
    try:
        while len(got) < ERROR_EXCERPT_BYTES and time.monotonic() < deadline:
            chunk = resp.raw.read1(ERROR_EXCERPT_BYTES - len(got), decode_content=True)
            if not chunk:
                break
            got += chunk
    except (requests.RequestException, urllib3.exceptions.HTTPError, OSError):
        return got.decode("utf-8", "replace")  # the message says what arrived; the status says the rest
    return got.decode(resp.encoding or "utf-8", "replace")


def is_transient(exc: Exception) -> bool:
    """A connection reset, a dropped keep-alive or a read timeout is retried; a refused
    connection, a DNS failure or a TLS error is not (retrying would only delay the error)."""
    import requests

    if isinstance(exc, requests.exceptions.SSLError):
        return False
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return True
    text = repr(exc).lower()
    permanent = ("connection refused", "name or service not known", "nodename nor servname", "no route to host")
    return not any(p in text for p in permanent)


def _new_adapter() -> HTTPAdapter:
    """Up to 128 idle keep-alive connections per host: more than the threads that may send at
    once in one process (a batch's 16 workers, builder.promote's shared pool of 24, a client's
    executor of 8), so urllib3 never discards one with a "pool is full" warning; beyond that it
    opens more rather than blocking."""
    from requests.adapters import HTTPAdapter

    class _Adapter(HTTPAdapter):
        def build_connection_pool_key_attributes(
            self, request: PreparedRequest, verify: bool | str, cert: str | tuple[str, str] | None = None
        ) -> tuple[_HostParams, _PoolKwargs]:
            # plain HTTP checks no certificate: skip requests' per-request stat() of a
            # CA-bundle path (REQUESTS_CA_BUNDLE); an https URL (e.g. a redirect) keeps it
            if isinstance(verify, str) and str(request.url).startswith("http://"):
                verify = True
            return super().build_connection_pool_key_attributes(request, verify, cert)

    # pool_block=False (requests' default, spelled out): a thread finding every pooled connection
    # in use opens another instead of waiting; a blocking pool without a timeout would hang the
    # process on one leaked response (https://urllib3.readthedocs.io/en/stable/reference/urllib3.connectionpool.html)
    return _Adapter(pool_connections=4, pool_maxsize=128, pool_block=False)


def connection_cause(exc: BaseException) -> str:
    """Why a connection failed, in words, from the innermost cause of ``exc`` (requests wraps
    urllib3, which wraps the socket error): ``the host name does not resolve (DNS)``
    (``socket.gaierror``), ``connection refused``, ``connection reset``, ``no answer in time``,
    else the OS error's text or the exception's type name; ``(through the proxy: ...)`` added when
    a proxy was in the way. Pure."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__ or next((a for a in cur.args if isinstance(a, BaseException)), None)
    via = (
        " (through the proxy: HTTPS_PROXY / HTTP_PROXY)" if any(type(e).__name__ == "ProxyError" for e in seen) else ""
    )
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
    names = {type(e).__name__ for e in seen}
    if any(isinstance(e, OSError) and e.strerror for e in seen):
        return next(str(e.strerror) for e in reversed(seen) if isinstance(e, OSError) and e.strerror)
    if any(n in names for n in ("ReadTimeout", "ConnectTimeout", "Timeout", "ReadTimeoutError")):
        return "no answer in time"
    return type(exc).__name__
