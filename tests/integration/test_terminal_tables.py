"""``builder status`` at 80 and 120 columns against the real registry: every variant id and
digest whole on one line, nothing wider than the terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.conftest import unset_builder_settings
from tests.integration.test_promote_cli import VARIANT, _build, _project

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("columns", [80, 120])
def test_status_keeps_ids_and_digests_whole(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, registry_address: str, unique_repo: str, columns: int
) -> None:
    unset_builder_settings(monkeypatch)
    project = _project(tmp_path / "project", registry_address, unique_repo)
    digest = _build(project, registry_address, unique_repo, b"terminal tables")
    env = {"HOME": str(project)}
    cli("promote", VARIANT, "--to", "dev", "--confirm", env=env, cwd=project)
    err = cli("status", env={**env, "COLUMNS": str(columns)}, cwd=project).stderr
    lines = err.splitlines()
    assert "…" not in err
    assert [line for line in lines if VARIANT in line], err
    assert [line for line in lines if digest[:19] in line], err
    assert max(len(line) for line in lines) <= columns, err
