"""Matmul throughput of JAX on the first visible device (GPU when there is one, else the CPU).

Prints ``builder.metric`` lines (docs/matrices.md "Metrics"). Sent on stdin to the image's python by
``builder check``; stdlib + jax only. Knobs: BUILDER_BENCH_N (matrix size, default 512),
BUILDER_DEMO_BENCH_SLOWDOWN (>= 1: extra uncounted work per sample, evidence/README.md).
"""

import json
import os
import time

import jax
import jax.numpy as jnp

N = int(os.environ.get("BUILDER_BENCH_N") or 512)
SLOWDOWN = max(1.0, float(os.environ.get("BUILDER_DEMO_BENCH_SLOWDOWN") or 1))
SAMPLES = 7


def metric(name, value, unit, higher_is_better, **extra):
    doc = {"name": name, "value": value, "unit": unit, "higher_is_better": higher_is_better, **extra}
    print("builder.metric " + json.dumps(doc), flush=True)


def main():
    device = jax.devices()[0]
    ka, kb = jax.random.split(jax.random.PRNGKey(0))
    a = jax.device_put(jax.random.normal(ka, (N, N), dtype=jnp.float32), device)
    b = jax.device_put(jax.random.normal(kb, (N, N), dtype=jnp.float32), device)
    matmul = jax.jit(lambda x, y: x @ y)
    matmul(a, b).block_until_ready()  # compile outside the timing

    def timed(iters):
        work = max(iters, round(iters * SLOWDOWN))
        start = time.perf_counter()
        for _ in range(work):
            out = matmul(a, b)
        out.block_until_ready()
        return time.perf_counter() - start

    iters = 1
    while timed(iters) < 0.1 and iters < 4096:  # samples of ~100 ms or more
        iters *= 2
    # best of SAMPLES: another process on the machine only ever makes a sample slower
    seconds = min(timed(iters) for _ in range(SAMPLES))
    flops = 2.0 * N**3 * iters
    print(f"jax {jax.__version__} on {device.platform}:{device.device_kind} N={N} iters={iters} slowdown={SLOWDOWN}")
    metric("matmul_f32_throughput", round(flops / seconds / 1e9, 3), "GFLOP/s", True, dataset=f"synthetic-normal-{N}x{N}@1")
    metric("matmul_f32_latency", round(seconds / iters * 1e3, 4), "ms", False)


main()
