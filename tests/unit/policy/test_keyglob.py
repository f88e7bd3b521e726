"""Key sets naming key files by glob (``file: "{root}/keys/check-runners/*.pub"``): every match is
a key; no match is a warning and rules needing the set deny (fail closed); the shipped default
policy lists both the committed runner keys and the machine-local demo key."""

from __future__ import annotations

import shutil
import textwrap
from typing import TYPE_CHECKING, Any

from builder.policy import check_policy, evaluate
from builder.predicates import DEVICE_CHECK_V1
from tests.unit.policy.support import NOW, ROOT, att, dc, ev

if TYPE_CHECKING:
    from pathlib import Path

POLICY = """\
version: 1
keys:
  build: [{{file: {build}}}]
  runners:
    - file: "{{root}}/keys/check-runners/*.pub"
promoters: [build]
stages:
  staging:
    from: build
    require:
      device_check: {{signers: [runners], vendors: [none]}}
    rollback: {{allowed: [build]}}
"""


def _key(dir_: Path, name: str) -> tuple[Path, str]:
    from builder.signing.keys import generate_key_pair

    _, pub, fp = generate_key_pair(dir_ / name, None)
    return pub, fp


def _evidence(signer: str) -> Any:
    return ev(att(DEVICE_CHECK_V1, dc("none"), signer), stage="staging")


def test_glob_names_every_matching_key(tmp_path: Path) -> None:
    made = tmp_path / "made"
    build, _ = _key(made, "build")
    runners = tmp_path / "repo" / "keys" / "check-runners"
    runners.mkdir(parents=True)
    fps = []
    for name in ("h200-rack3", "mi300-lab"):
        pub, fp = _key(made, name)
        shutil.copy(pub, runners / f"{name}.pub")
        fps.append(fp)
    (runners / "README.md").write_text("not a key")
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(POLICY.format(build=build)))
    policy, problems = check_policy(path, {"root": str(tmp_path / "repo"), "state_dir": str(tmp_path)})
    assert policy is not None and problems == [], problems
    (runset,) = [s for s in policy.keysets if s.name == "runners"]
    assert sorted(k.fingerprint or "" for k in runset.keys) == sorted(fps)
    assert all(k.file and k.file.endswith(".pub") for k in runset.keys)
    assert evaluate(policy, "staging", _evidence(fps[1]), NOW).allowed
    _, stranger = _key(made, "stranger")
    assert not evaluate(policy, "staging", _evidence(stranger), NOW).allowed


def test_no_match_warns_and_denies(tmp_path: Path) -> None:
    build, _ = _key(tmp_path / "made", "build")
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(POLICY.format(build=build)))
    policy, problems = check_policy(path, {"root": str(tmp_path / "empty"), "state_dir": str(tmp_path)})
    assert policy is not None
    assert [(p.severity, p.path) for p in problems] == [("warning", "keys.runners[0].file")]
    assert "no file matches" in problems[0].message and "check-runners/*.pub" in problems[0].message
    assert problems[0].location.endswith(":5:7")
    _, someone = _key(tmp_path / "made", "someone")
    d = evaluate(policy, "staging", _evidence(someone), NOW)
    assert not d.allowed and "no public key file matches" in d.failed()[0].reason


def test_glob_cannot_be_pinned(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "keys:\n  runners:\n    - {file: 'k/*.pub', fingerprint: 'sha256:00'}\n"
        "approvers:\n  alice: {file: 'k/a*.pub'}\n"
        "stages:\n  dev: {from: build, require: {unconditional: all}}\n"
    )
    _, problems = check_policy(path, {})
    errors = {p.path for p in problems if p.severity == "error"}
    assert {"keys.runners[0].fingerprint", "approvers.alice.file"} <= errors, problems


def test_default_policy_lists_committed_and_local_runner_keys(tmp_path: Path) -> None:
    text = (ROOT / "policies" / "default.yaml").read_text()
    assert '"{root}/keys/check-runners/*.pub"' in text and '"{state_dir}/keys/check-runner/builder.pub"' in text
    assert (ROOT / "keys" / "check-runners" / "README.md").is_file()
    # a runner key committed under {root}/keys/check-runners is trusted by the shipped policy
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "policies", root / "policies")
    shutil.copytree(ROOT / "fleets", root / "fleets")  # the prod fleet rule names ../fleets/demo.yaml
    pub, fp = _key(tmp_path / "made", "runner")
    (root / "keys" / "check-runners").mkdir(parents=True)
    shutil.copy(pub, root / "keys" / "check-runners" / "gpu-1.pub")
    policy, problems = check_policy(root / "policies" / "default.yaml", {"root": str(root), "state_dir": str(tmp_path)})
    assert policy is not None and not [p for p in problems if p.severity == "error"]
    assert not [p for p in problems if "check-runners" in p.message], problems
    (runset,) = [s for s in policy.keysets if s.name == "check-runners"]
    assert fp in {k.fingerprint for k in runset.keys}
