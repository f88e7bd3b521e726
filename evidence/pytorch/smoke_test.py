"""Deterministic checks of PyTorch in the image: known results, autograd, seeded randomness, the
device the benchmark will use. Writes a JUnit XML report to the path given as the first argument;
exits 1 on a failure. Sent on stdin to the image's python by ``builder check``; stdlib + torch only."""

import sys
import time
import unittest
from xml.sax.saxutils import quoteattr

import torch


class TorchSmoke(unittest.TestCase):
    def test_known_matmul(self):
        a = torch.arange(6.0).reshape(2, 3)
        self.assertEqual((a @ a.T).tolist(), [[5.0, 14.0], [14.0, 50.0]])

    def test_gradient(self):
        v = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
        (v**2).sum().backward()
        self.assertEqual(v.grad.tolist(), [2.0, -4.0, 6.0])

    def test_seeded_randomness_repeats(self):
        first = torch.randn(4, generator=torch.Generator().manual_seed(42)).tolist()
        self.assertEqual(first, torch.randn(4, generator=torch.Generator().manual_seed(42)).tolist())

    def test_device_computes_like_the_cpu(self):
        if not torch.cuda.is_available():
            self.skipTest("no GPU visible")
        a = torch.arange(12.0).reshape(3, 4)
        self.assertEqual((a.cuda() @ a.cuda().T).cpu().tolist(), (a @ a.T).tolist())

    def test_default_float_is_32_bit(self):
        self.assertEqual(torch.ones(2).dtype, torch.float32)


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
            '<testcase classname="TorchSmoke" name=%s time="%.4f">%s</testcase>'
            % (quoteattr(t._testMethodName), getattr(t, "seconds", 0.0), body)
        )
    xml = '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="torch-smoke" tests="%d" failures="%d" errors="%d" skipped="%d">%s</testsuite></testsuites>' % (
        result.testsRun, len(result.failures), len(result.errors), len(result.skipped), "".join(cases)
    )
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(xml)


def main():
    tests = list(unittest.defaultTestLoader.loadTestsFromTestCase(TorchSmoke))
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2, resultclass=Recorder).run(unittest.TestSuite(tests))
    if len(sys.argv) > 1:
        write_junit(sys.argv[1], result, tests)
    sys.exit(0 if result.wasSuccessful() else 1)


main()
