"""Rules about signed evidence: signatures (keys and keyless), device checks, provenance, fleets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from builder.policy import (
    DeviceCheckFacts,
    FleetEvidence,
    Policy,
    SignatureEvidence,
    device_check_facts,
    driver_branch,
    evaluate,
    load_policy,
)
from builder.predicates import DEVICE_CHECK_V1, SLSA_PROVENANCE_V1
from tests.unit.policy.support import (
    NOW,
    Keys,
    att,
    dc,
    ev,
    prod_evidence,
    reasons,
    write,
)

if TYPE_CHECKING:
    from pathlib import Path


def test_gpu_models_and_driver_branches(policy: Policy, keys: Keys) -> None:
    runner = keys["runner"][1]
    base = prod_evidence(keys)
    only_h100 = [a for a in base.attestations if "H200" not in str(a.predicate)]
    d = evaluate(policy, "prod", ev(*only_h100, ticket="CHG-1234"), NOW)
    assert "no passing check on a GPU matching 'NVIDIA H200*'" in reasons(d)["device_check"]
    old_driver = att(DEVICE_CHECK_V1, dc("nvidia", ("NVIDIA H200",), "550.90.07"), runner)
    d = evaluate(policy, "prod", ev(*only_h100, old_driver, ticket="CHG-1234"), NOW)
    assert "driver 550.90.07 not on branch 570/580" in reasons(d)["device_check"]
    amd = att(DEVICE_CHECK_V1, dc("amd", ("AMD Instinct MI300X",), "6.8.5"), runner)
    d = evaluate(policy, "prod", ev(amd, ticket="CHG-1234"), NOW)
    assert "ran on vendor amd, not nvidia" in reasons(d)["device_check"]


def test_fleet_rule(tmp_path: Path, keys: Keys) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(  # the policy loader validates the fleet file the rule names
        'clusters:\n  - {name: a100-east, vendor: nvidia, gpus: ["NVIDIA A100-SXM4-80GB"], drivers: ["535.161.08"]}\n'
    )
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


def test_provenance_source_and_builder(tmp_path: Path, keys: Keys) -> None:
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


def test_driver_branch_and_device_check_facts() -> None:
    assert driver_branch("580.65.06") == "580" and driver_branch("550.135") == "550"
    facts = device_check_facts({"passed": True, "host": {"vendor": "none", "gpus": []}})
    assert facts == DeviceCheckFacts(True, "none", "", ())
    assert device_check_facts({}) == DeviceCheckFacts(False, "unknown", "", ())
    h200 = device_check_facts(dc("nvidia", ("NVIDIA H200",), "570.124.06"))
    assert h200 == DeviceCheckFacts(True, "nvidia", "570.124.06", ("NVIDIA H200",))


def test_device_check_can_require_evidence_from_named_clusters(tmp_path: Path, keys: Keys) -> None:
    runner = keys["runner"][1]
    text = f"""\
    keys:
      check-runners: [{{file: {keys["runner"][0]}}}]
    stages:
      prod:
        from: build
        require:
          device_check: {{signers: [check-runners], clusters: [h100-train, a100-inference]}}
        rollback: {{allowed: [alice]}}
    approvers:
      alice: {{file: {keys["alice"][0]}}}
    """
    policy = load_policy(write(tmp_path, text))

    def on(cluster: str | None, passed: bool = True) -> Any:
        predicate = dc("nvidia", ("NVIDIA H100 80GB HBM3",), "570.172.08", passed=passed)
        if cluster is not None:
            predicate["placement"] = {"cluster": cluster, "runner": "slurm", "node": "gpu-01", "job_id": "42"}
        return att(DEVICE_CHECK_V1, predicate, runner)

    d = evaluate(policy, "prod", ev(on("h100-train"), on(None)), NOW)
    why = reasons(d)["device_check"]
    assert not d.allowed and "no passing check from cluster 'a100-inference'" in why
    assert "passing checks ran on: h100-train, no cluster named" in why
    d = evaluate(policy, "prod", ev(on("h100-train"), on("a100-inference", passed=False)), NOW)
    assert "no passing check from cluster 'a100-inference'" in reasons(d)["device_check"]
    d = evaluate(policy, "prod", ev(on("h100-train"), on("a100-inference")), NOW)
    assert d.allowed and "device_check" not in reasons(d)
    assert device_check_facts(on("h100-train").predicate).cluster == "h100-train"
    assert device_check_facts(dc("none")).cluster == ""
