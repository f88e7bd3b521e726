"""A failed push is the registry's error, not the engine's: ``builder.engine.registry_failure``
and ``engine_error`` on BuildKit output captured from real ``docker buildx build --push`` runs
(Docker 28, BuildKit in the daemon) against a stopped registry, a 5xx, a manifest PUT that kept
failing, and a daemon that is not running."""

from __future__ import annotations

import pytest

from builder.engine import engine_error, registry_failure
from builder.errors import (
    EngineCommandError,
    EngineUnavailableError,
    RegistryAuthError,
    RegistryError,
    RegistryUnavailableError,
)

CMD = ["docker", "buildx", "build"]

STOPPED = """\
#5 pushing layers done
#5 ERROR: failed to push 127.0.0.1:39975/test/b:t: failed to do request: Head "http://127.0.0.1:39975/v2/test/b/blobs/sha256:4e4a": dial tcp 127.0.0.1:39975: connect: connection refused
------
 > exporting to image:
------
ERROR: failed to solve: failed to push 127.0.0.1:39975/test/b:t: failed to do request: Head "http://127.0.0.1:39975/v2/test/b/blobs/sha256:4e4a": dial tcp 127.0.0.1:39975: connect: connection refused
"""  # noqa: E501 - captured output
STATUS_500 = """\
7.074 error: unexpected status from HEAD request to http://127.0.0.2:5000/v2/test/b/blobs/sha256:08d8: 500 Internal Server Error
ERROR: failed to solve: failed to push 127.0.0.2:5000/test/b:t: unexpected status from HEAD request to http://127.0.0.2:5000/v2/test/b/blobs/sha256:08d8: 500 Internal Server Error
"""  # noqa: E501 - captured output
MANIFEST_503 = (
    'ERROR: failed to solve: failed to push 127.0.0.1:37269/test/m:pending-tiny-m: failed commit on ref "manifest-'
    'sha256:be00": unexpected status from PUT request to http://127.0.0.1:37269/v2/test/m/manifests/pending-tiny-m: '
    "503 Service Unavailable\n"
)
DENIED = (
    "ERROR: failed to solve: failed to push reg.example:5000/test/b:t: failed to authorize: "
    "failed to fetch oauth token: unexpected status from GET request to https://auth.example/token: 401 Unauthorized\n"
)
NO_DAEMON = "ERROR: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n"
BUILD_FAILED = 'ERROR: failed to solve: process "/bin/sh -c exit 3" did not complete successfully: exit code: 3\n'


def test_a_stopped_registry_is_not_a_missing_daemon() -> None:
    err = registry_failure(CMD, STOPPED)
    assert isinstance(err, RegistryUnavailableError) and err.exit_code == 5
    assert err.details["registry"] == "127.0.0.1:39975" and err.details["transient"] is True
    assert "Docker daemon is not reachable" not in err.message
    assert isinstance(engine_error(CMD, 1, "", STOPPED), EngineCommandError)  # never EngineUnavailableError


@pytest.mark.parametrize(
    ("output", "status", "registry"), [(STATUS_500, 500, "127.0.0.2:5000"), (MANIFEST_503, 503, "127.0.0.1:37269")]
)
def test_a_5xx_during_the_push_is_a_transient_registry_error(output: str, status: int, registry: str) -> None:
    err = registry_failure(CMD, output)
    assert type(err) is RegistryError and err.exit_code == 7
    assert err.details["status"] == status and err.details["transient"] is True and err.details["registry"] == registry
    assert f"HTTP {status}" in err.message


def test_a_refused_push_is_an_auth_error_and_not_retried() -> None:
    err = registry_failure(CMD, DENIED)
    assert isinstance(err, RegistryAuthError) and err.exit_code == 6 and not err.details.get("transient")


#: `docker run` (Docker CLI 28.2.2) with DOCKER_HOST at a socket nothing listens on, as recorded on this machine
RUN_NO_DAEMON = (
    "docker: Cannot connect to the Docker daemon at unix:///nonexistent.sock. Is the docker daemon running?\n\n"
    "Run 'docker run --help' for more information\n"
)


def test_engine_failures_stay_the_engines() -> None:
    assert registry_failure(CMD, NO_DAEMON) is None
    assert isinstance(engine_error(CMD, 1, "", NO_DAEMON), EngineUnavailableError)
    err = engine_error(["docker", "run"], 125, "", RUN_NO_DAEMON)  # the reason, not the CLI's pointer to --help
    assert isinstance(err, EngineUnavailableError) and err.exit_code == 3
    assert err.message == (
        "the Docker daemon is not reachable: Cannot connect to the Docker daemon at unix:///nonexistent.sock. "
        "Is the docker daemon running?"
    )
    assert registry_failure(CMD, BUILD_FAILED) is None
    assert isinstance(engine_error(CMD, 1, "", BUILD_FAILED), EngineCommandError)
