"""The only module that talks to the container engine: the ``docker`` command-line client.

Every engine command runs through :mod:`builder.process` (echoed under ``builder --debug``) and
fails one way: ``EngineUnavailableError`` when no daemon answers (exit 3) or
``EngineCommandError`` when the command ran and failed (exit 4), carrying the command, exit code,
stdout and stderr. Driving the ``docker`` CLI means ``DOCKER_HOST``,
contexts and remote engines work as they do for docker itself.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict, Unpack

from builder import process
from builder.errors import (
    BuilderError,
    ConfigError,
    EngineCommandError,
    EngineUnavailableError,
    RegistryAuthError,
    RegistryError,
    RegistryUnavailableError,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

#: stderr fragments that mean "no daemon at the other end" (Docker CLI 20.10 .. 28).
_UNREACHABLE = (
    "cannot connect to the docker daemon",
    "error during connect",
    "is the docker daemon running",
    "connection refused",
    "no such file or directory",  # unix socket missing
)

#: BuildKit/containerd lines of a failed registry request during a push or a cache export
#: ("failed to push REF: failed to do request: Head \"http://HOST/v2/...\": dial tcp ...",
#: "unexpected status from PUT request to http://HOST/v2/...: 500 Internal Server Error").
_REGISTRY_LINE = re.compile(
    r"(failed to push|unexpected status from|failed to do request|failed to authorize|"
    r"failed to fetch (?:anonymous|oauth) token|error writing (?:layer|manifest) blob|failed commit on ref)",
    re.IGNORECASE,
)
_REGISTRY_HOST = re.compile(r"https?://([^/\s\"]+)/v2/|failed to push ([^/\s]+)/")
_HTTP_STATUS = re.compile(r"\b([1-5]\d\d) [A-Z][A-Za-z ]+$|status(?: code)?:? ([1-5]\d\d)\b")
#: connection-level failures of a registry request (retried; exit 5 when they persist)
_REGISTRY_DOWN = ("connection refused", "connection reset", "broken pipe", "i/o timeout", ": eof", "no route to host")
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})

#: the docker CLI's closing pointer to its help after an error ("Run 'docker run --help' for more
#: information"; "See 'docker run --help'." before Docker 23): never the reason
_CLI_HELP = re.compile(r"^(?:Run|See) '[^']+ --help'(?: for more information)?\.?$")

_NO_CLI = "the `docker` command-line client is not installed"
_NO_CLI_HINT = "run `bash scripts/setup`, or install the Docker CLI"


def docker_command() -> list[str]:
    """The docker client's argv prefix: ``$BUILDER_DOCKER`` split on spaces (``podman``,
    ``docker --context remote``) or ``docker``."""
    return (os.environ.get("BUILDER_DOCKER") or "docker").split()


def docker(*args: str, timeout: float = 60.0, input: str | None = None, client: Sequence[str] | None = None) -> str:
    """Run ``docker ARGS...`` (``client``: another CLI prefix, e.g. ``docker -H ssh://gpu-01``); return its
    stdout (text). Raises EngineUnavailableError (no CLI, no daemon, or no answer within ``timeout``
    seconds) or EngineCommandError (non-zero exit)."""
    cmd = [*(client or docker_command()), *args]
    try:
        proc = process.run(cmd, input=input, timeout=timeout)
    except FileNotFoundError as exc:
        raise EngineUnavailableError(_NO_CLI, hint=_NO_CLI_HINT) from exc
    except subprocess.TimeoutExpired as exc:
        raise EngineUnavailableError(f"`{' '.join(cmd)}` did not answer within {timeout:.0f} s", command=cmd) from exc
    if proc.returncode != 0:
        raise engine_error(cmd, proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout


def registry_failure(command: list[str], output: str) -> BuilderError | None:
    """The registry error in a failed push's output (BuildKit talks to the registry itself), or
    None when the output names no registry request. ``RegistryUnavailableError`` (exit 5) for a
    refused/reset/dropped connection, ``RegistryAuthError`` (6) for 401/403, ``RegistryError``
    (7) for another HTTP status. ``details['transient']`` is True for 429/5xx and dropped
    connections (worth pushing again), ``details['status']`` the HTTP status when one was given.
    Message formats: containerd's remotes/docker pusher and fetcher
    (https://github.com/containerd/containerd/blob/main/core/remotes/docker/pusher.go)."""
    lines = [ln.strip() for ln in output.splitlines() if _REGISTRY_LINE.search(ln)]
    if not lines:
        return None
    line = next((ln for ln in reversed(lines) if ln.startswith("ERROR")), lines[-1])
    host_match = _REGISTRY_HOST.search(line)
    registry = next((g for g in host_match.groups() if g), "") if host_match else ""
    status_match = _HTTP_STATUS.search(line)
    status = int(next(g for g in status_match.groups() if g)) if status_match else None
    where = f"registry {registry}" if registry else "the registry"
    text = line.removeprefix("ERROR: ")
    if status in (401, 403):
        return RegistryAuthError(
            f"{where} refused the push: {text}",
            hint="run docker login for the registry (BuildKit pushes with the Docker CLI's credentials)",
            registry=registry,
            status=status,
            command=command,
        )
    if status is not None:
        return RegistryError(
            f"{where} answered HTTP {status} during the push: {text}",
            registry=registry,
            status=status,
            transient=status in TRANSIENT_STATUSES,
            command=command,
        )
    low = line.lower()
    if any(s in low for s in _REGISTRY_DOWN):
        return RegistryUnavailableError(
            f"{where} is not reachable during the push (the Docker daemon is): {text}",
            hint="check that the registry is running and reachable from the Docker daemon",
            registry=registry,
            transient=True,
            command=command,
        )
    return RegistryError(f"{where} failed the push: {text}", registry=registry, transient=False, command=command)


def engine_error(
    command: list[str], code: int, stdout: str, stderr: str
) -> EngineCommandError | EngineUnavailableError:
    """Classify a failed engine command: EngineUnavailableError when the daemon did not answer
    (its socket: "Cannot connect to the Docker daemon", "error during connect"), not when a
    registry the daemon talked to did (see :func:`registry_failure`); EngineCommandError otherwise."""
    low = stderr.lower()
    if (
        _REGISTRY_LINE.search(stderr) is None
        and any(s in low for s in _UNREACHABLE)
        and ("daemon" in low or "docker.sock" in low or "connect" in low)
    ):
        said = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not _CLI_HELP.match(ln.strip())]
        # the line that says why (`docker run` prints it as "docker: Cannot connect to the Docker daemon at ...")
        why = next((ln for ln in reversed(said) if any(s in ln.lower() for s in _UNREACHABLE)), None)
        reason = (why or (said[-1] if said else "no answer")).removeprefix("docker: ")
        message = f"the Docker daemon is not reachable: {reason}"
        return EngineUnavailableError(message, command=command, exit_status=code)
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
    out = docker("version", "--format", "{{json .Server}}")
    try:
        server = json.loads(out or "null")
    except ValueError:
        server = None
    if not isinstance(server, dict):
        raise EngineUnavailableError("the Docker daemon did not answer `docker version`")
    return f"Docker Engine {server.get('Version', '?')} (API {server.get('ApiVersion', '?')})"


def _buildx_inspect(name: str | None) -> tuple[int, str, list[str]]:
    """``docker buildx inspect [NAME]``: exit code, output (stdout, else stderr), the command."""
    cmd = [*docker_command(), "buildx", "inspect", *([name] if name else [])]
    try:
        proc = process.run(cmd, timeout=60)
    except FileNotFoundError as exc:
        raise EngineUnavailableError(_NO_CLI, hint=_NO_CLI_HINT) from exc
    except subprocess.TimeoutExpired as exc:
        raise EngineUnavailableError(f"`{' '.join(cmd)}` did not answer within 60 s", command=cmd) from exc
    return proc.returncode, (proc.stdout if proc.returncode == 0 else proc.stderr or proc.stdout), cmd


def _inspect_field(text: str, field: str) -> str | None:
    m = re.search(rf"^{field}:\s*(\S+)", text, re.MULTILINE)
    return m.group(1) if m else None


def buildx_builder(name: str) -> str:
    """The driver of the buildx builder ``name`` (``docker``, ``docker-container``, ``remote``,
    ``kubernetes``: https://docs.docker.com/build/builders/drivers/), read with ``docker buildx inspect
    NAME``. Raises ConfigError naming the builder when buildx has none by that name (``docker buildx ls``
    lists them), or when it is the ``docker`` driver of another Docker context (buildx builds with such a
    builder only from its own context: ``use `docker --context=NAME buildx` to switch``);
    EngineUnavailableError when the engine does not answer."""
    hint = (
        "`docker buildx ls` lists the builders; a builder every context can use is made with e.g. "
        "`docker buildx create --name NAME --driver remote tcp://buildkitd:1234` (or --driver kubernetes, "
        "docker-container; docs/build.md)"
    )
    code, out, _ = _buildx_inspect(name)
    if code != 0:
        said = out.strip().removeprefix("ERROR: ")
        raise ConfigError(f"--builder {name}: buildx has no such builder ({said})", hint=hint, builder=name)
    driver = _inspect_field(out, "Driver") or "unknown"
    if driver == "docker":
        code, current, _ = _buildx_inspect(None)
        here = _inspect_field(current, "Name") if code == 0 else None
        if here is not None and here != name:
            raise ConfigError(
                f"--builder {name}: it is the `docker` driver of Docker context {name}, which buildx uses only "
                f"from that context (the current builder is {here})",
                hint=f"run with DOCKER_CONTEXT={name}, or name a builder of another driver; " + hint,
                builder=name,
            )
    return driver


def buildx_version() -> str:
    """``docker buildx version`` first line; EngineCommandError when buildx is missing."""
    lines = docker("buildx", "version").strip().splitlines()
    return lines[0] if lines else "buildx (unknown version)"


# --------------------------------------------------------------------------------------------
# Builds. BuildKit through `docker buildx build` (the command line `build_command` shows).
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BuildRequest:
    """One ``docker buildx build`` that pushes to ``push_ref`` (``registry/repo:tag``).

    ``secrets``: ``(id, source path)`` pairs passed as BuildKit secrets (never build args);
    ``cache_ref``: registry cache reference (``--cache-from``/``--cache-to type=registry``), or
    None; ``builder``: a buildx builder name (remote, kubernetes, ...), None = current one;
    ``provenance``: buildx's own provenance attestation (None = buildx default); ``annotations``:
    ``(key, value)`` pairs written on the image manifest and, when buildx writes an index (several
    platforms, or its provenance attestation), on the index too (``--annotation index:KEY=VALUE
    --annotation manifest:KEY=VALUE``, buildx >= 0.12:
    https://docs.docker.com/build/metadata/annotations/#add-annotations; one flag per level, as
    buildx 0.13 with the ``docker`` driver writes the combined ``index,manifest:`` prefix into the
    manifest's key). A single-platform image without provenance has no index, and BuildKit refuses
    index annotations there."""

    context_dir: Path
    dockerfile: Path
    push_ref: str
    build_args: tuple[tuple[str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    secrets: tuple[tuple[str, Path], ...] = ()
    platforms: tuple[str, ...] = ()
    builder: str | None = None
    cache_ref: str | None = None
    provenance: bool | None = None
    no_cache: bool = False
    annotations: tuple[tuple[str, str], ...] = ()

    @property
    def writes_index(self) -> bool:
        """Whether buildx pushes an image index: several platforms, or its provenance
        attestation manifest next to the image (buildx's default)."""
        return len(self.platforms) > 1 or self.provenance is not False


@dataclasses.dataclass(frozen=True)
class BuildResult:
    """``digest``: what BuildKit pushed (``containerimage.digest``: an index digest when buildx
    wrote an index); ``metadata``: buildx's metadata file as JSON."""

    digest: str
    metadata: dict[str, Any]


def build_command(req: BuildRequest) -> list[str]:
    """The equivalent ``docker buildx build`` command line (for echoing and logs)."""
    cmd = [*docker_command(), "buildx", "build", "--progress", "plain", "--file", str(req.dockerfile)]
    if req.builder:
        cmd += ["--builder", req.builder]
    for k, v in req.build_args:
        cmd += ["--build-arg", f"{k}={v}"]
    for k, v in req.labels:
        cmd += ["--label", f"{k}={v}"]
    levels = ("index", "manifest") if req.writes_index else ("manifest",)
    for k, v in req.annotations:  # one flag per level: buildx 0.13's docker driver keeps "index,manifest:" in the key
        cmd += [arg for level in levels for arg in ("--annotation", f"{level}:{k}={v}")]
    for sid, src in req.secrets:
        cmd += ["--secret", f"id={sid},src={src}"]
    if req.platforms:
        cmd += ["--platform", ",".join(req.platforms)]
    if req.cache_ref:
        cmd += ["--cache-from", f"type=registry,ref={req.cache_ref}"]
        cmd += ["--cache-to", f"type=registry,ref={req.cache_ref},mode=max"]
    if req.provenance is not None:
        cmd.append(f"--provenance={str(req.provenance).lower()}")
    if req.no_cache:
        cmd.append("--no-cache")
    cmd += ["--output", f"type=image,name={req.push_ref},push=true", str(req.context_dir)]
    return cmd


_STALE_CACHE = re.compile(
    r"snapshot \S+ (?:does not exist|not found)"  # containerd's snapshotter: "snapshot KEY does not exist: not found"
    r"|invalid mutable ref"  # BuildKit's cache manager committing a ref whose storage is gone
    r"|/overlay2/\S+: no such file or directory"  # the docker driver's overlay2 directory of that ref
)


#: BuildKit's own error lines (``#6 ERROR: ...``, ``ERROR: failed to solve: ...``; older clients: ``failed to
#: solve: rpc error: ...``), not what a ``RUN`` step printed
_BUILDKIT_ERROR = re.compile(r"^(?:#\d+ ERROR: |ERROR: |error: )|failed to solve: ")


def stale_build_cache(output: str) -> bool:
    """Whether a failed build's ``output`` says BuildKit's cache names storage that is gone: a build
    killed or cancelled while exporting, or a prune racing a build, leaves a cache record whose snapshot
    was removed, and every build that reuses the record fails the same way ("failed to commit ... during
    finalize: ... snapshot KEY does not exist: not found"; "invalid mutable ref ... no such file or
    directory") until the step is built without the cache (``--no-cache``) or the cache is pruned.
    Sources: https://github.com/moby/buildkit/issues/1956 (persists until ``--no-cache``),
    https://github.com/docker/buildx/issues/1038 (snapshot not found, cured by ``docker buildx prune``)."""
    return any(_STALE_CACHE.search(line) for line in output.splitlines() if _BUILDKIT_ERROR.search(line))


def build_and_push(req: BuildRequest, *, log: Callable[[str], None], metadata_file: Path) -> BuildResult:
    """Run the build, streaming every log line to ``log``; push to ``req.push_ref``.

    Returns the pushed digest from buildx's metadata file. Raises EngineUnavailableError (no
    daemon: exit 3), EngineCommandError (the build failed: exit 4, output tail in the message),
    or, when the build ran and its push (or cache export) failed, the registry's error from
    :func:`registry_failure` (exit 5/6/7; ``details['transient']`` tells a retryable one). An
    EngineCommandError's ``details['stale_cache']`` tells a build that failed on BuildKit's own stale
    cache (:func:`stale_build_cache`), which a build without the cache cures."""
    cmd = build_command(req)
    cmd[-1:-1] = ["--metadata-file", str(metadata_file)]
    try:
        code, tail = process.stream(cmd, on_line=log)
    except FileNotFoundError as exc:
        raise EngineUnavailableError(_NO_CLI, hint=_NO_CLI_HINT) from exc
    if code != 0:
        output = "\n".join(tail)
        registry = registry_failure(cmd, output)
        if registry is not None:  # the build ran; its push failed: the registry's error, not the engine's
            raise registry
        err = engine_error(cmd, code, "", output)
        if isinstance(err, EngineUnavailableError):
            raise err
        raise EngineCommandError(
            f"docker buildx build for {req.push_ref} failed (exit {code}):\n" + "\n".join(tail[-12:]),
            command=cmd,
            exit_status=code,
            stderr=output,
            hint="the build log has the full output",
            stale_cache=stale_build_cache(output),
        )
    try:
        metadata = json.loads(metadata_file.read_text())
        digest = str(metadata["containerimage.digest"])
    except (OSError, ValueError, KeyError) as exc:
        raise EngineCommandError(
            f"buildx finished but wrote no image digest to {metadata_file}: {exc}",
            command=cmd,
            hint="upgrade buildx (>= 0.10 writes containerimage.digest)",
        ) from exc
    return BuildResult(digest=digest, metadata=metadata)


# --------------------------------------------------------------------------------------------
# Check containers (owned by helper F / builder.checks): one fresh container per check, the probe
# program sent on standard input (no bind mount, so a remote DOCKER_HOST works), a timeout.
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ContainerResult:
    """What a check container did: ``exit_code`` (125/126/127 are the engine's own failures:
    the container did not start or the command was not found; 124 = builder's timeout),
    ``stdout``/``stderr`` (text), ``seconds`` (wall time), ``command`` (the docker argv)."""

    exit_code: int
    stdout: str
    stderr: str
    seconds: float
    command: tuple[str, ...]
    timed_out: bool = False


class ContainerOptions(TypedDict, total=False):
    """How one check container runs, every key optional (the keyword arguments of :func:`run_container`
    and of a check runner's ``run_container``, ``builder.checks.runners.RunnerSession``): ``stdin``
    (bytes sent; None: none), ``gpus`` (``--gpus``), ``devices`` (``--device``), ``group_add``,
    ``shm_size``, ``env`` (variables set in the container), ``user``, ``entrypoint`` (``""`` clears the
    image's), ``timeout`` (seconds; :data:`DEFAULT_TIMEOUT` when absent)."""

    stdin: bytes | None
    gpus: str | None
    devices: Sequence[str]
    group_add: Sequence[str]
    shm_size: str | None
    env: Mapping[str, str] | None
    user: str | None
    entrypoint: str | None
    timeout: float


#: seconds a check container may run when its options name no timeout
DEFAULT_TIMEOUT = 300.0


def container_name() -> str:
    """A fresh name for a check container: ``builder-check-<12 hex>``."""
    return f"builder-check-{uuid.uuid4().hex[:12]}"


def run_argv(
    name: str,
    image: str,
    argv: Sequence[str],
    *,
    client: Sequence[str] = ("docker",),
    pull: str = "missing",
    options: Sequence[str] = (),
    **container: Unpack[ContainerOptions],
) -> list[str]:
    """The argv of ``CLIENT run --rm --name NAME --pull=PULL [-i] [--gpus G] [--device D]... IMAGE ARGV...``
    (pure): what :func:`run_container` runs here, and what a check runner starts on a cluster node
    (``client``: ``docker``, ``podman``; https://docs.docker.com/reference/cli/docker/container/run/;
    ``options``: more ``run`` options, e.g. Podman's ``--tls-verify=false``; ``container``: the
    :class:`ContainerOptions`, ``-i`` when it sends ``stdin``, its ``timeout`` is the caller's)."""
    cmd = [*client, "run", "--rm", "--name", name, f"--pull={pull}", *options]
    if container.get("stdin") is not None:
        cmd.append("-i")
    if gpus := container.get("gpus"):
        cmd += ["--gpus", gpus]
    for d in container.get("devices", ()):
        cmd += ["--device", d]
    for g in container.get("group_add", ()):
        cmd += ["--group-add", str(g)]
    if shm_size := container.get("shm_size"):
        cmd += ["--shm-size", shm_size]
    for k, v in (container.get("env") or {}).items():
        cmd += ["-e", f"{k}={v}"]
    if user := container.get("user"):
        cmd += ["--user", user]
    if (entrypoint := container.get("entrypoint")) is not None:
        cmd += ["--entrypoint", entrypoint]
    return [*cmd, image, *argv]


def run_container(
    image: str,
    argv: Sequence[str],
    *,
    pull: str = "missing",
    client: Sequence[str] | None = None,
    options: Sequence[str] = (),
    **container: Unpack[ContainerOptions],
) -> ContainerResult:
    """``docker run --rm -i [--gpus G] [--device D]... IMAGE ARGV...`` in a fresh, named container.

    ``container``: :class:`ContainerOptions` (``timeout`` default :data:`DEFAULT_TIMEOUT` s).
    ``client``: the engine CLI's argv prefix (``docker -H ssh://gpu-01``, ``podman``; default
    :func:`docker_command`); ``options``: more ``run`` options (:func:`run_argv`).

    ``devices`` are passed to ``--device`` (``/dev/kfd``, or CDI names ``nvidia.com/gpu=all``).
    On timeout the container is removed (``docker rm -f``) and ``exit_code`` is 124; when the
    run is interrupted (``process.Interrupted``) it is removed too before the exception goes on.
    A container that fails is a *result*, not an exception; EngineUnavailableError is raised only
    when the daemon cannot be reached at all."""
    name = container_name()
    prefix = list(client) if client else docker_command()
    stdin, timeout = container.get("stdin"), container.get("timeout", DEFAULT_TIMEOUT)
    cmd = run_argv(name, image, argv, client=prefix, pull=pull, options=options, **container)
    start = time.monotonic()
    try:
        proc = process.run(cmd, input=stdin, text=False, timeout=timeout)
    except FileNotFoundError as exc:
        raise EngineUnavailableError(_NO_CLI, hint=_NO_CLI_HINT) from exc
    except subprocess.TimeoutExpired as exc:
        process.cleanup([*prefix, "rm", "-f", name])
        out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else ""
        err = exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else ""
        return ContainerResult(124, out, err + f"\nbuilder: timed out after {timeout:.0f} s", timeout, tuple(cmd), True)
    except process.Interrupted:
        # the docker client is gone, the container may not be (its PID 1 can ignore SIGTERM)
        process.cleanup([*prefix, "rm", "-f", name])
        raise
    seconds = time.monotonic() - start
    stdout = proc.stdout.decode("utf-8", "replace")
    stderr = proc.stderr.decode("utf-8", "replace")
    if proc.returncode != 0 and any(s in stderr.lower() for s in _UNREACHABLE[:3]):
        raise engine_error(cmd, proc.returncode, stdout, stderr)
    return ContainerResult(proc.returncode, stdout, stderr, round(seconds, 3), tuple(cmd))


def info_json(client: Sequence[str] | None = None) -> dict[str, Any]:
    """``docker info --format '{{json .}}'`` as a dict (ServerVersion, Runtimes, DefaultRuntime,
    CgroupDriver, CDISpecDirs ...; ``client``: see :func:`docker`). Raises EngineUnavailableError /
    EngineCommandError."""
    out = docker("info", "--format", "{{json .}}", client=client)
    try:
        data = json.loads(out or "{}")
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise EngineCommandError("`docker info` did not print a JSON object", command=[*docker_command(), "info"])
    return data
