"""GitHub Actions output of the promotion commands against the real registry: ``promote`` writes
its ``digests`` output and a summary row, ``resolve`` its ``reference`` output (``GITHUB_ACTIONS=true``,
the runner's files in a temporary directory, builder in-process through the ``cli`` fixture)."""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING

import pytest

from tests.conftest import ROOT, unset_builder_settings
from tests.integration.test_promote_cli import VARIANT, _build, _project

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli, CliResult

pytestmark = pytest.mark.integration


def _run(cli: Cli, project: Path, *args: str, env: dict[str, str], code: int = 0) -> CliResult:
    """``builder ARGS`` in ``project`` with ``HOME`` there (no credentials of the test's user)."""
    return cli(*args, code=code, env={"HOME": str(project), **env}, cwd=project)


def test_promote_and_resolve_write_their_outputs(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    unset_builder_settings(monkeypatch)
    project = _project(tmp_path / "project", registry_address, unique_repo)
    digest = _build(project, registry_address, unique_repo, b"github one")
    output, summary = tmp_path / "output", tmp_path / "summary.md"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary)}

    _run(cli, project, "promote", VARIANT, "--to", "dev", "--confirm", env=env)
    [line] = output.read_text().splitlines()
    assert line.startswith("digests=") and json.loads(line.removeprefix("digests=")) == {VARIANT: digest}
    assert f"| `{VARIANT}` | `{digest}` | promoted | dev |" in summary.read_text().splitlines()

    output.write_text("")
    reference = _run(cli, project, "resolve", VARIANT, "--stage", "dev", env=env).stdout.strip()
    assert reference == f"{registry_address}/{unique_repo}@{digest}"
    assert output.read_text() == f"reference={reference}\n"

    err = _run(cli, project, "resolve", VARIANT, "--stage", "prod", code=8, env=env).stderr
    assert "::error title=not-found::" in err


def test_a_build_plan_writes_its_summary(
    cli: Cli, tmp_path: Path, registry_address: str, mirror_base: str, unique_repo: str
) -> None:
    """``build --dry-run`` on the tiny matrix: nothing built, so ``digests`` is ``{}`` and each
    variant's row says it would be built."""
    assert mirror_base
    state = tmp_path / "state"
    state.mkdir()
    shutil.copy(ROOT / ".builder" / "mirror.json", state / "mirror.json")
    matrix = tmp_path / "tiny.yaml"
    matrix.write_text((ROOT / "tests/data/matrices/tiny.yaml").read_text().replace("test/tiny", unique_repo))
    output, summary = tmp_path / "output", tmp_path / "summary.md"
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
        "BUILDER_STATE_DIR": str(state),
        "BUILDER_REGISTRY": registry_address,
    }
    ids = [v["id"] for v in cli("matrix", "list", "--matrix", str(matrix), "--json", cwd=ROOT).json()]
    cli("build", "--dry-run", "--matrix", str(matrix), cwd=ROOT, env=env)
    assert output.read_text() == "digests={}\n"
    lines = summary.read_text().splitlines()
    assert lines[0] == "### builder build" and len(ids) == 2
    for variant in ids:
        assert f"| `{variant}` | - | would build | - |" in lines
