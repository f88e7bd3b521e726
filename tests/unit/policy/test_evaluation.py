"""Evaluating a policy: fail closed, each rule's result and why."""

from __future__ import annotations

import pytest

from builder.errors import NotFoundError
from builder.policy import (
    AttestationEvidence,
    Policy,
    SignatureEvidence,
    evaluate,
)
from builder.predicates import DEVICE_CHECK_V1, PROMOTION_V1
from tests.unit.policy.support import (
    DIGEST,
    NOW,
    OTHER,
    Keys,
    att,
    dc,
    ev,
    prod_evidence,
    promo,
    reasons,
)


def test_unknown_stage(policy: Policy) -> None:
    with pytest.raises(NotFoundError, match="qa"):
        evaluate(policy, "qa", ev(), NOW)


def test_dev_is_unconditional(policy: Policy) -> None:
    d = evaluate(policy, "dev", ev(stage="dev"), NOW)
    assert d.allowed and d.reasons[0].reason == "every build"


def test_staging_needs_build_signature_and_runner_check(policy: Policy, keys: Keys) -> None:
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


def test_prod_allowed_with_full_evidence(policy: Policy, keys: Keys) -> None:
    d = evaluate(policy, "prod", prod_evidence(keys), NOW)
    assert d.allowed, d.failed()
    text = "\n".join(line for r in d.reasons for line in r.lines())
    assert "approved by alice, bob" in text and "in staging since 2026-11-28T12:00:00Z" in text


def test_unreadable_evidence_is_named_in_the_reason(policy: Policy) -> None:
    d = evaluate(policy, "staging", ev(stage="staging", problems=("registry answered HTTP 500",)), NOW)
    assert not d.allowed
    assert all("HTTP 500" in r.reason for r in d.failed())


def test_a_crashing_rule_denies(policy: Policy, keys: Keys) -> None:
    weird = AttestationEvidence(
        DEVICE_CHECK_V1, {"result": "passed", "host": {"gpus": 7}}, keys["runner"][1], True, "", None, (DIGEST,)
    )
    d = evaluate(policy, "staging", ev(weird, sigs=(SignatureEvidence(keys["build"][1], True),), stage="staging"), NOW)
    assert not d.allowed  # vendor unknown: not in [none, nvidia]


def test_oddly_shaped_evidence_denies_with_the_error(policy: Policy, keys: Keys) -> None:
    """A predicate of an unexpected shape that trips a rule denies (fail closed) and says so."""
    odd = dict(promo("staging", "2026-11-28T12:00:00Z"), decision=["not", "an", "object"])
    base = [a for a in prod_evidence(keys).attestations if a.predicate_type != PROMOTION_V1]
    d = evaluate(policy, "prod", ev(*base, att(PROMOTION_V1, odd, keys["build"][1]), ticket="CHG-1234"), NOW)
    assert not d.allowed
    assert d.reasons[0].reason.startswith("rule failed on the evidence: AttributeError")
