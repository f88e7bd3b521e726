"""The declared checks: matrix ``tests`` / ``benchmark`` / ``overrides``, the metrics format, JUnit
totals, and what a run of a declared check becomes (predicates, pass/fail) with a recorded container
result of the real demo image (the in-container run itself: tests/integration/test_evidence.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from builder.checks.device import CheckResult, Step
from builder.checks.evidence import (
    METRIC_MARKER,
    EvidenceRun,
    cpu_model,
    evidence_failure,
    evidence_lines,
    parse_junit,
    parse_metrics,
    run_declared,
    run_evidence,
)
from builder.checks.host.model import HostInfo
from builder.checks.script_bundle import bundle_script
from builder.checks.topology import Topology
from builder.engine import ContainerResult
from builder.errors import MatrixError
from builder.matrix import load_matrix
from builder.models import CheckCommand
from builder.predicates import BENCHMARK_V1, HARDWARE_KEYS, TEST_RESULT_V1

ROOT = Path(__file__).resolve().parents[3]

# stdout of evidence/jax/benchmark.py in 127.0.0.1:5000/demo/jax:jax0.7-cpu-py3.11-debian12 (this machine)
BENCH_OUT = (
    "jax 0.7.2 on cpu:cpu N=512 iters=16 slowdown=1.0\n"
    'builder.metric {"name": "matmul_f32_throughput", "value": 86.008, "unit": "GFLOP/s", '
    '"higher_is_better": true, "dataset": "synthetic-normal-512x512@1"}\n'
    'builder.metric {"name": "matmul_f32_latency", "value": 3.121, "unit": "ms", "higher_is_better": false}\n'
)
JUNIT = (
    '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="jax-smoke" tests="5" failures="1" '
    'errors="0" skipped="1"><testcase classname="JaxSmoke" name="test_gradient" time="0.1"/></testsuite></testsuites>'
)


def test_metrics_format() -> None:
    metrics, declared, problems = parse_metrics(BENCH_OUT)
    assert [(m.name, m.value, m.unit, m.higher_is_better) for m in metrics] == [
        ("matmul_f32_throughput", 86.008, "GFLOP/s", True),
        ("matmul_f32_latency", 3.121, "ms", False),
    ]
    assert declared == {"dataset": "synthetic-normal-512x512@1"} and problems == ()


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("{not json", "not JSON"),
        ('{"name": "x", "value": 1, "unit": "s"}', "higher_is_better"),
        ('{"name": "x", "value": "fast", "unit": "s", "higher_is_better": true}', "not a finite number"),
        ('{"name": "x", "value": NaN, "unit": "s", "higher_is_better": true}', "not a finite number"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_malformed_metric_lines_are_problems(line: str, says: str) -> None:
    metrics, _, problems = parse_metrics(METRIC_MARKER + line + "\n")
    assert metrics == () and len(problems) == 1 and says in problems[0] and "line 1" in problems[0]
    run = run_declared(
        "r",
        CheckCommand("benchmark", command=("b",)),
        mode="cpu",
        runner=_runner(METRIC_MARKER + line + "\n"),
        root=ROOT,
    )
    assert not run.passed and run.problems[-1].startswith("the benchmark printed no valid metric line"), run.problems


def test_junit_totals_and_refusals() -> None:
    j = parse_junit(JUNIT)
    assert (j.tests, j.failures, j.errors, j.skipped) == (5, 1, 0, 1)
    assert parse_junit('<testsuite tests="2" failures="0" errors="0"/>').tests == 2
    for bad in ("no xml", "<html/>", '<!DOCTYPE x [<!ENTITY a "b">]><testsuite/>'):
        with pytest.raises(ValueError):
            parse_junit(bad)


def _runner(stdout: str, code: int = 0) -> Any:
    calls: list[dict[str, Any]] = []

    def run(image: str, argv: list[str], **kw: Any) -> ContainerResult:
        calls.append({"image": image, "argv": argv, **kw})
        return ContainerResult(code, stdout, "", 2.5, ("docker", "run", image, *argv))

    run.calls = calls  # type: ignore[attr-defined]
    return run


def _device() -> CheckResult:
    return CheckResult(
        "r@sha256:" + "1" * 64, None, HostInfo(), "cpu", "none", "1g", (Step("probe/compute", True, 0.1),), "t0", "t1"
    )


def test_benchmark_script_is_sent_to_the_image_python_with_its_limits() -> None:
    check = CheckCommand("benchmark", script="evidence/jax/benchmark.py", timeout=90, shm_size="2g", dataset="d@1")
    runner = _runner(BENCH_OUT)
    run = run_declared("r@sha256:" + "1" * 64, check, mode="cpu", runner=runner, root=ROOT)
    call = runner.calls[0]
    # the script with evidence/evidence_support.py, which it imports (builder.checks.script_bundle)
    assert call["stdin"] == bundle_script(ROOT, "evidence/jax/benchmark.py")
    assert call["entrypoint"] == "sh" and call["argv"][0] == "-c"
    assert call["timeout"] == 90 and call["shm_size"] == "2g" and call["gpus"] is None  # cpu mode: no devices
    assert run.passed and run.script_sha256 and len(run.metrics) == 2
    gpu = run_declared("r", check, mode="nvidia", runner=_runner(BENCH_OUT), root=ROOT)
    assert gpu.passed
    ev = EvidenceRun(_device(), (run,), Topology(), "AMD EPYC", "abc123")
    [(ptype, pred)] = ev.predicates()
    assert ptype == BENCHMARK_V1 and pred["result"] == "passed" and pred["dataset"] == "d@1"
    assert pred["code"] == {
        "commit": "abc123",
        "script": "evidence/jax/benchmark.py",
        "args": [],
        "sha256": run.script_sha256,
    }
    assert pred["hardware"] == {
        "vendor": "none",
        "gpu_model": None,
        "gpu_count": 0,
        "driver_branch": None,
        "cpu_model": "AMD EPYC",
    }
    assert tuple(pred["hardware"]) == HARDWARE_KEYS  # the keys a policy's benchmark rule reads and `same` names
    assert pred["metrics"][0]["value"] == 86.008 and pred["topology"]["fabric"] == "none"


def test_benchmark_without_metrics_or_with_a_failing_exit_fails() -> None:
    check = CheckCommand("benchmark", command=("python", "-c", "print(1)"))
    silent = run_declared("r", check, mode="cpu", root=ROOT, runner=_runner("1\n"))
    assert not silent.passed and "no metric line" in silent.problems[0]
    crashed = run_declared("r", check, mode="cpu", root=ROOT, runner=_runner(BENCH_OUT, code=1))
    assert not crashed.passed
    ev = EvidenceRun(_device(), (silent,), Topology(), None, None)
    assert "benchmark failed: the benchmark printed no metric line" in (evidence_failure(ev) or "")


def test_tests_pass_on_exit_zero_and_a_clean_junit_report() -> None:
    check = CheckCommand("tests", command=("python", "-m", "pytest", "/opt/tests"), junit="/tmp/j.xml")
    runner = _runner("5 passed\n\n----- builder: junit xml -----\n" + JUNIT.replace('failures="1"', 'failures="0"'))
    run = run_declared("r", check, mode="cpu", runner=runner, root=ROOT)
    argv = runner.calls[0]["argv"]
    assert argv[:2] == ["-c", argv[1]] and argv[3:] == ["/tmp/j.xml", "python", "-m", "pytest", "/opt/tests"]
    assert run.passed and run.junit is not None and run.junit.tests == 5 and run.output == "5 passed\n"
    failing = run_declared(
        "r", check, mode="cpu", root=ROOT, runner=_runner("x\n----- builder: junit xml -----\n" + JUNIT)
    )
    assert not failing.passed  # exit 0 but the report counts a failure
    [(ptype, pred)] = EvidenceRun(_device(), (failing,), Topology(), None, None).predicates()
    assert ptype == TEST_RESULT_V1 and pred["result"] == "failed" and pred["summary"]["failures"] == 1
    no_report = run_declared("r", check, mode="cpu", root=ROOT, runner=_runner("ok\n"))
    assert not no_report.passed and "no JUnit report" in no_report.problems[0]


def test_a_missing_script_fails_that_check_naming_the_path(tmp_path: Path) -> None:
    check = CheckCommand("tests", script="evidence/gone.py")
    run = run_declared("r", check, mode="cpu", root=tmp_path, runner=_runner(""))
    assert not run.passed and "evidence/gone.py" in run.problems[0] and str(tmp_path) in run.problems[0]


def test_cpu_model_from_proc_cpuinfo(tmp_path: Path) -> None:
    f = tmp_path / "cpuinfo"
    f.write_text("processor\t: 0\nmodel name\t: AMD EPYC 7B13 64-Core Processor\n")
    assert cpu_model(f) == "AMD EPYC 7B13 64-Core Processor"
    assert cpu_model(tmp_path / "missing") is None


def _matrix(tmp_path: Path, extra: str) -> Path:
    text = (ROOT / "matrices" / "demo.yaml").read_text().split("# Checks run by")[0]
    path = tmp_path / "m.yaml"
    path.write_text(text + extra)
    return path


def test_matrix_checks_per_family_overridden_per_variant(tmp_path: Path) -> None:
    path = _matrix(
        tmp_path,
        "tests: {command: 'python -m pytest /opt/tests -q', timeout: 30}\n"
        "benchmark: {script: bench.py, env: {N: 64}, dataset: 'imagenet-val@2024'}\n"
        "overrides:\n  - match: '*-cu128-*'\n    benchmark: {command: [nvidia-smi], gpus: 2, shm_size: 8g}\n",
    )
    m = load_matrix(path)
    cpu = next(v for v in m.variants if "-cpu-" in v.id)
    cuda = next(v for v in m.variants if "-cu128-" in v.id)
    assert cpu.tests == cuda.tests and cpu.tests is not None
    assert cpu.tests.command == ("python", "-m", "pytest", "/opt/tests", "-q") and cpu.tests.timeout == 30
    assert cpu.benchmark is not None and cpu.benchmark.script == "bench.py"
    assert cpu.benchmark.env == (("N", "64"),) and cpu.benchmark.dataset == "imagenet-val@2024"
    assert cuda.benchmark == CheckCommand("benchmark", command=("nvidia-smi",), gpus="2", shm_size="8g")


@pytest.mark.parametrize(
    ("extra", "path", "says"),
    [
        ("tests: {timeout: 5}\n", "tests", "exactly one of `command`"),
        ("tests: {command: x, script: y}\n", "tests", "exactly one of `command`"),
        ("benchmark: {command: x, timeout: -1}\n", "benchmark.timeout", "greater than 0"),
        ("overrides: [{match: 'torch*', tests: {command: x}}]\n", "overrides[0].match", "matches no variant"),
        ('tests: {command: "echo \'x"}\n', "tests.command", "cannot be split"),
        ("tests: {script: ../outside.py}\n", "tests.script", "a path inside the project"),
        ("benchmark: {command: x, gpus: two}\n", "benchmark.gpus", "all, none or a number of GPUs (got 'two')"),
        ("benchmark: {command: x, min_devices: 2}\n", "benchmark.min_devices", "collective check only"),
        ("benchmark: {scrpit: x.py}\n", "benchmark.scrpit", "script"),
    ],
)
def test_matrix_check_mistakes_are_located(tmp_path: Path, extra: str, path: str, says: str) -> None:
    with pytest.raises(MatrixError) as err:
        load_matrix(_matrix(tmp_path, extra))
    problems = err.value.details["problems"]
    assert any(p["path"] == path and says in p["message"] and p["line"] for p in problems), problems


def test_collective_section_compares_with_the_topology_and_parses_nccl_tests() -> None:
    from builder.checks.host.model import HostGpu
    from builder.checks.topology import parse_nvidia_topo

    data = ROOT / "tests" / "data"
    topo = parse_nvidia_topo((data / "topology" / "nvidia-smi-topo-01-h100-nvswitch.txt").read_text())
    nccl = (data / "nccl-tests" / "all-reduce-02-2gpu-tail.txt").read_text()
    doc = {
        "ok": True,
        "ranks": 8,
        "backend": "nccl",
        "busbw_gbps": 360.0,
        "allreduce_correct": True,
        "oversubscribed": [],
        "rows": [],
        "nccl_tests_output": nccl,
    }
    check = CheckCommand("collective", script="evidence/jax/collective.py", min_devices=2)
    runner = _runner("builder.collective " + json.dumps(doc) + "\n")
    run = run_declared("r", check, mode="nvidia", runner=runner, root=ROOT)
    gpus = tuple(HostGpu(name="NVIDIA H100 80GB HBM3", index=i) for i in range(8))
    device = _device()
    device = CheckResult(
        device.image_ref,
        None,
        HostInfo(vendor="nvidia", gpus=gpus),
        "nvidia",
        "--gpus all",
        "1g",
        device.steps,
        "t0",
        "t1",
    )
    ev = EvidenceRun(device, (run,), topo, None, None)
    [(ptype, pred)] = ev.predicates()
    c = pred["collective"]
    assert ptype == BENCHMARK_V1 and pred["metrics"][0] == {
        "name": "allreduce_busbw",
        "value": 360.0,
        "unit": "GB/s",
        "higher_is_better": True,
    }
    assert c["expected_gbps"] == 450.0 and c["ratio"] == 0.8 and c["link"].startswith("NVSwitch: 18 NVLink 4")
    assert c["nccl_tests"]["avg_busbw_gbps"] == 8.62002 and c["nccl_tests"]["peak_busbw_gbps"] == 25.86


def test_collective_section_on_a_pcie_only_host_uses_the_slowest_max_pcie_link() -> None:
    import dataclasses

    from builder.checks.host.model import HostGpu
    from builder.checks.topology import Pcie, parse_nvidia_topo
    from builder.compat.links import pcie_gbps

    data = ROOT / "tests" / "data"
    topo = parse_nvidia_topo((data / "topology" / "nvidia-smi-topo-02-4090-pcie.txt").read_text())
    # an idle GPU reports Current Gen1 (power saving); the expectation uses Max, the trained link
    links = tuple(Pcie(f"00000000:{i:02x}:00.0", 1, 4, 16, 16) for i in range(8))
    topo = dataclasses.replace(topo, pcie=links)
    doc = {"ok": True, "ranks": 8, "backend": "nccl", "busbw_gbps": 22.0, "allreduce_correct": True}
    check = CheckCommand("collective", script="evidence/jax/collective.py", min_devices=2)
    run = run_declared(
        "r", check, mode="nvidia", runner=_runner("builder.collective " + json.dumps(doc) + "\n"), root=ROOT
    )
    base = _device()
    gpus = tuple(HostGpu(name="NVIDIA GeForce RTX 4090", index=i) for i in range(8))
    device = CheckResult(
        base.image_ref, None, HostInfo(vendor="nvidia", gpus=gpus), "nvidia", "--gpus all", "1g", base.steps, "t0", "t1"
    )
    [(_, pred)] = EvidenceRun(device, (run,), topo, None, None).predicates()
    c = pred["collective"]
    assert c["expected_gbps"] == round(pcie_gbps(4, 16) or 0, 3) and "Gen4 x16" in c["link"]
    assert c["ratio"] == round(22.0 / c["expected_gbps"], 4) and 0.69 < c["ratio"] < 0.71


def test_each_declared_run_is_one_line_for_people() -> None:
    """`builder run` says the smoke tests and the benchmark ran (it never did): one line per run, what it
    measured and its time; a failed run says what was wrong."""
    tests = CheckCommand("tests", command=("python", "-m", "pytest", "/opt/tests"), junit="/tmp/j.xml")
    clean = JUNIT.replace('failures="1"', 'failures="0"')
    report = _runner("ok\n----- builder: junit xml -----\n" + clean)
    passed = run_declared("r", tests, mode="cpu", root=ROOT, runner=report)
    bench = CheckCommand("benchmark", script="evidence/jax/benchmark.py")
    measured = run_declared("r", bench, mode="cpu", root=ROOT, runner=_runner(BENCH_OUT))
    silent = run_declared("r", bench, mode="cpu", root=ROOT, runner=_runner("1\n"))
    ev = EvidenceRun(_device(), (passed, measured, silent), Topology(), None, None)
    lines = evidence_lines(ev)
    assert lines[:2] == (
        "tests passed: 5 tests, 0 failed (2.5 s)",
        "benchmark passed: matmul_f32_throughput 86.01 GFLOP/s, matmul_f32_latency 3.121 ms (2.5 s)",
    )
    assert lines[2].startswith("benchmark failed: the benchmark printed no metric line")
    assert lines[2].endswith("(2.5 s)")
    assert len(lines) == 3
    assert evidence_lines(EvidenceRun(_device(), (), Topology(), None, None)) == ()


def test_a_declared_check_that_does_not_run_is_named_with_its_reason() -> None:
    """Never left out silently: after a failed device check every declared check is skipped as such, and a
    collective check is skipped naming the GPUs it needs and the GPUs the check saw; the rest still run."""
    checks = (
        CheckCommand("collective", command=("python", "-c", "0")),
        CheckCommand("tests", command=("true",)),
    )
    runner = _runner("ok\n")
    ev = run_evidence("r", _device(), checks, topology=Topology(), commit=None, root=ROOT, runner=runner, cpu="x")
    assert [r.check.kind for r in ev.runs] == ["tests"] and len(runner.calls) == 1
    assert [s.to_json() for s in ev.skipped] == [
        {"kind": "collective", "reason": "needs at least 2 GPUs; the check saw no GPUs (mode cpu)"}
    ]
    failed = dataclasses.replace(_device(), steps=(Step("probe/compute", False, 0.1, error="boom"),))
    runner = _runner("ok\n")
    none = run_evidence("r", failed, checks, topology=Topology(), commit=None, root=ROOT, runner=runner, cpu="x")
    assert none.runs == () and runner.calls == []
    assert [(s.kind, s.reason) for s in none.skipped] == [
        ("tests", "the device check failed"),
        ("collective", "the device check failed"),
    ]
