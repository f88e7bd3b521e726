"""Loading and validating a policy file: every problem with its place (``yamldoc.Problem``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.errors import NotFoundError, PolicyError
from builder.policy import (
    RULE_KINDS,
    check_policy,
    load_policy,
)
from tests.unit.policy.support import (
    ROOT,
    Keys,
    write,
)


def test_shipped_default_policy_is_valid(tmp_path: Path) -> None:
    policy, problems = check_policy(ROOT / "policies" / "default.yaml", {"state_dir": str(tmp_path), "root": str(ROOT)})
    errors = [p for p in problems if p.severity == "error"]
    assert errors == [], errors
    assert policy is not None and policy.stage_names == ("dev", "staging", "prod")
    # key files are machine-local: missing ones are warnings naming the file, not errors
    assert any("builder.pub" in p.message and p.severity == "warning" for p in problems)
    prod = policy.stage("prod")
    assert prod.source == "staging" and prod.repository_for("ml/jax") == "prod/ml/jax"
    assert prod.tag_for("jax0.7-cpu") == "jax0.7-cpu-prod"


def test_every_problem_is_listed_with_its_location(tmp_path: Path, keys: Keys) -> None:
    text = f"""\
    version: 1
    keys:
      build: [{{file: {keys["build"][0]}}}]
      empty: []
    approvers:
      alice: {{file: {keys["alice"][0]}}}
    stages:
      dev:
        from: build
        require:
          all_of: []
      staging:
        from: nowhere
        require:
          all_of:
            - signature: {{signers: [build, ghosts]}}
            - approvals: {{count: 3, approvers: [alice, zed]}}
            - change_ticket: {{pattern: "CHG-[0-9"}}
            - freeze: {{timezone: Mars/Olympus, windows: [{{days: [funday]}}]}}
            - soak: {{min: forever, signers: [build]}}
            - teleport: {{}}
      prod:
        from: prod
      Bad_Name:
        from: build
        require: {{unconditional: ""}}
    """
    path = write(tmp_path, text)
    policy, problems = check_policy(path)
    assert policy is None
    text_problems = [str(p) for p in problems]
    expected = {
        ("stages.dev.require.all_of", 11): "empty all_of",
        ("stages.staging.require.all_of[0].signature.signers[1]", 16): "unknown key set 'ghosts'",
        ("stages.staging.require.all_of[1].approvals.approvers[1]", 17): "unknown approver 'zed'",
        ("stages.staging.require.all_of[1].approvals.count", 17): "could never pass",
        ("stages.staging.require.all_of[2].change_ticket.pattern", 18): "not a regular expression",
        ("stages.staging.require.all_of[3].freeze.timezone", 19): "unknown time zone",
        ("stages.staging.require.all_of[3].freeze.windows[0].days[0]", 19): "unknown weekday",
        ("stages.staging.require.all_of[4].soak.min", 20): "not a duration",
        ("stages.staging.require.all_of[5].teleport", 21): "unknown rule 'teleport'",
        ("stages.staging.from", 13): "unknown stage 'nowhere'",
        ("stages.prod", 22): "missing `require:`",
        ("stages.Bad_Name", 24): "stage name",
        ("stages.Bad_Name.require.unconditional", 26): "takes the reason as text",
        ("keys.empty", 4): "an empty key set trusts nobody",
    }
    for (where, line), what in expected.items():
        hits = [p for p in problems if p.path == where and what in p.message]
        assert hits, f"missing problem {where}: {what}\n" + "\n".join(text_problems)
        assert hits[0].location.startswith(f"{path}:{line}:"), (hits[0], line)
    with pytest.raises(PolicyError) as err:
        load_policy(path)
    assert len(err.value.details["problems"]) == len(problems)
    assert "all_of" in err.value.message


@pytest.mark.parametrize("kind", RULE_KINDS)
def test_every_rule_kind_has_a_builder(tmp_path: Path, kind: str) -> None:
    """Each name in RULE_KINDS reaches its own builder: a wrong body is a problem of that rule, never
    `unknown rule`."""
    text = f"""\
    stages:
      dev: {{from: build, require: {{{kind}: 42}}}}
    """
    policy, problems = check_policy(write(tmp_path, text))
    assert policy is None
    mine = [p for p in problems if p.path.startswith(f"stages.dev.require.{kind}")]
    assert mine and not any("unknown rule" in p.message for p in problems), problems


def test_yaml_syntax_error_has_location(tmp_path: Path) -> None:
    path = write(tmp_path, "stages:\n  dev: [\n")
    policy, problems = check_policy(path)
    assert policy is None and len(problems) == 1
    assert problems[0].location.startswith(str(path) + ":") and "not valid YAML" in problems[0].message


def test_missing_policy_file() -> None:
    with pytest.raises(NotFoundError):
        load_policy(Path("/nonexistent/policy.yaml"))


def test_cycle_and_self_reference(tmp_path: Path) -> None:
    text = """\
    stages:
      a: {from: b, require: {unconditional: x}}
      b: {from: a, require: {unconditional: x}}
    """
    _, problems = check_policy(write(tmp_path, text))
    assert any("cycle" in p.message for p in problems)


def test_key_pin_must_match_file(tmp_path: Path, keys: Keys) -> None:
    text = f"""\
    keys:
      build: [{{file: {keys["build"][0]}, fingerprint: "{keys["alice"][1]}"}}]
    promoters: [build]
    stages:
      dev: {{from: build, require: {{signature: {{signers: [build]}}}}}}
    """
    _, problems = check_policy(write(tmp_path, text))
    assert any("fingerprint" in p.message and p.path.startswith("keys.build[0]") for p in problems), problems


def test_validation_weekdays_rule_names_and_crowded_rules(tmp_path: Path) -> None:
    text = """\
    version: 1
    stages:
      dev:
        from: build
        require:
          all_of:
            - freeze:
                timezone: Europe/Berlin
                windows:
                  - {days: [frisbee, Monday, SUN, tues], from: "16:00"}
            - signatur: {signers: [x]}
      staging:
        from: dev
        require:
          all_of: []
          unconditional: yes
    """
    _, problems = check_policy(write(tmp_path, text))
    errors = {p.path: p for p in problems if p.severity == "error"}
    days = errors["stages.dev.require.all_of[0].freeze.windows[0].days[0]"]
    assert "unknown weekday 'frisbee'" in days.message and days.location.split(":")[-2] == "10"
    assert "stages.dev.require.all_of[0].freeze.windows[0].days[3]" in errors  # 'tues': not a weekday name
    assert not any(".days[1]" in k or ".days[2]" in k for k in errors)  # Monday, SUN are fine
    typo = errors["stages.dev.require.all_of[1].signatur"]
    assert "did you mean 'signature'?" in typo.message
    crowded = errors["stages.staging.require"]
    assert "exactly one key, this one has 2 (all_of, unconditional)" in crowded.message
    assert "under a single `all_of:`" in crowded.message and "`all_of` is empty" in crowded.message


def test_problems_have_the_one_problem_shape(tmp_path: Path) -> None:
    """Problems are ``builder.yamldoc.Problem``: file, line, col, dotted path (empty for the
    document), message, severity; ``PolicyError`` carries each as ``to_json()``."""
    path = write(tmp_path, "stages:\n  dev: [\n")
    (syntax,) = check_policy(path)[1]
    assert (syntax.file, syntax.path, syntax.severity) == (str(path), "", "error")
    assert syntax.line == 3 and syntax.col >= 1 and syntax.location == f"{path}:{syntax.line}:{syntax.col}"
    path = write(tmp_path, "- not a mapping\n")
    (doc,) = check_policy(path)[1]
    assert (doc.path, doc.line, doc.col) == ("", 1, 1) and "a policy is a mapping" in doc.message
    path = write(tmp_path, "stages:\n  dev:\n    from: build\n    require: {signatur: {signers: [x]}}\n")
    with pytest.raises(PolicyError) as err:
        load_policy(path)
    problems = err.value.details["problems"]
    typo = next(p for p in problems if p["path"] == "stages.dev.require.signatur")
    assert typo["file"] == str(path) and (typo["line"], typo["col"]) == (4, 15) and typo["severity"] == "error"
    assert set(typo) == {"file", "line", "col", "path", "message", "severity"}
    assert f"{path}:4:15: stages.dev.require.signatur: unknown rule 'signatur'" in err.value.message
