"""Deterministic checks of TensorFlow in the image: known results, a gradient, seeded randomness,
tf.function/eager agreement. Writes a JUnit XML report to the path given as the first argument;
exits 1 on a failure. Sent on stdin to the image's python by ``builder check``
with evidence/evidence_support.py (the JUnit report); stdlib + tensorflow only."""

import unittest

import tensorflow as tf

from evidence_support import run_smoke


class TfSmoke(unittest.TestCase):
    def test_known_matmul(self):
        a = tf.reshape(tf.range(6.0), (2, 3))
        self.assertEqual(tf.linalg.matmul(a, a, transpose_b=True).numpy().tolist(), [[5.0, 14.0], [14.0, 50.0]])

    def test_gradient(self):
        v = tf.Variable([1.0, -2.0, 3.0])
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(v**2)
        self.assertEqual(tape.gradient(y, v).numpy().tolist(), [2.0, -4.0, 6.0])

    def test_seeded_randomness_repeats(self):
        first = tf.random.Generator.from_seed(42).normal((4,)).numpy().tolist()
        self.assertEqual(first, tf.random.Generator.from_seed(42).normal((4,)).numpy().tolist())

    def test_function_matches_eager(self):
        x = tf.linspace(-3.0, 3.0, 101)
        f = lambda v: tf.tanh(v) * v**2  # noqa: E731
        self.assertTrue(bool(tf.reduce_all(tf.abs(tf.function(f)(x) - f(x)) < 1e-6)))

    def test_default_float_is_32_bit(self):
        self.assertEqual(tf.ones(2).dtype, tf.float32)


run_smoke(TfSmoke, "tensorflow-smoke")
