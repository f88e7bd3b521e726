"""HTTP to one registry host: a thread-safe keep-alive connection pool per origin shared by every
thread (``http.client`` for origins reached directly, :mod:`builder.registry.connections`;
urllib3's ``ProxyManager`` / ``SOCKSProxyManager`` when a proxy applies,
https://urllib3.readthedocs.io/en/stable/advanced-usage.html#proxies), the
environment's proxy/CA/netrc settings resolved once per host
(:mod:`builder.registry.environment`), bounded retries, redirects followed (``Authorization``
dropped when the host changes), the 401 challenge round trip (answered by
:class:`builder.registry.auth.Authenticator`) and the mapping of HTTP answers to builder errors.
Every answer is a :class:`builder.registry.response.Response`.

Sources: ``Retry-After`` (RFC 9110 section 10.2.3), redirects (RFC 9110 section 15.4; urllib3's
``Retry.remove_headers_on_redirect`` drops ``Authorization``, ``Proxy-Authorization`` and
``Cookie`` on a cross-host redirect, as requests' ``should_strip_auth`` did:
https://urllib3.readthedocs.io/en/stable/reference/urllib3.util.html#urllib3.util.Retry),
distribution-spec v1.1 error statuses
(https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#error-codes).

Errors: ``RegistryUnavailableError`` (cannot connect or TLS fails: exit 5), ``RegistryAuthError``
(401/403: exit 6), ``NotFoundError`` (404: exit 8), ``RegistryError`` (anything else, too many
redirects included: exit 7). Every message names the registry, the request and the HTTP status.
429 and 5xx answers and connection resets are retried with exponential backoff a bounded number
of times.
"""

from __future__ import annotations

import base64
import functools
import re
import threading
import time
from typing import IO, TYPE_CHECKING, TypedDict, Unpack
from urllib.parse import urlsplit

from builder import __version__
from builder.errors import BuilderError, NotFoundError, RegistryAuthError, RegistryError, RegistryUnavailableError
from builder.registry.connections import BadHeader, BadURL, Pool, Resends, Timeout, body_size, check_ca, tls_context
from builder.registry.environment import EnvSettings, env_settings
from builder.registry.exchange import (
    SendError,
    TooManyRedirects,
    origin_pool,
    proxy_manager,
    send,
    split_url,
)
from builder.registry.failures import (
    ca_note,
    connect_timed_out,
    connection_cause,
    error_text,
    is_transient,
    proxy_hint,
    proxy_note,
    proxy_refusal,
    timed_out,
    timeout_seconds,
    tls_failed,
    tunnel_status,
    unusable_answer,
)
from builder.registry.response import BodyLimit, Response

if TYPE_CHECKING:
    import ssl
    from collections.abc import Mapping

    import urllib3

    from builder.registry.auth import Authenticator, TokenRequest
    from builder.registry.stream import BlobStream

__all__ = ["EnvSettings", "Response", "Transport"]

MAX_BODY_BYTES = 16 * 1024 * 1024
"""The largest response body read into memory (manifests, configs, signature layers, tag lists,
referrers): distribution-spec asks clients not to push manifests over 4 MiB
(https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pushing-manifests); a
hostile or broken registry sending more (300 MiB) is refused without reading the rest."""

MAX_BODY_SECONDS = 120.0
"""The longest a response body may take to arrive in total: the read timeout bounds one silent
gap, this bounds a registry that trickles a byte at a time to stay under it."""

DEFAULT_TIMEOUT = (5.0, 60.0)  # connect, read (seconds); builder.toml `registry_timeout_s` sets the read one
DEFAULT_RETRIES = 4  # extra attempts after the first one on 429/5xx/connection reset
#: Attempts that may end in a timeout before the request gives up, whatever ``retries`` allows: a
#: registry (or proxy) that did not answer within the read timeout is rarely helped by more than
#: one more try, and 5 x 60 s of silence is a hang to the user.
MAX_TIMEOUT_ATTEMPTS = 2
DEFAULT_BACKOFF = 0.25  # seconds before the first retry; doubled for each next one (plus up to 25 % jitter)
DEFAULT_MAX_DELAY = 30.0  # seconds: the longest wait between attempts (a longer Retry-After is capped)
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: Idle keep-alive connections kept per host: more than the threads that may send at once in one
#: process (a batch's 16 workers, builder.promote's shared pool of 24, a client's executor of 8),
#: so none is discarded with a "pool is full" warning; beyond that more are opened, never waited for.
POOL_MAXSIZE = 128
#: The ``User-Agent`` of every request (RFC 9110 section 10.1.5): registries and proxies log it, and
#: operators tell builder's traffic from docker's, skopeo's or cosign's by it.
USER_AGENT = f"builder/{__version__}"


