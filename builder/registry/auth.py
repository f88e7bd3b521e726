"""Registry credentials and the HTTP 401 challenge handshake (Basic and Bearer).

Credentials are read the way the Docker CLI reads them, through the docker SDK's auth module
(``docker.auth.load_config`` / ``resolve_authconfig``,
https://github.com/docker/docker-py/blob/main/docker/auth.py): ``credHelpers[host]``, else
``credsStore``, else ``auths[host]`` (``auth`` = base64 ``user:password``, ``identitytoken``);
keys such as ``https://host:port/v1/`` match ``host:port``. A credential helper is run by the
configured with the SDK's reading of the file, and run through :func:`builder.process.run` (so
``--debug`` echoes it, SIGTERM ends it, builder's own secrets stay out of its environment) as
``docker-credential-<name> get`` with the server URL on stdin; it answers
``{"ServerURL", "Username", "Secret"}`` (``Username`` ``<token>``: an identity token), or exits
non-zero saying ``credentials not found in native keychain`` when it holds none, per
https://github.com/docker/docker-credential-helpers#development and
https://github.com/docker/docker-credential-helpers/blob/master/credentials/error.go. A helper gets
:data:`HELPER_TIMEOUT_S` seconds (a keychain waiting for an unlock prompt nobody sees would hang
builder); after :data:`builder.lockfile.NOTICE_AFTER_S` seconds one WARNING record on :data:`LOG`
says what is awaited. Configuration file format:
https://docs.docker.com/reference/cli/docker/#configuration-files.

Challenges follow RFC 7235 (``WWW-Authenticate`` auth-params) and the Docker registry token
specification (https://distribution.github.io/distribution/spec/auth/token/: ``Bearer
realm=..,service=..,scope=..``; the answer carries ``token`` or ``access_token``; an identity
token is exchanged with ``grant_type=refresh_token``,
https://distribution.github.io/distribution/spec/auth/oauth/).

Errors: ``RegistryAuthError`` (exit 6) for an unreadable config, a missing, failing or hung
(past :data:`HELPER_TIMEOUT_S`) helper and refused credentials; ``RegistryError`` (exit 7) for a
token service that answers oddly.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import re
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from builder import process
from builder.errors import RegistryAuthError, RegistryError

if TYPE_CHECKING:
    from pathlib import Path

    from docker.auth import AuthConfig

    from builder.registry.response import Response
    from builder.registry.token import TokenRequest as TokenRequest  # noqa: PLC0414 - re-exported: the transport imports it from here

#: The server URL Docker uses for Docker Hub in credential stores.
DOCKER_HUB_SERVER = "https://index.docker.io/v1/"
#: The ``Username`` a credential helper answers for an identity (refresh) token.
TOKEN_USERNAME = "<token>"
#: Seconds a credential helper may take to answer ``get`` before builder gives up on it (exit 6).
#: Helpers answer from a keychain or a cloud token endpoint in well under a second; one waiting on
#: an unlock prompt or a dead network would otherwise hang builder for good.
HELPER_TIMEOUT_S = 30.0
#: What a helper's exit says when it holds nothing for the server (not an error: anonymous access),
#: https://github.com/docker/docker-credential-helpers/blob/master/credentials/error.go
HELPER_NOT_FOUND = "credentials not found in native keychain"
#: Where a slow credential helper is said (one WARNING record per call that passes
#: :data:`builder.lockfile.NOTICE_AFTER_S`; the command line prints it on stderr).
LOG = logging.getLogger("builder.registry.auth")


@dataclasses.dataclass(frozen=True)
class Credential:
    """A user name and secret for one registry. ``identity_token`` set: OAuth2 refresh token."""

    username: str
    password: str
    identity_token: str | None = None

    def __repr__(self) -> str:  # never print secrets
        return f"Credential(username={self.username!r}, password=***)"


def normalize_host(key: str) -> str:
    """``https://host:port/v1/`` -> ``host:port``; Docker Hub's names -> ``docker.io``."""
    k = key.strip()
    if "://" in k:
        k = urlsplit(k).netloc or k
    k = k.split("/", 1)[0]
    if k in ("index.docker.io", "registry-1.docker.io"):
        return "docker.io"
    return k


