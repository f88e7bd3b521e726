"""A matrix that names a policy or fleet file that does not exist: ``builder matrix list`` (the
validator) warns naming the matrix, the field, the missing file, the closest name and the names
there are; the commands that use the file refuse it with the same words (exit 8, ``--json`` in the
one error shape)."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import pytest

from builder.config import load_config
from builder.errors import NotFoundError
from builder.matrix import load_matrices
from builder.matrix.bindings import binding_problems, bound_file
from tests.conftest import ROOT
from tests.projects import cpu_matrix

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli


def project(root: Path, head: str) -> Path:
    for d in ("matrices", "policies", "fleets"):
        (root / d).mkdir(parents=True)
    shutil.copy(ROOT / "policies" / "default.yaml", root / "policies" / "default.yaml")
    shutil.copy(ROOT / "policies" / "evidence.yaml", root / "policies" / "evidence.yaml")
    shutil.copy(ROOT / "fleets" / "demo.yaml", root / "fleets" / "demo.yaml")
    (root / "matrices" / "tiny.yaml").write_text(head + cpu_matrix("tiny", "team/tiny"))
    (root / "builder.toml").write_text('state_dir = "state"\n')
    return root


def test_a_misspelt_policy_is_named_with_the_closest_one(cli: Cli, tmp_path: Path) -> None:
    root = project(tmp_path / "p", "policy: defualt\n")
    listed = cli("matrix", "list", cwd=root)
    assert "warning: matrices/tiny.yaml: `policy: defualt` names policies/defualt.yaml, which does not exist" in (
        listed.stderr
    )
    assert "did you mean 'default'?" in listed.stderr and "(default, evidence)" in listed.stderr
    assert "tiny-cpu-py3.11-debian12" in listed.stderr
    assert cli("matrix", "list", "--json", cwd=root).json()[0]["id"] == "tiny-cpu-py3.11-debian12"
    # the commands that use the policy refuse it (exit 8), before reaching any registry
    doc = cli("status", "--json", cwd=root, code=8).json()
    assert doc["error"]["kind"] == "not-found" and doc["error"]["details"]["field"] == "policy"
    assert "did you mean 'default'?" in doc["error"]["message"]


def test_a_policy_that_is_a_folder_is_named_as_one(cli: Cli, tmp_path: Path) -> None:
    """`mkdir policies/default.yaml` read as "does not exist; did you mean 'default'?" (exit 8):
    a folder is named as one, exit 2 where the policy is used, a warning in `matrix list`."""
    root = project(tmp_path / "p", "policy: evidence\n")
    (root / "policies" / "evidence.yaml").unlink()
    (root / "policies" / "evidence.yaml").mkdir()
    said = "`policy: evidence` names policies/evidence.yaml, which is a folder, not a file"
    assert f"warning: matrices/tiny.yaml: {said}" in cli("matrix", "list", cwd=root).stderr
    doc = cli("status", "--json", cwd=root, code=2).json()
    assert doc["error"]["kind"] == "config" and said in doc["error"]["message"]
    assert "did you mean" not in doc["error"]["message"]


def test_a_missing_fleet_file_path_is_named(cli: Cli, tmp_path: Path) -> None:
    root = project(tmp_path / "p", "fleet: sites/gpu.yaml\n")
    err = cli("matrix", "list", "--format", "github", cwd=root).stderr
    assert "`fleet: sites/gpu.yaml` names sites/gpu.yaml, which does not exist" in err
    assert "fleets/ without .yaml (demo)" in err


def test_bound_files_that_exist_are_no_problem(tmp_path: Path) -> None:
    root = project(tmp_path / "p", "policy: evidence\nfleet: demo\n")
    cfg = load_config(root, {})
    assert binding_problems(cfg, load_matrices([root / "matrices" / "tiny.yaml"])) == ()
    (root / "fleets" / "demo.yaml").unlink()
    (problem,) = binding_problems(cfg, load_matrices([root / "matrices" / "tiny.yaml"]))
    assert "`fleet: demo` names fleets/demo.yaml" in problem and "(none there)" in problem
    with pytest.raises(NotFoundError, match=r"`fleet: demo` names fleets/demo\.yaml"):
        bound_file(cfg, "fleet", root / "matrices" / "tiny.yaml", "demo")
