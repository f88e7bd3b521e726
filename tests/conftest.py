"""Shared fixtures.

Integration fixtures use the real Docker Engine and the real registry that ``scripts/setup``
starts (default 127.0.0.1:5000). When they are missing, tests skip on a developer machine but
FAIL under CI (``CI=true``): integration tests must run in CI, never silently skip.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


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
def cosign_bin() -> str:
    path = shutil.which("cosign")
    if path is None:
        _unavailable("cosign")
        raise AssertionError("unreachable")
    return path


@pytest.fixture(scope="session")
def mirror_base(registry_address: str) -> str:
    """``registry/mirror/debian:bookworm@sha256:...``: the mirrored Debian base (scripts/setup)."""
    from builder.registry import RegistryClient

    record = ROOT / ".builder" / "mirror.json"
    if record.exists():
        entry = json.loads(record.read_text())["debian:bookworm"]
        return f"{entry['reference']}@{entry['digest']}"
    try:
        digest = RegistryClient(registry_address, insecure=True).resolve("mirror/debian", "bookworm")
    except Exception:
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
