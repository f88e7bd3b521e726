"""The ``docker`` and ``podman`` check runners: the engine's CLI on this host or at a remote ``host``.

``docker``: ``docker [-H HOST] run ...`` (``HOST``: ``ssh://user@gpu-01``, ``tcp://gpu-01:2376``;
https://docs.docker.com/engine/security/protection/). ``podman``: ``podman [--url HOST] run ...``
(https://docs.podman.io/en/latest/markdown/podman.1.html#url-value). Without a ``host`` and for
``docker``, the engine is the one ``builder.engine`` uses (``$BUILDER_DOCKER``, ``DOCKER_HOST``).

The node is the engine's own name (``docker info`` ``Name``); there is no scheduler, so no job id.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING

from builder.checks.runners import Placement

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from typing_extensions import Unpack

    from builder.checks.host.model import HostInfo
    from builder.compat.fleet_model import RunnerSettings
    from builder.engine import ContainerOptions, ContainerResult


def loopback(image: str) -> bool:
    """Whether ``image`` (``host[:port]/repository...``) is on this machine's loopback, which builder always
    speaks plain HTTP to (docs/registry.md); Podman needs ``--tls-verify=false`` for it, Docker does not
    (https://docs.docker.com/reference/cli/dockerd/#insecure-registries: loopback is insecure by default)."""
    from builder.hosts import is_loopback

    return "/" in image and is_loopback(image.split("/", 1)[0])


def client_argv(settings: RunnerSettings) -> list[str] | None:
    """The engine CLI's argv prefix for ``settings`` (None: this host's default engine)."""
    if settings.kind == "podman":
        return ["podman", "--url", settings.host] if settings.host else ["podman"]
    return ["docker", "-H", settings.host] if settings.host else None


@dataclasses.dataclass
class EngineSession:
    """A check on one engine (see the module docstring); ``node`` is filled by :meth:`host`."""

    cluster: str | None
    settings: RunnerSettings
    node: str | None = None

    def run_container(self, image: str, argv: Sequence[str], **options: Unpack[ContainerOptions]) -> ContainerResult:
        """:func:`builder.engine.run_container` with this runner's client."""
        from builder.engine import run_container

        return run_container(
            image,
            argv,
            client=client_argv(self.settings),
            options=["--tls-verify=false"] if self.settings.kind == "podman" and loopback(image) else [],
            **options,
        )

    def host(self) -> HostInfo:
        """This host probed live (GPUs, driver, toolkit) with the engine's ``info``; a remote engine is known
        through its ``info`` only (its GPUs are what the check's ``nvidia-smi`` step prints). The node is the
        engine's host name (``docker info`` ``Name``, ``podman info`` ``host.hostname``). Raises
        EngineUnavailableError / EngineCommandError when the engine does not answer."""
        from builder import engine
        from builder.checks.host.probing import probe_host

        client = client_argv(self.settings)
        data = engine.info_json(client)
        if self.settings.kind == "podman":
            podman_host = data.get("host")
            name = podman_host.get("hostname") if isinstance(podman_host, dict) else None
            info = probe_host(engine_info=None) if not self.settings.host else _nothing_known()
        else:
            name = data.get("Name")
            info = probe_host(engine_info=data) if not self.settings.host else _engine_only(data)
        self.node = name if isinstance(name, str) else None
        return info

    def placement(self) -> Placement:
        return Placement(self.cluster, self.settings.kind, self.node, None)

    def node_tools(self) -> Callable[[Sequence[str]], tuple[int, str]] | None:
        """None for a local engine (its node is this host: the tools run as for a local check); a remote
        engine's host is reached through its engine only, so every tool there is not run (:func:`_remote`)."""
        return None if not self.settings.host else _remote

    def cpu_model(self) -> str | None:
        """This host's CPU model for a local engine; None for a remote one (its ``info`` names no CPU model)."""
        if self.settings.host:
            return None
        from builder.checks.host.cpu import cpu_model

        return cpu_model()


def _remote(argv: Sequence[str]) -> tuple[int, str]:
    """A tool on a remote engine's host: builder reaches only the engine there, not a shell (exit 127, the
    shell's "not found", with the reason as its output)."""
    return 127, f"{argv[0]}: not run: builder reaches a remote engine's host through the engine only"


def _nothing_known() -> HostInfo:
    """A remote host whose engine's ``info`` builder does not read (Podman's): no facts."""
    from builder.checks.host.accumulator import Accumulator
    from builder.checks.host.assemble import assemble

    return assemble(Accumulator())


def _engine_only(data: dict[str, object]) -> HostInfo:
    """A remote host known only through its engine's ``info`` JSON."""
    import json

    from builder.checks.host.reading import parse_text

    return parse_text(json.dumps(data), source="remote engine info")


@contextlib.contextmanager
def engine_session(cluster: str | None, settings: RunnerSettings) -> Iterator[EngineSession]:
    """A session on the engine ``settings`` names; nothing to release afterwards. An engine at a
    ``host`` the fleet file names that does not answer is EngineUnavailableError (3) whose hint names
    the cluster and that ``host:`` (not this machine's daemon or ``DOCKER_HOST``, which the check did
    not use)."""
    from builder.errors import EngineUnavailableError

    try:
        yield EngineSession(cluster, settings)
    except EngineUnavailableError as exc:
        if not settings.host:
            raise
        raise EngineUnavailableError(
            exc.message,
            hint=f"cluster {cluster}'s runner is the {settings.kind} engine at {settings.host} (its fleet file's "
            "`runner: host:`): start that engine, or fix the address in the fleet file",
            **exc.details,
        ) from exc


__all__ = ["EngineSession", "client_argv", "engine_session", "loopback"]
