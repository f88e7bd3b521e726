"""What the declared check programs (``evidence/<family>/*.py``) share: the JUnit report of a smoke
test, the ``builder.metric`` lines and the matmul timing loop of a benchmark.

Not sent alone: ``builder check`` sends it with each program that imports it (docs/matrices.md
"Checks declared with the image", builder/checks/script_bundle.py). Run a program by hand with ``PYTHONPATH=evidence``. Stdlib only.
Knobs: BUILDER_BENCH_N (matrix size, default 512), BUILDER_DEMO_BENCH_SLOWDOWN (>= 1: extra
uncounted work per sample, evidence/README.md).
"""

import json
import os
import sys
import time
import unittest
from xml.sax.saxutils import quoteattr

N = int(os.environ.get("BUILDER_BENCH_N") or 512)
SLOWDOWN = max(1.0, float(os.environ.get("BUILDER_DEMO_BENCH_SLOWDOWN") or 1))
SAMPLES = 7


def metric(name, value, unit, higher_is_better, **extra):
    """One ``builder.metric {json}`` line (docs/matrices.md "Metrics")."""
    doc = {"name": name, "value": value, "unit": unit, "higher_is_better": higher_is_better, **extra}
    print("builder.metric " + json.dumps(doc), flush=True)


def matmul_benchmark(run, describe):
    """Time ``run(count)`` (``count`` N x N float32 multiplications, returning once the device is done;
    compile/trace before calling this) and print ``describe`` and the two matmul metrics: samples of
    ~100 ms or more, the best of SAMPLES (another process on the machine only ever makes a sample
    slower); SLOWDOWN runs that many times the work per sample while counting only the first."""

    def timed(iters):
        work = max(iters, round(iters * SLOWDOWN))
        start = time.perf_counter()
        run(work)
        return time.perf_counter() - start

    iters = 1
    while timed(iters) < 0.1 and iters < 4096:
        iters *= 2
    seconds = min(timed(iters) for _ in range(SAMPLES))
    flops = 2.0 * N**3 * iters
    print(f"{describe} N={N} iters={iters} slowdown={SLOWDOWN}")
    metric("matmul_f32_throughput", round(flops / seconds / 1e9, 3), "GFLOP/s", True, dataset=f"synthetic-normal-{N}x{N}@1")
    metric("matmul_f32_latency", round(seconds / iters * 1e3, 4), "ms", False)


class _Recorder(unittest.TextTestResult):
    def startTest(self, test):
        self._t0 = time.perf_counter()
        super().startTest(test)

    def stopTest(self, test):
        test.seconds = time.perf_counter() - self._t0
        super().stopTest(test)


def _write_junit(path, suite, result, tests):
    failed = {id(t): m for t, m in result.failures}
    errored = {id(t): m for t, m in result.errors}
    cases = []
    for t in tests:
        body = ""
        if id(t) in failed:
            body = "<failure message=%s/>" % quoteattr(failed[id(t)].strip().splitlines()[-1])
        elif id(t) in errored:
            body = "<error message=%s/>" % quoteattr(errored[id(t)].strip().splitlines()[-1])
        cases.append(
            "<testcase classname=%s name=%s time=\"%.4f\">%s</testcase>"
            % (quoteattr(type(t).__name__), quoteattr(t._testMethodName), getattr(t, "seconds", 0.0), body)
        )
    xml = '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name=%s tests="%d" failures="%d" errors="%d" skipped="%d">%s</testsuite></testsuites>' % (
        quoteattr(suite), result.testsRun, len(result.failures), len(result.errors), len(result.skipped), "".join(cases)
    )
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(xml)


def run_smoke(case, suite):
    """Run the unittest TestCase class ``case`` verbosely; write the JUnit XML report (testsuite
    ``suite``) to the path given as the first argument, when there is one; exit 1 on a failure."""
    tests = list(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2, resultclass=_Recorder).run(unittest.TestSuite(tests))
    if len(sys.argv) > 1:
        _write_junit(sys.argv[1], suite, result, tests)
    sys.exit(0 if result.wasSuccessful() else 1)
