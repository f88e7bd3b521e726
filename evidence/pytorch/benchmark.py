"""Matmul throughput of PyTorch on the first visible device (CUDA/ROCm GPU when there is one, else the CPU).

Prints ``builder.metric`` lines (docs/matrices.md "Metrics"). Sent on stdin to the image's python by
``builder check``; stdlib + torch only. Knobs: BUILDER_BENCH_N (matrix size, default 512),
BUILDER_DEMO_BENCH_SLOWDOWN (>= 1: extra uncounted work per sample, evidence/README.md).
"""

import json
import os
import time

import torch

N = int(os.environ.get("BUILDER_BENCH_N") or 512)
SLOWDOWN = max(1.0, float(os.environ.get("BUILDER_DEMO_BENCH_SLOWDOWN") or 1))
SAMPLES = 7


def metric(name, value, unit, higher_is_better, **extra):
    doc = {"name": name, "value": value, "unit": unit, "higher_is_better": higher_is_better, **extra}
    print("builder.metric " + json.dumps(doc), flush=True)


def main():
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")  # ROCm builds answer as cuda
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(N, N, generator=gen, dtype=torch.float32).to(device)
    b = torch.randn(N, N, generator=gen, dtype=torch.float32).to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    torch.matmul(a, b)
    sync()

    def timed(iters):
        work = max(iters, round(iters * SLOWDOWN))
        start = time.perf_counter()
        for _ in range(work):
            torch.matmul(a, b)
        sync()
        return time.perf_counter() - start

    iters = 1
    while timed(iters) < 0.1 and iters < 4096:  # samples of ~100 ms or more
        iters *= 2
    # best of SAMPLES: another process on the machine only ever makes a sample slower
    seconds = min(timed(iters) for _ in range(SAMPLES))
    flops = 2.0 * N**3 * iters
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"
    print(f"torch {torch.__version__} on {name} N={N} iters={iters} slowdown={SLOWDOWN}")
    metric("matmul_f32_throughput", round(flops / seconds / 1e9, 3), "GFLOP/s", True, dataset=f"synthetic-normal-{N}x{N}@1")
    metric("matmul_f32_latency", round(seconds / iters * 1e3, 4), "ms", False)


main()
