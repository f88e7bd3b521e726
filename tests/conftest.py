"""Shared fixtures.

Integration fixtures use the real Docker Engine and the real registry that ``scripts/setup``
starts (default 127.0.0.1:5000). When they are missing, tests skip on a developer machine but
FAIL under CI (``CI=true``): integration tests must run in CI, never silently skip.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


def unset_builder_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove the test environment's ``BUILDER_*`` settings, ``DOCKER_CONFIG`` and ``COSIGN_PASSWORD``
    (for this test): what a project's own builder.toml and keys say is what the command reads."""
    for name in list(os.environ):
        if name.startswith("BUILDER_") or name in ("DOCKER_CONFIG", "COSIGN_PASSWORD"):
            monkeypatch.delenv(name)


_LOCK_HOLDER = """
import sys
from filelock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire(timeout=0)
print("held", flush=True)
sys.stdin.readline()  # until the test says so
lock.release()
"""


def lock_holder(path: Path) -> subprocess.Popen[str]:
    """Another process holding the lock file ``path`` (``filelock``, as builder's locks) when this
    returns, until a line reaches its stdin (the caller kills it in the end)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _LOCK_HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def _unavailable(what: str) -> None:
    msg = f"{what} is not available: run `bash scripts/setup` first"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(msg + " (CI=true: integration tests must not skip)")
    pytest.skip(msg)


def require_tool(name: str, *alternatives: str) -> str:
    """Path of a command-line tool `scripts/setup` installs; skips locally, FAILS under CI=true."""
    for candidate in (name, *alternatives):
        path = shutil.which(candidate)
        if path is not None:
            return path
    _unavailable(f"the `{name}` command")
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def registry_address() -> str:
    """Address of the real local registry (BUILDER_REGISTRY or 127.0.0.1:5000)."""
    from builder.errors import BuilderError
    from builder.registry import RegistryClient

    address = os.environ.get("BUILDER_REGISTRY", "127.0.0.1:5000")
    try:
        RegistryClient(address, insecure=True).ping()
    except BuilderError:
        _unavailable(f"the registry at {address}")
    return address


@pytest.fixture(scope="session")
def docker_engine() -> str:
    """Ensures a real Docker daemon answers; returns its version string."""
    from builder import engine
    from builder.errors import BuilderError

    try:
        return engine.ping()
    except BuilderError as exc:
        _unavailable("the Docker daemon")
        raise AssertionError("unreachable") from exc  # for type checkers


@pytest.fixture(scope="session")
def docker_host(docker_engine: str) -> str:
    """The address of this machine's Docker Engine as the current context names it (``unix:///...``):
    how a remote engine is addressed (``docker -H``, a context's ``host=``)."""
    inspected = subprocess.run(
        ["docker", "context", "inspect", "--format", "{{json .Endpoints.docker.Host}}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return str(json.loads(inspected.stdout))


DEMO_CPU_VARIANT = "jax0.7-cpu-py3.11-debian12"
"""The demo matrix's CPU variant: a real JAX image that runs here (tests of declared checks use it)."""


@pytest.fixture(scope="session")
def demo_cpu_image(registry_address: str, docker_engine: str) -> str:
    """``REGISTRY/demo/jax:jax0.7-cpu-py3.11-debian12``, the demo's CPU image. A fresh machine has
    not run ``bash scripts/demo``: the image is then built and pushed here with ``builder build``
    (a no-op when it is already there), so these tests run, never skip, on a clean CI machine."""
    from builder.registry import RegistryClient

    if RegistryClient(registry_address, insecure=True).try_resolve("demo/jax", DEMO_CPU_VARIANT) is None:
        env = {k: v for k, v in os.environ.items() if k != "BUILDER_REPOSITORY_PREFIX"}
        env["BUILDER_REGISTRY"] = registry_address
        argv = [sys.executable, "-m", "builder", "build", "--matrix", "matrices/demo.yaml"]
        argv += ["--select", DEMO_CPU_VARIANT]
        built = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False)
        if built.returncode:
            pytest.fail(f"building the demo CPU image failed (exit {built.returncode}):\n{built.stderr[-3000:]}")
    return f"{registry_address}/demo/jax:{DEMO_CPU_VARIANT}"


@pytest.fixture(scope="session")
def cosign_bin() -> str:
    path = shutil.which("cosign")
    if path is None:
        _unavailable("cosign")
        raise AssertionError("unreachable")
    return path


@pytest.fixture(scope="session")
def mirror_base(registry_address: str) -> str:
    """``registry/mirror/debian:bookworm@sha256:...``: the mirrored Debian base (scripts/setup)."""
    from builder.errors import BuilderError
    from builder.registry import RegistryClient

    record = ROOT / ".builder" / "mirror.json"
    if record.exists():
        entry = json.loads(record.read_text())["debian:bookworm"]
        return f"{entry['reference']}@{entry['digest']}"
    try:
        digest = RegistryClient(registry_address, insecure=True).resolve("mirror/debian", "bookworm")
    except BuilderError:
        _unavailable("the mirrored Debian base (mirror/debian:bookworm)")
        raise
    return f"{registry_address}/mirror/debian:bookworm@{digest}"


@pytest.fixture
def unique_repo() -> str:
    """A repository name no other test (or earlier run) uses: ``test/<random>``."""
    return f"test/{uuid.uuid4().hex[:12]}"


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "state"
    d.mkdir()
    yield d


# ---------------------------------------------------------------------------------------------
# Markers by fixture: a test that takes a real engine, registry or cosign is an integration test,
# wherever it lives (`pytest -m "not integration"` runs the fast suite).

INTEGRATION_FIXTURES = frozenset({"registry_address", "docker_engine", "cosign_bin", "mirror_base"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        uses = set(getattr(item, "fixturenames", ()))
        if "integration" in item.path.parts or uses & INTEGRATION_FIXTURES:
            item.add_marker(pytest.mark.integration)


# ---------------------------------------------------------------------------------------------
# The one CLI harness: `builder` in-process, as `main([...])` runs it for a user.


@dataclasses.dataclass(frozen=True)
class CliResult:
    """One invocation: exit ``code``, ``stdout`` (JSON documents) and ``stderr`` (human text)."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


class Cli(Protocol):
    def __call__(
        self,
        *args: str,
        code: int | None = 0,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        stdin: str | None = None,
    ) -> CliResult: ...


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """Run ``builder ARGS...`` in-process (``builder.cli.main``) and return a ``CliResult``;
    asserts the exit status is ``code`` (``None``: any). ``env`` is set for this test only;
    ``cwd`` is where the command runs (the project root is found from it); ``stdin`` its input."""
    from builder.cli import console, main

    def run(
        *args: str,
        code: int | None = 0,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        stdin: str | None = None,
    ) -> CliResult:
        for key in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):  # tests that run in CI
            monkeypatch.delenv(key, raising=False)  # write to no runner file unless `env` names one
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        if cwd is not None:
            monkeypatch.chdir(cwd)
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        capsys.readouterr()
        console.cache_clear()  # a fresh console per invocation, as a new process has (width from COLUMNS)
        try:
            main(list(args))
            status = 0
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        result = CliResult(status, out, err)
        if code is not None:
            assert status == code, f"builder {' '.join(args)}: exit {status}, expected {code}\n{out}\n{err}"
        if "--json" in args and out.strip():
            check_document(list(args), result.json())
        return result

    return run


def command_path(args: list[str]) -> str:
    """The command ``args`` run (``bases update``), past the global options."""
    from builder.cli import COMMANDS

    words: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-C", "--root"):
            skip = True
        elif not arg.startswith("-"):
            words.append(arg)
    if not words or words[0] not in COMMANDS:
        return " ".join(words[:1])
    module, _, attr = COMMANDS[words[0]][0].partition(":")
    import importlib

    import click

    cmd = getattr(importlib.import_module(module), attr)
    if isinstance(cmd, click.Group) and len(words) > 1:
        return f"{words[0]} {words[1]}"
    return words[0]


def check_document(args: list[str], doc: Any) -> None:
    """A ``--json`` output matches its declared schema (docs/schemas): the failure document when
    it is ``{"error": ...}``, else the command's."""
    import jsonschema

    from builder.cli.documents import DOCUMENTS

    command = command_path(args)
    if isinstance(doc, dict) and set(doc) == {"error"}:
        jsonschema.validate(doc, _schema("error"))
    elif command in DOCUMENTS:
        jsonschema.validate(doc, _schema(command))


@functools.cache
def _schema(command: str) -> dict[str, Any]:
    from builder.cli.documents import schema

    return schema(command)