class DockerCredentials:
    """Credentials from a Docker CLI ``config.json``, looked up per registry host (thread-safe,
    each host looked up once).

    Build one with :meth:`from_file` (the composition root passes the path it resolved from
    ``--docker-config`` / ``$DOCKER_CONFIG`` / ``~/.docker``; core code reads no environment) or
    :meth:`anonymous` (explicitly none)."""

    def __init__(self, document: Mapping[str, object], *, source: str) -> None:
        """``document``: a parsed ``config.json``; ``source``: what to name in messages. The docker
        SDK (slow to import) reads it on the first lookup, and only when it configures anything."""
        self._document = dict(document)
        self.source = source
        self._config: AuthConfig | None = None
        self._cache: dict[str, Credential | None] = {}
        self._lock = threading.RLock()

    @classmethod
    def anonymous(cls) -> DockerCredentials:
        """No credentials at all: every registry is accessed anonymously."""
        return cls({}, source="<anonymous>")

    @classmethod
    def from_file(cls, path: Path) -> DockerCredentials:
        """Load ``path``: a ``config.json``, or a directory holding one (the composition root,
        builder/app.py, resolves it; anonymous access is :meth:`anonymous`, never a default). A
        missing file has no credentials (as for Docker: nobody logged in yet).
        Raises RegistryAuthError naming the file when it is unreadable or not a JSON object."""
        p = path / "config.json" if path.is_dir() else path
        if not p.exists():
            return cls({}, source=str(p))
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError) as exc:
            raise RegistryAuthError(
                f"cannot read Docker config {p}: {exc}",
                hint="fix or remove the file, or run `docker login` again",
            ) from exc
        if not isinstance(data, dict):
            raise RegistryAuthError(f"Docker config {p} is not a JSON object")
        return cls(data, source=str(p))

    def get(self, registry: str) -> Credential | None:
        """The credential for ``registry`` (``host[:port]``) or None. Raises RegistryAuthError
        for a malformed ``auths`` entry, and when the configured credential helper is missing,
        fails, or answers garbage."""
        host = normalize_host(registry)
        with self._lock:  # one lookup per host, helpers run one at a time
            if host not in self._cache:
                self._cache[host] = self._lookup(host) if any(self._document.values()) else None
            return self._cache[host]

    def helper_for(self, registry: str) -> str | None:
        """The credential helper program Docker would run for ``registry``
        (``docker-credential-<name>``), or None when the file's ``auths`` answer."""
        if not any(self._document.values()):
            return None
        with self._lock:
            name = self._auth_config().get_credential_store(_server_url(normalize_host(registry)))
        return f"docker-credential-{name}" if name else None

    def _auth_config(self) -> AuthConfig:
        """The document read by the SDK (once). Plain ``username`` / ``password`` fields of an
        ``auths`` entry count, as the Docker CLI reads them
        (https://github.com/docker/cli/blob/master/cli/config/configfile/file.go, LoadFromReader)."""
        if self._config is None:
            from docker.auth import AuthConfig, load_config

            doc = dict(self._document)  # load_config pops keys: never hand it ours
            auths = doc.get("auths")
            if isinstance(auths, Mapping):
                doc["auths"] = {str(key): _auth_entry(str(key), entry, self.source) for key, entry in auths.items()}
            # never an empty document: the SDK would then look for $DOCKER_CONFIG / ~/.docker itself
            self._config = load_config(config_dict=doc) if any(doc.values()) else AuthConfig({})
        return self._config

    def _lookup(self, host: str) -> Credential | None:
        import shutil  # a credential helper's lookup only (start-up, issue 19)

        from docker.auth import resolve_authconfig
        from docker.errors import DockerException

        helper = self.helper_for(host)
        if helper is not None and shutil.which(helper) is None:
            raise RegistryAuthError(
                f"Docker config {self.source} names credential helper `{helper}` for {host}, but it is not installed",
                hint=f"install {helper} or remove it from the Docker config",
                registry=host,
            )
        if helper is not None:
            answer = self._ask_helper(helper, host)
            if answer is not None:
                return answer
        # the file's `auths` (also when the helper holds nothing for host: as Docker falls back);
        # the SDK gets no helper name here, so it never runs one itself (without a timeout)
        from docker.auth import AuthConfig

        try:
            found = resolve_authconfig(AuthConfig({"auths": self._auth_config().auths}), host)
        except DockerException as exc:
            raise RegistryAuthError(
                f"Docker config {self.source}: cannot read the credentials of {host}: {exc}", registry=host
            ) from exc
        return _credential(found) if found else None

    def _ask_helper(self, helper: str, host: str) -> Credential | None:
        """Run ``<helper> get`` for ``host`` (at most :data:`HELPER_TIMEOUT_S` s, said on :data:`LOG`
        after :data:`builder.lockfile.NOTICE_AFTER_S` s). None when it holds nothing for ``host``;
        raises RegistryAuthError naming the helper and this config file when it fails, hangs or
        answers no ``Username``/``Secret`` JSON."""
        import subprocess

        from builder.lockfile import NOTICE_AFTER_S

        server = _server_url(host)
        notice = threading.Timer(
            NOTICE_AFTER_S,
            LOG.warning,
            ("waiting for %s (credentials of %s); up to %g s", helper, host, HELPER_TIMEOUT_S),
        )
        notice.daemon = True
        notice.start()
        try:
            done = process.run([helper, "get"], input=server, timeout=HELPER_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise RegistryAuthError(
                f"credential helper {helper} gave no answer for {host} within {HELPER_TIMEOUT_S:g} s",
                hint=f"it is named in {self.source}; check that `echo {server} | {helper} get` answers"
                " (a locked keychain waits for its prompt), or remove it from that file",
                registry=host,
            ) from exc
        finally:
            notice.cancel()
        said = (done.stdout.strip() or done.stderr.strip())[:300]
        if done.returncode != 0:
            if HELPER_NOT_FOUND in said:
                return None
            raise RegistryAuthError(
                f"credential helper `{helper} get` failed for {host} (exit {done.returncode}): {said}"
                f" (configured in {self.source})",
                hint=f"run `docker login {host}` again",
                registry=host,
            )
        try:
            answer = json.loads(done.stdout)
            user, secret = str(answer["Username"]), str(answer["Secret"])
        except (ValueError, KeyError, TypeError) as exc:
            raise RegistryAuthError(
                f"credential helper `{helper} get` printed no Username/Secret JSON for {host}"
                f" (configured in {self.source})",
                registry=host,
            ) from exc
        if user == TOKEN_USERNAME:
            return Credential(user, "", secret)
        return Credential(user, secret) if user or secret else None


def _server_url(host: str) -> str:
    """What Docker looks up in credential stores for ``host`` (Docker Hub has a URL)."""
    return DOCKER_HUB_SERVER if host == "docker.io" else host


def _auth_entry(key: str, entry: object, source: str) -> dict[str, object]:
    """One ``auths`` entry normalised for the SDK: an empty ``auth`` dropped, plain
    ``username``/``password`` turned into ``auth``, a malformed ``auth`` refused."""
    if not isinstance(entry, Mapping):
        raise RegistryAuthError(
            f"Docker config {source}: `auths.{key}` is not an object", hint=f"run `docker login {key}` again"
        )
    out = {str(k): v for k, v in entry.items() if not (k == "auth" and not v)}
    if "auth" in out:
        from docker.auth import decode_auth

        try:
            decode_auth(str(out["auth"]))
        except ValueError as exc:  # bad base64, no ':' or not UTF-8 (UnicodeDecodeError is a ValueError)
            raise RegistryAuthError(
                f"Docker config {source}: `auths.{key}.auth` is not base64 of user:password",
                hint=f"run `docker login {key}` again",
            ) from exc
    elif out.get("username"):
        out["auth"] = base64.b64encode(f"{out['username']}:{out.get('password') or ''}".encode()).decode()
    return out


def _credential(found: Mapping[str, object]) -> Credential | None:
    """The SDK's answer (``username``/``password`` from ``auths``, ``Username``/``Password``
    from a helper, ``IdentityToken`` from either) as a Credential; None when it holds nothing."""
    user = found.get("Username") or found.get("username")
    password = found.get("Password") or found.get("password") or ""
    token = found.get("IdentityToken")
    if token:
        return Credential(str(user or TOKEN_USERNAME), "", str(token))
    if user:
        return Credential(str(user), str(password))
    return None


# --------------------------------------------------------------------------------------------
# challenges
# --------------------------------------------------------------------------------------------

#: one auth-param of a challenge; compiled on the first challenge (``re``'s own cache), not at import
_CHALLENGE = r'([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))'


def parse_www_authenticate(header: str) -> tuple[str, dict[str, str]]:
    """``Bearer realm="..",service="..",scope=".."`` -> ``("bearer", {"realm": .., ...})``.

    The scheme is lower-cased; quoted values are unescaped (RFC 7235 auth-params)."""
    header = header.strip()
    scheme, _, rest = header.partition(" ")
    params: dict[str, str] = {}
    for m in re.finditer(_CHALLENGE, rest):
        val = m.group(2) if m.group(2) is not None else m.group(3)
        params[m.group(1).lower()] = re.sub(r"\\(.)", r"\1", val or "")
    return scheme.lower(), params


#: Sends a token request and returns the raw response (the transport maps connection errors).
TokenSender = Callable[["TokenRequest"], "Response"]


class Authenticator:
    """The ``Authorization`` state of one registry: the Basic header once a Basic challenge was
    answered, and one Bearer token per scope key (repository + extra scopes). Thread-safe."""

    def __init__(self, registry: str, credentials: DockerCredentials | Credential | None) -> None:
        self.registry = registry
        self._credentials = credentials
        self._lock = threading.Lock()
        self._basic: str | None = None
        self._tokens: dict[str, str] = {}

    def credential(self) -> Credential | None:
        """The credential for this registry (None: anonymous)."""
        if self._credentials is None:
            return None
        if isinstance(self._credentials, Credential):
            return self._credentials
        return self._credentials.get(self.registry)

    def login_hint(self, extra: str = "") -> str:
        """What to do about refused credentials: where they came from and how to give others."""
        if isinstance(self._credentials, DockerCredentials) and self._credentials.source != "<anonymous>":
            where = f"credentials are read from {self._credentials.source}; "
        else:
            where = ""
        return (
            f"{where}run `docker login {self.registry}`, or point --docker-config / DOCKER_CONFIG at a Docker "
            f"config that has credentials for {self.registry}" + (f"; {extra}" if extra else "")
        )

    def header_for(self, key: str) -> str | None:
        """The ``Authorization`` value to send for scope key ``key`` (None: nothing yet)."""
        with self._lock:
            return self._tokens.get(key, self._basic)

    def answer(self, challenge: str, key: str, scopes: tuple[str, ...], where: str, send: TokenSender) -> None:
        """Answer a ``WWW-Authenticate`` challenge for the request ``where``; later calls of
        :meth:`header_for` return the new header. Raises RegistryAuthError (no or refused
        credentials, unsupported scheme), RegistryError (token service answered oddly)."""
        scheme, params = parse_www_authenticate(challenge)
        cred = self.credential()
        if scheme == "basic":
            if cred is None or cred.identity_token:
                raise RegistryAuthError(
                    f"registry {self.registry} requires a user name and password for {where} (HTTP 401, Basic)",
                    hint=self.login_hint(),
                    registry=self.registry,
                    status=401,
                )
            token = base64.b64encode(f"{cred.username}:{cred.password}".encode()).decode()
            with self._lock:
                self._basic = f"Basic {token}"
            return
        if scheme == "bearer":
            req = self._token_request(params, scopes, cred, where)
            tok = self._token_from(send(req), req.realm, cred, where)
            with self._lock:
                self._tokens[key] = f"Bearer {tok}"
            return
        raise RegistryAuthError(
            f"registry {self.registry} asks for unsupported authentication {scheme!r} for {where}",
            registry=self.registry,
            status=401,
        )

    def _token_request(
        self, params: Mapping[str, str], scopes: tuple[str, ...], cred: Credential | None, where: str
    ) -> TokenRequest:
        from builder.registry.token import TokenRequest  # a Bearer challenge only

        realm = params.get("realm")
        if not realm:
            raise RegistryAuthError(f"registry {self.registry} sent a Bearer challenge without realm for {where}")
        scope_list = list(dict.fromkeys([s for s in params.get("scope", "").split(" ") if s] + list(scopes)))
        q: list[tuple[str, str]] = []
        if params.get("service"):
            q.append(("service", params["service"]))
        if cred is not None and cred.identity_token:
            form = dict(q) | {
                "grant_type": "refresh_token",
                "refresh_token": cred.identity_token,
                "client_id": "builder",
                "scope": " ".join(scope_list),
            }
            return TokenRequest(realm, form=tuple(form.items()))
        q.extend(("scope", s) for s in scope_list)
        basic = (cred.username, cred.password) if cred is not None else None
        return TokenRequest(realm, query=tuple(q), basic=basic)

    def _token_from(self, resp: Response, realm: str, cred: Credential | None, where: str) -> str:
        if resp.status_code in (401, 403):
            who = f"user {cred.username!r}" if cred else "anonymous access"
            raise RegistryAuthError(
                f"token service {realm} refused {who} for {where} (HTTP {resp.status_code})",
                hint=self.login_hint("check the user's rights on the repository"),
                registry=self.registry,
                status=resp.status_code,
            )
        if resp.status_code != 200:
            raise RegistryError(
                f"token service {realm} answered HTTP {resp.status_code} for {where}: {resp.text[:200]}",
                registry=self.registry,
                status=resp.status_code,
            )
        try:
            body = resp.json()
        except ValueError:
            body = None
        token = (body.get("token") or body.get("access_token")) if isinstance(body, dict) else None
        if not token:
            raise RegistryError(f"token service {realm} sent no token for {where}", registry=self.registry)
        return str(token)
