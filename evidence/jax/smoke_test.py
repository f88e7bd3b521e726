"""Deterministic checks of JAX in the image: known results, jit/eager agreement, a gradient, seeded
randomness. Writes a JUnit XML report to the path given as the first argument; exits 1 on a failure.
Sent on stdin to the image's python by ``builder check``; stdlib + jax only."""

import sys
import time
import unittest
from xml.sax.saxutils import quoteattr

import jax
import jax.numpy as jnp


class JaxSmoke(unittest.TestCase):
    def test_known_matmul(self):
        a = jnp.arange(6.0).reshape(2, 3)
        self.assertEqual((a @ a.T).tolist(), [[5.0, 14.0], [14.0, 50.0]])

    def test_jit_matches_eager(self):
        x = jnp.linspace(-3.0, 3.0, 101)
        f = lambda v: jnp.tanh(v) * v**2  # noqa: E731
        self.assertTrue(bool(jnp.allclose(jax.jit(f)(x), f(x), atol=1e-6)))

    def test_gradient(self):
        g = jax.grad(lambda v: jnp.sum(v**2))(jnp.array([1.0, -2.0, 3.0]))
        self.assertEqual(g.tolist(), [2.0, -4.0, 6.0])

    def test_seeded_randomness_repeats(self):
        k = jax.random.PRNGKey(42)
        self.assertEqual(jax.random.normal(k, (4,)).tolist(), jax.random.normal(k, (4,)).tolist())

    def test_default_float_is_32_bit(self):
        self.assertEqual(jnp.ones(2).dtype, jnp.float32)


class Recorder(unittest.TextTestResult):
    def startTest(self, test):
        self._t0 = time.perf_counter()
        super().startTest(test)

    def stopTest(self, test):
        test.seconds = time.perf_counter() - self._t0
        super().stopTest(test)


def write_junit(path, result, tests):
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
            '<testcase classname="JaxSmoke" name=%s time="%.4f">%s</testcase>'
            % (quoteattr(t._testMethodName), getattr(t, "seconds", 0.0), body)
        )
    xml = '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="jax-smoke" tests="%d" failures="%d" errors="%d" skipped="%d">%s</testsuite></testsuites>' % (
        result.testsRun, len(result.failures), len(result.errors), len(result.skipped), "".join(cases)
    )
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(xml)


def main():
    tests = list(unittest.defaultTestLoader.loadTestsFromTestCase(JaxSmoke))
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2, resultclass=Recorder).run(unittest.TestSuite(tests))
    if len(sys.argv) > 1:
        write_junit(sys.argv[1], result, tests)
    sys.exit(0 if result.wasSuccessful() else 1)


main()
