"""The evidence gates of the declared checks: ``tests``, ``benchmark`` (regression against the digest the
stage holds, same hardware class, fail closed, allow_first, a fixed value, lower-is-better metrics) and
``collective`` (busbw against the link bandwidth), with predicates shaped as builder.checks.evidence
writes them (docs/evidence.md)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import pytest

from builder.errors import PolicyError
from builder.policy import Policy, evaluate, load_policy
from builder.predicates import BENCHMARK_V1, TEST_RESULT_V1
from tests.unit.policy.support import DIGEST, NOW, OTHER, Keys, att, ev, reasons, staging_policy, write

if TYPE_CHECKING:
    from pathlib import Path

H100 = {
    "vendor": "nvidia",
    "gpu_model": "NVIDIA H100 80GB HBM3",
    "gpu_count": 8,
    "driver_branch": "580",
    "cpu_model": "x",
}
CPU = {"vendor": "none", "gpu_model": None, "gpu_count": 0, "driver_branch": None, "cpu_model": "AMD EPYC 7B13"}


def _policy(tmp_path: Path, keys: Keys, staging: str) -> Policy:
    return staging_policy(tmp_path, keys, staging)


def bench(
    value: float, hw: dict[str, Any], *, hib: bool = True, result: str = "passed", when: str = "t1"
) -> dict[str, Any]:
    return {
        "result": result,
        "metrics": [{"name": "throughput", "value": value, "unit": "GFLOP/s", "higher_is_better": hib}],
        "hardware": hw,
        "run": {"finished_at": when},
    }


GATE = "      benchmark: {signers: [runners], metric: throughput, max_regression: 5%, same: [gpu_model, driver_branch]}"


def _with_stage(evidence: Any, *baseline: Any, held: str | None = OTHER) -> Any:
    return dataclasses.replace(evidence, stage="staging", baseline_digest=held, baseline=baseline)


def test_regression_beyond_the_limit_is_denied_naming_both_numbers_and_the_class(tmp_path: Path, keys: Keys) -> None:
    runner = keys["runner"][1]
    policy = _policy(tmp_path, keys, GATE)
    held = att(BENCHMARK_V1, bench(100.0, H100), runner, subject=OTHER)
    slower = _with_stage(ev(att(BENCHMARK_V1, bench(90.0, H100), runner)), held)
    why = reasons(evaluate(policy, "staging", slower, NOW))["benchmark"]
    assert "throughput 90 GFLOP/s vs 100 GFLOP/s of staging's sha256:bbbbbbbbbbbb: 10.0% slower" in why
    assert "(max regression 5%) on hardware class gpu_model=NVIDIA H100 80GB HBM3, driver_branch=580" in why
    ok = _with_stage(ev(att(BENCHMARK_V1, bench(96.0, H100), runner)), held)
    assert evaluate(policy, "staging", ok, NOW).allowed


def test_only_the_same_hardware_class_counts_and_missing_is_fail_closed(tmp_path: Path, keys: Keys) -> None:
    runner = keys["runner"][1]
    policy = _policy(tmp_path, keys, GATE)
    other_driver = att(BENCHMARK_V1, bench(50.0, {**H100, "driver_branch": "570"}), runner, subject=OTHER)
    cand = ev(att(BENCHMARK_V1, bench(90.0, H100), runner))
    why = reasons(evaluate(policy, "staging", _with_stage(cand, other_driver), NOW))["benchmark"]
    assert "no benchmark/v1 of staging's sha256:bbbbbbbbbbbb with throughput on hardware class" in why
    assert "driver_branch=580" in why
    empty = reasons(evaluate(policy, "staging", _with_stage(cand, held=None), NOW))["benchmark"]
    assert "staging holds no digest to compare throughput 90 GFLOP/s with" in empty and "allow_first" in empty
    nothing = reasons(evaluate(policy, "staging", _with_stage(ev(), held=None), NOW))["benchmark"]
    assert "no passing benchmark/v1 with metric 'throughput'" in nothing


def test_allow_first_and_a_fixed_value_and_lower_is_better(tmp_path: Path, keys: Keys) -> None:
    runner = keys["runner"][1]
    first = _policy(tmp_path, keys, GATE.replace("same:", "allow_first: true, same:"))
    cand = ev(att(BENCHMARK_V1, bench(90.0, CPU), runner))
    assert evaluate(first, "staging", _with_stage(cand, held=None), NOW).allowed
    fixed = _policy(tmp_path, keys, GATE.replace("same:", "against: 100, same:"))
    why = reasons(evaluate(fixed, "staging", _with_stage(cand, held=None), NOW))["benchmark"]
    assert "throughput 90 GFLOP/s vs 100 GFLOP/s of the policy's value: 10.0% slower" in why
    latency = att(BENCHMARK_V1, bench(12.0, CPU, hib=False), runner)
    held = att(BENCHMARK_V1, bench(10.0, CPU, hib=False), runner, subject=OTHER)
    why_map = reasons(evaluate(_policy(tmp_path, keys, GATE), "staging", _with_stage(ev(latency), held), NOW))
    assert "20.0% higher" in why_map["benchmark"]


def test_untrusted_failed_or_other_digest_benchmarks_do_not_count(tmp_path: Path, keys: Keys) -> None:
    runner, mallory = keys["runner"][1], keys["mallory"][1]
    policy = _policy(tmp_path, keys, GATE.replace("same:", "allow_first: true, same:"))
    for a in (
        att(BENCHMARK_V1, bench(200.0, H100), mallory),
        att(BENCHMARK_V1, bench(200.0, H100, result="failed"), runner),
        att(BENCHMARK_V1, bench(200.0, H100), runner, subject=OTHER),
        att(BENCHMARK_V1, bench(200.0, H100), runner, ok=False, reason="bad signature"),
    ):
        d = evaluate(policy, "staging", _with_stage(ev(a), held=None), NOW)
        assert not d.allowed and "no passing benchmark/v1" in reasons(d)["benchmark"]


def test_the_newest_run_of_each_digest_is_compared(tmp_path: Path, keys: Keys) -> None:
    runner = keys["runner"][1]
    policy = _policy(tmp_path, keys, GATE)
    held = (
        att(BENCHMARK_V1, bench(50.0, H100, when="2026-11-01T00:00:00Z"), runner, subject=OTHER),
        att(BENCHMARK_V1, bench(100.0, H100, when="2026-11-02T00:00:00Z"), runner, subject=OTHER),
    )
    cand = ev(
        att(BENCHMARK_V1, bench(99.0, H100, when="2026-11-03T00:00:00Z"), runner),
        att(BENCHMARK_V1, bench(10.0, H100, when="2026-11-02T00:00:00Z"), runner),
    )
    assert evaluate(policy, "staging", _with_stage(cand, *held), NOW).allowed


def test_tests_rule(tmp_path: Path, keys: Keys) -> None:
    runner = keys["runner"][1]
    policy = _policy(tmp_path, keys, "      tests: {signers: [runners]}")
    summary = {"tests": 5, "failures": 1, "errors": 0, "skipped": 0}
    failed = att(TEST_RESULT_V1, {"result": "failed", "summary": summary}, runner)
    why = reasons(evaluate(policy, "staging", _with_stage(ev(failed)), NOW))["tests"]
    assert "tests by" in why and "failed (5 tests, 1 failed)" in why
    assert "no test-result/v1 attestation" in reasons(evaluate(policy, "staging", _with_stage(ev()), NOW))["tests"]
    passed = att(TEST_RESULT_V1, {"result": "passed", "summary": {**summary, "failures": 0}}, runner)
    assert evaluate(policy, "staging", _with_stage(ev(passed)), NOW).allowed


def test_tests_passed_short_form_means_the_check_runners(tmp_path: Path, keys: Keys) -> None:
    runner = keys["runner"][1]
    text = f"""\
    version: 1
    keys:
      check-runners: [{{file: {keys["runner"][0]}}}]
      build: [{{file: {keys["build"][0]}}}]
    promoters: [build]
    stages:
      dev: {{from: build, require: {{tests: passed}}, rollback: {{allowed: [build]}}}}
    """
    policy = load_policy(write(tmp_path, text))
    passed = att(TEST_RESULT_V1, {"result": "passed"}, runner)
    assert evaluate(policy, "dev", dataclasses.replace(ev(passed), stage="dev"), NOW).allowed
    assert not evaluate(policy, "dev", dataclasses.replace(ev(), stage="dev"), NOW).allowed
    with pytest.raises(PolicyError) as err:  # no such key set: named at the rule
        _policy(tmp_path, keys, "      tests: passed")
    assert any("check-runners" in p["message"] for p in err.value.details["problems"])


def test_collective_rule(tmp_path: Path, keys: Keys) -> None:
    runner = keys["runner"][1]
    policy = _policy(tmp_path, keys, "      collective: {signers: [runners], min_busbw_ratio: 0.8}")

    def coll(busbw: float | None, expected: float | None, passed: bool = True) -> Any:
        section = {
            "passed": passed,
            "busbw_gbps": busbw,
            "expected_gbps": expected,
            "problems": ["x"],
            "link": "NVSwitch: 18 NVLink 4 links x 25 GB/s (Hopper GH100)",
        }
        return att(BENCHMARK_V1, {**bench(1.0, H100), "collective": section}, runner)

    low = reasons(evaluate(policy, "staging", _with_stage(ev(coll(300.0, 450.0))), NOW))["collective"]
    assert "all-reduce busbw 300 GB/s vs expected 450 GB/s" in low and "ratio 0.67 (min 0.8)" in low
    assert evaluate(policy, "staging", _with_stage(ev(coll(400.0, 450.0))), NOW).allowed
    unknown = reasons(evaluate(policy, "staging", _with_stage(ev(coll(20.0, None))), NOW))["collective"]
    assert "nothing to compare with" in unknown
    over = reasons(evaluate(policy, "staging", _with_stage(ev(coll(400.0, 450.0, passed=False))), NOW))
    assert "collective check by" in over["collective"] and "failed: x" in over["collective"]
    single = reasons(evaluate(policy, "staging", _with_stage(ev(att(BENCHMARK_V1, bench(1.0, CPU), runner))), NOW))
    assert "the collective check needs >= 2 GPUs" in single["collective"] and "ran on 0 GPU(s)" in single["collective"]
    assert "single_gpu: not-applicable" in single["collective"]  # says how to mark it, stays closed
    none = reasons(evaluate(policy, "staging", _with_stage(ev(att(BENCHMARK_V1, bench(1.0, H100), runner))), NOW))
    assert "no benchmark/v1 with a collective measurement on >= 2 GPUs" in none["collective"]
    assert "the newest ran on 8 GPU(s)" in none["collective"]


def test_collective_single_gpu_not_applicable_only_when_the_policy_says_so(tmp_path: Path, keys: Keys) -> None:
    runner = keys["runner"][1]
    body = "      collective: {signers: [runners], min_busbw_ratio: 0.8, single_gpu: not-applicable}"
    policy = _policy(tmp_path, keys, body)
    one_gpu = {**H100, "gpu_count": 1, "gpu_model": "NVIDIA H200"}
    cpu_gloo = {"passed": True, "busbw_gbps": 1.2, "expected_gbps": None, "link": "fewer than 2 GPUs: no GPU-GPU link"}
    for pred in (bench(1.0, one_gpu), {**bench(1.0, CPU), "collective": cpu_gloo}):
        decision = evaluate(policy, "staging", _with_stage(ev(att(BENCHMARK_V1, pred, runner))), NOW)
        [why] = [r.reason for r in decision.reasons if r.rule.startswith("collective")]
        assert decision.allowed and why.startswith("not applicable: the collective check needs >= 2 GPUs"), why
    # an 8-GPU measurement still counts (and is judged) when a later benchmark ran on one GPU
    section = {"passed": True, "busbw_gbps": 100.0, "expected_gbps": 450.0, "link": "NVSwitch"}
    multi = att(BENCHMARK_V1, {**bench(1.0, H100, when="t1"), "collective": section}, runner)
    later = att(BENCHMARK_V1, bench(1.0, one_gpu, when="t2"), runner)
    low = reasons(evaluate(policy, "staging", _with_stage(ev(multi, later)), NOW))["collective"]
    assert "ratio 0.22 (min 0.8)" in low
    # nothing at all is still closed, and a wrong value is located
    assert "no benchmark/v1" in reasons(evaluate(policy, "staging", _with_stage(ev()), NOW))["collective"]
    with pytest.raises(PolicyError) as err:
        _policy(tmp_path, keys, "      collective: {signers: [runners], min_busbw_ratio: 0.8, single_gpu: skip}")
    assert any("not-applicable" in p["message"] for p in err.value.details["problems"])


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("{signers: [runners], metric: m, max_regression: 150%}", "less than 1"),
        ("{signers: [runners], metric: m, max_regression: 5%, same: [gpu]}", "'gpu_model'"),
        ("{signers: [nobody], metric: m, max_regression: 5%}", "nobody"),
        ("{signers: [runners], max_regression: 5%}", "metric"),
    ],
)
def test_benchmark_rule_mistakes_are_located(tmp_path: Path, keys: Keys, body: str, says: str) -> None:
    with pytest.raises(PolicyError) as err:
        _policy(tmp_path, keys, f"      benchmark: {body}")
    problems = err.value.details["problems"]
    assert any("benchmark" in p["path"] and says in p["path"] + p["message"] for p in problems), problems


def test_against_stage_digest_itself_passes(tmp_path: Path, keys: Keys) -> None:
    runner = keys["runner"][1]
    policy = _policy(tmp_path, keys, GATE)
    same = _with_stage(ev(att(BENCHMARK_V1, bench(1.0, H100), runner)), held=DIGEST)
    assert evaluate(policy, "staging", same, NOW).allowed
