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


def message(name: str) -> str:
    """The recorded message without the file's header: line 1 (``# Source: URL``) and the description line under
    it, so the diagnosis reads only what the tools printed."""
    lines = (DATA / name).read_text().splitlines(keepends=True)
    if lines and lines[0].startswith("# Source:"):
        lines = lines[1:]
        if lines and lines[0].startswith("# "):
            lines = lines[1:]
    return "".join(lines)


def d(name: str, ctx: Context | None = None) -> Diagnosis:
    return diagnose(message(name), ctx)


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


# --- issue 16: new kinds, cross-checks, alternatives and context -------------------------------------------

NEW_KINDS = (
    "cdi-not-enabled",
    "toolkit-ldconfig-failed",
    "device-cgroup-denied",
    "driver-libs-in-image",
    "k8s-runtime-not-configured",
    "apptainer-gpu-libs-missing",
    "slurm-gres-invalid",
    "cudnn-version-mismatch",
    "nccl-shm-too-small",
    "nccl-network-failure",
    "nccl-rank-mismatch",
    "nccl-system-error",
    "gpu-fallen-off-bus",
    "gpu-ecc-error",
    "wsl-gpu-unavailable",
)


@pytest.mark.parametrize("key", NEW_KINDS)
def test_every_new_kind_has_three_real_messages(key: str) -> None:
    files = [n for n in MORE if n.rsplit("-", 1)[0] == key]
    assert len(files) >= 3, (key, files)
    for n in files:
        assert (DATA / n).read_text().startswith("# Source: https://"), n


def test_new_kinds_carry_their_facts() -> None:
    assert d("toolkit-ldconfig-failed-01.txt").facts["ldconfig"] == "/sbin/ldconfig.real"
    assert d("toolkit-ldconfig-failed-02.txt").facts["exit_code"] == "127"
    assert d("driver-libs-in-image-01.txt").facts["library"] == "libnvidia-ml.so.1"
    cudnn = d("cudnn-version-mismatch-02.txt").facts
    assert (cudnn["cudnn_compiled_with"], cudnn["cudnn_loaded"]) == ("8.5.0", "8.4.1")
    assert d("cudnn-version-mismatch-03.txt").facts == {"cudnn_compiled_with": "7.1.2", "cudnn_loaded": "7.6.0"}
    assert d("nccl-shm-too-small-01.txt").facts["segment_bytes"] == 9637888
    assert d("nccl-network-failure-01.txt").facts["ib_status"] == 12
    assert d("gpu-fallen-off-bus-03.txt").facts["xid"] == 79
    assert d("gpu-ecc-error-03.txt").facts["cuda_error"] == 214
    wsl = d("wsl-gpu-unavailable-01.txt").facts
    assert (wsl["kernel"], wsl["wsl"]) == ("4.4.0-19041-Microsoft", 1)
    assert d("k8s-runtime-not-configured-01.txt").facts["engine"] == "kubernetes"
    assert d("slurm-gres-invalid-03.txt").facts["request"] == "--gres=gpu:4"


def test_layers_of_new_kinds() -> None:
    assert (d("cdi-not-enabled-01.txt").at_fault, d("cdi-not-enabled-01.txt").noticed_by) == (
        "container-engine",
        "container-engine",
    )
    assert d("driver-libs-in-image-02.txt").noticed_by == "container-toolkit"
    assert d("device-cgroup-denied-02.txt").noticed_by == "container-toolkit"
    # the engine's CDI switch is not the toolkit: no "toolkit missing" alternative
    assert d("cdi-not-enabled-02.txt").also_matched == ()


def test_ngc_banner_names_the_required_driver_over_error_804() -> None:
    r = d("driver-too-old-for-image-07.txt")
    assert (r.key, r.facts["required_driver"], r.facts["host_driver"]) == (
        "driver-too-old-for-image",
        "450.51",
        "440.33.01",
    )
    assert "forward-compat-unsupported" in r.also_matched and ">= 450.51" in r.fix
    assert diagnose("[[CUDA Driver UNAVAILABLE (cuInit(0) returned 804)]]").key == "forward-compat-unsupported"


