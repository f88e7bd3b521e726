"""Deterministic checks of PyTorch in the image: known results, autograd, seeded randomness, the
device the benchmark will use. Writes a JUnit XML report to the path given as the first argument;
exits 1 on a failure. Sent on stdin to the image's python by ``builder check``
with evidence/evidence_support.py (the JUnit report); stdlib + torch only."""

import unittest

import torch

from evidence_support import run_smoke


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


run_smoke(TorchSmoke, "torch-smoke")
