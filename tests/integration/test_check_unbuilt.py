"""`builder check VARIANT` (and every command whose REF may be a variant id: inspect, diff, sbom,
sign, ...) of a variant the matrices define but no build pushed: the error names the variant and its
absent moving tag and hints `builder build --select VARIANT` (it hinted `builder status`, which
lists stages, not how to get an image). A variant that was built but lacks the asked platform, and
an image reference (not a variant id) that names nothing, keep the registry's own error. Real
parts: the registry, a project checkout, the command line in-process."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient
from tests.conftest import unset_builder_settings
from tests.integration.test_promote_support import push_build
from tests.projects import jax_matrix

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli

pytestmark = pytest.mark.integration

VARIANT = "jax0.7-cpu-py3.11-debian12"


def _project(root: Path, registry: str, repo: str) -> Path:
    (root / "matrices").mkdir(parents=True)
    (root / "builder.toml").write_text(f'registry = "{registry}"\nstate_dir = "state"\n')
    (root / "matrices" / "tiny.yaml").write_text(jax_matrix(repo))
    return root


def test_checking_a_variant_never_built_says_how_to_build_it(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    unset_builder_settings(monkeypatch)
    root = _project(tmp_path / "project", registry_address, unique_repo)
    env = {"HOME": str(root)}
    error = cli("check", VARIANT, "--no-attest", "--json", code=8, env=env, cwd=root).json()["error"]
    assert error["hint"].startswith(f"build and push it first: `builder build --select {VARIANT}`"), error
    assert f"{registry_address}/{unique_repo}:{VARIANT} does not exist" in error["message"]
    assert error["details"] == {"variant": VARIANT, "reference": f"{registry_address}/{unique_repo}:{VARIANT}"}
    human = cli("check", VARIANT, "--no-attest", code=8, env={**env, "COLUMNS": "200"}, cwd=root).stderr
    assert f"`builder build --select {VARIANT}`" in human and "builder status" not in human
    assert "Traceback" not in human
    for args in (("inspect", VARIANT), ("diff", VARIANT, VARIANT), ("sbom", VARIANT)):
        other = cli(*args, "--json", code=8, env=env, cwd=root).json()["error"]
        assert other["details"] == error["details"] and other["hint"] == error["hint"], (args, other)
    by_reference = cli("inspect", f"{registry_address}/{unique_repo}:nope", "--json", code=8, env=env, cwd=root)
    assert "builder build" not in by_reference.json()["error"]["hint"]  # not a variant id: the registry's 404

    push_build(RegistryClient(registry_address, insecure=True), unique_repo, VARIANT, b"built once")
    other = cli("check", VARIANT, "--platform", "linux/arm64", "--no-attest", "--json", code=8, env=env, cwd=root)
    missing = other.json()["error"]
    assert "linux/arm64" in missing["message"] and "builder build" not in missing["hint"]  # built: no arm64
