"""Per-GPU verdicts of measured GPU libraries (builder.compat.kernels) and their place in check_compat.

Targets are those measured in real libraries (bitsandbytes 0.50.2, tests/unit/image/test_gpu_code.py):
``libbitsandbytes_cuda126.so`` has SASS sm_60..sm_90 and PTX compute_90 (ISA 8.5), ``_cuda128.so`` adds
sm_100/sm_120 SASS and compute_120 PTX (ISA 8.7).
"""

from __future__ import annotations

import pytest

from builder.compat import Verdict, check_compat
from builder.compat.kernels import KernelBinary, kernel_verdict, line_of, loading_binaries, ptx_isa_needs_cuda

SITE = "/usr/local/lib/python3.11/dist-packages/bitsandbytes"
CU126 = KernelBinary(
    f"{SITE}/libbitsandbytes_cuda126.so",
    sass=("sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"),
    ptx=("compute_90",),
    ptx_isa="8.5",
)
CU128 = KernelBinary(
    f"{SITE}/libbitsandbytes_cuda128.so",
    sass=("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"),
    ptx=("compute_120",),
    ptx_isa="8.7",
)
STALE = KernelBinary("/opt/ext/lib/libcustom_kernels.so", sass=("sm_80", "sm_90"))
ROCM = KernelBinary(f"{SITE}/libbitsandbytes_rocm72.so", gfx=("gfx90a", "gfx942", "gfx1100"))


@pytest.mark.parametrize(
    ("binary", "target", "expected"),
    [
        (CU126, "9.0", "native"),
        (CU126, "8.9", "native"),
        (CU126, "12.0", "jit"),  # no sm_120 SASS, compute_90 PTX JITs on sm_120
        (CU128, "12.0", "native"),
        (CU128, "10.3", "native"),  # sm_100 SASS runs on 10.3 (same major, higher minor)
        (STALE, "12.0", "none"),
        (STALE, "8.6", "native"),  # sm_80 on 8.6
        (STALE, "7.5", "none"),  # a lower capability never runs higher SASS
        (KernelBinary("/a.so", sass=("sm_90a",)), "9.0", "native"),
        (KernelBinary("/a.so", sass=("sm_90a",)), "10.0", "none"),  # arch-specific: exactly its target
        (KernelBinary("/a.so", sass=("sm_100a",)), "10.3", "none"),
        (KernelBinary("/a.so", sass=("sm_100f",)), "10.3", "native"),  # family: same major, minor >=
        (KernelBinary("/a.so", sass=("sm_100f",)), "12.0", "none"),
        (KernelBinary("/a.so", ptx=("compute_100a",), ptx_isa="8.7"), "12.0", "none"),  # arch-specific PTX
        (KernelBinary("/a.so", ptx=("compute_120",), ptx_isa="8.7"), "9.0", "none"),  # PTX newer than the GPU
    ],
)
def test_kernel_verdicts(binary: KernelBinary, target: str, expected: str) -> None:
    assert kernel_verdict(binary, target).verdict == expected


def test_ptx_needs_a_driver_that_knows_its_isa() -> None:
    """PTX ISA 8.7 came with CUDA 12.8: a driver for CUDA 12.4 cannot JIT it; one for 12.8 can."""
    lib = KernelBinary("/a.so", sass=("sm_80",), ptx=("compute_80",), ptx_isa="8.7")
    assert ptx_isa_needs_cuda("8.7") == "12.8"
    old = kernel_verdict(lib, "9.0", driver_cuda="12.4")
    assert old.verdict == "none"
    assert "CUDA >= 12.8" in old.reason
    assert kernel_verdict(lib, "9.0", driver_cuda="12.8").verdict == "jit"


