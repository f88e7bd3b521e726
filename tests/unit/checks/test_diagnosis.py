"""Diagnosis on real error messages (tests/data/errors; source URL on line 1 of each file).

* error-NN.txt: the reference cases (source URL on line 1).
* <key>-NN.txt: more real messages of each kind found in public issue threads (other versions,
  compose, Kubernetes events, podman, Slurm/CI logs).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.checks.diagnosis import LAYERS, RULES, Context, Diagnosis, diagnose, evaluate_requirement

if TYPE_CHECKING:
    from builder.compat import Evaluation
    from tests.conftest import Cli

DATA = Path(__file__).resolve().parents[2] / "data" / "errors"


def d(name: str, ctx: Context | None = None) -> Diagnosis:
    return diagnose((DATA / name).read_text(), ctx)


# --- tests/data/errors/error-NN.txt: the layer at fault (docs/diagnosis.md) ------------------


def test_01_toolkit_missing() -> None:
    r = d("error-01.txt")
    assert (r.key, r.at_fault, r.noticed_by) == ("container-toolkit-missing", "container-toolkit", "container-engine")
    assert "nvidia-ctk runtime configure" in r.fix


def test_02_needs_cuda_12_8() -> None:
    r = d("error-02.txt")
    assert (r.key, r.at_fault) == ("driver-too-old-for-image", "kernel-driver")
    assert r.facts["image_cuda"] == "12.8" and r.facts["min_driver"] == "570.26"
    assert r.noticed_by == "container-toolkit"
    assert "570.26" in r.fix


def test_04_needs_cuda_11_0() -> None:
    r = d("error-04.txt")
    assert (r.key, r.at_fault) == ("driver-too-old-for-image", "kernel-driver")
    assert r.facts["image_cuda"] == "11.0" and r.facts["min_driver"] == "450.36.06"


def test_05_fabric_manager() -> None:
    r = d("error-05.txt")
    assert (r.key, r.at_fault) == ("fabric-manager-not-ready", "fabric-manager")
    assert r.facts["cuda_error"] == 802


def test_06_cgroup_lost() -> None:
    r = d("error-06.txt")
    assert (r.key, r.at_fault) == ("device-cgroup-lost", "container-engine")
    assert "fresh container" in r.fix and "on the host" in r.fix


def test_07_forward_compat_consumer() -> None:
    r = d("error-07.txt")
    assert (r.key, r.at_fault) == ("forward-compat-unsupported", "kernel-driver")
    assert r.facts["cuda_error"] == 804
    assert str(r.facts["gpu_class"]).startswith("consumer")
    r2 = d("error-07.txt", Context(gpu_brand="GeForce", image_cuda="12.8"))
    assert r2.facts["gpu_class"] == "consumer" and r2.facts["min_driver"] == "570.26"


def test_08_rocm_gfx_missing() -> None:
    r = d("error-08.txt")
    assert (r.key, r.at_fault) == ("gpu-arch-not-in-image", "framework-build")
    assert r.facts["vendor"] == "amd"


def test_10_gpu_not_requested() -> None:
    r = d("error-10.txt")
    assert (r.key, r.at_fault) == ("gpu-not-requested", "run-options")
    assert "--gpus" in r.fix


def test_11_error_35() -> None:
    r = d("error-11.txt")
    assert (r.key, r.at_fault) == ("driver-too-old-for-image", "kernel-driver")
    assert r.facts["cuda_error"] == 35


def test_12_no_gpu_visible_from_hook() -> None:
    r = d("error-12.txt")
    assert (r.key, r.at_fault) == ("no-gpu-visible", "kernel-driver")
    assert r.noticed_by == "container-toolkit"


def test_14_found_version_11000() -> None:
    r = d("error-14.txt")
    assert (r.key, r.at_fault) == ("driver-too-old-for-image", "kernel-driver")
    assert r.facts["driver_cuda"] == "11.0"


# --- more real messages per kind ----------------------------------------------------------------

MORE = sorted(p.name for p in DATA.glob("*-0*.txt") if not p.name.startswith("error-"))


@pytest.mark.parametrize("name", MORE)
def test_more_real_messages(name: str) -> None:
    expected = name.rsplit("-", 1)[0]
    r = d(name)
    assert r.key == expected, (name, r.key, r.evidence)
    assert r.at_fault == next(x.at_fault for x in RULES if x.key == expected)
    assert r.at_fault in LAYERS and r.noticed_by in LAYERS
    assert r.evidence, "the matched lines are quoted"


def test_at_least_two_more_per_kind() -> None:
    # probe-python-missing: builder's own probe message (no public threads), tested in test_diagnose_input.py
    keys = {r.key for r in RULES} - {"wrong-vendor-tool", "probe-python-missing"}
    for key in keys:
        assert sum(1 for n in MORE if n.rsplit("-", 1)[0] == key) >= 2, key


def test_more_messages_carry_facts() -> None:
    assert d("driver-too-old-for-image-01.txt").facts["image_cuda"] == "9.0"  # "cuda >= 9.0" with spaces
    assert d("driver-too-old-for-image-02.txt").facts["min_driver"] == "570.26"
    assert d("driver-library-mismatch-01.txt").facts["user_space_version"] == "570.124"
    assert d("cdi-device-unresolvable-02.txt").facts["cdi_device"].startswith("management.nvidia.com/gpu=GPU-")
    assert d("gpu-arch-not-in-image-01.txt").facts["gpu_arch"] == "sm_120"
    assert "sm_90" in d("gpu-arch-not-in-image-01.txt").facts["image_archs"]
    assert d("device-permission-denied-02.txt").facts["device"] == "/dev/kfd"
    assert d("fabric-manager-not-ready-01.txt").facts["cuda_error"] == 802


# --- the last-clause problem: evaluate the whole NVIDIA_REQUIRE_CUDA --------------------------

REQ_128 = (
    "cuda>=12.8 brand=unknown,driver>=470,driver<471 brand=tesla,driver>=535,driver<536 "
    "brand=nvidia,driver>=550,driver<551 brand=tesla,driver>=550,driver<551"
)


def test_last_clause_is_explained() -> None:
    text = (
        "nvidia-container-cli: requirement error: unsatisfied condition: brand = tesla, "
        "please update your driver to a newer version, or use an earlier cuda container: unknown"
    )
    ctx = Context(require_cuda=REQ_128, driver_version="545.23.08", driver_cuda="12.3", gpu_brand="GeForce")
    r = diagnose(text, ctx)
    assert r.key == "driver-too-old-for-image"
    assert "last clause" in r.facts["note"]
    assert r.facts["image_cuda"] == "12.8" and r.facts["min_driver"] == "570.26"
    ev = r.facts["require_cuda_evaluation"]
    assert ev["satisfied"] is False and ev["undetermined"] is False
    assert any("570.26" in w for w in r.facts["would_satisfy"])
    # a GeForce is never exempted: the answer says so instead of offering the R550 window
    assert any("no exemption applies to brand 'geforce'" in w for w in r.facts["would_satisfy"])
    assert r.facts["compat_verdict"]["verdict"] == "blocked"
    assert r.facts["compat_verdict"]["min_driver"] == "570.26"


def test_requirement_is_evaluated_by_compat() -> None:
    def ev(**kw: str | None) -> Evaluation:
        result = evaluate_requirement(Context(require_cuda=REQ_128, **kw))
        assert result is not None
        return result

    assert ev(driver_version="550.144.03", driver_cuda="12.4", gpu_brand="Tesla").satisfied
    assert not ev(driver_version="550.144.03", driver_cuda="12.4", gpu_brand="GeForce").satisfied
    assert ev(driver_version="570.26", driver_cuda="12.8", gpu_brand="GeForce").satisfied
    # the driver's CUDA comes from compat's table when the message does not say it
    assert ev(driver_version="570.26", gpu_brand="GeForce").satisfied


def test_unknown_brand_is_undetermined_not_a_match_or_a_refusal() -> None:
    unknown = evaluate_requirement(Context(require_cuda=REQ_128, driver_version="550.144.03", driver_cuda="12.4"))
    assert unknown is not None
    assert not unknown.satisfied and unknown.undetermined and unknown.unknown_facts == ("brand",)
    assert any("brand unknown" in s for s in unknown.satisfy)
    nothing = evaluate_requirement(Context(require_cuda=REQ_128))
    assert nothing is not None and nothing.undetermined and set(nothing.unknown_facts) == {"cuda", "brand", "driver"}


# --- kind, not sample -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("docker: Error response from daemon: unknown or invalid runtime name: nvidia.", "container-toolkit-missing"),
        ("Error: crun: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=0", "cdi-device-unresolvable"),
        ("CUDA error at foo.cu:12 code=35(cudaErrorInsufficientDriver)", "driver-too-old-for-image"),
        ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "gpu-arch-not-in-image"),
        (
            "E tensorflow: failed call to cuInit: CUDA_ERROR_SYSTEM_NOT_READY: system not yet initialized",
            "fabric-manager-not-ready",
        ),
        ("NVIDIA: API mismatch: the NVIDIA kernel module has version 535.54.03 but this", "driver-library-mismatch"),
        ("RuntimeError: No CUDA GPUs are available", "no-gpu-visible"),
        ("bash: nvidia-smi: command not found\n(host has /dev/kfd, AMD Instinct MI250X)", "wrong-vendor-tool"),
        ("ImportError: libcuda.so.1: cannot open shared object file: No such file or directory", "gpu-not-requested"),
        ("AssertionError: Torch not compiled with CUDA enabled", "framework-without-gpu-support"),
    ],
)
def test_kinds_in_other_words(text: str, key: str) -> None:
    assert diagnose(text).key == key


def test_wrong_vendor_tool_uses_host_vendor() -> None:
    assert diagnose("sh: 1: nvidia-smi: not found", Context(vendor="amd")).key == "wrong-vendor-tool"
    assert diagnose("sh: 1: rocm-smi: not found", Context(vendor="nvidia")).key == "wrong-vendor-tool"
    assert diagnose("sh: 1: nvidia-smi: not found", Context(vendor="nvidia")).key == "gpu-not-requested"


def test_capabilities_context() -> None:
    r = diagnose("ImportError: libcuda.so.1: cannot open shared object file", Context(driver_capabilities="utility"))
    assert r.key == "driver-capabilities-missing" and r.at_fault == "run-options"


def test_unknown_quotes_what_it_could_not_place() -> None:
    r = diagnose("starting job\nSegmentation fault in libfoo while frobnicating\ndone")
    assert r.key == "unknown"
    assert any("Segmentation fault" in q for q in r.facts["quoted"])


# --- CLI -------------------------------------------------------------------------------------


def test_cli_diagnose_json_file_and_stdin(cli: Cli) -> None:
    doc = cli("diagnose", str(DATA / "error-02.txt"), "--json").json()
    assert set(doc) >= {"diagnosis", "at_fault", "noticed_by", "summary", "fix", "facts"}
    assert doc["diagnosis"] == "driver-too-old-for-image" and doc["facts"]["min_driver"] == "570.26"
    res = cli("diagnose", "-", "--json", stdin=(DATA / "error-12.txt").read_text())
    assert res.json()["diagnosis"] == "no-gpu-visible"


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("container-toolkit-missing-local.txt", "container-toolkit-missing"),
        ("cdi-device-unresolvable-local.txt", "cdi-device-unresolvable"),
    ],
)
def test_this_machines_real_engine_errors(name: str, key: str) -> None:
    r = d(name)
    assert r.key == key and r.at_fault == "container-toolkit" and r.noticed_by == "container-engine"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (
            'exec: \\\\\\"nvidia-container-runtime-hook\\\\\\": executable file not found in $PATH',
            "container-toolkit-missing",
        ),
        (
            "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open",
            "driver-not-loaded",
        ),
        ("cudaGetDeviceCount returned 35\n-> CUDA driver version is insufficient", "driver-too-old-for-image"),
        (
            "RuntimeError: Unable to initialize backend 'cuda': FAILED_PRECONDITION: No visible GPU devices.",
            "no-gpu-visible",
        ),
        ("RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.", "gpu-not-requested"),
        ("RuntimeError: HIP error: invalid device function", "gpu-arch-not-in-image"),
    ],
)
def test_more_kinds_in_other_words(text: str, key: str) -> None:
    assert diagnose(text).key == key


def test_jax_found_cuda_version() -> None:
    r = diagnose("CUDA backend failed to initialize: Found CUDA version 12010, but JAX was built against version 12020")
    assert r.key == "driver-too-old-for-image" and r.facts["driver_cuda"] == "12.1"
