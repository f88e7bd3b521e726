"""Evidence beyond the smoke test, on real parts (#17): the demo image's declared tests and benchmark
run by `builder check` in fresh containers and signed (real cosign verifies test-result/v1 and
benchmark/v1 with the check-runner key); the in-container collective check with 2 processes on the
CPU (gloo) for real, oversubscription included; and the regression gate: the same variant rebuilt
with the demo benchmark's knob (BUILDER_DEMO_BENCH_SLOWDOWN, an ENV of the image) is denied at
staging by the `benchmark` rule, naming both throughputs and the hardware class.

Needs the demo image (bash scripts/demo). No timing assertion: the knob makes the rebuilt image do
ten times the work per sample, far beyond the machine's noise and the policy's 25 %.
"""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING, Any

import pytest

from builder.checks.evidence import run_declared
from builder.engine import run_container
from builder.models import CheckCommand
from builder.predicates import BENCHMARK_V1, TEST_RESULT_V1
from tests.attestations import statements, verify_attestation
from tests.conftest import ROOT, Cli

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration

VARIANT = "jax0.7-cpu-py3.11-debian12"
ENV = {"BUILDER_KEY_PASSWORD": "evidence-test"}


@pytest.fixture(autouse=True)
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


@pytest.fixture(scope="module")
def demo_image(demo_cpu_image: str) -> str:
    return demo_cpu_image


def _collective(image: str, **env: str) -> tuple[bool, dict[str, Any], tuple[str, ...]]:
    check = CheckCommand(
        "collective", script="evidence/jax/collective.py", timeout=300, min_devices=0, env=tuple(env.items())
    )
    run = run_declared(image, check, mode="cpu", runner=run_container, root=ROOT)
    assert run.collective is not None, run.output + str(run.step.error)
    return run.passed, dict(run.collective), run.problems


def test_collective_two_processes_on_the_cpu_with_gloo(demo_image: str) -> None:
    passed, doc, problems = _collective(demo_image, BUILDER_COLLECTIVE_BIND="0,1")
    assert passed and not problems, problems
    assert doc["backend"] == "gloo" and doc["ranks"] == 2 and doc["allreduce_correct"] is True
    detail = doc["ranks_detail"]
    assert [r["device"] for r in detail] == ["cpu:0", "cpu:1"]
    assert [r["cpus"] for r in detail] == [[0], [1]]
    rows = doc["rows"]
    assert [r["size_bytes"] for r in rows] == [65536, 1048576, 8388608]
    # 2 ranks: busbw = algbw * 2 (n - 1) / n = algbw (nccl-tests PERFORMANCE.md)
    assert all(r["busbw_gbps"] == r["algbw_gbps"] > 0 for r in rows)


def test_two_ranks_on_one_device_is_oversubscription(demo_image: str) -> None:
    passed, doc, problems = _collective(demo_image, BUILDER_COLLECTIVE_BIND="0,0")
    assert not passed and doc["oversubscribed"] == ["cpu:0"]
    assert any("oversubscribed: more than one rank on cpu:0" in p for p in problems)


def _policy(path: Path, build_pub: Path, runner_pub: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "keys": {
                    "build": [{"file": str(build_pub)}],
                    "check-runners": [{"file": str(runner_pub)}],
                },
                "promoters": ["build"],
                "stages": {
                    "dev": {"from": "build", "require": {"unconditional": "every build"}},
                    "staging": {
                        "from": "dev",
                        "require": {
                            "all_of": [
                                {"tests": {"signers": ["check-runners"]}},
                                {
                                    "benchmark": {
                                        "signers": ["check-runners"],
                                        "metric": "matmul_f32_throughput",
                                        "max_regression": "25%",
                                        "allow_first": True,
                                    }
                                },
                            ]
                        },
                    },
                },
            }
        )
    )
    return path


def _verify(cosign_bin: str, pub: Path, ref: str, ptype: str) -> dict[str, Any]:
    out = verify_attestation(cosign_bin, pub, ref, ptype)
    assert out.returncode == 0, out.stderr
    statement = statements(out.stdout)[-1]
    assert statement["predicateType"] == ptype
    predicate: dict[str, Any] = statement["predicate"]
    return predicate


