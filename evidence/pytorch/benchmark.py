"""Matmul throughput of PyTorch on the first visible device (CUDA/ROCm GPU when there is one, else the CPU).

Prints ``builder.metric`` lines (docs/matrices.md "Metrics"). Sent on stdin to the image's python by
``builder check`` with evidence/evidence_support.py (the timing loop, the knobs BUILDER_BENCH_N and
BUILDER_DEMO_BENCH_SLOWDOWN); stdlib + torch only.
"""

import torch

from evidence_support import N, matmul_benchmark


def main():
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")  # ROCm builds answer as cuda
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(N, N, generator=gen, dtype=torch.float32).to(device)
    b = torch.randn(N, N, generator=gen, dtype=torch.float32).to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    torch.matmul(a, b)
    sync()

    def run(count):
        for _ in range(count):
            torch.matmul(a, b)
        sync()

    name = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"
    matmul_benchmark(run, f"torch {torch.__version__} on {name}")


main()
