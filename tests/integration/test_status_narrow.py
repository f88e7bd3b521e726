"""`BUILDER_REPOSITORY_PREFIX=fresh builder status --select VARIANT` at 80 columns, a newcomer's first
command, against a password-protected registry (basic and bearer-token auth, credentials only in
DOCKER_CONFIG): a prefix with nothing promoted drew an 82-cell table that the terminal cut (the
"attestations" header without its right border, 67-character body rows)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.integration.test_credentials import VARIANT, project, registry

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli
    from tests.registries import AuthRegistry

__all__ = ["project", "registry"]  # the fixtures, shared with test_credentials


def test_fresh_prefix_status_table_has_whole_borders_at_80(
    cli: Cli, project: Path, registry: AuthRegistry, tmp_path: Path
) -> None:
    env = {
        "DOCKER_CONFIG": str(registry.docker_config(tmp_path / "docker")),
        "HOME": str(tmp_path / "home"),
        "BUILDER_REPOSITORY_PREFIX": "fresh",
        "COLUMNS": "80",
    }
    human = cli("status", "--select", VARIANT, env=env, cwd=project).stderr
    table = [line for line in human.splitlines() if line[:1] in "┏┃┡│└"]
    assert len(table) >= 5, human  # header and the three stages
    assert len({len(line) for line in table}) == 1 and len(table[0]) <= 80, human
    assert all(line[-1] in "┓┃┩│┘" for line in table), human
    assert "HTTP 401" not in human
