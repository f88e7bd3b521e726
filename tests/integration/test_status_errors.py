"""``status`` and ``history`` exit non-zero when they could not read what was asked: an
unreachable registry is exit 5 at once; a row (stage) that cannot be read carries its ``error``
in the one ``--json`` document, every other row is still printed, and the command exits with the
first error's code."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from builder.errors import RegistryAuthError, RegistryUnavailableError
from tests.conftest import unset_builder_settings
from tests.integration.test_promote_cli import VARIANT, _build, _project
from tests.integration.test_promote_support import password_registry

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.conftest import Cli, CliResult

pytestmark = pytest.mark.integration


@pytest.fixture
def run(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    unset_builder_settings(monkeypatch)
    yield cli


def _in(cli: Cli, project: Path, *args: str, code: int) -> CliResult:
    return cli(*args, code=code, env={"HOME": str(project)}, cwd=project)


def test_status_and_history_with_the_registry_down_exit_5(cli: Cli, run: object, tmp_path: Path) -> None:
    project = _project(tmp_path / "project", "127.0.0.1:1", "demo/down")
    for args in (("status",), ("history", VARIANT)):
        error = _in(cli, project, *args, "--json", code=RegistryUnavailableError.exit_code).json()["error"]
        assert error["kind"] == "registry-unavailable" and "127.0.0.1:1" in error["message"]
        assert "scripts/setup" in error["hint"]  # a registry on this machine: start it
        human = _in(cli, project, *args, code=RegistryUnavailableError.exit_code).stderr
        assert "is not reachable" in human and "could not be read" not in human


def test_a_registry_elsewhere_is_not_told_to_start_with_scripts_setup() -> None:
    remote = RegistryUnavailableError("registry docker.io is not reachable", registry="docker.io")
    assert "scripts/setup" not in remote.hint and "docker.io is reachable" in remote.hint
    for local in ("127.0.0.1:5000", "localhost:5000", "[::1]:5000"):
        assert "scripts/setup" in RegistryUnavailableError("down", registry=local).hint, local


def test_rows_that_cannot_be_read_carry_their_error_and_set_the_exit_code(
    cli: Cli, run: object, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    """prod lives in a password-protected registry this user has no credentials for: its rows
    (stages) say why they could not be read, dev's are read as usual, and the exit code is 6."""
    project = _project(tmp_path / "project", registry_address, unique_repo)
    with password_registry(tmp_path / "auth") as protected:
        policy = project / "policies" / "default.yaml"
        tail = "    rollback:\n      allowed: [alice, bob]\n"
        text = policy.read_text()
        assert text.endswith(tail)
        policy.write_text(text[: -len(tail)] + f'    registry: "{protected}"\n' + tail)
        digest = _build(project, registry_address, unique_repo, b"status errors")
        _in(cli, project, "promote", VARIANT, "--to", "dev", "--confirm", code=0)

        doc = _in(cli, project, "status", "--json", code=RegistryAuthError.exit_code).json()
        rows = {r["stage"]: r for r in doc["rows"]}
        assert set(rows) == {"dev", "staging", "prod"}
        assert rows["dev"]["digest"] == digest and rows["dev"]["error"] is None
        assert rows["staging"]["digest"] is None and rows["staging"]["error"] is None
        assert rows["prod"]["error"]["kind"] == "registry-auth" and protected in rows["prod"]["pointer"]
        human = _in(cli, project, "status", code=RegistryAuthError.exit_code).stderr
        assert digest[:19] in human and "1 row(s) could not be read" in human
        assert "None" not in human  # no Python None in human output

        hist = _in(cli, project, "history", VARIANT, "--json", code=RegistryAuthError.exit_code).json()
        stages = {h["stage"]: h for h in hist["stages"]}
        assert stages["dev"]["records"][0]["digest"] == digest and "error" not in stages["dev"]
        assert stages["staging"]["pointer"] is None and "error" not in stages["staging"]
        assert stages["prod"]["error"]["exit_code"] == RegistryAuthError.exit_code
        human = _in(cli, project, "history", VARIANT, code=RegistryAuthError.exit_code).stderr
        assert "1 stage(s) could not be read" in human and "(never promoted)" in human and "None" not in human


def test_when_no_row_can_be_read_the_first_error_is_the_document(cli: Cli, run: object, tmp_path: Path) -> None:
    """Every stage in a registry that refuses this user: one error document (not a table of
    errors), the registry's auth code."""
    with password_registry(tmp_path / "auth") as protected:
        project = _project(tmp_path / "project", protected, "demo/locked")
        for args in (("status",), ("history", VARIANT)):
            doc = _in(cli, project, *args, "--json", code=RegistryAuthError.exit_code).json()
            assert set(doc) == {"error"} and doc["error"]["kind"] == "registry-auth", doc
