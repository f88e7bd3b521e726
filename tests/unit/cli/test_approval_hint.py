"""The prod-approval hint of ``builder run`` names approver keys under the configured state
directory (``Config.approver_key_dir``), where the shipped policies look for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.cli.run import approval_hint
from builder.config import load_config

if TYPE_CHECKING:
    from pathlib import Path


def test_hint_follows_state_dir_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "builder.toml").write_text('state_dir = "/var/lib/builder-state"\n')
    hint = approval_hint(load_config(tmp_path, {}), cwd=tmp_path)
    assert "--output-dir /var/lib/builder-state/keys/approvers/alice`" in hint
    assert "--key /var/lib/builder-state/keys/approvers/alice/builder.key`" in hint
    assert ".builder" not in hint


def test_hint_from_the_environment_and_relative_to_the_checkout(tmp_path: Path) -> None:
    cfg = load_config(tmp_path, {"BUILDER_STATE_DIR": "state"})
    hint = approval_hint(cfg, cwd=tmp_path)
    assert "--output-dir state/keys/approvers/alice`" in hint
    assert "(and state/keys/approvers/bob)" in hint
    assert "--key state/keys/approvers/alice/builder.key`" in hint
    assert cfg.key_path == tmp_path / "state" / "keys" / "builder.key"  # one layout for every key


def test_the_hint_names_the_keys_the_shipped_policy_reads(tmp_path: Path) -> None:
    from builder.policy.loader import check_policy
    from tests.conftest import ROOT

    cfg = load_config(tmp_path, {"BUILDER_STATE_DIR": str(tmp_path / "elsewhere")})
    policy, _ = check_policy(
        ROOT / "policies" / "default.yaml", {"state_dir": str(cfg.state_dir), "root": str(tmp_path)}
    )
    assert policy is not None
    files = {a.name: a.key.file for a in policy.approvers}
    assert files["alice"] == str(cfg.approver_key_dir("alice") / "builder.pub")
    assert f"--output-dir {cfg.approver_key_dir('alice')}`" in approval_hint(cfg, cwd=tmp_path / "sub")