def test_driver_too_old_is_cross_checked_against_the_driver_and_cuda() -> None:
    # a container started with raw --device nodes: the driver (346.46) meets CUDA 7.0's minimum
    r = d("driver-libs-not-injected-01.txt")
    assert (r.key, r.at_fault) == ("driver-libs-not-injected", "run-options")
    assert r.facts["min_driver"] == "346.46" and "/dev/nvidia0" in r.facts["raw_devices"]
    assert "driver-too-old-for-image" in r.also_matched and "--gpus all" in r.fix
    # bare metal: no container, so the contradiction is reported, not a run option
    bare = d("error-crosscheck-bare-metal.txt")
    assert bare.key == "driver-too-old-for-image" and "not too old" in bare.summary
    assert bare.facts["host_driver"] == "440.33.01" and bare.facts["image_cuda"] == "10.1"
    # a driver that really is too old stays "too old"
    real = diagnose("CUDA driver version is insufficient for CUDA runtime version", Context(driver_version="352.31"))
    assert real.key == "driver-too-old-for-image"
    old = diagnose(
        "docker run --device /dev/nvidia0 nvidia/cuda:11.0-base\nCUDA driver version is insufficient", Context()
    )
    assert old.key == "driver-too-old-for-image"  # no driver named: nothing to cross-check


def test_context_decides_between_alternatives() -> None:
    text = message("nccl-system-error-02.txt")
    plain = diagnose(text)
    assert plain.key == "nccl-system-error"
    assert [a["diagnosis"] for a in plain.facts["alternatives"]][:2] == ["nccl-shm-too-small", "nccl-network-failure"]
    assert diagnose(text, Context(engine="docker")).key == "nccl-shm-too-small"
    assert diagnose(text, Context(engine="kubernetes")).fix.startswith("in the pod spec")
    assert diagnose(text, Context(engine="slurm")).key == "nccl-network-failure"
    lib = "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory"
    assert diagnose(lib, Context(engine="apptainer")).fix.startswith("in the run options: add `--nv`")
    assert diagnose(lib, Context(engine="kubernetes")).key == "k8s-runtime-not-configured"
    none = "RuntimeError: No CUDA GPUs are available"
    assert "ConstrainDevices" in diagnose(none, Context(engine="slurm")).fix


def test_cli_engine_option(cli: Cli) -> None:
    f = str(DATA / "nccl-system-error-01.txt")
    doc = cli("--json", "diagnose", f, "--engine", "podman").json()
    assert doc["diagnosis"] == "nccl-shm-too-small" and "podman" in doc["facts"]["decided_by"]
    human = cli("diagnose", f)
    assert "nccl-shm-too-small: in a container" in human.stderr
    cli("diagnose", f, "--engine", "lxc", code=2)


def test_device_facts_keep_hyphens() -> None:
    r = diagnose("nvidia-container-cli: failed to open /dev/nvidia-uvm: permission denied")
    assert r.facts["device"] == "/dev/nvidia-uvm"
    caps = diagnose("open /dev/nvidia-caps/nvidia-cap1: no such file or directory")
    assert caps.facts["device"] == "/dev/nvidia-caps/nvidia-cap1"


def test_ngc_unsupported_gpu_notice() -> None:
    new = d("gpu-arch-not-in-image-09.txt")
    assert (new.facts["gpu"], new.facts["gpu_arch"], new.facts["gpu_newer_than_image"]) == (
        "GeForce RTX 4090",
        "sm_89",
        True,
    )
    old = d("gpu-arch-not-in-image-10.txt")
    assert (old.facts["gpu"], old.facts["gpu_newer_than_image"]) == ("Tesla K80", False)


def test_collect_env_of_a_cpu_wheel_next_to_a_gpu() -> None:
    assert d("framework-without-gpu-support-03.txt").key == "framework-without-gpu-support"
    gpu_build = "PyTorch version: 2.0.1+cu117\nCUDA used to build PyTorch: 11.7\nIs CUDA available: True\n"
    assert diagnose(gpu_build).key == "unknown"  # a healthy collect_env is no failure


def test_clean_tool_output_is_no_false_alarm() -> None:
    # nvidia-smi -q lists "Pending Page Retirement : No" and ECC counters: fields, not failures
    for f in ("nvidia-smi/nvidia-smi-06.txt", "rocm-smi/rocm-smi-05.txt", "h200/nvidia-smi-q.txt"):
        text = (DATA.parent / f).read_text()
        assert diagnose(text).key == "unknown", f
