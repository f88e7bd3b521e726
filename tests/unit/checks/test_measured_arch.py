"""The device check's ``arch-measured`` step (issue 15 item 2: "the device check's architecture step" from
the measured code), on the recorded H200 host (tests/data/h200: driver 580.159.04, one H200, sm_90) and
its recorded JAX probe, whose in-container architecture step reads torch only. The libraries are real:
shared objects carrying fat binaries made by NVIDIA's ``ptxas`` + ``fatbinary`` (tests/gpu_code.py),
read by builder's own ELF reader, and bitsandbytes 0.50.2's CUDA 12.8 library from PyPI."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.checks.device import with_measured_step
from builder.checks.host.model import HostInfo
from builder.checks.measured import STEP, measured_arch
from builder.errors import RegistryUnavailableError
from builder.image.elf import scan_bytes
from tests import gpu_code
from tests.unit.checks.host.test_h200_recordings import H200, run_recorded

if TYPE_CHECKING:
    from pathlib import Path

    from builder.compat.kernels import KernelBinary


def _library(tmp_path: Path, name: str, **targets: tuple[str, ...]) -> KernelBinary:
    fb = gpu_code.make_fatbin(tmp_path / f"{name}.fatbin", **targets)  # type: ignore[arg-type]
    lib = gpu_code.make_library(tmp_path / f"{name}.so", fb)
    code = scan_bytes(f"/opt/ext/lib/{name}.so", lib.read_bytes())
    assert code is not None
    return code.kernel_binary()


def test_a_library_without_code_for_the_gpu_fails_the_check_naming_it(tmp_path: Path) -> None:
    ampere = _library(tmp_path, "libampere_only", sass=("sm_80", "sm_86"))  # sm_8x SASS never runs on sm_90
    assert ampere.sass == ("sm_80", "sm_86") and ampere.ptx == ()
    jax = run_recorded("probe-jax.json", framework="jax")
    assert jax.passed and jax.diagnosis is None  # the container steps alone pass
    r = with_measured_step(jax, lambda: (ampere,))
    step = r.steps[-1]
    assert step.name == STEP and not step.ok and not r.passed
    assert step.detail["devices"] == [
        {"device": 0, "target": "sm_90", "native": [], "jit": [], "none": ["/opt/ext/lib/libampere_only.so"]}
    ]
    assert step.error is not None and step.error.startswith("GPU 0 (sm_90): libampere_only.so")
    assert r.diagnosis is not None and r.predicate()["result"] == "failed"
    assert r.diagnosis.to_json()["diagnosis"] == "gpu-arch-not-in-image"  # the kind the run-time error has


def test_native_and_jit_code_pass(tmp_path: Path) -> None:
    ptx_only = _library(tmp_path, "libptx", ptx=("compute_80",))  # JIT on sm_90 (the driver's CUDA 13.0)
    data = gpu_code.bitsandbytes_lib("libbitsandbytes_cuda128.so").read_bytes()
    bnb = scan_bytes("/x/libbitsandbytes_cuda128.so", data)
    assert bnb is not None
    r = with_measured_step(run_recorded("probe.json"), lambda: (ptx_only, bnb.kernel_binary()))
    step = r.steps[-1]
    assert step.ok and r.passed and r.diagnosis is None
    [row] = step.detail["devices"]
    assert row["native"] == ["/x/libbitsandbytes_cuda128.so"] and row["jit"] == ["/opt/ext/lib/libptx.so"]


def test_nothing_to_judge_is_said_and_unreadable_layers_skip(tmp_path: Path) -> None:
    from builder.checks.host.reading import load_hostinfo

    host = load_hostinfo(H200 / "hostinfo.json")
    ok, detail, error = measured_arch(host, ())
    assert ok and error is None and "nothing measured" in detail["skipped"]
    ok, detail, _ = measured_arch(HostInfo(vendor="none"), (_library(tmp_path, "liba", sass=("sm_80",)),))
    assert ok and "no GPU on the host" in detail["skipped"]

    def unreachable() -> tuple[KernelBinary, ...]:
        raise RegistryUnavailableError("registry 127.0.0.1:9 is not reachable")

    r = with_measured_step(run_recorded("probe.json"), unreachable)
    assert r.passed and "127.0.0.1:9 is not reachable" in r.steps[-1].detail["skipped"]
