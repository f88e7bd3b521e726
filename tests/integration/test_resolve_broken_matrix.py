"""``IMAGE=$(builder resolve VARIANT --stage S)`` in a deploy script must not break because someone
else's matrix is broken: resolve (by variant id or by the full stage reference) answers from the
matrices it needs, and the broken unrelated matrix is a warning on stderr, never exit 10. Real
registry, real signed promotion (the ``cli`` fixture runs builder as a user does)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.integration.test_promote_cli import VARIANT, _build, _project

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli

pytestmark = pytest.mark.integration

BROKEN = "family: pytorch\nrepository: demo/pytorch\naxes:\n  python: [3.11\n"  # an unclosed flow list


def test_resolve_answers_despite_a_broken_unrelated_matrix(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    project = _project(tmp_path / "project", registry_address, unique_repo)
    digest = _build(project, registry_address, unique_repo, b"broken neighbour")
    env = {"HOME": str(project)}
    cli("promote", VARIANT, "--to", "dev", "--confirm", cwd=project, env=env)
    (project / "matrices" / "pytorch.yaml").write_text(BROKEN)
    pinned = f"{registry_address}/{unique_repo}@{digest}"

    by_id = cli("resolve", VARIANT, "--stage", "dev", cwd=project, env=env)
    assert by_id.stdout == pinned + "\n"
    warning = by_id.stderr.replace("\n  ", " ")
    assert "warning: matrices/pytorch.yaml does not load and was left out (5:1: not valid YAML" in warning
    assert "`builder matrix list` shows every problem" in warning and "Traceback" not in warning
    assert all(len(line) <= 80 for line in by_id.stderr.splitlines())

    reference = f"{registry_address}/{unique_repo}:{VARIANT}-dev"
    assert cli("resolve", reference, "--stage", "dev", cwd=project, env=env).stdout == pinned + "\n"
    doc = cli("resolve", VARIANT, "--stage", "dev", "--json", cwd=project, env=env)
    assert json.loads(doc.stdout)["reference"] == pinned and "pytorch.yaml" in doc.stderr

    # a variant of the broken matrix: not found, and the warning says why it may be missing
    missing = cli("resolve", "pytorch2.7-cpu-py3.11-debian12", "--stage", "dev", code=8, cwd=project, env=env)
    assert "pytorch.yaml does not load" in missing.stderr.replace("\n  ", " ")
    # a promotion (a write) is decided under the policy every matrix names: a broken one might
    # name another, so --confirm refuses unless --policy says which; the plan only warns
    assert "pytorch.yaml" in cli("promote", VARIANT, "--to", "dev", "--confirm", code=10, cwd=project, env=env).stderr
    assert "does not load" in cli("promote", VARIANT, "--to", "dev", cwd=project, env=env).stderr
    policy = str(project / "policies" / "default.yaml")
    cli("promote", VARIANT, "--to", "dev", "--confirm", "--policy", policy, cwd=project, env=env)
    # the commands that validate matrices still refuse it, and gc, which deletes what no variant's
    # stages protect, decides on every matrix or on none
    assert "pytorch.yaml" in cli("matrix", "list", code=10, cwd=project, env=env).stderr
    assert "pytorch.yaml" in cli("gc", code=10, cwd=project, env=env).stderr
