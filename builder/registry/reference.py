"""Image references: ``[registry/]repository[:tag][@digest]``, tag and digest syntax, the
referrers fallback tag and sha256 digests.

Sources: the Docker CLI's reference grammar
(https://github.com/distribution/reference/blob/main/reference.go: registry when the first
component has ``.`` or ``:`` or is ``localhost``; tags of at most 128 word characters, ``.``
and ``-``, not starting with ``.`` or ``-``), OCI
distribution-spec v1.1 (the referrers fallback tag ``<alg>-<ref>``,
https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#referrers-tag-schema).
Docker Hub (https://docs.docker.com/docker-hub/image-library/mirror/ and the Docker CLI's
``reference.ParseNormalizedNamed``): a name without a registry is on ``docker.io``, an official
image's repository gets ``library/``; ``index.docker.io`` and ``registry-1.docker.io`` are other
names of ``docker.io``, whose registry API is served at ``registry-1.docker.io`` with tokens from
``auth.docker.io`` (https://distribution.github.io/distribution/spec/auth/token/).
Errors: ``ConfigError`` (exit 2) naming the reference.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re

from builder.config import registry_problem, repository_problem
from builder.errors import ConfigError

_DIGEST_RE = re.compile(r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$")
_SHA256_RE = re.compile(r"^sha256:[a-f0-9]{64}$")
_TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


#: Docker Hub's canonical registry name (what references and identities use).
DOCKER_HUB = "docker.io"
#: Where Docker Hub's registry API answers (``https://registry-1.docker.io/v2/``).
DOCKER_HUB_ENDPOINT = "registry-1.docker.io"
#: Other names of Docker Hub, normalised to :data:`DOCKER_HUB`.
DOCKER_HUB_ALIASES = frozenset({"index.docker.io", "registry-1.docker.io"})


def canonical_registry(host: str) -> str:
    """One spelling per registry, for identities and comparisons: lower case; Docker Hub's
    aliases -> ``docker.io``; ``localhost[:port]`` -> ``127.0.0.1[:port]`` (both name this
    machine's loopback registry). ``127.0.0.1:5000`` and ``localhost:5000`` compare equal."""
    h = host.strip().lower()
    if h in DOCKER_HUB_ALIASES:
        return DOCKER_HUB
    if h == "localhost" or h.startswith("localhost:"):
        return "127.0.0.1" + h[len("localhost") :]
    return h


def canonical_reference(reference: str) -> str:
    """``reference`` with its registry in :func:`canonical_registry` spelling (the rest as is), for
    comparing identities written by different spellings of one registry. Text without a registry
    part is returned unchanged."""
    first, sep, rest = reference.partition("/")
    if not sep:
        return reference
    return f"{canonical_registry(first)}/{rest}"


def qualify(reference: str) -> str:
    """A base-image name as the Docker CLI reads it, fully qualified: ``ubuntu:24.04`` ->
    ``docker.io/library/ubuntu:24.04``, ``nvidia/cuda:12.8.1-...`` -> ``docker.io/nvidia/cuda:...``,
    ``index.docker.io/ubuntu`` -> ``docker.io/library/ubuntu``; a name with a registry part (it has
    ``.`` or ``:`` or is ``localhost``) keeps it
    (https://docs.docker.com/reference/cli/docker/image/tag/#description)."""
    first, _, rest = reference.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        if canonical_registry(first) != DOCKER_HUB:
            return reference
        return qualify(rest)
    if not rest:
        return f"{DOCKER_HUB}/library/{reference}"
    return f"{DOCKER_HUB}/{reference}"


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
        """A copy with ``digest`` (``sha256:<hex>``) set; the tag is kept."""
        return dataclasses.replace(self, digest=digest)

    def with_tag(self, tag: str | None) -> Reference:
        """A copy with ``tag`` (None: no tag); the digest is kept."""
        return dataclasses.replace(self, tag=tag)


def is_tag(text: str) -> bool:
    """Whether ``text`` is a whole OCI tag: ``[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`` (ASCII only;
    https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pulling-manifests)."""
    return _TAG_RE.fullmatch(text) is not None


def is_digest(text: str) -> bool:
    """Whether ``text`` is a whole OCI digest ``algorithm:encoded`` (a sha256 one with 64 lowercase
    hex: https://github.com/opencontainers/image-spec/blob/main/descriptor.md#digests)."""
    return _DIGEST_RE.fullmatch(text) is not None and (not text.startswith("sha256:") or is_sha256_digest(text))


def is_sha256_digest(text: str) -> bool:
    """Whether ``text`` is a whole ``sha256:<64 lowercase hex>`` digest (the OCI image spec's
    registered sha256 form: https://github.com/opencontainers/image-spec/blob/main/descriptor.md#digests)."""
    return _SHA256_RE.fullmatch(text) is not None


def parse_reference(ref: str, default_registry: str) -> Reference:
    """Parse ``[registry/]repository[:tag][@digest]``.

    The first path component is a registry when it contains ``.`` or ``:`` or is ``localhost``
    (the Docker CLI's rule); otherwise the name is relative and resolves against
    ``default_registry`` (the configured registry, not Docker Hub). Docker Hub's aliases become
    ``docker.io`` and ``docker.io/name`` becomes ``docker.io/library/name`` as Docker does.
    Raises ConfigError naming the reference.
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
        if not is_digest(digest):
            shape = "sha256:<64 hex digits>" if digest.startswith("sha256:") else "<algorithm>:<hex>"
            raise bad(f"digest {digest!r} is not {shape} (copy the whole digest, not a short form)")
    tag: str | None = None
    last = text.rsplit("/", 1)[-1]
    if ":" in last:
        text, tag = text.rsplit(":", 1)
        if not is_tag(tag):
            raise bad(f"tag {tag!r} is not valid (letters, digits, _ . -; at most 128; no leading . or -)")
    parts = text.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        registry = parts[0]
        why = registry_problem(registry)
        if why is not None:
            raise bad(f"registry {why}")
        repo_parts = parts[1:]
    else:
        registry = default_registry
        repo_parts = parts
    if canonical_registry(registry) == DOCKER_HUB:
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and len(repo_parts) == 1:
        repo_parts = ["library", *repo_parts]
    repository = "/".join(repo_parts)
    why = repository_problem(repository)  # the one grammar (builder.config)
    if why is not None:
        raise bad(f"repository {why}")
    return Reference(registry=registry, repository=repository, tag=tag, digest=digest)


def fallback_tag(digest: str) -> str:
    """The referrers fallback tag of a subject digest: ``sha256:<hex>`` -> ``sha256-<hex>``."""
    alg, _, hexpart = digest.partition(":")
    return f"{alg}-{hexpart}"


def sha256_digest(data: bytes) -> str:
    """``sha256:<64 lowercase hex>`` of ``data`` (an OCI content digest)."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def join_reference(repository: str, reference: str) -> str:
    """``repo:tag`` or ``repo@sha256:<hex>`` for messages (a reference with ``:`` is a digest)."""
    sep = "@" if ":" in reference else ":"
    return f"{repository}{sep}{reference}"