class RequestOptions(TypedDict, total=False):
    """What :meth:`Transport.request` takes besides headers: ``data`` (the body: bytes, a binary
    file, or a :class:`builder.registry.stream.BlobStream`; a file or stream is sent with
    ``Content-Length`` from its size, never chunked), ``stream`` (True: the body is left unread
    for the caller, who closes the response) and ``timeout`` (seconds: one number, or (connect,
    read); default: the transport's)."""

    data: bytes | IO[bytes] | BlobStream
    stream: bool
    timeout: float | tuple[float, float]


_REPO_PATH_RE = re.compile(r"^/v2/(.+?)/(?:manifests|blobs|tags|referrers)/")


class Transport:
    """HTTP to ``registry`` (``host[:port]``) over ``https``, or plain ``http`` when
    ``insecure`` (only for loopback or explicitly insecure registries). Thread-safe.

    ``timeout``: (connect, read) seconds; ``retries``: extra attempts on 429/5xx/connection
    reset (a timed-out attempt retried at most once: ``MAX_TIMEOUT_ATTEMPTS``) with exponential
    backoff starting at ``backoff`` seconds (doubling, plus up to 25 %
    jitter), a ``Retry-After`` honoured; no wait is longer than ``max_delay`` seconds.
    ``environ``: the environment whose proxy, CA and netrc variables apply
    (:mod:`builder.registry.environment`; the composition root passes the process's; None: none
    of them, direct connections trusting certifi's CA bundle)."""

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
        environ: Mapping[str, str] | None = None,
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
        self.environ: Mapping[str, str] = dict(environ or {})
        self._lock = threading.Lock()
        self._managers: dict[tuple[tuple[str, str | None, str | None], bool], urllib3.PoolManager] = {}
        self._env_cache: dict[str, EnvSettings] = {}
        #: origin (scheme://netloc) -> its direct pool, or the proxy's manager (:meth:`_route`)
        self._routes: dict[str, Pool | urllib3.PoolManager] = {}
        self.requests_sent = 0  # HTTP requests sent, retries and auth round trips included
        self.max_body_bytes = MAX_BODY_BYTES  # bodies read into memory: at most this many bytes ...
        self.max_body_seconds = MAX_BODY_SECONDS  # ... arriving within this many seconds

    def env_settings(self, url: str) -> EnvSettings:
        """The environment's proxy, CA and netrc settings for ``url``'s ``scheme://host``, read
        once per ``scheme://host`` and kept (a later change of the environment is not seen)."""
        parts = urlsplit(url)
        return self._env_for(f"{parts.scheme}://{parts.netloc}")

    def _env_for(self, origin: str) -> EnvSettings:
        """:meth:`env_settings` of ``origin`` (``scheme://netloc``, as :func:`split_url` gives it).
        Raises BadURL for an origin whose port is no port (``host:99999``)."""
        with self._lock:
            got = self._env_cache.get(origin)
        if got is None:
            try:
                got = env_settings(origin + "/", self.environ)
            except ValueError as exc:  # urllib.parse's port check
                raise BadURL(str(exc)) from exc
            with self._lock:
                self._env_cache[origin] = got
        return got

    def route(self, url: str) -> Pool | urllib3.PoolManager:
        """What carries requests to ``url``'s origin: its keep-alive ``http.client`` pool
        (:class:`builder.registry.connections.Pool`) when it is reached directly, else urllib3's
        ``ProxyManager`` (one per distinct proxy/CA setting); both thread-safe, so every thread
        reuses the same keep-alive connections. Raises RegistryUnavailableError for a proxy URL
        or CA path from the environment that cannot be used, BadURL for an origin that cannot be
        reached (no host, an unknown scheme)."""
        return self._route(split_url(url)[0])

    def _manager_for(self, env: EnvSettings, tls: bool) -> urllib3.PoolManager:
        key = (env.pool_key, tls)
        with self._lock:
            got = self._managers.get(key)
            if got is None:
                got = self._managers[key] = proxy_manager(env, tls, self.registry, POOL_MAXSIZE)
            return got

    def _route(self, origin: str) -> Pool | urllib3.PoolManager:
        """:meth:`route` of ``origin`` (``scheme://netloc``), resolved on its first request and
        kept (urllib3 is imported only here, and only when a proxy applies)."""
        with self._lock:
            got = self._routes.get(origin)
        if got is None:
            env = self._env_for(origin)
            if env.proxy:
                got = self._manager_for(env, origin.startswith("https:"))
            else:
                got = origin_pool(origin, lambda: self._tls(env), POOL_MAXSIZE)
            with self._lock:
                got = self._routes.setdefault(origin, got)
        return got

    def _tls(self, env: EnvSettings) -> ssl.SSLContext:
        """The TLS settings trusting ``env.ca`` (a file or a directory) or certifi's bundle. Raises
        RegistryUnavailableError for a CA path that does not exist."""
        check_ca(env, self.registry)
        return tls_context(env.ca)

    def _locate(self, path: str) -> tuple[str, str, str, str]:
        """``(url, origin, target, path)`` of a request for ``path`` (see :meth:`url`): the
        absolute URL, its ``scheme://netloc``, the request target on that origin and the path
        alone. A path on this registry is not parsed at all; an absolute URL once."""
        if "://" in path:  # an absolute URL (an upload location)
            return (path, *split_url(path))
        target = path.partition("#")[0]
        return self.base + path, self.base, target, target.partition("?")[0]

    def _prepare(self, path: str) -> tuple[str, str, EnvSettings]:
        """``(url, path, settings)`` of a request for ``path`` (:meth:`_locate`, :meth:`env_settings`).
        Raises RegistryError for a URL no request can be sent to."""
        try:
            url, origin, _, url_path = self._locate(path)
            return url, url_path, self._env_for(origin)
        except ValueError as exc:  # BadURL included
            raise _unusable_url(self.registry, self.url(path), exc) from exc

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
    ) -> Response:
        """One HTTP request to ``/v2/...`` (or an absolute upload URL); raises the builder error
        for the status. Answers auth challenges once, retries 429/5xx/connection resets, follows
        redirects (at most ``MAX_REDIRECTS``). ``scopes``: extra token scopes (e.g.
        ``repository:other:pull`` for a mount); ``ref`` names the request in messages;
        ``ok_after_loss``: statuses that also count as success when an earlier attempt's
        connection dropped before its answer (the registry may have acted on it: a repeated
        DELETE then finds nothing, 404); ``headers`` and ``kw`` (:class:`RequestOptions`) shape
        the request. ``retry=False``: no retry of a dropped connection or a 429/5xx (the caller
        starts over itself: a streamed upload cannot be sent twice into one upload session).
        ``process.Interrupted`` when SIGTERM/SIGINT arrives during a backoff (no attempt follows)."""
        url, url_path, env = self._prepare(path)
        where = f"{self.registry}/{ref}" if ref else f"{self.registry}{url_path}"
        timeout = _timeout(kw.get("timeout", self.timeout))  # one Timeout per distinct value
        stream = bool(kw.get("stream"))
        data = kw.get("data")
        sent = {"User-Agent": USER_AGENT, **(headers or {})}
        if data is not None and not isinstance(data, bytes) and not any(k.lower() == "content-length" for k in sent):
            sent["Content-Length"] = str(body_size(data))  # a known length: never a chunked upload
        key = self._scope_key(url_path, scopes)
        authed_once = False
        attempt = 0
        lost = False  # an attempt's connection dropped before its answer
        timeouts = 0  # attempts that ended in a timeout
        retries = self.retries if retry else 0
        resent = Resends(self._count_request)  # the pool's re-sends on a new connection (each sent again)
        started = time.monotonic()  # for "N attempts over S s" when the retries are spent
        while True:
            auth_header = self.auth.header_for(key)
            if auth_header:
                sent["Authorization"] = auth_header
            elif env.netrc is not None and "Authorization" not in sent:
                sent["Authorization"] = _basic(*env.netrc)  # netrc only when nothing else authenticates
            if data is not None and hasattr(data, "seek"):
                data.seek(0)
            self._count_request()
            try:
                resp = send(
                    self._route,
                    method,
                    url,
                    sent,
                    data,
                    timeout,
                    stream,
                    resend=retries > 0,
                    on_resend=resent,
                    limits=(self.max_body_bytes, self.max_body_seconds),
                )
            except SendError as exc:
                cause = exc.cause
                if isinstance(cause, TooManyRedirects | BadHeader | BodyLimit):
                    raise _unsendable(
                        self.registry, cause, f"{method} {where}", sent.get("Authorization")
                    ) from exc
                timeouts += timed_out(cause)
                if attempt < retries and is_transient(cause) and timeouts < MAX_TIMEOUT_ATTEMPTS:
                    attempt += 1
                    lost = True
                    self._sleep(attempt, None, (started, retries, f"{method} {where}: {connection_cause(cause)}"))
                    continue
                raise self._unavailable(cause, method, where, attempt, env, timeout) from exc
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
                why = f"{method} {where} answered HTTP {resp.status_code}"
                self._sleep(attempt, resp.headers.get("Retry-After"), (started, retries, why))
                continue
            break
        if resp.status_code in ok or ((lost or resent.count) and resp.status_code in ok_after_loss):
            return resp
        try:
            spent = (attempt + 1, time.monotonic() - started, retries)
            raise self._error_for(resp, method, where, streamed=stream, env=env, spent=spent)
        finally:
            resp.close()  # the body was read into the message (or not needed): free the connection

    def read_body(self, resp: Response, where: str) -> bytes:
        """The body of ``resp`` (requested with ``stream=True``) read with the limits: at most
        ``max_body_bytes`` (a larger ``Content-Length`` is refused before reading) within
        ``max_body_seconds`` in total. RegistryError (7) naming the registry and the request
        otherwise; the connection is closed either way."""
        try:
            return resp.read_limited(self.max_body_bytes, self.max_body_seconds)
        except BodyLimit as exc:
            raise _unsendable(self.registry, exc, where, None) from exc
        except OSError as exc:  # ReadError included
            env = self.env_settings(resp.url)
            raise self._unavailable(exc, "GET", where, 0, env, _timeout(self.timeout)) from exc
        finally:
            resp.close()

    def send_token_request(self, req: TokenRequest) -> Response:
        """Send ``req`` to its token service (the environment's proxy/CA/netrc apply; redirects
        followed); returns the response, body read, whatever its status. Raises
        RegistryUnavailableError when it is unreachable."""
        url = req.url
        try:
            env = self.env_settings(url)
        except ValueError as exc:  # BadURL included
            raise _unusable_url(self.registry, url, exc) from exc
        headers: dict[str, str] = {"User-Agent": USER_AGENT}
        body: bytes | None = None
        if req.method == "POST":
            from urllib.parse import urlencode

            body = urlencode(req.form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        elif req.basic or env.netrc:
            headers["Authorization"] = _basic(*(req.basic or env.netrc or ("", "")))
        try:
            limits = (self.max_body_bytes, self.max_body_seconds)
            return send(
                self._route, req.method, url, headers, body, _timeout(self.timeout), False, resend=self.retries > 0,
                limits=limits,
            )
        except SendError as exc:
            cause = exc.cause
            if isinstance(cause, BadHeader | BodyLimit):
                raise _unsendable(self.registry, cause, f"the token request to {req.realm}", None) from exc
            bad = unusable_answer(cause)
            if bad:
                raise RegistryError(
                    f"token service {req.realm} of registry {self.registry} answered with {bad}",
                    hint="the registry's token service (or a proxy in front of it) is misconfigured: "
                    "check its realm and redirects",
                    registry=self.registry,
                ) from exc
            if env.proxy and proxy_refusal(cause):
                raise self._proxy_refused(env, proxy_refusal(cause), f"the token service {req.realm}") from exc
            if env.proxy and tunnel_status(cause):
                realm_host = urlsplit(req.realm).hostname or ""
                target = f"the token service {req.realm}"
                from builder.registry.status_errors import proxy_tunnel_failed

                raise proxy_tunnel_failed(env, tunnel_status(cause), self.registry, realm_host, target, 1) from exc
            raise RegistryUnavailableError(
                f"token service {req.realm} of registry {self.registry} is not reachable: "
                f"{connection_cause(cause, proxy_note(env))}",
                hint=proxy_hint(env, urlsplit(req.realm).hostname or ""),
                registry=self.registry,
            ) from exc

    def _scope_key(self, path: str, extra_scopes: tuple[str, ...]) -> str:
        m = _REPO_PATH_RE.match(path)
        repo = m.group(1) if m else ""
        return " ".join((repo, *extra_scopes))

    def delay(self, attempt: int, retry_after: str | None) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based): :func:`backoff.retry_delay`
        with this transport's ``backoff`` and ``max_delay`` (``Retry-After`` honoured)."""
        from builder.registry.backoff import retry_delay  # on a retry only: start-up sends none

        return retry_delay(attempt, retry_after, self.backoff, self.max_delay)

    def _count_request(self) -> None:
        """One more request went out (``requests_sent``)."""
        with self._lock:
            self.requests_sent += 1

    def _sleep(self, attempt: int, retry_after: str | None, request: tuple[float, int, str]) -> None:
        """Wait :meth:`delay` seconds before retry ``attempt``; a SIGTERM/SIGINT ends the wait with
        ``process.Interrupted`` (:func:`builder.process.backoff`), in a worker thread too.
        ``request``: (when its first attempt started, ``time.monotonic``; retries allowed; what
        failed, in words), for :func:`backoff.say_retry`."""
        from builder import process  # on a retry only: start-up sends no retry
        from builder.registry.backoff import say_retry

        delay = self.delay(attempt, retry_after)
        say_retry(self.registry, attempt, delay, *request)
        process.backoff(delay)

    def _unavailable(
        self,
        exc: BaseException,
        method: str,
        where: str,
        attempt: int,
        env: EnvSettings,
        timeout: Timeout,
    ) -> RegistryUnavailableError | RegistryError:
        """The error for a request that got no HTTP answer: TLS, a proxy refusing the tunnel, a
        timeout (named with its seconds and the ``registry_timeout_s`` setting), or no connection
        (named with the cause, the proxy it went through and the attempts made); the hint names
        the proxy variable and NO_PROXY when a proxy was used. An answer that came but cannot be
        read (``failures.unusable_answer``: not HTTP, a body that does not decode, a URL that
        cannot be used) is a RegistryError (7) saying what was wrong with it."""
        bad = unusable_answer(exc)
        if bad:
            return RegistryError(
                f"registry {self.registry} answered {method} {where} ({self.scheme}) with {bad}; not retried",
                hint="the registry, or a proxy or load balancer in front of it, sends answers that are not valid "
                "HTTP for this request: check its logs and that REGISTRY names a registry (not another service)",
                registry=self.registry,
            )
        tunnel = tunnel_status(exc) if env.proxy else ""
        if tunnel:
            target = f"registry {self.registry} ({method} {where})"
            if proxy_refusal(exc):
                return self._proxy_refused(env, tunnel, target)
            from builder.registry.status_errors import proxy_tunnel_failed

            return proxy_tunnel_failed(env, tunnel, self.registry, self._host(), target, attempt + 1)
        if tls_failed(exc):
            return RegistryUnavailableError(
                f"TLS to registry {self.registry} failed on {method} {where}: {exc}",
                hint="if the registry speaks plain HTTP, list it in builder.toml `insecure_registries`; "
                "otherwise install its CA certificate (or point REQUESTS_CA_BUNDLE / SSL_CERT_FILE at it); "
                + ca_note(env),
                registry=self.registry,
            )
        kind = "timed out" if timed_out(exc) else "is not reachable"
        tries = f"{attempt + 1} attempt" + ("s" if attempt else "")
        if timed_out(exc):
            connecting = connect_timed_out(exc)
            seconds = timeout.connect if connecting else timeout.read
            what = "no connection" if connecting else "no answer"
            via = f" through the proxy {proxy_note(env)}" if env.proxy else ""
            return RegistryUnavailableError(
                f"registry {self.registry} timed out ({self.scheme}) on {method} {where}{via}: {what} within "
                f"{timeout_seconds(seconds)} s ({tries})",
                hint="the registry (or a proxy in between) did not answer in time: check that it runs and is not "
                "overloaded; builder.toml `registry_timeout_s` (or BUILDER_REGISTRY_TIMEOUT_S) sets how long "
                "to wait for an answer" + (f"; {proxy_hint(env, self._host())}" if env.proxy else ""),
                registry=self.registry,
            )
        return RegistryUnavailableError(
            f"registry {self.registry} {kind} ({self.scheme}) on {method} {where}: "
            f"{connection_cause(exc, proxy_note(env))} ({tries})",
            hint=proxy_hint(env, urlsplit(self.base).hostname or ""),
            registry=self.registry,
        )

    def _host(self) -> str:
        """The registry's host name (no port), as NO_PROXY lists it."""
        return urlsplit(self.base).hostname or self.registry

    def _proxy_refused(self, env: EnvSettings, status: str, target: str) -> RegistryUnavailableError:
        """The proxy (not the registry) refused: a CONNECT tunnel answered 403/407, or a 407
        (only proxies send it: RFC 9110 section 15.5.8) to a plain-HTTP request."""
        host = urlsplit(self.base).hostname or self.registry
        if status.startswith("407"):
            what = (
                f"the proxy wants credentials: put them in {env.proxy_variable} "
                "(http://USER:PASSWORD@HOST:PORT)"
            )
        else:
            what = f"ask the proxy's administrator to allow {host}"
        return RegistryUnavailableError(
            f"the proxy {proxy_note(env)} refused to reach {target}: HTTP {status} (the proxy refused, "
            "not the registry)",
            hint=f"{what}, or list {host} in NO_PROXY if it is reachable directly",
            registry=self.registry,
        )

    def _error_for(
        self,
        resp: Response,
        method: str,
        where: str,
        *,
        streamed: bool,
        env: EnvSettings,
        spent: tuple[int, float, int],
    ) -> BuilderError:
        """The error for an answer with a status not asked for: 407 from a proxy, 401/403
        (RegistryAuthError), 404 (NotFoundError), 429/502/503/504 once the retries are spent
        (RegistryUnavailableError, :func:`status_errors.unavailable_status`), else RegistryError
        naming the status, the body's error text and, when retried, the attempts made. ``spent``:
        (attempts made, seconds since the first, retries allowed)."""
        status = resp.status_code
        text = resp.excerpt(ERROR_EXCERPT_BYTES, ERROR_EXCERPT_SECONDS) if streamed else resp.text
        body = "" if method == "HEAD" else error_text(text)[:300]  # a HEAD answer has no body to read
        if status == 407 and env.proxy:
            return self._proxy_refused(env, f"407 {body}".strip(), f"registry {self.registry} ({method} {where})")
        if status in (401, 403):
            cred = self.auth.credential()
            who = f"as user {cred.username!r}" if cred else "without credentials"
            hint = self.auth.login_hint("for 403, ask for push/pull rights on the repository")
            if status == 403 and env.proxy:
                host = urlsplit(self.base).hostname or self.registry
                hint += (
                    f"; the request went through the proxy {proxy_note(env)}: if the proxy refused it, "
                    f"list {host} in NO_PROXY or ask the proxy's administrator to allow it"
                )
            return RegistryAuthError(
                f"registry {self.registry} refused {method} {where} {who}: HTTP {status} {body}".rstrip(),
                hint=hint,
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
        from builder.registry.status_errors import UNAVAILABLE_STATUSES, RetryBudget, unavailable_status

        budget = RetryBudget(*spent, self.backoff, self.max_delay)
        if status in UNAVAILABLE_STATUSES:
            return unavailable_status(status, self.registry, f"{method} {where}", body, budget, proxy_note(env))
        tries = f" (on {budget.spent()})" if budget.attempts > 1 else ""
        return RegistryError(
            f"registry {self.registry} answered HTTP {status} to {method} {where}{tries}: {body or '(no body)'}",
            registry=self.registry,
            status=status,
        )


#: Bytes of a streamed error answer read for its message, and the seconds they may take: a
#: hostile registry's endless or trickled error body is never waited for.
ERROR_EXCERPT_BYTES = 4096
ERROR_EXCERPT_SECONDS = 5.0


def _unsendable(
    registry: str, cause: TooManyRedirects | BadHeader | BodyLimit, request: str, authorization: str | None
) -> RegistryError:
    """:func:`builder.registry.request_errors.unsendable_error`, imported on such a failure only."""
    from builder.registry.request_errors import unsendable_error

    return unsendable_error(registry, cause, request, authorization)


def _unusable_url(registry: str, url: str, exc: ValueError) -> RegistryError:
    """:func:`builder.registry.request_errors.unusable_url_error`, imported on such a failure only."""
    from builder.registry.request_errors import unusable_url_error

    return unusable_url_error(registry, url, exc)


@functools.cache
def _timeout(value: float | tuple[float, float]) -> Timeout:
    """The (connect, read) timeout for ``value`` seconds (one number: both)."""
    connect, read = value if isinstance(value, tuple) else (value, value)
    return Timeout(connect=connect, read=read)


def _basic(user: str, password: str) -> str:
    """An ``Authorization: Basic`` value (RFC 7617)."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
