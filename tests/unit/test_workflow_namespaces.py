"""Workflows name ghcr-compatible repositories (under the GitHub repository, the prefix the
workflow token may push) and a scheduled workflow proposes base-image updates as a pull request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from builder.config import load_config
from builder.matrix import github_matrix, load_matrices

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"


def _load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = YAML(typ="safe").load((WORKFLOWS / name).read_text())
    return doc


def test_registry_workflows_set_the_repository_prefix() -> None:
    for name in ("images.yml", "promote.yml"):
        text = str(_load(name))
        assert "'BUILDER_REPOSITORY_PREFIX': '${{ github.repository }}'" in text, name


def test_the_prefix_reaches_the_matrix_the_jobs_push_to() -> None:
    """``matrix.repository`` (what images.yml's jobs push to and promote) is under the prefix, lower case."""
    cfg = load_config(ROOT, {"BUILDER_REPOSITORY_PREFIX": "Acme/Images"})
    variants = [v for m in load_matrices(sorted(cfg.matrices_dir.glob("*.yaml"))) for v in m.variants]
    repos = {e["repository"] for e in github_matrix(variants, cfg.repository_prefix)["include"]}
    assert "acme/images/ml/jax" in repos and all(r.startswith("acme/images/") for r in repos)


def test_scheduled_bases_update_opens_a_pull_request() -> None:
    doc = _load("bases.yml")
    assert doc["on"]["schedule"] and "workflow_dispatch" in doc["on"]
    steps = doc["jobs"]["update"]["steps"]
    assert any("builder bases update" in s.get("run", "") for s in steps)
    (pr,) = [s for s in steps if str(s.get("uses", "")).startswith("peter-evans/create-pull-request@")]
    assert pr["with"]["add-paths"] == "bases.lock.json" and "bases-report.md" in pr["with"]["body-path"]
    assert doc["jobs"]["update"]["permissions"] == {"contents": "write", "pull-requests": "write"}