def test_signed_results_and_the_regression_gate(
    demo_image: str, registry_address: str, unique_repo: str, tmp_path: Path, cosign_bin: str, cli: Cli
) -> None:
    cli("keys", "generate", "--output-dir", str(tmp_path / "build"), env=ENV)
    cli("keys", "generate", "--output-dir", str(tmp_path / "runner"), env=ENV)
    build_key, runner_key = tmp_path / "build" / "builder.key", tmp_path / "runner" / "builder.key"
    policy = _policy(tmp_path / "policy.yaml", build_key.with_suffix(".pub"), runner_key.with_suffix(".pub"))
    ref = f"{registry_address}/{unique_repo}:{VARIANT}"
    subprocess.run(["docker", "buildx", "imagetools", "create", "-t", ref, demo_image], check=True, timeout=300)

    # 1. the declared tests and benchmark run after the device probe and are signed
    doc = cli("check", ref, "--key", str(runner_key), "--json", env=ENV).json()
    by_type = {e["predicate_type"]: e for e in doc["evidence"]}
    assert by_type[TEST_RESULT_V1]["passed"] and by_type[TEST_RESULT_V1]["summary"]["failures"] == 0
    assert by_type[BENCHMARK_V1]["written"] and by_type[BENCHMARK_V1]["metrics"][0]["unit"] == "GFLOP/s"
    bench = _verify(cosign_bin, runner_key.with_suffix(".pub"), ref, BENCHMARK_V1)
    tests = _verify(cosign_bin, runner_key.with_suffix(".pub"), ref, TEST_RESULT_V1)
    assert tests["result"] == "passed" and tests["summary"]["tests"] >= 5
    assert bench["code"]["script"] == "evidence/jax/benchmark.py"
    assert bench["image"]["digest"] == doc["image"]["digest"]
    assert bench["hardware"]["gpu_count"] == 0 and bench["topology"]["fabric"] == "none"
    baseline = bench["metrics"][0]["value"]

    fresh = cli("report", ref, "--policy", str(policy), "--no-svg", env=ENV)  # checked, not promoted yet
    assert "no stage holds this variant yet" in fresh.stderr and f"builder promote {ref} --to dev" in fresh.stderr

    common = ["--policy", str(policy), "--key", str(build_key)]
    penv = {**ENV, "BUILDER_LEDGER": str(tmp_path / "ledger.sqlite")}  # not the checkout's own ledger
    cli("promote", ref, "--to", "dev", "--confirm", *common, env=penv)
    cli("promote", f"{registry_address}/{unique_repo}:{VARIANT}-dev", "--to", "staging", "--confirm", *common, env=penv)

    # 2. the same variant rebuilt with the knob: ten times the work per timed sample
    ctx = tmp_path / "slow"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM {demo_image}\nENV BUILDER_DEMO_BENCH_SLOWDOWN=10\n")
    subprocess.run(["docker", "buildx", "build", "--push", "-q", "-t", ref, str(ctx)], check=True, timeout=600)
    slow = cli("check", ref, "--key", str(runner_key), "--json", env=ENV).json()
    slow_value = next(e for e in slow["evidence"] if e["predicate_type"] == BENCHMARK_V1)["metrics"][0]["value"]
    cli("promote", ref, "--to", "dev", "--confirm", *common, env=penv)
    denied = cli(
        "promote", f"{registry_address}/{unique_repo}:{VARIANT}-dev", "--to", "staging", *common, env=penv, code=31
    )
    assert (tmp_path / "ledger.sqlite").is_file()  # the rows went to the test's own ledger
    reason = denied.stderr + denied.stdout
    assert "benchmark matmul_f32_throughput" in reason
    assert f"{slow_value:g} GFLOP/s vs {baseline:g} GFLOP/s" in reason
    assert "slower (max regression 25%) on hardware class" in reason and "gpu_model=none" in reason

    # 3. the report: dev held the fast then the slow digest, staging the fast one
    svg = tmp_path / "perf.svg"
    rep = cli("report", ref, "--policy", str(policy), "--svg", str(svg), "--json", env=ENV).json()
    stages = {st["stage"]: st for st in rep["stages"]}
    assert rep["metric"] == "matmul_f32_throughput" and rep["svg"] == str(svg)
    assert [p["value"] for p in stages["dev"]["points"]] == [baseline, slow_value]
    assert stages["dev"]["sparkline"] == "█▁" and [p["tests"] for p in stages["dev"]["points"]] == ["passed"] * 2
    assert [p["value"] for p in stages["staging"]["points"]] == [baseline]
    assert svg.read_text().startswith("<svg") and svg.read_text().count("<circle") == 3

    # 4. as a new user reads it: 80 columns, each digest's line; a metric no benchmark has is named
    human = cli("report", ref, "--policy", str(policy), "--no-svg", env={**ENV, "COLUMNS": "80"})
    lines = human.stderr.splitlines()
    assert lines[1] == "metric: matmul_f32_throughput" and any("tests passed" in ln for ln in lines), human.stderr
    assert all(len(ln) <= 80 for ln in lines[1:]), human.stderr  # the first line echoes the reference
    wrong = cli("report", ref, "--policy", str(policy), "--metric", "nosuch", "--no-svg", env=ENV, code=8)
    assert "has metric 'nosuch'; they have: matmul_f32_throughput, matmul_f32_latency" in wrong.stderr
    assert "Traceback" not in wrong.stderr
