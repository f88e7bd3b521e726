"""A dry run checks the key ``--confirm`` would sign with (issue: ``builder promote REF --to dev
--key other.key`` planned "would promote" with no warning, then ``--confirm`` failed with exit 16
"not a promoter"): a key that is not one of the policy's promoters is a failing ``promoter`` row
of the plan, never "would promote"; ``--confirm`` still says exit 16 in the same words."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from tests.integration.test_promote_cli import VARIANT, _build, _project

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli, CliResult

pytestmark = pytest.mark.integration


@pytest.fixture
def project(tmp_path: Path, registry_address: str, unique_repo: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("BUILDER_") or name in ("DOCKER_CONFIG", "COSIGN_PASSWORD"):
            monkeypatch.delenv(name)
    return _project(tmp_path / "project", registry_address, unique_repo)


def _in(cli: Cli, project: Path, *args: str, code: int = 0) -> CliResult:
    return cli(*args, code=code, env={"HOME": str(project), "COLUMNS": "400"}, cwd=project)


def test_a_dry_run_with_a_key_that_is_not_a_promoter_says_so_as_confirm_does(
    cli: Cli, project: Path, registry_address: str, unique_repo: str, tmp_path: Path
) -> None:
    from builder.signing.keys import generate_key_pair

    _build(project, registry_address, unique_repo, b"dry run signer")
    other, _pub, _fp = generate_key_pair(tmp_path / "other", None)
    promoter = project / "state" / "keys" / "build" / "builder.key"
    # the project's own promoter key: the dry run is as before
    assert "would promote" in _in(cli, project, "promote", VARIANT, "--to", "dev", "--key", str(promoter)).stderr
    dry = _in(cli, project, "promote", VARIANT, "--to", "dev", "--key", str(other), "--json", code=31).json()
    rows = {r["rule"]: r for r in dry["error"]["details"]["results"][0]["decision"]["reasons"]}
    assert rows["promoter"]["passed"] is False and "is not a promoter" in rows["promoter"]["reason"], rows
    assert "is not a promoter" in dry["error"]["message"]
    human = _in(cli, project, "promote", VARIANT, "--to", "dev", "--key", str(other), code=31).stderr
    assert "would promote" not in human and "is not a promoter" in human, human
    confirm = _in(cli, project, "promote", VARIANT, "--to", "dev", "--key", str(other), "--confirm", "--json", code=16)
    message = confirm.json()["error"]["message"]
    assert "is not a promoter" in message and rows["promoter"]["reason"].startswith(message.split(";")[0])
