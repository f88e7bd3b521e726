"""`builder gc --select GLOB` sweeps and reports only the repositories of the selected variants: a
project with two matrices in two repositories listed the other one as "nothing to collect" (and
read its tags). Real registry, the command line in-process; the other repository's candidates are
still swept by a `gc` without --select."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient
from tests.conftest import unset_builder_settings
from tests.integration.test_gc import OLD, layer, push_dated
from tests.integration.test_promote_cli import VARIANT, _project
from tests.projects import cpu_matrix

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli, CliResult

pytestmark = pytest.mark.integration

OTHER = "tiny-cpu-py3.11-debian12"


def test_gc_select_reports_only_the_selected_variants_repositories(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    other_repo = f"{unique_repo}-other"
    project = _project(tmp_path / "project", registry_address, unique_repo)
    (project / "matrices" / "other.yaml").write_text(cpu_matrix("tiny", other_repo))

    def run(*args: str, code: int = 0) -> CliResult:
        unset_builder_settings(monkeypatch)
        return cli(*args, code=code, env={"HOME": str(project), "COLUMNS": "200"}, cwd=project)

    assert OTHER in run("matrix", "list").stderr
    client = RegistryClient(registry_address, insecure=True)
    old_jax = push_dated(client, unique_repo, [f"{VARIANT}-{'a' * 12}"], created=OLD, layers=[layer()])
    old_other = push_dated(client, other_repo, [f"{OTHER}-{'b' * 12}"], created=OLD, layers=[layer()])

    report = run("gc", "--select", "jax*", "--json").json()
    assert [r["repository"] for r in report["repositories"]] == [f"{registry_address}/{unique_repo}"]
    assert [(t["tag"], t["delete"]) for t in report["repositories"][0]["tags"]] == [(f"{VARIANT}-{'a' * 12}", True)]
    human = run("gc", "--select", "jax*").stderr
    assert other_repo not in human and "nothing to collect" not in human and unique_repo in human

    everything = run("gc", "--json").json()  # without --select: every variant's repository
    assert sorted(r["repository"] for r in everything["repositories"]) == sorted(
        f"{registry_address}/{r}" for r in (unique_repo, other_repo)
    )
    run("gc", "--select", "tiny*", "--confirm")
    assert client.try_get_manifest(other_repo, old_other) is None  # deleted
    assert client.try_get_manifest(unique_repo, old_jax) is not None  # not selected: kept
