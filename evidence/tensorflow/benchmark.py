"""Matmul throughput of TensorFlow on the first visible device (GPU when there is one, else the CPU).

Prints ``builder.metric`` lines (docs/matrices.md "Metrics"). Sent on stdin to the image's python by
``builder check``; stdlib + tensorflow only. Knobs: BUILDER_BENCH_N (matrix size, default 512),
BUILDER_DEMO_BENCH_SLOWDOWN (>= 1: extra uncounted work per sample, evidence/README.md).
"""

import json
import os
import time

import tensorflow as tf

N = int(os.environ.get("BUILDER_BENCH_N") or 512)
SLOWDOWN = max(1.0, float(os.environ.get("BUILDER_DEMO_BENCH_SLOWDOWN") or 1))
SAMPLES = 7


def metric(name, value, unit, higher_is_better, **extra):
    doc = {"name": name, "value": value, "unit": unit, "higher_is_better": higher_is_better, **extra}
    print("builder.metric " + json.dumps(doc), flush=True)


def main():
    gpus = tf.config.list_logical_devices("GPU")
    device = gpus[0].name if gpus else "/CPU:0"
    with tf.device(device):
        gen = tf.random.Generator.from_seed(0)
        a = gen.normal((N, N), dtype=tf.float32)
        b = gen.normal((N, N), dtype=tf.float32)
        matmul = tf.function(lambda x, y: tf.linalg.matmul(x, y))
        matmul(a, b).numpy()  # trace and compile outside the timing

        def timed(iters):
            work = max(iters, round(iters * SLOWDOWN))
            start = time.perf_counter()
            for _ in range(work):
                out = matmul(a, b)
            out.numpy()  # waits for the device
            return time.perf_counter() - start

        iters = 1
        while timed(iters) < 0.1 and iters < 4096:  # samples of ~100 ms or more
            iters *= 2
        # best of SAMPLES: another process on the machine only ever makes a sample slower
    seconds = min(timed(iters) for _ in range(SAMPLES))
    flops = 2.0 * N**3 * iters
    print(f"tensorflow {tf.__version__} on {device} N={N} iters={iters} slowdown={SLOWDOWN}")
    metric("matmul_f32_throughput", round(flops / seconds / 1e9, 3), "GFLOP/s", True, dataset=f"synthetic-normal-{N}x{N}@1")
    metric("matmul_f32_latency", round(seconds / iters * 1e3, 4), "ms", False)


main()
