"""The composition root: one ``App`` per invocation, built from ``builder.toml`` and the
environment, owning what every command shares.

- **Credentials, once.** Docker's own lookup: ``--docker-config`` (file or directory), else
  ``$DOCKER_CONFIG``, else ``~/.docker``; inside it ``config.json`` with ``auths``,
  ``credHelpers`` and ``credsStore`` (https://docs.docker.com/reference/cli/docker/#configuration-files).
  Every registry client any command makes carries them, so a password-protected registry works
  the same for ``sign`` and for ``promote`` (crane's root command and default keychain have the
  same shape: https://github.com/google/go-containerregistry/tree/main/cmd/crane).
- **Registry clients**: one per registry host, reused by every step of a command.

The command line builds the ``App`` (it alone reads ``os.environ`` and options) and hands its
parts to the core, which never builds credentials or clients itself.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from builder.config import Config

if TYPE_CHECKING:
    from builder.registry import DockerCredentials, RegistryClient


def docker_config_path(option: Path | None, environ: Mapping[str, str], home: Path) -> Path:
    """Where Docker's client configuration is: ``option``, else ``$DOCKER_CONFIG``, else
    ``<home>/.docker`` (a directory holding ``config.json``, or the file itself)."""
    if option is not None:
        return option
    if environ.get("DOCKER_CONFIG"):
        return Path(environ["DOCKER_CONFIG"])
    return home / ".docker"


@dataclasses.dataclass
class App:
    """What one invocation shares: ``config`` (``builder.toml`` + ``BUILDER_*``) and
    ``docker_config`` (resolved by :func:`docker_config_path`)."""

    config: Config
    docker_config: Path
    _clients: dict[str, RegistryClient] = dataclasses.field(default_factory=dict, repr=False)
    _guard: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    @functools.cached_property
    def credentials(self) -> DockerCredentials:
        """The Docker credentials (read once; RegistryAuthError when the file is unreadable)."""
        from builder.registry import DockerCredentials

        return DockerCredentials.from_file(self.docker_config)

    def client(self, registry: str) -> RegistryClient:
        """The client for ``registry`` (``host[:port]``) with this invocation's credentials;
        one per host, shared by threads."""
        from builder.registry import client_for

        with self._guard:
            if registry not in self._clients:
                self._clients[registry] = client_for(
                    registry, insecure=self.config.is_insecure, auth=self.credentials
                )
            return self._clients[registry]

    @property
    def default_client(self) -> RegistryClient:
        """The client of the configured registry (``builder.toml`` ``registry``)."""
        return self.client(self.config.registry)
