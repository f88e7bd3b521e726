"""OCI distribution client (distribution-spec 1.1): the only module that speaks HTTP to registries.

What it does: resolve tags to digests, get/put manifests and indexes byte for byte, blob
existence/upload/cross-repository mount, copy of missing blobs between registries, tag listing
with pagination, the referrers API with the ``sha256-<hex>`` fallback tag index, and a
manifest-level image copy (:func:`copy_image`) used by promotion.

Sources of facts: OCI distribution-spec v1.1 (endpoints, ``Link`` pagination, referrers API
and the fallback tag schema ``<alg>-<ref>``), OCI image-spec v1.1 (descriptors, ``artifactType``,
``subject``), Docker registry token authentication spec (``WWW-Authenticate: Bearer realm=..,
service=.., scope=..``, token response ``token``/``access_token``), the Docker CLI's
``config.json`` format (``auths`` entries with base64 ``user:pass``, ``credsStore`` and
``credHelpers`` running ``docker-credential-<name> get``), buildx's attestation manifests
(platform ``unknown/unknown``, annotation ``vnd.docker.reference.type: attestation-manifest``).

Errors: ``RegistryUnavailableError`` (cannot connect: exit 5), ``RegistryAuthError`` (401/403:
exit 6), ``NotFoundError`` (404 on a named reference: exit 8), ``RegistryError`` (anything else:
exit 7). Every message names the registry, the reference and the HTTP status.
Plain HTTP is used only for loopback or explicitly insecure registries (the caller decides,
normally with ``Config.is_insecure``). 429 and 5xx answers and connection resets are retried
with exponential backoff a bounded number of times.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import dataclasses
import functools
import hashlib
import json
import random
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlencode, urljoin, urlsplit

from builder.errors import (
    ConfigError,
    NotFoundError,
    RegistryAuthError,
    RegistryError,
    RegistryUnavailableError,
)

if TYPE_CHECKING:
    import requests

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MANIFEST_TYPES = (OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST)
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
ACCEPT = ", ".join(MANIFEST_TYPES)
OCI_EMPTY = "application/vnd.oci.empty.v1+json"

#: buildx attestation manifests (in-toto provenance/SBOM) inside an index: never a runnable platform.
ATTESTATION_REF_TYPE_KEY = "vnd.docker.reference.type"
ATTESTATION_REF_TYPE = "attestation-manifest"

DEFAULT_TIMEOUT = (5.0, 60.0)  # connect, read (seconds)
DEFAULT_RETRIES = 4  # extra attempts after the first one on 429/5xx/connection reset
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
SPOOL_BYTES = 64 * 1024 * 1024  # blobs larger than this are spooled to disk while copied

_DIGEST_RE = re.compile(r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$")
_SHA256_RE = re.compile(r"^sha256:[a-f0-9]{64}$")
_TAG_RE = re.compile(r"^[\w][\w.-]{0,127}$")
_COMPONENT_RE = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_HOST_RE = re.compile(r"^(?:\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)(?::[0-9]+)?$")


# --------------------------------------------------------------------------------------------
# references
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Reference:
    """An image reference: ``registry/repository[:tag][@digest]``; ``str()`` round-trips."""

    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    def __str__(self) -> str:
        s = f"{self.registry}/{self.repository}"
        if self.tag:
            s += f":{self.tag}"
        if self.digest:
            s += f"@{self.digest}"
        return s

    @property
    def name(self) -> str:
        """``registry/repository`` (no tag, no digest)."""
        return f"{self.registry}/{self.repository}"

    @property
    def ref(self) -> str:
        """What goes after ``/manifests/``: the digest when known, else the tag.

        Raises ConfigError when the reference has neither (no implicit ``latest``)."""
        if self.digest:
            return self.digest
        if self.tag:
            return self.tag
        raise ConfigError(
            f"image reference {self} has neither a tag nor a digest",
            hint="write NAME:TAG or NAME@sha256:<hex> (builder never assumes `latest`)",
        )

    def with_digest(self, digest: str) -> Reference:
        return dataclasses.replace(self, digest=digest)

    def with_tag(self, tag: str | None) -> Reference:
        return dataclasses.replace(self, tag=tag)


def parse_reference(ref: str, default_registry: str) -> Reference:
    """Parse ``[registry/]repository[:tag][@digest]``.

    The first path component is a registry when it contains ``.`` or ``:`` or is ``localhost``
    (the Docker CLI's rule); otherwise the name is relative and resolves against
    ``default_registry`` (the configured registry, not Docker Hub). ``docker.io/name`` becomes
    ``docker.io/library/name`` as Docker does. Raises ConfigError naming the reference.
    """
    text = ref.strip()

    def bad(why: str) -> ConfigError:
        return ConfigError(
            f"invalid image reference {ref!r}: {why}",
            hint="write [REGISTRY/]REPOSITORY[:TAG][@sha256:<hex>], e.g. 127.0.0.1:5000/ml/jax:tag",
        )

    if not text:
        raise bad("empty")
    digest: str | None = None
    if "@" in text:
        text, digest = text.split("@", 1)
        if not _DIGEST_RE.match(digest) or (digest.startswith("sha256:") and not _SHA256_RE.match(digest)):
            raise bad(f"digest {digest!r} is not <algorithm>:<hex>")
    tag: str | None = None
    last = text.rsplit("/", 1)[-1]
    if ":" in last:
        text, tag = text.rsplit(":", 1)
        if not _TAG_RE.match(tag):
            raise bad(f"tag {tag!r} is not valid (letters, digits, _ . -; at most 128; no leading . or -)")
    parts = text.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        registry = parts[0]
        if not _HOST_RE.match(registry):
            raise bad(f"registry {registry!r} is not host[:port]")
        repo_parts = parts[1:]
    else:
        registry = default_registry
        repo_parts = parts
    if registry in ("docker.io", "index.docker.io") and len(repo_parts) == 1:
        repo_parts = ["library", *repo_parts]
    for comp in repo_parts:
        if not _COMPONENT_RE.match(comp):
            raise bad(f"repository component {comp!r} must be lowercase letters/digits separated by . _ __ -")
    repository = "/".join(repo_parts)
    if len(repository) > 255:
        raise bad("repository name longer than 255 characters")
    return Reference(registry=registry, repository=repository, tag=tag, digest=digest)


def fallback_tag(digest: str) -> str:
    """The referrers fallback tag of a subject digest: ``sha256:<hex>`` -> ``sha256-<hex>``."""
    alg, _, hexpart = digest.partition(":")
    return f"{alg}-{hexpart}"


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------------------------
# descriptors, manifests, indexes
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Platform:
    os: str
    architecture: str
    variant: str | None = None

    def __str__(self) -> str:
        return f"{self.os}/{self.architecture}" + (f"/{self.variant}" if self.variant else "")


@dataclasses.dataclass(frozen=True)
class Descriptor:
    """An OCI content descriptor. ``annotations`` is a sorted tuple of pairs (hashable)."""

    media_type: str
    digest: str
    size: int
    artifact_type: str | None = None
    annotations: tuple[tuple[str, str], ...] = ()
    platform: Platform | None = None

    @property
    def annotation_map(self) -> dict[str, str]:
        return dict(self.annotations)

    def to_json(self) -> dict[str, Any]:
        """The descriptor as OCI JSON (``mediaType``, ``digest``, ``size``, ...)."""
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        if self.artifact_type:
            out["artifactType"] = self.artifact_type
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        if self.platform:
            p: dict[str, Any] = {"architecture": self.platform.architecture, "os": self.platform.os}
            if self.platform.variant:
                p["variant"] = self.platform.variant
            out["platform"] = p
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any], *, where: str = "") -> Descriptor:
        """Parse a descriptor; RegistryError naming ``where`` if a required field is missing."""
        try:
            media_type = str(d["mediaType"]) if "mediaType" in d else ""
            digest = str(d["digest"])
            size = int(d["size"])
        except (KeyError, TypeError, ValueError) as exc:
            raise RegistryError(f"invalid descriptor in {where or 'manifest'}: {exc!r} in {dict(d)!r}") from exc
        ann = d.get("annotations") or {}
        plat = d.get("platform")
        platform = None
        if isinstance(plat, Mapping):
            platform = Platform(
                os=str(plat.get("os", "")),
                architecture=str(plat.get("architecture", "")),
                variant=str(plat["variant"]) if plat.get("variant") else None,
            )
        at = d.get("artifactType")
        return cls(
            media_type=media_type,
            digest=digest,
            size=size,
            artifact_type=str(at) if at else None,
            annotations=tuple(sorted((str(k), str(v)) for k, v in ann.items())),
            platform=platform,
        )

    @property
    def is_attestation(self) -> bool:
        """True for buildx attestation manifests (``unknown/unknown`` + reference-type annotation)."""
        if self.annotation_map.get(ATTESTATION_REF_TYPE_KEY) == ATTESTATION_REF_TYPE:
            return True
        return self.platform is not None and self.platform.os == "unknown" and self.platform.architecture == "unknown"


@dataclasses.dataclass(frozen=True)
class Manifest:
    """A manifest or index as the registry stored it: ``raw`` bytes (kept byte for byte),
    ``media_type``, ``digest`` (sha256 of ``raw``) and the parsed JSON."""

    raw: bytes
    media_type: str
    digest: str

    @functools.cached_property
    def json(self) -> dict[str, Any]:
        """The parsed document (parsed once; treat as read-only)."""
        return _parse_json(self.raw, self.digest)

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES

    @property
    def size(self) -> int:
        return len(self.raw)

    @property
    def artifact_type(self) -> str | None:
        """``artifactType``, else the config media type for image manifests (OCI 1.1 rule)."""
        j = self.json
        at = j.get("artifactType")
        if at:
            return str(at)
        if not self.is_index:
            cfg = j.get("config") or {}
            mt = cfg.get("mediaType")
            return str(mt) if mt else None
        return None

    def descriptor(self, *, with_artifact_type: bool = False) -> Descriptor:
        """This manifest as a descriptor (media type, digest, size; artifact type if asked)."""
        ann = self.json.get("annotations") or {}
        return Descriptor(
            media_type=self.media_type,
            digest=self.digest,
            size=self.size,
            artifact_type=self.artifact_type if with_artifact_type else None,
            annotations=tuple(sorted((str(k), str(v)) for k, v in ann.items())) if with_artifact_type else (),
        )

    @property
    def manifests(self) -> list[Descriptor]:
        """Child manifests of an index (empty for an image manifest)."""
        if not self.is_index:
            return []
        return [Descriptor.from_json(d, where=self.digest) for d in self.json.get("manifests") or []]

    @property
    def config(self) -> Descriptor | None:
        cfg = self.json.get("config")
        return Descriptor.from_json(cfg, where=self.digest) if isinstance(cfg, Mapping) else None

    @property
    def layers(self) -> list[Descriptor]:
        return [Descriptor.from_json(d, where=self.digest) for d in self.json.get("layers") or []]

    @property
    def blobs(self) -> list[Descriptor]:
        """Config + layers of an image manifest (what must exist before it can be PUT)."""
        cfg = self.config
        return ([cfg] if cfg else []) + self.layers

    @property
    def subject(self) -> Descriptor | None:
        s = self.json.get("subject")
        return Descriptor.from_json(s, where=self.digest) if isinstance(s, Mapping) else None


def runnable_platforms(index: Manifest) -> list[Descriptor]:
    """The platform manifests of an index that can run, in index order: buildx attestation
    manifests (``unknown/unknown`` / ``vnd.docker.reference.type: attestation-manifest``) are
    skipped. For an image manifest (no index) the result is empty: the caller reads its config."""
    return [d for d in index.manifests if not d.is_attestation]


def platform_names(index: Manifest) -> tuple[str, ...]:
    """``("linux/amd64", ...)`` of :func:`runnable_platforms` (descriptors without platform skipped)."""
    return tuple(str(d.platform) for d in runnable_platforms(index) if d.platform is not None)


def _parse_json(raw: bytes, where: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RegistryError(f"{where}: the registry sent a document that is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise RegistryError(f"{where}: expected a JSON object, got {type(data).__name__}")
    return data


def canonical_json(data: Any) -> bytes:
    """Compact, key-sorted JSON bytes (what this project writes for manifests and indexes)."""
    return json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


# --------------------------------------------------------------------------------------------
# credentials (Docker config file)
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Credential:
    """A user name and secret for one registry. ``identity_token`` set: OAuth2 refresh token."""

    username: str
    password: str
    identity_token: str | None = None

    def __repr__(self) -> str:  # never print secrets
        return f"Credential(username={self.username!r}, password=***)"


def _normalize_host(key: str) -> str:
    """``https://host:port/v1/`` -> ``host:port`` (how Docker matches ``auths`` keys)."""
    k = key.strip()
    if "://" in k:
        k = urlsplit(k).netloc or k
    k = k.split("/", 1)[0]
    if k in ("index.docker.io", "registry-1.docker.io"):
        return "docker.io"
    return k


class DockerCredentials:
    """Credentials from a Docker CLI ``config.json`` (the CLI passes the path; core reads no env).

    Lookup order for a registry host (Docker's): ``credHelpers[host]``, then ``auths[host]``
    (``auth`` base64 ``user:pass`` or ``username``/``password``, ``identitytoken``), then the
    ``credsStore`` helper. A helper is run as ``docker-credential-<name> get`` with the server
    URL on stdin and answers ``{"Username":..,"Secret":..}`` (Username ``<token>`` = identity
    token). Raises RegistryAuthError when the file is unreadable or a helper fails oddly.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, *, source: str = "<none>") -> None:
        self.config: Mapping[str, Any] = config or {}
        self.source = source
        self._cache: dict[str, Credential | None] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: Path | None) -> DockerCredentials:
        """Load ``path`` (a ``config.json``; a directory means ``<dir>/config.json``); a missing
        file gives empty credentials."""
        if path is None:
            return cls()
        p = path / "config.json" if path.is_dir() else path
        if not p.exists():
            return cls(source=str(p))
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
        """The credential for ``registry`` (``host[:port]``) or None."""
        host = _normalize_host(registry)
        with self._lock:
            if host in self._cache:
                return self._cache[host]
        cred = self._lookup(host)
        with self._lock:
            self._cache[host] = cred
        return cred

    def _lookup(self, host: str) -> Credential | None:
        helpers = self.config.get("credHelpers") or {}
        for key, helper in helpers.items():
            if _normalize_host(key) == host:
                return self._run_helper(str(helper), host)
        auths = self.config.get("auths") or {}
        for key, entry in auths.items():
            if _normalize_host(key) != host or not isinstance(entry, Mapping):
                continue
            cred = self._from_entry(entry, key)
            if cred is not None:
                return cred
        store = self.config.get("credsStore")
        if store:
            return self._run_helper(str(store), host)
        return None

    def _from_entry(self, entry: Mapping[str, Any], key: str) -> Credential | None:
        token = entry.get("identitytoken") or None
        if entry.get("auth"):
            try:
                decoded = base64.b64decode(str(entry["auth"])).decode()
            except (ValueError, UnicodeDecodeError) as exc:
                raise RegistryAuthError(
                    f"Docker config {self.source}: `auths.{key}.auth` is not base64 of user:password",
                    hint=f"run `docker login {key}` again",
                ) from exc
            user, sep, password = decoded.partition(":")
            if not sep:
                raise RegistryAuthError(
                    f"Docker config {self.source}: `auths.{key}.auth` has no ':' between user and password",
                    hint=f"run `docker login {key}` again",
                )
            return Credential(user, password, str(token) if token else None)
        if entry.get("username"):
            return Credential(str(entry["username"]), str(entry.get("password", "")), str(token) if token else None)
        if token:
            return Credential("<token>", "", str(token))
        return None

    def _run_helper(self, helper: str, host: str) -> Credential | None:
        server = "https://index.docker.io/v1/" if host == "docker.io" else host
        cmd = f"docker-credential-{helper}"
        try:
            proc = subprocess.run([cmd, "get"], input=server, capture_output=True, text=True, timeout=30, check=False)
        except FileNotFoundError as exc:
            raise RegistryAuthError(
                f"Docker config {self.source} names credential helper `{cmd}` for {host}, but it is not installed",
                hint=f"install {cmd} or remove it from the Docker config",
                registry=host,
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise RegistryAuthError(f"credential helper `{cmd} get` timed out for {host}", registry=host) from exc
        if proc.returncode != 0:
            out = (proc.stdout + proc.stderr).lower()
            if "not found" in out or "no credentials" in out:
                return None
            raise RegistryAuthError(
                f"credential helper `{cmd} get` failed for {host} (exit {proc.returncode}): "
                f"{proc.stderr.strip()[:200]}",
                hint=f"run `docker login {host}` again",
                registry=host,
            )
        try:
            data = json.loads(proc.stdout)
            user, secret = str(data["Username"]), str(data["Secret"])
        except (ValueError, KeyError, TypeError) as exc:
            raise RegistryAuthError(
                f"credential helper `{cmd} get` printed no Username/Secret JSON for {host}", registry=host
            ) from exc
        if user == "<token>":
            return Credential(user, "", secret)
        return Credential(user, secret)


_CHALLENGE_RE = re.compile(r'([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))')


def parse_www_authenticate(header: str) -> tuple[str, dict[str, str]]:
    """``Bearer realm="..",service="..",scope=".."`` -> ``("bearer", {"realm": .., ...})``.

    The scheme is lower-cased; quoted values are unescaped (RFC 7235 auth-params)."""
    header = header.strip()
    scheme, _, rest = header.partition(" ")
    params: dict[str, str] = {}
    for m in _CHALLENGE_RE.finditer(rest):
        val = m.group(2) if m.group(2) is not None else m.group(3)
        params[m.group(1).lower()] = re.sub(r"\\(.)", r"\1", val or "")
    return scheme.lower(), params


_REPO_PATH_RE = re.compile(r"^/v2/(.+?)/(?:manifests|blobs|tags|referrers)/")


# --------------------------------------------------------------------------------------------
# the client
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class CopyStats:
    """What a copy did: blobs mounted, copied (bytes), already present; manifests written."""

    mounted: int = 0
    copied: int = 0
    copied_bytes: int = 0
    present: int = 0
    manifests: int = 0


class RegistryClient:
    """Client for one registry host (``host[:port]``). Thread-safe for concurrent requests.

    ``insecure=True`` uses plain HTTP (only for loopback or explicitly insecure registries).
    ``auth``: credentials (a :class:`DockerCredentials` or a fixed :class:`Credential`); Basic and
    Bearer challenges are answered when the registry sends them. ``retries``: extra attempts on
    429/5xx/connection reset with exponential backoff starting at ``backoff`` seconds.
    """

    def __init__(
        self,
        registry: str,
        *,
        insecure: bool = False,
        auth: DockerCredentials | Credential | None = None,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        backoff: float = 0.25,
    ) -> None:
        self.registry = registry
        self.scheme = "http" if insecure else "https"
        host = "registry-1.docker.io" if registry in ("docker.io", "index.docker.io") else registry
        self.base = f"{self.scheme}://{host}"
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._auth = auth
        self._local = threading.local()
        self._lock = threading.Lock()
        self._basic: str | None = None  # "Basic ..." once a Basic challenge was answered
        self._tokens: dict[str, str] = {}  # scope key -> "Bearer ..."
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._adapter: Any = None  # one requests HTTPAdapter (connection pool) shared by all threads
        self._env_cache: dict[str, dict[str, Any]] = {}  # scheme://host -> proxies/verify/netrc
        self.requests_sent = 0  # HTTP requests sent, retries and auth round trips included

    def __repr__(self) -> str:
        return f"RegistryClient({self.registry!r}, scheme={self.scheme!r})"

    # -- plumbing -------------------------------------------------------------------------

    @property
    def session(self) -> requests.Session:
        """One ``requests.Session`` per thread, all sharing this client's connection pool (one
        ``HTTPAdapter``: urllib3 pools are thread-safe), so a thread started later reuses the
        keep-alive connections of earlier ones instead of opening its own. ``trust_env`` is off:
        the environment's proxy, CA-bundle and netrc settings are resolved once per host
        (:meth:`_env_settings`) rather than on every request."""
        s: requests.Session | None = getattr(self._local, "session", None)
        if s is None:
            import requests

            s = requests.Session()
            s.trust_env = False
            adapter = self._shared_adapter()
            s.mount("http://", adapter)
            s.mount("https://", adapter)
            self._local.session = s
        return s

    def _shared_adapter(self) -> Any:
        with self._lock:
            if self._adapter is None:
                from requests.adapters import HTTPAdapter

                # up to 128 idle keep-alive connections per host: more than the threads that may
                # send at once in one process (a batch's 16 workers, builder.promote's shared pool of
                # 24, this client's executor of 8), so urllib3 never discards one with a "pool is
                # full" warning; beyond that it opens more rather than blocking
                class _Adapter(HTTPAdapter):
                    def build_connection_pool_key_attributes(self, request: Any, verify: Any, cert: Any = None) -> Any:
                        # plain HTTP checks no certificate: skip requests' per-request stat() of a
                        # CA-bundle path (REQUESTS_CA_BUNDLE); an https URL (e.g. a redirect) keeps it
                        if isinstance(verify, str) and str(request.url).startswith("http://"):
                            verify = True
                        return super().build_connection_pool_key_attributes(request, verify, cert)

                self._adapter = _Adapter(pool_connections=4, pool_maxsize=128)
            return self._adapter

    def _env_settings(self, url: str) -> dict[str, Any]:
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
            got = {"proxies": dict(merged.get("proxies") or {}), "verify": merged.get("verify", True)}
            netrc = get_netrc_auth(key + "/")
            if netrc is not None:
                got["netrc"] = netrc
            with self._lock:
                self._env_cache[key] = got
        return got

    @property
    def executor(self) -> concurrent.futures.ThreadPoolExecutor:
        """A small thread pool owned by this client (reused, so its threads keep their
        keep-alive connections): parallel blob mounts/copies. Never submit from inside it."""
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=8, thread_name_prefix=f"registry-{self.registry}"
                )
            return self._pool

    def credential(self) -> Credential | None:
        if self._auth is None:
            return None
        if isinstance(self._auth, Credential):
            return self._auth
        return self._auth.get(self.registry)

    def _url(self, path: str) -> str:
        return path if "://" in path else f"{self.base}{path}"

    def _scope_key(self, path: str, extra_scopes: tuple[str, ...]) -> str:
        m = _REPO_PATH_RE.match(urlsplit(self._url(path)).path)
        repo = m.group(1) if m else ""
        return " ".join((repo, *extra_scopes))

    def request(
        self,
        method: str,
        path: str,
        *,
        ref: str = "",
        ok: tuple[int, ...] = (200,),
        scopes: tuple[str, ...] = (),
        **kw: Any,
    ) -> requests.Response:
        """One HTTP request to ``/v2/...`` (or an absolute upload URL); raises the builder error
        for the status. Answers auth challenges once, retries 429/5xx/connection resets.
        ``scopes``: extra token scopes (e.g. ``repository:other:pull`` for a mount)."""
        import requests

        url = self._url(path)
        where = f"{self.registry}/{ref}" if ref else f"{self.registry}{urlsplit(url).path}"
        kw.setdefault("timeout", self.timeout)
        env = self._env_settings(url)
        kw.setdefault("proxies", env["proxies"])
        kw.setdefault("verify", env["verify"])
        headers = dict(kw.pop("headers", None) or {})
        key = self._scope_key(path, scopes)
        authed_once = False
        attempt = 0
        while True:
            auth_header = self._auth_header_for(key)
            if auth_header:
                headers["Authorization"] = auth_header
                kw.pop("auth", None)
            elif "netrc" in env and "Authorization" not in headers:
                kw["auth"] = env["netrc"]  # as trust_env would: netrc only when nothing else authenticates
            data = kw.get("data")
            if data is not None and hasattr(data, "seek"):
                data.seek(0)
            with self._lock:
                self.requests_sent += 1
            try:
                resp = self.session.request(method, url, headers=headers, **kw)
            except (requests.ConnectionError, requests.Timeout) as exc:
                if attempt < self.retries and _transient(exc):
                    attempt += 1
                    self._sleep(attempt, None)
                    continue
                if isinstance(exc, requests.exceptions.SSLError):
                    raise RegistryUnavailableError(
                        f"TLS to registry {self.registry} failed on {method} {where}: {exc}",
                        hint="if the registry speaks plain HTTP, list it in builder.toml `insecure_registries`; "
                        "otherwise install its CA certificate",
                        registry=self.registry,
                    ) from exc
                kind = "timed out" if isinstance(exc, requests.Timeout) else "is not reachable"
                raise RegistryUnavailableError(
                    f"registry {self.registry} {kind} ({self.scheme}) on {method} {where} "
                    f"after {attempt + 1} attempts: {type(exc).__name__}",
                    registry=self.registry,
                ) from exc
            if resp.status_code == 401 and not authed_once:
                challenge = resp.headers.get("WWW-Authenticate", "")
                if challenge:
                    authed_once = True
                    self._answer_challenge(challenge, key, scopes, where)
                    continue
            if resp.status_code in RETRY_STATUSES and resp.status_code not in ok and attempt < self.retries:
                attempt += 1
                self._sleep(attempt, resp.headers.get("Retry-After"))
                continue
            break
        if resp.status_code in ok:
            return resp
        self._raise_for(resp, method, where)
        raise AssertionError("unreachable")  # pragma: no cover

    def _sleep(self, attempt: int, retry_after: str | None) -> None:
        delay = self.backoff * (2 ** (attempt - 1)) * (1 + random.random() / 4)
        if retry_after and retry_after.isdigit():
            delay = max(delay, min(float(retry_after), 30.0))
        time.sleep(min(delay, 30.0))

    def _raise_for(self, resp: requests.Response, method: str, where: str) -> None:
        status = resp.status_code
        body = resp.text[:300] if method != "HEAD" else ""
        if status in (401, 403):
            cred = self.credential()
            who = f"as user {cred.username!r}" if cred else "without credentials"
            raise RegistryAuthError(
                f"registry {self.registry} refused {method} {where} {who}: HTTP {status} {body}".rstrip(),
                hint=f"log in with `docker login {self.registry}` (or pass --docker-config FILE); "
                "for 403, ask for push/pull rights on the repository",
                registry=self.registry,
                status=status,
            )
        if status == 404:
            raise NotFoundError(
                f"{where} not found (HTTP 404 on {method}) {body}".rstrip(),
                hint="check the repository, tag or digest; `builder status` lists what exists",
                registry=self.registry,
                status=404,
            )
        raise RegistryError(
            f"registry {self.registry} answered HTTP {status} to {method} {where}: {body}",
            registry=self.registry,
            status=status,
        )

    def _auth_header_for(self, key: str) -> str | None:
        with self._lock:
            if key in self._tokens:
                return self._tokens[key]
            return self._basic

    def _answer_challenge(self, challenge: str, key: str, scopes: tuple[str, ...], where: str) -> None:
        scheme, params = parse_www_authenticate(challenge)
        cred = self.credential()
        if scheme == "basic":
            if cred is None or cred.identity_token:
                raise RegistryAuthError(
                    f"registry {self.registry} requires a user name and password for {where} (HTTP 401, Basic)",
                    hint=f"run `docker login {self.registry}` or pass a Docker config with credentials "
                    "(--docker-config / DOCKER_CONFIG)",
                    registry=self.registry,
                    status=401,
                )
            token = base64.b64encode(f"{cred.username}:{cred.password}".encode()).decode()
            with self._lock:
                self._basic = f"Basic {token}"
            return
        if scheme == "bearer":
            tok = self._fetch_token(params, scopes, cred, where)
            with self._lock:
                self._tokens[key] = f"Bearer {tok}"
            return
        raise RegistryAuthError(
            f"registry {self.registry} asks for unsupported authentication {scheme!r} for {where}",
            registry=self.registry,
            status=401,
        )

    def _fetch_token(
        self, params: Mapping[str, str], scopes: tuple[str, ...], cred: Credential | None, where: str
    ) -> str:
        import requests

        realm = params.get("realm")
        if not realm:
            raise RegistryAuthError(f"registry {self.registry} sent a Bearer challenge without realm for {where}")
        scope_list = [s for s in params.get("scope", "").split(" ") if s] + list(scopes)
        q: list[tuple[str, str]] = []
        if params.get("service"):
            q.append(("service", params["service"]))
        q.extend(("scope", s) for s in dict.fromkeys(scope_list))
        try:
            if cred is not None and cred.identity_token:
                form = dict(q) | {
                    "grant_type": "refresh_token",
                    "refresh_token": cred.identity_token,
                    "client_id": "builder",
                }
                form["scope"] = " ".join(dict.fromkeys(scope_list))
                env = self._env_settings(realm)
                resp = self.session.post(
                    realm, data=form, timeout=self.timeout, proxies=env["proxies"], verify=env["verify"]
                )
            else:
                env = self._env_settings(realm)
                auth = (cred.username, cred.password) if cred is not None else env.get("netrc")
                resp = self.session.get(
                    f"{realm}?{urlencode(q)}",
                    auth=auth,
                    timeout=self.timeout,
                    proxies=env["proxies"],
                    verify=env["verify"],
                )
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise RegistryUnavailableError(
                f"token service {realm} of registry {self.registry} is not reachable: {type(exc).__name__}",
                registry=self.registry,
            ) from exc
        if resp.status_code in (401, 403):
            who = f"user {cred.username!r}" if cred else "anonymous access"
            raise RegistryAuthError(
                f"token service {realm} refused {who} for {where} (HTTP {resp.status_code})",
                hint=f"run `docker login {self.registry}`; check the user's rights on the repository",
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
            token = body.get("token") or body.get("access_token")
        except ValueError:
            token = None
        if not token:
            raise RegistryError(f"token service {realm} sent no token for {where}", registry=self.registry)
        return str(token)

    # -- basic operations -------------------------------------------------------------------

    def ping(self) -> None:
        """GET /v2/; RegistryUnavailableError when nothing answers (401 counts as alive)."""
        self.request("GET", "/v2/", ok=(200, 401))

    def check_auth(self) -> None:
        """GET /v2/ answering any challenge: RegistryAuthError when our credentials are refused."""
        self.request("GET", "/v2/", ok=(200,))

    def resolve(self, repository: str, reference: str) -> str:
        """Tag or digest -> manifest digest (``sha256:<hex>``) via HEAD with every manifest type.

        Raises NotFoundError (404), RegistryAuthError, RegistryUnavailableError, RegistryError."""
        resp = self.request(
            "HEAD",
            f"/v2/{repository}/manifests/{reference}",
            ref=_join_ref(repository, reference),
            headers={"Accept": ACCEPT},
        )
        digest = resp.headers.get("Docker-Content-Digest")
        if not digest:
            # a registry may omit the header on HEAD: fall back to GET and hash the bytes
            return self.get_manifest(repository, reference).digest
        return digest

    def try_resolve(self, repository: str, reference: str) -> str | None:
        """Like :meth:`resolve` but None when the tag/digest (or the repository) does not exist."""
        try:
            return self.resolve(repository, reference)
        except NotFoundError:
            return None

    def get_manifest(self, repository: str, reference: str) -> Manifest:
        """GET a manifest or index; the bytes are kept exactly as served. When ``reference`` is a
        digest the bytes are checked against it (RegistryError on mismatch)."""
        where = _join_ref(repository, reference)
        resp = self.request("GET", f"/v2/{repository}/manifests/{reference}", ref=where, headers={"Accept": ACCEPT})
        raw = resp.content
        digest = sha256_digest(raw)
        if reference.startswith("sha256:") and digest != reference:
            raise RegistryError(
                f"registry {self.registry} served bytes for {where} that hash to {digest}",
                hint="the registry or a proxy changed the manifest; do not trust this registry",
                registry=self.registry,
            )
        header_digest = resp.headers.get("Docker-Content-Digest")
        if header_digest and header_digest.startswith("sha256:") and header_digest != digest:
            raise RegistryError(
                f"registry {self.registry} says {where} is {header_digest} but its bytes hash to {digest}",
                registry=self.registry,
            )
        media_type = resp.headers.get("Content-Type", "").split(";")[0].strip()
        if media_type not in MANIFEST_TYPES:
            media_type = str(_parse_json(raw, where).get("mediaType") or media_type)
        return Manifest(raw=raw, media_type=media_type, digest=digest)

    def try_get_manifest(self, repository: str, reference: str) -> Manifest | None:
        try:
            return self.get_manifest(repository, reference)
        except NotFoundError:
            return None

    def put_manifest(self, repository: str, reference: str, raw: bytes, media_type: str) -> str:
        """PUT ``raw`` (sent byte for byte) under a tag or its digest; returns the digest.

        The digest the registry returns must equal sha256(raw) (RegistryError otherwise); a digest
        ``reference`` must equal it too. Every blob/child it names must already be in the repository
        (the registry answers 400 MANIFEST_BLOB_UNKNOWN otherwise)."""
        digest = sha256_digest(raw)
        where = _join_ref(repository, reference)
        if reference.startswith("sha256:") and reference != digest:
            raise RegistryError(f"refusing to PUT {where}: the bytes hash to {digest}", registry=self.registry)
        resp = self.request(
            "PUT",
            f"/v2/{repository}/manifests/{reference}",
            ref=where,
            ok=(201, 200),
            data=raw,
            headers={"Content-Type": media_type},
        )
        returned = resp.headers.get("Docker-Content-Digest")
        if returned and returned != digest:
            raise RegistryError(
                f"registry {self.registry} stored {where} as {returned}, expected {digest}",
                hint="the registry rewrote the manifest; use a registry that stores manifests byte for byte",
                registry=self.registry,
            )
        return digest

    def delete_manifest(self, repository: str, digest: str) -> None:
        """DELETE a manifest by digest (the registry must allow deletes). For tests and clean-up."""
        self.request("DELETE", f"/v2/{repository}/manifests/{digest}", ref=_join_ref(repository, digest), ok=(202, 200))

    def blob_exists(self, repository: str, digest: str) -> bool:
        """HEAD a blob: True if the repository has it (or can serve it)."""
        try:
            self.request("HEAD", f"/v2/{repository}/blobs/{digest}", ref=f"{repository}@{digest}")
        except NotFoundError:
            return False
        return True

    def get_blob(self, repository: str, digest: str) -> bytes:
        """GET a whole blob into memory, checking its sha256 (RegistryError on mismatch)."""
        resp = self.request("GET", f"/v2/{repository}/blobs/{digest}", ref=f"{repository}@{digest}")
        data = resp.content
        if digest.startswith("sha256:") and sha256_digest(data) != digest:
            raise RegistryError(f"blob {repository}@{digest} from {self.registry} does not match its digest")
        return data

    def open_blob(self, repository: str, digest: str) -> requests.Response:
        """GET a blob as a stream (``resp.iter_content``); the caller closes the response."""
        return self.request("GET", f"/v2/{repository}/blobs/{digest}", ref=f"{repository}@{digest}", stream=True)

    def put_blob(self, repository: str, data: bytes | IO[bytes], digest: str | None = None) -> str:
        """Upload a blob monolithically (POST a session, PUT the bytes with ``?digest=``); returns
        the digest. ``data`` may be bytes or a seekable binary file (then pass ``digest``)."""
        if digest is None:
            if not isinstance(data, bytes):
                raise ValueError("put_blob: pass digest= with a file object")
            digest = sha256_digest(data)
        where = f"{repository}@{digest}"
        resp = self.request("POST", f"/v2/{repository}/blobs/uploads/", ref=where, ok=(202,))
        location = self._location(resp, where)
        sep = "&" if "?" in location else "?"
        length = len(data) if isinstance(data, bytes) else _file_size(data)
        self.request(
            "PUT",
            f"{location}{sep}{urlencode({'digest': digest})}",
            ref=where,
            ok=(201, 204),
            data=data,
            headers={"Content-Type": "application/octet-stream", "Content-Length": str(length)},
        )
        return digest

    def mount_blob(self, repository: str, digest: str, from_repository: str) -> bool:
        """Cross-repository mount (same registry): True when mounted (201). When the registry
        starts an upload instead (202), the session is cancelled and False is returned."""
        where = f"{repository}@{digest}"
        resp = self.request(
            "POST",
            f"/v2/{repository}/blobs/uploads/?{urlencode({'mount': digest, 'from': from_repository})}",
            ref=where,
            ok=(201, 202),
            scopes=(f"repository:{from_repository}:pull",),
        )
        if resp.status_code == 201:
            return True
        with contextlib.suppress(RegistryError):
            self.request("DELETE", self._location(resp, where), ref=where, ok=(204, 200, 202, 404))
        return False

    def _location(self, resp: requests.Response, where: str) -> str:
        loc = resp.headers.get("Location")
        if not loc:
            raise RegistryError(f"registry {self.registry} sent no upload Location for {where}")
        return urljoin(resp.url, loc)

    def list_tags(self, repository: str, *, page_size: int = 1000) -> list[str]:
        """Every tag of a repository, following ``Link: <...>; rel="next"`` pages. A repository
        that does not exist has no tags (empty list)."""
        tags: list[str] = []
        url: str | None = f"/v2/{repository}/tags/list?n={page_size}"
        while url:
            try:
                resp = self.request("GET", url, ref=f"{repository} (tags)")
            except NotFoundError:
                return tags
            body = _parse_json(resp.content, f"{self.registry}/{repository} tag list")
            tags.extend(str(t) for t in body.get("tags") or [])
            url = _next_link(resp.headers.get("Link"), resp.url)
        return tags

    # -- referrers --------------------------------------------------------------------------

    def referrers(self, repository: str, digest: str, artifact_type: str | None = None) -> list[Descriptor]:
        """Manifests whose ``subject`` is ``digest``: the referrers API when it answers a 200 OCI
        index, else the ``sha256-<hex>`` fallback tag index (none: empty list). Filtered by
        ``artifact_type`` when given."""
        path = f"/v2/{repository}/referrers/{digest}"
        if artifact_type:
            path += "?" + urlencode({"artifactType": artifact_type})
        descs: list[Descriptor] | None = None
        try:
            resp = self.request("GET", path, ref=f"{repository}@{digest} (referrers)", ok=(200,))
            ctype = resp.headers.get("Content-Type", "").split(";")[0].strip()
            if ctype == OCI_INDEX:
                body = _parse_json(resp.content, f"referrers of {repository}@{digest}")
                descs = [Descriptor.from_json(d, where="referrers") for d in body.get("manifests") or []]
        except (NotFoundError, RegistryError):
            descs = None  # no referrers API (distribution 2.8 answers 404): use the fallback tag
        if descs is None:
            index = self.try_get_manifest(repository, fallback_tag(digest))
            descs = index.manifests if index is not None and index.is_index else []
        if artifact_type:
            descs = [d for d in descs if d.artifact_type == artifact_type]
        return descs

    def add_referrer_to_fallback_index(
        self,
        repository: str,
        subject_digest: str,
        descriptor: Descriptor,
        *,
        attempts: int = 6,
        lock_dir: Path | None = None,
        lock_timeout: float = 60.0,
    ) -> str:
        """Add ``descriptor`` (with ``artifactType``) to the ``sha256-<hex>`` fallback index of
        ``subject_digest``: GET-or-create, add (an entry with the same digest is replaced), sort
        by digest, PUT, re-read; when a concurrent writer dropped our entry, start over (bounded).
        The referrer manifest itself must already be pushed. Returns the index digest.
        Writers in one process are serialised per index; ``lock_dir`` adds a file lock there
        (one per registry/repository/tag) so processes on one machine are serialised too.
        Raises RegistryError when the entry does not stick after ``attempts`` tries (or the file
        lock is not acquired within ``lock_timeout`` seconds)."""
        if not descriptor.artifact_type:
            raise ValueError("a fallback-index entry needs artifactType (consumers filter on it)")
        tag = fallback_tag(subject_digest)
        with _index_lock(self.registry, repository, tag):
            if lock_dir is None:
                return self._add_to_fallback_index(repository, tag, descriptor, attempts)
            from filelock import FileLock, Timeout

            lock_dir.mkdir(parents=True, exist_ok=True)
            key = hashlib.sha256(f"{self.registry}/{repository}:{tag}".encode()).hexdigest()[:32]
            try:
                with FileLock(str(lock_dir / f"referrers-{key}.lock"), timeout=lock_timeout):
                    return self._add_to_fallback_index(repository, tag, descriptor, attempts)
            except Timeout as exc:
                raise RegistryError(
                    f"another process holds the lock of {self.registry}/{repository}:{tag} for {lock_timeout:.0f} s",
                    hint=f"wait for it to finish, or remove a stale lock file in {lock_dir}",
                ) from exc

    def _add_to_fallback_index(self, repository: str, tag: str, descriptor: Descriptor, attempts: int) -> str:
        for attempt in range(attempts):
            current = self.try_get_manifest(repository, tag)
            if current is not None and not current.is_index:
                raise RegistryError(
                    f"{self.registry}/{repository}:{tag} exists but is not an OCI index ({current.media_type})",
                    hint="the referrers fallback tag is reserved for the index of referrers; remove what is there",
                )
            doc: dict[str, Any] = (
                dict(current.json) if current is not None else {"schemaVersion": 2, "mediaType": OCI_INDEX}
            )
            entries = [d for d in (doc.get("manifests") or []) if d.get("digest") != descriptor.digest]
            if current is not None and any(
                d.get("digest") == descriptor.digest and d.get("artifactType") == descriptor.artifact_type
                for d in doc.get("manifests") or []
            ):
                return current.digest
            entries.append(descriptor.to_json())
            entries.sort(key=lambda d: str(d.get("digest")))
            doc["manifests"] = entries
            doc.setdefault("schemaVersion", 2)
            doc["mediaType"] = OCI_INDEX
            raw = canonical_json(doc)
            self.put_manifest(repository, tag, raw, OCI_INDEX)
            time.sleep(random.uniform(0.0, 0.02) * attempt)
            after = self.get_manifest(repository, tag)
            if any(d.digest == descriptor.digest for d in after.manifests):
                return after.digest
        raise RegistryError(
            f"could not add {descriptor.digest} to the referrers index {self.registry}/{repository}:{tag} "
            f"after {attempts} attempts (concurrent writers)",
            hint="retry; if it persists, something keeps rewriting the fallback index",
        )

    # -- copies ----------------------------------------------------------------------------

    def copy_blob_from(self, src: RegistryClient, src_repo: str, dst_repo: str, desc: Descriptor) -> int:
        """Copy one blob from ``src`` (any registry), spooling to disk above 64 MiB. Returns bytes."""
        with src.open_blob(src_repo, desc.digest) as resp, _spool() as buf:
            h = hashlib.sha256()
            n = 0
            for chunk in resp.iter_content(chunk_size=1 << 20):
                h.update(chunk)
                buf.write(chunk)
                n += len(chunk)
            got = "sha256:" + h.hexdigest()
            if desc.digest.startswith("sha256:") and got != desc.digest:
                raise RegistryError(f"blob {src.registry}/{src_repo}@{desc.digest} hashes to {got} when read")
            buf.flush()
            if n <= SPOOL_BYTES:
                buf.seek(0)
                self.put_blob(dst_repo, buf.read(), desc.digest)
            else:
                self.put_blob(dst_repo, buf, desc.digest)
            return n


def copy_blobs(
    src: RegistryClient,
    src_repo: str,
    dst: RegistryClient,
    dst_repo: str,
    blobs: Iterable[Descriptor],
    stats: CopyStats | None = None,
    *,
    workers: int = 8,
) -> CopyStats:
    """Make every blob exist in ``dst/dst_repo`` (in parallel, ``workers`` at a time).

    Within one registry each blob is mounted from ``src_repo`` (one POST; a blob already in the
    destination mounts too); when the registry does not mount it (202), or across registries,
    a HEAD checks the destination and only missing blobs are copied (streamed)."""
    stats = stats if stats is not None else CopyStats()
    same_registry = src.registry == dst.registry and src.base == dst.base
    lock = threading.Lock()

    def one(desc: Descriptor) -> None:
        if same_registry and src_repo == dst_repo:
            kind, n = "present", 0
        elif same_registry and dst.mount_blob(dst_repo, desc.digest, src_repo):
            kind, n = "mounted", 0
        elif dst.blob_exists(dst_repo, desc.digest):
            kind, n = "present", 0
        else:
            kind, n = "copied", dst.copy_blob_from(src, src_repo, dst_repo, desc)
        with lock:
            setattr(stats, kind, getattr(stats, kind) + 1)
            stats.copied_bytes += n

    items = list(dict.fromkeys(blobs))
    if len(items) <= 1 or workers <= 1:
        for d in items:
            one(d)
        return stats
    for fut in [dst.executor.submit(one, d) for d in items]:
        fut.result()  # re-raise the first error
    return stats


def copy_image(
    src: RegistryClient,
    src_repo: str,
    digest: str,
    dst: RegistryClient,
    dst_repo: str,
    tag: str | None = None,
    *,
    stats: CopyStats | None = None,
) -> str:
    """Manifest-level copy of ``src/src_repo@digest`` to ``dst/dst_repo`` (under ``tag`` when
    given, else by digest). Index children (attestation manifests included: they are part of
    the index digest) are copied first; blobs are mounted or copied only when missing;
    manifests are PUT byte for byte; the destination digest is verified equal to ``digest``
    (the registry's answer to the PUT, then a HEAD of the tag). Cost within one registry: a
    few requests per blob, independent of the blob sizes.
    Returns the digest. Raises RegistryError on a digest mismatch."""
    stats = stats if stats is not None else CopyStats()
    _copy_manifest(src, src_repo, digest, dst, dst_repo, stats, tag=tag)
    if tag is not None:
        got = dst.resolve(dst_repo, tag)
        if got != digest:
            raise RegistryError(
                f"after copying, {dst.registry}/{dst_repo}:{tag} resolves to {got}, expected {digest}",
                hint="another writer moved the tag at the same time; retry",
                registry=dst.registry,
            )
    return digest


def _copy_manifest(
    src: RegistryClient,
    src_repo: str,
    digest: str,
    dst: RegistryClient,
    dst_repo: str,
    stats: CopyStats,
    *,
    tag: str | None = None,
) -> None:
    # look at the destination and read the source at the same time (two round trips in one)
    there = dst.executor.submit(dst.try_resolve, dst_repo, digest)
    m = src.get_manifest(src_repo, digest)
    present = there.result() == digest
    if not present:  # a manifest in the registry implies its blobs and children are there
        if m.is_index:
            for child in m.manifests:
                _copy_manifest(src, src_repo, child.digest, dst, dst_repo, stats)
        else:
            copy_blobs(src, src_repo, dst, dst_repo, m.blobs, stats)
    if present and tag is None:
        return
    got = dst.put_manifest(dst_repo, tag or digest, m.raw, m.media_type)
    stats.manifests += 1
    if got != digest:  # pragma: no cover - put_manifest already verifies
        raise RegistryError(f"copied manifest {dst.registry}/{dst_repo}@{got} != {digest}")


def image_blobs(client: RegistryClient, repository: str, digest: str) -> Iterator[tuple[Manifest, Descriptor]]:
    """Every (manifest, blob descriptor) reachable from ``digest`` (through index children)."""
    m = client.get_manifest(repository, digest)
    if m.is_index:
        for child in m.manifests:
            yield from image_blobs(client, repository, child.digest)
    else:
        for b in m.blobs:
            yield m, b


def verify_complete(client: RegistryClient, repository: str, digest: str) -> list[str]:
    """Check every child manifest and blob of ``digest`` exists; returns what is missing
    (empty list: complete). NotFoundError when ``digest`` itself is missing."""
    missing: list[str] = []
    m = client.get_manifest(repository, digest)
    children = m.manifests if m.is_index else []
    for child in children:
        if client.try_resolve(repository, child.digest) is None:
            missing.append(f"manifest {child.digest}")
            continue
        missing.extend(verify_complete(client, repository, child.digest))
    for b in m.blobs:
        if not client.blob_exists(repository, b.digest):
            missing.append(f"blob {b.digest}")
    return missing


def image_config(client: RegistryClient, repository: str, digest: str, platform: str = "linux/amd64") -> dict[str, Any]:
    """The image config JSON for ``platform`` of ``digest`` (an index picks that platform, else its
    first runnable one). Used to read ``config.Env`` (NVIDIA_REQUIRE_CUDA, CUDA_VERSION)."""
    m = client.get_manifest(repository, digest)
    if m.is_index:
        plats = runnable_platforms(m)
        if not plats:
            raise RegistryError(f"{client.registry}/{repository}@{digest} is an index without runnable platforms")
        chosen = next((d for d in plats if d.platform is not None and str(d.platform) == platform), plats[0])
        m = client.get_manifest(repository, chosen.digest)
    cfg = m.config
    if cfg is None:
        raise RegistryError(f"{client.registry}/{repository}@{m.digest} has no config")
    return _parse_json(client.get_blob(repository, cfg.digest), f"config {cfg.digest}")


def config_env(config: Mapping[str, Any]) -> dict[str, str]:
    """``config.Env`` (``["K=V", ...]``) of an image config as a dict."""
    env = (config.get("config") or {}).get("Env") or []
    out: dict[str, str] = {}
    for item in env:
        k, _, v = str(item).partition("=")
        out[k] = v
    return out


def client_for(
    registry: str,
    *,
    insecure: Callable[[str], bool],
    auth: DockerCredentials | Credential | None = None,
    cache: dict[str, RegistryClient] | None = None,
) -> RegistryClient:
    """A client for ``registry`` (``insecure`` usually ``Config.is_insecure``), cached in ``cache``."""
    if cache is not None and registry in cache:
        return cache[registry]
    c = RegistryClient(registry, insecure=insecure(registry), auth=auth)
    if cache is not None:
        cache[registry] = c
    return c


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------


_INDEX_LOCKS: dict[tuple[str, str, str], threading.Lock] = {}
_INDEX_LOCKS_GUARD = threading.Lock()


def _index_lock(registry: str, repository: str, tag: str) -> threading.Lock:
    """One lock per fallback index in this process: writers in one process never lose each
    other's entries; across processes the re-read after each write detects a lost entry."""
    with _INDEX_LOCKS_GUARD:
        return _INDEX_LOCKS.setdefault((registry, repository, tag), threading.Lock())


def _transient(exc: Exception) -> bool:
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


def _join_ref(repository: str, reference: str) -> str:
    sep = "@" if ":" in reference else ":"
    return f"{repository}{sep}{reference}"


_LINK_RE = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


def _next_link(header: str | None, current_url: str) -> str | None:
    if not header:
        return None
    m = _LINK_RE.search(header)
    return urljoin(current_url, m.group(1)) if m else None


def _file_size(f: IO[bytes]) -> int:
    pos = f.tell()
    f.seek(0, 2)
    n = f.tell()
    f.seek(pos)
    return n


def _spool() -> tempfile.SpooledTemporaryFile[bytes]:
    return tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
