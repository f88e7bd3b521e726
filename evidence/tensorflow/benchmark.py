"""Matmul throughput of TensorFlow on the first visible device (GPU when there is one, else the CPU).

Prints ``builder.metric`` lines (docs/matrices.md "Metrics"). Sent on stdin to the image's python by
``builder check`` with evidence/evidence_support.py (the timing loop, the knobs BUILDER_BENCH_N and
BUILDER_DEMO_BENCH_SLOWDOWN); stdlib + tensorflow only.
"""

import tensorflow as tf

from evidence_support import N, matmul_benchmark


def main():
    gpus = tf.config.list_logical_devices("GPU")
    device = gpus[0].name if gpus else "/CPU:0"
    with tf.device(device):
        gen = tf.random.Generator.from_seed(0)
        a = gen.normal((N, N), dtype=tf.float32)
        b = gen.normal((N, N), dtype=tf.float32)
        matmul = tf.function(lambda x, y: tf.linalg.matmul(x, y))
        matmul(a, b).numpy()  # trace and compile outside the timing

        def run(count):
            for _ in range(count):
                out = matmul(a, b)
            out.numpy()  # waits for the device

        matmul_benchmark(run, f"tensorflow {tf.__version__} on {device}")


main()
