"""The rule base, groups and how denial reasons order the evidence that did not count."""

from __future__ import annotations

import pytest

from builder.policy import (
    AllOf,
    AttestationEvidence,
    Policy,
    SignatureEvidence,
    evaluate,
)
from builder.predicates import DEVICE_CHECK_V1, SLSA_PROVENANCE_V1
from builder.signing.fingerprints import short_fingerprint
from tests.unit.policy.support import (
    NOW,
    Keys,
    att,
    dc,
    ev,
    prod_evidence,
    reasons,
)


def test_empty_all_of_is_an_error_in_code_too() -> None:
    with pytest.raises(ValueError, match="empty all_of"):
        AllOf("x:1:1", rules=())


def test_any_of_and_attestation_where(policy: Policy, keys: Keys) -> None:
    d = evaluate(policy, "prod", prod_evidence(keys), NOW)
    anyof = d.reasons[0].children[-1]
    assert anyof.passed and anyof.reason == "1 of 2 alternatives pass"
    assert "no https://slsa.dev/provenance/v1 attestation" in anyof.children[0].reason
    prov = att(
        SLSA_PROVENANCE_V1,
        {"buildDefinition": {"externalParameters": {"source": {"ref": "refs/heads/dev"}}}},
        keys["build"][1],
    )
    anyof = evaluate(policy, "prod", prod_evidence(keys, prov), NOW).reasons[0].children[-1]
    assert "buildDefinition.externalParameters.source.ref != 'refs/heads/main'" in anyof.children[0].reason


def test_denial_reasons_put_the_rules_own_keys_first(policy: Policy, keys: Keys) -> None:
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
    own = f"device check by runners ({short_fingerprint(runner)}) on none did not pass"  # named by the policy
    assert reason.startswith(own), reason
    assert reason.count("not a listed check runner") == 1  # the same line once
    assert reason.index("not a listed check runner") > reason.index(own)
    assert reason.endswith("+3 device check(s) by keys this policy does not list")
    assert alice[7:19] not in reason  # approver keys are not listed for a check-runner rule
    notes = next(r for r in d.failed() if r.rule.startswith("device_check")).to_json()["notes"]
    assert sum(foreign_reason in n for n in notes) == 3 and own in notes  # every fact in --json
    # only foreign evidence: the count names the rule's own key set, not every key of the policy
    only = reasons(evaluate(policy, "staging", ev(*foreign, stage="staging"), NOW))
    assert only["device_check"].startswith("3 device check(s) by keys this policy does not list (none of runners: ")
    assert short_fingerprint(runner) in only["device_check"] and alice[7:19] not in only["device_check"]
    # signatures: the same treatment
    sigs = (SignatureEvidence(None, False, foreign_reason, None, True), SignatureEvidence(alice, True))
    r = reasons(evaluate(policy, "staging", ev(by_build, sigs=sigs, stage="staging"), NOW))["signature"]
    assert r.endswith(
        f"signature by alice ({short_fingerprint(alice)}) is not from a listed key; "
        "+1 signature(s) by keys this policy does not list"
    )
