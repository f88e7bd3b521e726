"""Deterministic checks of JAX in the image: known results, jit/eager agreement, a gradient, seeded
randomness. Writes a JUnit XML report to the path given as the first argument; exits 1 on a failure.
Sent on stdin to the image's python by ``builder check``
with evidence/evidence_support.py (the JUnit report); stdlib + jax only."""

import unittest

import jax
import jax.numpy as jnp

from evidence_support import run_smoke


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


run_smoke(JaxSmoke, "jax-smoke")
