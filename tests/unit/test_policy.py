"""Policy loading, validation (every problem with its location) and fail-closed evaluation."""

from __future__ import annotations

import datetime as dt
import textwrap
from pathlib import Path
from typing import Any

import pytest

from builder.errors import NotFoundError, PolicyError
from builder.policy import (
    AllOf,
    AttestationEvidence,
    Evidence,
    FleetEvidence,
    SignatureEvidence,
    check_policy,
    device_check_facts,
    driver_branch,
    evaluate,
    load_policy,
    parse_duration,
)
from builder.predicates import APPROVAL_V1, DEVICE_CHECK_V1, PROMOTION_V1, SLSA_PROVENANCE_V1

ROOT = Path(__file__).resolve().parents[2]
DIGEST = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64
NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    from builder.keys import generate_key_pair

    root = tmp_path_factory.mktemp("keys")
    out = {}
    for name in ("build", "runner", "alice", "bob", "carol", "mallory"):
        _, pub, fp = generate_key_pair(root / name, None)
        out[name] = (pub, fp)
    return out


def write(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


POLICY = """\
version: 1
keys:
  build: [{{file: {build}}}]
  runners: [{{file: {runner}}}]
approvers:
  alice: {{file: {alice}}}
  bob: {{file: {bob}}}
  carol: {{file: {carol}}}
promoters: [build]
stages:
  dev:
    from: build
    require: {{unconditional: every build}}
    rollback: {{allowed: [build]}}
  staging:
    from: dev
    require:
      all_of:
        - signature: {{signers: [build]}}
        - device_check: {{signers: [runners], vendors: [none, nvidia]}}
    rollback: {{allowed: [alice]}}
  prod:
    from: staging
    repository: "prod/{{repository}}"
    require:
      all_of:
        - approvals: {{count: 2, approvers: [alice, bob, carol]}}
        - device_check:
            signers: [runners]
            vendors: [nvidia]
            gpu_models: ["NVIDIA H100*", "NVIDIA H200*"]
            driver_branches: ["570", "580"]
        - change_ticket: {{pattern: "CHG-[0-9]{{4,8}}"}}
        - soak: {{min: 24h, signers: [build]}}
        - any_of:
            - attestation:
                type: {slsa}
                signers: [build]
                where: {{buildDefinition.externalParameters.source.ref: refs/heads/main}}
            - unconditional: provenance optional while the build migrates
    rollback: {{allowed: [alice, bob]}}
"""


@pytest.fixture
def policy(tmp_path: Path, keys: dict[str, tuple[Path, str]]) -> Any:
    text = POLICY.format(**{k: v[0] for k, v in keys.items()}, slsa=SLSA_PROVENANCE_V1)
    return load_policy(write(tmp_path, text))


def att(
    ptype: str, predicate: dict[str, Any], signer: str, *, ok: bool = True, subject: str = DIGEST, reason: str = ""
) -> AttestationEvidence:
    return AttestationEvidence(ptype, predicate, signer, ok, reason, None, (subject,))


def dc(vendor: str, gpus: tuple[str, ...] = (), driver: str = "", passed: bool = True) -> dict[str, Any]:
    return {
        "result": "passed" if passed else "failed",
        "host": {"vendor": vendor, "driver_version": driver, "gpus": [{"name": g} for g in gpus]},
    }


def approval(fp: str, *, digest: str = DIGEST, stage: str = "prod") -> dict[str, Any]:
    return {
        "approver": {"fingerprint": fp, "name": None},
        "stage": stage,
        "digest": digest,
        "ticket": "CHG-1234",
        "time": "2026-11-30T10:00:00Z",
    }


def promo(stage: str, when: str, digest: str = DIGEST) -> dict[str, Any]:
    return {"action": "promote", "stage": stage, "digest": digest, "time": when, "decision": {"allowed": True}}


def ev(
    *atts: AttestationEvidence,
    sigs: tuple[SignatureEvidence, ...] = (),
    ticket: str | None = None,
    stage: str = "prod",
    problems: tuple[str, ...] = (),
    fleet: tuple[FleetEvidence, ...] = (),
) -> Evidence:
    return Evidence("reg/repo", DIGEST, stage, sigs, atts, fleet, ticket, problems)


def reasons(decision: Any) -> dict[str, str]:
    return {r.rule.split()[0]: r.reason for r in decision.failed()}


# --------------------------------------------------------------------------------------------- loading


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


def test_every_problem_is_listed_with_its_location(tmp_path: Path, keys: dict[str, tuple[Path, str]]) -> None:
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


def test_yaml_syntax_error_has_location(tmp_path: Path) -> None:
    path = write(tmp_path, "stages:\n  dev: [\n")
    policy, problems = check_policy(path)
    assert policy is None and len(problems) == 1
    assert problems[0].location.startswith(str(path) + ":") and "not valid YAML" in problems[0].message


def test_missing_policy_file() -> None:
    with pytest.raises(NotFoundError):
        load_policy(Path("/nonexistent/policy.yaml"))


def test_empty_all_of_is_an_error_in_code_too() -> None:
    with pytest.raises(ValueError, match="empty all_of"):
        AllOf("x:1:1", rules=())


def test_cycle_and_self_reference(tmp_path: Path) -> None:
    text = """\
    stages:
      a: {from: b, require: {unconditional: x}}
      b: {from: a, require: {unconditional: x}}
    """
    _, problems = check_policy(write(tmp_path, text))
    assert any("cycle" in p.message for p in problems)


def test_key_pin_must_match_file(tmp_path: Path, keys: dict[str, tuple[Path, str]]) -> None:
    text = f"""\
    keys:
      build: [{{file: {keys["build"][0]}, fingerprint: "{keys["alice"][1]}"}}]
    promoters: [build]
    stages:
      dev: {{from: build, require: {{signature: {{signers: [build]}}}}}}
    """
    _, problems = check_policy(write(tmp_path, text))
    assert any("fingerprint" in p.message and p.path.startswith("keys.build[0]") for p in problems), problems


def test_unknown_stage(policy: Any) -> None:
    with pytest.raises(NotFoundError, match="qa"):
        evaluate(policy, "qa", ev(), NOW)


# --------------------------------------------------------------------------------------------- evaluation


def test_dev_is_unconditional(policy: Any) -> None:
    d = evaluate(policy, "dev", ev(stage="dev"), NOW)
    assert d.allowed and d.reasons[0].reason == "every build"


def test_staging_needs_build_signature_and_runner_check(policy: Any, keys: dict[str, tuple[Path, str]]) -> None:
    build, runner = keys["build"][1], keys["runner"][1]
    good_sig = SignatureEvidence(build, True)
    cpu = att(DEVICE_CHECK_V1, dc("none"), runner)
    assert evaluate(policy, "staging", ev(cpu, sigs=(good_sig,), stage="staging"), NOW).allowed
    # no evidence at all: both rules fail, each says why
    r = reasons(evaluate(policy, "staging", ev(stage="staging"), NOW))
    assert "no signature found" in r["signature"] and "no device-check attestation" in r["device_check"]
    # a device check signed by the build key does not count
    self_check = att(DEVICE_CHECK_V1, dc("none"), build)
    r = reasons(evaluate(policy, "staging", ev(self_check, sigs=(good_sig,), stage="staging"), NOW))
    assert list(r) == ["device_check"] and "not a listed check runner" in r["device_check"]
    # a signature by an unlisted key, and an unverifiable one
    bad = (SignatureEvidence(keys["mallory"][1], True), SignatureEvidence(None, False, "payload edited"))
    r = reasons(evaluate(policy, "staging", ev(cpu, sigs=bad, stage="staging"), NOW))
    assert "not from a listed key" in r["signature"] and "payload edited" in r["signature"]
    # an edited (unverified) attestation and a failed check
    edited = att(DEVICE_CHECK_V1, dc("none"), runner, ok=False, reason="layer blob does not match its digest")
    failed = att(DEVICE_CHECK_V1, dc("none", passed=False), runner)
    r = reasons(evaluate(policy, "staging", ev(edited, failed, sigs=(good_sig,), stage="staging"), NOW))
    assert "does not match its digest" in r["device_check"] and "did not pass" in r["device_check"]
    # an attestation about another digest
    elsewhere = att(DEVICE_CHECK_V1, dc("none"), runner, subject=OTHER)
    r = reasons(evaluate(policy, "staging", ev(elsewhere, sigs=(good_sig,), stage="staging"), NOW))
    assert "another digest" in r["device_check"]


def _prod_evidence(
    keys: dict[str, tuple[Path, str]],
    *extra: AttestationEvidence,
    ticket: str = "CHG-1234",
    approvers: tuple[str, ...] = ("alice", "bob"),
) -> Evidence:
    runner, build = keys["runner"][1], keys["build"][1]
    items = [att(APPROVAL_V1, approval(keys[a][1]), keys[a][1]) for a in approvers]
    items.append(att(DEVICE_CHECK_V1, dc("nvidia", ("NVIDIA H100 80GB HBM3",), "580.65.06"), runner))
    items.append(att(DEVICE_CHECK_V1, dc("nvidia", ("NVIDIA H200",), "570.124.06"), runner))
    items.append(att(PROMOTION_V1, promo("staging", "2026-11-28T12:00:00Z"), build))
    return ev(*items, *extra, ticket=ticket)


def test_prod_allowed_with_full_evidence(policy: Any, keys: dict[str, tuple[Path, str]]) -> None:
    d = evaluate(policy, "prod", _prod_evidence(keys), NOW)
    assert d.allowed, d.failed()
    text = "\n".join(line for r in d.reasons for line in r.lines())
    assert "approved by alice, bob" in text and "in staging since 2026-11-28T12:00:00Z" in text


def test_approvals_count_distinct_listed_approvers_for_this_digest_and_stage(
    policy: Any, keys: dict[str, tuple[Path, str]]
) -> None:
    alice, bob, build = keys["alice"][1], keys["bob"][1], keys["build"][1]
    cases = {
        "replayed onto another digest": att(APPROVAL_V1, approval(bob, digest=OTHER), bob),
        "statement about another digest": att(APPROVAL_V1, approval(bob), bob, subject=OTHER),
        "for another stage": att(APPROVAL_V1, approval(bob, stage="staging"), bob),
        "by a non-approver": att(APPROVAL_V1, approval(build), build),
        "claiming another key": att(APPROVAL_V1, approval(alice), bob),
        "unverifiable": att(APPROVAL_V1, approval(bob), bob, ok=False, reason="wrong key"),
    }
    expect = {
        "replayed onto another digest": "names digest " + OTHER,
        "statement about another digest": "is for another digest",
        "for another stage": "is for stage 'staging'",
        "by a non-approver": "who is not a listed approver",
        "claiming another key": "claims another approver key",
        "unverifiable": "does not verify (wrong key)",
    }
    for name, bad in cases.items():
        d = evaluate(policy, "prod", _prod_evidence(keys, bad, approvers=("alice", "alice")), NOW)
        r = reasons(d)
        assert list(r) == ["approvals"], (name, r)
        assert "has 1 (alice)" in r["approvals"] and expect[name] in r["approvals"], (name, r["approvals"])


def test_gpu_models_and_driver_branches(policy: Any, keys: dict[str, tuple[Path, str]]) -> None:
    runner = keys["runner"][1]
    base = _prod_evidence(keys)
    only_h100 = [a for a in base.attestations if "H200" not in str(a.predicate)]
    d = evaluate(policy, "prod", ev(*only_h100, ticket="CHG-1234"), NOW)
    assert "no passing check on a GPU matching 'NVIDIA H200*'" in reasons(d)["device_check"]
    old_driver = att(DEVICE_CHECK_V1, dc("nvidia", ("NVIDIA H200",), "550.90.07"), runner)
    d = evaluate(policy, "prod", ev(*only_h100, old_driver, ticket="CHG-1234"), NOW)
    assert "driver 550.90.07 not on branch 570/580" in reasons(d)["device_check"]
    amd = att(DEVICE_CHECK_V1, dc("amd", ("AMD Instinct MI300X",), "6.8.5"), runner)
    d = evaluate(policy, "prod", ev(amd, ticket="CHG-1234"), NOW)
    assert "ran on vendor amd, not nvidia" in reasons(d)["device_check"]


def test_ticket_and_soak(policy: Any, keys: dict[str, tuple[Path, str]]) -> None:
    assert (
        "no change ticket" in reasons(evaluate(policy, "prod", _prod_evidence(keys, ticket=""), NOW))["change_ticket"]
    )
    assert (
        "does not match"
        in reasons(evaluate(policy, "prod", _prod_evidence(keys, ticket="CHG-12"), NOW))["change_ticket"]
    )
    early = dt.datetime(2026, 11, 29, 2, 0, tzinfo=dt.UTC)  # 14h after entering staging
    r = reasons(evaluate(policy, "prod", _prod_evidence(keys), early))
    assert list(r) == ["soak"] and "14h" in r["soak"] and "10h to go" in r["soak"]
    # a promotion record signed by someone else does not count for soak
    base = [a for a in _prod_evidence(keys).attestations if a.predicate_type != PROMOTION_V1]
    forged = att(PROMOTION_V1, promo("staging", "2026-11-01T00:00:00Z"), keys["mallory"][1])
    r = reasons(evaluate(policy, "prod", ev(*base, forged, ticket="CHG-1234"), NOW))
    assert "not a listed promoter" in r["soak"]


def test_unreadable_evidence_is_named_in_the_reason(policy: Any) -> None:
    d = evaluate(policy, "staging", ev(stage="staging", problems=("registry answered HTTP 500",)), NOW)
    assert not d.allowed
    assert all("HTTP 500" in r.reason for r in d.failed())


def test_a_crashing_rule_denies(policy: Any, keys: dict[str, tuple[Path, str]]) -> None:
    weird = AttestationEvidence(
        DEVICE_CHECK_V1, {"result": "passed", "host": {"gpus": 7}}, keys["runner"][1], True, "", None, (DIGEST,)
    )
    d = evaluate(policy, "staging", ev(weird, sigs=(SignatureEvidence(keys["build"][1], True),), stage="staging"), NOW)
    assert not d.allowed  # vendor unknown: not in [none, nvidia]


def test_any_of_and_attestation_where(policy: Any, keys: dict[str, tuple[Path, str]]) -> None:
    d = evaluate(policy, "prod", _prod_evidence(keys), NOW)
    anyof = d.reasons[0].children[-1]
    assert anyof.passed and anyof.reason == "1 of 2 alternatives pass"
    assert "no https://slsa.dev/provenance/v1 attestation" in anyof.children[0].reason
    prov = att(
        SLSA_PROVENANCE_V1,
        {"buildDefinition": {"externalParameters": {"source": {"ref": "refs/heads/dev"}}}},
        keys["build"][1],
    )
    anyof = evaluate(policy, "prod", _prod_evidence(keys, prov), NOW).reasons[0].children[-1]
    assert "buildDefinition.externalParameters.source.ref != 'refs/heads/main'" in anyof.children[0].reason


def test_fleet_rule(tmp_path: Path, keys: dict[str, tuple[Path, str]]) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("clusters: {}\n")
    text = f"""\
    stages:
      prod:
        from: build
        require:
          fleet: {{file: {fleet}, clusters: [a100-east, h200-west]}}
        rollback: {{allowed: [alice]}}
    approvers:
      alice: {{file: {keys["alice"][0]}}}
    """
    policy = load_policy(write(tmp_path, text))
    assert policy.fleets("prod") == (str(fleet.resolve()),)
    f = str(fleet.resolve())
    rows = (
        FleetEvidence(f, "a100-east", "ok"),
        FleetEvidence(f, "h200-west", "blocked", "driver 535 < 570.26"),
        FleetEvidence(f, "other", "blocked"),
    )
    r = reasons(evaluate(policy, "prod", ev(fleet=rows), NOW))
    assert r["fleet"] == "cannot run on cluster h200-west: blocked (driver 535 < 570.26)"
    ok = (FleetEvidence(f, "a100-east", "ok"), FleetEvidence(f, "h200-west", "minor-version-compat"))
    assert evaluate(policy, "prod", ev(fleet=ok), NOW).allowed
    assert "no compatibility verdicts" in reasons(evaluate(policy, "prod", ev(), NOW))["fleet"]


def test_freeze_windows_in_time_zones(tmp_path: Path) -> None:
    text = """\
    stages:
      prod:
        from: build
        require:
          freeze:
            timezone: Europe/Berlin
            windows:
              - {reason: year end, start: 2026-12-18T18:00:00, end: 2027-01-04T08:00:00}
              - {reason: friday evening, days: [fri], from: "16:00"}
              - {reason: weekend, days: [sat, sun]}
              - {reason: nightly maintenance, days: [mon], from: "23:00", to: "02:00"}
    """
    policy = load_policy(write(tmp_path, text))

    def frozen(when: dt.datetime) -> str | None:
        d = evaluate(policy, "prod", ev(stage="prod"), when)
        return None if d.allowed else d.failed()[0].reason

    utc = dt.UTC
    assert frozen(dt.datetime(2026, 12, 18, 16, 59, tzinfo=utc)) is not None  # Fri 17:59 Berlin: friday evening
    assert "year end" in (frozen(dt.datetime(2026, 12, 22, 10, 0, tzinfo=utc)) or "")
    assert frozen(dt.datetime(2027, 1, 4, 7, 30, tzinfo=utc)) is None  # Mon 08:30 Berlin: after the window
    assert frozen(dt.datetime(2026, 11, 27, 14, 59, tzinfo=utc)) is None  # Fri 15:59 Berlin (CET)
    assert "friday evening" in (frozen(dt.datetime(2026, 11, 27, 15, 0, tzinfo=utc)) or "")
    # summer time: Fri 16:00 Berlin is 14:00 UTC in July
    assert "friday evening" in (frozen(dt.datetime(2026, 7, 3, 14, 0, tzinfo=utc)) or "")
    assert "weekend" in (frozen(dt.datetime(2026, 11, 29, 12, 0, tzinfo=utc)) or "")
    # overnight window: Monday 23:30 and Tuesday 01:30 Berlin, not Tuesday 02:30
    assert "nightly" in (frozen(dt.datetime(2026, 11, 30, 22, 30, tzinfo=utc)) or "")
    assert "nightly" in (frozen(dt.datetime(2026, 12, 1, 0, 30, tzinfo=utc)) or "")
    assert frozen(dt.datetime(2026, 12, 1, 1, 30, tzinfo=utc)) is None
    with pytest.raises(ValueError):
        evaluate(policy, "prod", ev(stage="prod"), dt.datetime(2026, 1, 1))
    # the denial says when the freeze lifts, following windows that continue it
    fri = frozen(dt.datetime(2026, 11, 27, 15, 0, tzinfo=utc)) or ""
    assert fri.startswith("frozen until 2026-11-30 00:00 CET (Europe/Berlin, 2d8h to go): friday evening"), fri
    year_end = frozen(dt.datetime(2026, 12, 22, 10, 0, tzinfo=utc)) or ""
    assert year_end.startswith("frozen until 2027-01-04 08:00 CET (Europe/Berlin, 12d21h to go): year end"), year_end
    into_year_end = frozen(dt.datetime(2026, 12, 18, 16, 59, tzinfo=utc)) or ""
    assert "until 2027-01-04 08:00 CET" in into_year_end and "friday evening" in into_year_end
    nightly = frozen(dt.datetime(2026, 11, 30, 22, 30, tzinfo=utc)) or ""
    assert nightly.startswith("frozen until 2026-12-01 02:00 CET (Europe/Berlin, 2h30m to go)"), nightly
    assert "now 2026-11-30 23:30 CET" in nightly


def test_small_helpers() -> None:
    assert parse_duration("1d12h") == dt.timedelta(days=1, hours=12)
    assert parse_duration("90m") == dt.timedelta(minutes=90)
    assert parse_duration(30) == dt.timedelta(seconds=30)
    for bad in ("", "12", "forever", "-1h"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    assert driver_branch("580.65.06") == "580" and driver_branch("550.135") == "550"
    assert device_check_facts({"passed": True, "host": {"vendor": "none", "gpus": []}}) == (True, "none", "", ())
    assert device_check_facts({}) == (False, "unknown", "", ())


def test_keyless_identities(tmp_path: Path) -> None:
    text = """\
    keys:
      ci:
        - issuer: https://token.actions.githubusercontent.com
          subject: "https://github.com/acme/images/.github/workflows/build.yml@refs/heads/.+"
    stages:
      dev:
        from: build
        require: {signature: {signers: [ci]}}
    """
    policy = load_policy(write(tmp_path, text))
    gha = "https://token.actions.githubusercontent.com"
    good = SignatureEvidence(
        None, True, "", (gha, "https://github.com/acme/images/.github/workflows/build.yml@refs/heads/main")
    )
    fork = SignatureEvidence(
        None, True, "", (gha, "https://github.com/evil/images/.github/workflows/build.yml@refs/heads/main")
    )
    other_issuer = SignatureEvidence(
        None, True, "", ("https://accounts.google.com", good.identity[1] if good.identity else "")
    )
    assert evaluate(policy, "dev", ev(sigs=(good,), stage="dev"), NOW).allowed
    for bad in (fork, other_issuer):
        r = reasons(evaluate(policy, "dev", ev(sigs=(bad,), stage="dev"), NOW))
        assert "not from a listed key" in r["signature"]


def test_keyless_signer_text_parses() -> None:
    from builder.promote import keyless_identity

    assert keyless_identity("sha256:" + "a" * 64) is None
    assert keyless_identity("ci@example.com (issuer https://issuer.example)") == (
        "https://issuer.example",
        "ci@example.com",
    )


def test_provenance_source_and_builder(tmp_path: Path, keys: dict[str, tuple[Path, str]]) -> None:
    text = f"""\
    keys:
      build: [{{file: {keys["build"][0]}}}]
    stages:
      dev:
        from: build
        require:
          provenance:
            signers: [build]
            source: "git+https://github.com/acme/images@*"
            builder_id: https://builder-project.github.io/builder
    """
    policy = load_policy(write(tmp_path, text))
    build = keys["build"][1]

    def prov(uri: str, builder: str = "https://builder-project.github.io/builder") -> dict[str, Any]:
        return {
            "buildDefinition": {"resolvedDependencies": [{"name": "source", "uri": uri}, {"name": "Dockerfile"}]},
            "runDetails": {"builder": {"id": builder}},
        }

    good = att(SLSA_PROVENANCE_V1, prov("git+https://github.com/acme/images@0123abcd"), build)
    assert evaluate(policy, "dev", ev(good, stage="dev"), NOW).allowed
    fork = att(SLSA_PROVENANCE_V1, prov("git+https://github.com/evil/images@0123abcd"), build)
    r = reasons(evaluate(policy, "dev", ev(fork, stage="dev"), NOW))
    assert "is not git+https://github.com/acme/images@*" in r["provenance"]
    other_builder = att(SLSA_PROVENANCE_V1, prov("git+https://github.com/acme/images@1", "https://x"), build)
    assert "builder 'https://x'" in reasons(evaluate(policy, "dev", ev(other_builder, stage="dev"), NOW))["provenance"]
    by_runner = att(SLSA_PROVENANCE_V1, prov("git+https://github.com/acme/images@1"), keys["runner"][1])
    assert "not a listed signer" in reasons(evaluate(policy, "dev", ev(by_runner, stage="dev"), NOW))["provenance"]


def test_denial_reasons_put_the_rules_own_keys_first(policy: Any, keys: dict[str, tuple[Path, str]]) -> None:
    """The rule's own signers' evidence first, each line once, attestations by keys the policy does
    not list summarised as a count naming only the rule's key set; every line kept in the JSON."""
    build, runner, alice = keys["build"][1], keys["runner"][1], keys["alice"][1]
    foreign_reason = f"wrong key? none of the given keys ({build[:19]}, {alice[:19]}) verifies this signature"
    foreign = [
        AttestationEvidence(DEVICE_CHECK_V1, {}, f"sha256:{i}" * 8, False, foreign_reason, None, (), untrusted=True)
        for i in range(3)
    ]
    by_build = att(DEVICE_CHECK_V1, dc("none"), build)
    failed = att(DEVICE_CHECK_V1, dc("none", passed=False), runner)
    evidence = ev(
        *foreign, by_build, by_build, by_build, failed, sigs=(SignatureEvidence(build, True),), stage="staging"
    )
    d = evaluate(policy, "staging", evidence, NOW)
    reason = reasons(d)["device_check"]
    own = f"device check by {runner[:19]}… on none did not pass"
    assert reason.startswith(own), reason
    assert reason.count("not a listed check runner") == 1  # the same line once
    assert reason.index("not a listed check runner") > reason.index(own)
    assert reason.endswith("+3 device check(s) by keys this policy does not list")
    assert alice[:19] not in reason  # approver keys are not listed for a check-runner rule
    notes = next(r for r in d.failed() if r.rule.startswith("device_check")).to_json()["notes"]
    assert sum(foreign_reason in n for n in notes) == 3 and own in notes  # every fact in --json
    # only foreign evidence: the count names the rule's own key set, not every key of the policy
    only = reasons(evaluate(policy, "staging", ev(*foreign, stage="staging"), NOW))
    assert only["device_check"].startswith("3 device check(s) by keys this policy does not list (none of runners: ")
    assert runner[:19] in only["device_check"] and alice[:19] not in only["device_check"]
    # signatures: the same treatment
    sigs = (SignatureEvidence(None, False, foreign_reason, None, True), SignatureEvidence(alice, True))
    r = reasons(evaluate(policy, "staging", ev(by_build, sigs=sigs, stage="staging"), NOW))["signature"]
    assert r.endswith(
        "signature by " + alice[:19] + "… is not from a listed key; +1 signature(s) by keys this policy does not list"
    )


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
