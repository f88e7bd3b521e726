"""builder.policy.approvals: the approver-name check and the warnings of `builder approve`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from builder.errors import NotFoundError, SigningKeyError
from builder.policy import Policy, load_policy
from builder.policy.approvals import plan_approval
from builder.signing.fingerprints import short_fingerprint
from builder.signing.keys import generate_key_pair

if TYPE_CHECKING:
    from pathlib import Path

POLICY = """\
version: 1
keys:
  build: [{{file: {build}}}]
approvers:
  alice: {{file: {alice}}}
  bob: {{file: {bob}}}
promoters: [build]
stages:
  dev:
    from: build
    require: {{unconditional: every build}}
  prod:
    from: dev
    require:
      all_of:
        - approvals: {{count: 1, approvers: [alice]}}
        - change_ticket: {{pattern: "CHG-[0-9]{{4}}"}}
"""


@pytest.fixture(scope="module")
def fingerprints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    root = tmp_path_factory.mktemp("keys")
    out = {}
    for name in ("build", "alice", "bob", "mallory"):
        _, pub, fp = generate_key_pair(root / name, None)
        out[name] = (pub, fp)
    return out


@pytest.fixture
def policy(tmp_path: Path, fingerprints: dict[str, tuple[Path, str]]) -> Policy:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY.format(**{k: v[0] for k, v in fingerprints.items()}))
    return load_policy(path)


def test_listed_approver_records_the_policy_name(policy: Policy, fingerprints: dict[str, tuple[Path, str]]) -> None:
    plan = plan_approval(policy, "prod", fingerprints["alice"][1], key_label="a.key", name=None, ticket="CHG-1234")
    assert (plan.recorded_name, plan.listed_name, plan.who, plan.warnings) == ("alice", "alice", "alice", ())


def test_other_approvers_name_is_refused(policy: Policy, fingerprints: dict[str, tuple[Path, str]]) -> None:
    with pytest.raises(SigningKeyError, match=r"--name alice: m.key .* is not alice's key"):
        plan_approval(policy, "prod", fingerprints["mallory"][1], key_label="m.key", name="alice", ticket=None)


def test_unlisted_key_and_bad_ticket_warn(policy: Policy, fingerprints: dict[str, tuple[Path, str]]) -> None:
    fp = fingerprints["mallory"][1]
    plan = plan_approval(policy, "prod", fp, key_label="m.key", name="mal", ticket="T-1")
    assert plan.listed_name is None and plan.recorded_name == "mal"
    assert plan.who == f"{short_fingerprint(fp)} (unlisted key, calls itself 'mal')"
    assert any("not a listed approver" in w for w in plan.warnings)
    assert any("does not match stage prod's change_ticket pattern" in w for w in plan.warnings)


def test_listed_key_with_another_name_is_recorded_under_the_listed_name(
    policy: Policy, fingerprints: dict[str, tuple[Path, str]]
) -> None:
    plan = plan_approval(policy, "prod", fingerprints["alice"][1], key_label="a.key", name="al", ticket="CHG-1234")
    assert plan.recorded_name == "alice"
    assert plan.warnings == ("--name al ignored: the policy lists this key as alice",)


def test_unknown_stage(policy: Policy, fingerprints: dict[str, tuple[Path, str]]) -> None:
    with pytest.raises(NotFoundError):
        plan_approval(policy, "qa", fingerprints["alice"][1], key_label="a.key", name=None, ticket=None)
