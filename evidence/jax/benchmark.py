"""Matmul throughput of JAX on the first visible device (GPU when there is one, else the CPU).

Prints ``builder.metric`` lines (docs/matrices.md "Metrics"). Sent on stdin to the image's python by
``builder check`` with evidence/evidence_support.py (the timing loop, the knobs BUILDER_BENCH_N and
BUILDER_DEMO_BENCH_SLOWDOWN); stdlib + jax only.
"""

import jax
import jax.numpy as jnp

from evidence_support import N, matmul_benchmark


def main():
    device = jax.devices()[0]
    ka, kb = jax.random.split(jax.random.PRNGKey(0))
    a = jax.device_put(jax.random.normal(ka, (N, N), dtype=jnp.float32), device)
    b = jax.device_put(jax.random.normal(kb, (N, N), dtype=jnp.float32), device)
    matmul = jax.jit(lambda x, y: x @ y)
    matmul(a, b).block_until_ready()  # compile outside the timing

    def run(count):
        for _ in range(count):
            out = matmul(a, b)
        out.block_until_ready()

    matmul_benchmark(run, f"jax {jax.__version__} on {device.platform}:{device.device_kind}")


main()
