"""The only module that talks to the container engine (Docker Engine via python-on-whales).

Every engine call goes through :func:`call`, which turns python-on-whales' ``DockerException``
into ``EngineUnavailableError`` (daemon not reachable: exit 3) or ``EngineCommandError``
(command ran and failed: exit 4), carrying the command, exit code, stdout and stderr.
python-on-whales drives the ``docker`` CLI, so ``DOCKER_HOST``/contexts/remote engines work as
they do for docker itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from builder.errors import EngineCommandError, EngineUnavailableError

if TYPE_CHECKING:
    from python_on_whales import DockerClient

T = TypeVar("T")

#: stderr fragments that mean "no daemon at the other end" (Docker CLI 20.10 .. 28).
_UNREACHABLE = (
    "cannot connect to the docker daemon",
    "error during connect",
    "is the docker daemon running",
    "connection refused",
    "no such file or directory",  # unix socket missing
)


@functools.cache
def client() -> DockerClient:
    """The shared python-on-whales client (the ``docker`` CLI on PATH, current context)."""
    from python_on_whales import DockerClient

    return DockerClient()


def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run one engine operation; map failures to builder errors. Returns ``fn``'s result."""
    from python_on_whales.exceptions import DockerException

    try:
        return fn(*args, **kwargs)
    except DockerException as exc:
        raise engine_error(list(exc.docker_command), exc.return_code, exc.stdout or "", exc.stderr or "") from exc
    except FileNotFoundError as exc:  # no docker CLI at all
        raise EngineUnavailableError(
            "the `docker` command-line client is not installed",
            hint="run `bash scripts/setup`, or install the Docker CLI",
        ) from exc


def engine_error(
    command: list[str], code: int, stdout: str, stderr: str
) -> EngineCommandError | EngineUnavailableError:
    """Classify a failed engine command."""
    low = stderr.lower()
    if any(s in low for s in _UNREACHABLE) and ("daemon" in low or "docker.sock" in low or "connect" in low):
        return EngineUnavailableError(
            f"the Docker daemon is not reachable: {stderr.strip().splitlines()[-1] if stderr.strip() else 'no answer'}",
            command=command,
            exit_status=code,
        )
    tail = "\n".join(stderr.strip().splitlines()[-15:])
    return EngineCommandError(
        f"`{' '.join(command)}` failed with exit code {code}:\n{tail}",
        command=command,
        exit_status=code,
        stdout=stdout,
        stderr=stderr,
    )


def ping() -> str:
    """Server version string; raises EngineUnavailableError when the daemon does not answer."""
    v = call(client().version)
    server = v.server
    if server is None:
        raise EngineUnavailableError("the Docker daemon did not answer `docker version`")
    return f"Docker Engine {server.version} (API {server.api_version})"


def buildx_version() -> str:
    """``docker buildx version`` first line; EngineCommandError when buildx is missing."""
    out: Any = call(client().buildx.version)
    if isinstance(out, dict):
        return f"buildx {out.get('version', '?')}"
    return str(out).strip()