def test_gfx_targets_and_features() -> None:
    assert kernel_verdict(ROCM, "gfx942").verdict == "native"
    assert kernel_verdict(ROCM, "gfx1030").verdict == "none"
    assert "hipErrorNoBinaryForGpu" in kernel_verdict(ROCM, "gfx1030").reason
    xnack_off = KernelBinary("/h.so", gfx=("gfx90a:xnack-",))
    assert kernel_verdict(xnack_off, "gfx90a:xnack-").verdict == "native"
    assert kernel_verdict(xnack_off, "gfx90a:xnack+").verdict == "none"
    assert kernel_verdict(xnack_off, "gfx90a").verdict == "native"  # the GPU's mode unknown: not refused
    assert kernel_verdict(ROCM, "gfx90a:xnack+").verdict == "native"  # an object without the feature runs in both


def test_one_library_per_cuda_line_is_judged_by_the_one_that_loads() -> None:
    assert line_of(CU128.path) == (f"{SITE}/libbitsandbytes.so", "cuda", 128)
    assert line_of("/usr/lib/libcudart.so.12") is None
    both = (CU126, CU128, ROCM)
    assert loading_binaries(both, cuda="12.8", rocm=None) == (CU128, ROCM)
    assert loading_binaries(both, cuda="12.6", rocm=None) == (CU126, ROCM)
    assert loading_binaries(both, cuda="12.7", rocm=None) == (CU126, ROCM)  # the highest line below
    assert loading_binaries(both, cuda=None, rocm=None) == (CU126, CU128, ROCM)  # unknown: all judged


def test_check_compat_blocks_naming_the_library() -> None:
    def verdict(gpu: str, brand: str, lib: KernelBinary) -> Verdict:
        return check_compat(
            driver="570.172.08", cuda="12.8", require="cuda>=12.8", gpu=gpu, brand=brand, kernels=(lib,)
        )

    blocked = verdict("NVIDIA GeForce RTX 5090", "GeForce", STALE)
    assert blocked.verdict == "blocked"
    assert blocked.arch_covered is False
    assert any("libcustom_kernels.so" in r and "sm_120" in r for r in blocked.reasons)
    h100 = verdict("NVIDIA H100 80GB HBM3", "NVIDIA", STALE)
    assert h100.verdict == "ok"
    fixed = KernelBinary(STALE.path, sass=("sm_80", "sm_90", "sm_120"))
    assert verdict("NVIDIA GeForce RTX 5090", "GeForce", fixed).verdict == "ok"


def test_measured_code_wins_over_the_declared_list() -> None:
    """A label claiming sm_120 does not make a library without sm_120 code run."""
    v = check_compat(
        driver="570.172.08",
        gpu="NVIDIA GeForce RTX 5090",
        brand="GeForce",
        cuda="12.8",
        image_archs=("sm_80", "sm_90", "sm_120"),
        kernels=(STALE,),
    )
    assert v.verdict == "blocked"


def test_jit_is_a_reason_not_a_block() -> None:
    v = check_compat(driver="570.172.08", gpu="NVIDIA GeForce RTX 5090", brand="GeForce", cuda="12.6", kernels=(CU126,))
    assert v.verdict != "blocked"
    assert any("JIT-compiled" in r for r in v.reasons)


def test_cuda_libraries_do_not_judge_amd_gpus() -> None:
    v = check_compat(driver="6.3", gpu="AMD Instinct MI300X", brand=None, rocm="6.3", kernels=(STALE, ROCM))
    assert v.verdict == "ok", v.reasons


def test_uncovered_claims_of_a_label() -> None:
    from builder.compat.kernels import uncovered_claims

    assert uncovered_claims(("sm_80", "sm_90", "sm_120"), (STALE,)) == ("sm_120",)
    assert uncovered_claims(("sm_90", "compute_90"), (CU126,)) == ()
    assert uncovered_claims(("compute_120",), (CU126,)) == ("compute_120",)
    assert uncovered_claims(("sm_100",), (KernelBinary("/a.so", sass=("sm_100f",)),)) == ()  # a family cubin
    assert uncovered_claims(("gfx90a", "gfx1030"), (ROCM,)) == ("gfx1030",)
    assert uncovered_claims(("none",), (STALE,)) == ()
