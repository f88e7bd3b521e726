"""Diagnosis against real recorded data beyond tests/data/errors: no false alarm on any clean real tool output,
NVIDIA_DRIVER_CAPABILITIES read for what it says (not for being named), missing driver libraries next to raw
/dev/nvidia* nodes, and the interconnect layer of NCCL transport failures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.checks.diagnosis import LAYERS, Context, diagnose

DATA = Path(__file__).resolve().parents[2] / "data"

#: recordings that are failures, not clean outputs: each with why
NOT_CLEAN = {
    "nvidia-smi/nvidia-smi-11.txt": "nvidia-smi: 'couldn't communicate with the NVIDIA driver' (driver-not-loaded)",
    "h200/probe-run1-gcnarch-bug.json": "the probe's recorded arch-coverage error (a bug in builder's probe, fixed)",
}

#: every real recording of a working host, tool or probe (h200 probes and host facts, nvidia-smi / rocm-smi /
#: amd-smi / nvidia-container-cli outputs, topologies, fleet hosts, nccl-tests results, rendered Dockerfiles)
CLEAN = sorted(
    str(p.relative_to(DATA))
    for folder in (
        "h200",
        "nvidia-smi",
        "nvidia-smi-query",
        "rocm-smi",
        "host-formats",
        "topology",
        "compat/fleets/hosts",
        "nccl-tests",
        "golden",
    )
    for p in (DATA / folder).rglob("*")
    if p.is_file() and str(p.relative_to(DATA)) not in NOT_CLEAN
)


def test_the_clean_set_covers_the_h200_probes_and_tool_outputs() -> None:
    assert {"h200/probe.json", "h200/probe-jax.json", "h200/probe-hidden.json", "h200/nvidia-smi-q.txt"} <= set(
        CLEAN
    )
    assert len(CLEAN) >= 80, len(CLEAN)


@pytest.mark.parametrize("name", CLEAN)
def test_clean_real_output_is_no_false_alarm(name: str) -> None:
    r = diagnose((DATA / name).read_text(errors="replace"))
    assert r.key == "unknown", (name, r.key, r.evidence)


@pytest.mark.parametrize("name", sorted(NOT_CLEAN))
def test_recorded_failures_stay_failures(name: str) -> None:
    assert diagnose((DATA / name).read_text()).key != "unknown", name


# --- NVIDIA_DRIVER_CAPABILITIES: its value decides, with a symptom ------------------------------------------------


def test_capabilities_named_in_a_healthy_probe_are_no_failure() -> None:
    text = (DATA / "h200" / "probe.json").read_text()
    assert '"NVIDIA_DRIVER_CAPABILITIES": "compute,graphics,utility"' in text
    assert diagnose(text).key == "unknown"


@pytest.mark.parametrize(
    ("env", "symptom", "missing"),
    [
        # enroot's default is `utility` only (docs/hpc.md): torch finds no driver
        ("NVIDIA_DRIVER_CAPABILITIES=utility", "RuntimeError: Found no NVIDIA driver on your system.", "compute"),
        ('"NVIDIA_DRIVER_CAPABILITIES": "compute"', "bash: nvidia-smi: command not found", "utility"),
        ("-e NVIDIA_DRIVER_CAPABILITIES=compute,utility", "Cannot load libnvidia-encode.so.1", "video"),
    ],
)
def test_a_symptom_whose_capability_is_not_listed(env: str, symptom: str, missing: str) -> None:
    r = diagnose(f"{env}\n{symptom}\n")
    assert (r.key, r.at_fault) == ("driver-capabilities-missing", "run-options"), r
    assert r.facts["missing_capability"] == missing


def test_a_symptom_whose_capability_is_listed_is_something_else() -> None:
    text = "NVIDIA_DRIVER_CAPABILITIES=compute,utility\nRuntimeError: Found no NVIDIA driver on your system.\n"
    assert diagnose(text).key == "gpu-not-requested"
    assert diagnose(text.replace("compute,utility", "all")).key == "gpu-not-requested"
    # the context's value (--host / the image's env) decides the same way
    lib = "ImportError: libcuda.so.1: cannot open shared object file"
    assert diagnose(lib, Context(driver_capabilities="compute,utility")).key == "gpu-not-requested"
    assert diagnose(lib, Context(driver_capabilities="utility")).facts["missing_capability"] == "compute"


# --- driver libraries not injected ------------------------------------------------------------------------------


def test_missing_libcuda_next_to_raw_device_nodes_is_not_a_missing_gpu_request() -> None:
    # the docker command of tensorflow/tensorflow#9969 (raw --device nodes, no runtime) with the ImportError
    # that thread is titled after
    text = (
        "docker run -it --rm --device /dev/nvidia0:/dev/nvidia0 --device /dev/nvidiactl:/dev/nvidiactl "
        "--device /dev/nvidia-uvm:/dev/nvidia-uvm tensorflow/tensorflow:latest-gpu /bin/bash\n"
        "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory\n"
    )
    r = diagnose(text)
    assert (r.key, r.at_fault) == ("driver-libs-not-injected", "run-options")
    assert r.facts["raw_devices"] == ["/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl"]
    assert "gpu-not-requested" in r.also_matched and "--gpus all" in r.fix
    assert diagnose(text.split("\n", 1)[1]).key == "gpu-not-requested"  # without the devices: no GPU request


# --- the interconnect layer ---------------------------------------------------------------------------------------


def test_nccl_transport_failures_are_the_interconnect() -> None:
    assert "interconnect" in LAYERS
    text = (DATA / "errors" / "nccl-network-failure-01.txt").read_text()
    r = diagnose(text)
    assert (r.key, r.at_fault) == ("nccl-network-failure", "interconnect")
    assert (r.facts["ib_status"], r.facts["ib_status_name"]) == (12, "IBV_WC_RETRY_EXC_ERR")
    assert "ibstat" in r.fix and "NCCL_IB_GID_INDEX" in r.fix
    p2p = diagnose("RuntimeError: CUDA error: peer access is not supported between these two devices")
    assert (p2p.key, p2p.at_fault) == ("nccl-network-failure", "interconnect")


# --- kinds generalised on further real messages (tests/data/errors, found after the first set) --------------------


def _recorded(name: str) -> str:
    lines = (DATA / "errors" / name).read_text().splitlines(keepends=True)
    assert lines[0].startswith("# Source: https://"), name
    return "".join(line for line in lines if not line.startswith("# "))


def test_a_requested_gpu_whose_libraries_are_not_found_is_the_ld_cache_not_the_request() -> None:
    for name, request in (
        ("toolkit-ldconfig-failed-04.txt", "--gpus all"),  # llama.cpp#7822
        ("toolkit-ldconfig-failed-05.txt", "--gpus all"),  # nvidia-docker#854: `ldconfig` inside fixed it
        ("toolkit-ldconfig-failed-06.txt", "--runtime nvidia"),
    ):
        r = diagnose(_recorded(name))
        assert (r.key, r.at_fault, r.noticed_by) == ("toolkit-ldconfig-failed", "container-toolkit", "image-user-space")
        assert r.facts["gpu_request"] == request and "gpu-not-requested" in r.also_matched
        assert "ldconfig -p" in r.fix
    # no request on the command line: the request is what is missing
    assert diagnose(_recorded("gpu-not-requested-04.txt")).key == "gpu-not-requested"
    # the engine decides where it is not docker/podman
    k8s = diagnose(_recorded("toolkit-ldconfig-failed-04.txt"), Context(engine="kubernetes"))
    assert k8s.key == "k8s-runtime-not-configured"


def test_nvidia_docker_1_names_the_driver_cuda_and_the_image_cuda() -> None:
    r = diagnose(_recorded("driver-too-old-for-image-08.txt"))
    assert (r.facts["driver_cuda"], r.facts["image_cuda"], r.facts["min_driver"]) == ("7.5", "8.0", "367.48")


def test_ranks_with_different_nccl_versions() -> None:
    r = diagnose(_recorded("nccl-rank-mismatch-07.txt"))  # nccl#1267: 2.20.5 on one node, 2.19.3 on the others
    assert (r.key, r.facts["nccl_versions"]) == ("nccl-rank-mismatch", ["2.20.5", "2.19.3"])
    # a cu11 and a cu12 wheel side by side on every node is no disagreement; two banners that differ are
    same = "NCCL WARN x\nnvidia-nccl-cu11==2.14.3\nnvidia-nccl-cu12==2.19.3\nnvidia-nccl-cu12==2.19.3\n"
    assert "nccl_versions" not in diagnose(same).facts and diagnose(same).key == "unknown"
    banners = "NCCL version 2.18.6+cuda12.2\nNCCL version 2.19.3+cuda12.3\nNCCL WARN Message truncated\n"
    assert diagnose(banners).facts["nccl_versions"] == ["2.18.6", "2.19.3"]


def test_rocminfo_without_the_kfd_module_is_the_amd_driver() -> None:
    for name in ("driver-not-loaded-05.txt", "driver-not-loaded-06.txt", "driver-not-loaded-07.txt"):
        r = diagnose(_recorded(name))
        assert (r.key, r.at_fault) == ("driver-not-loaded", "kernel-driver"), name
        assert "modprobe amdgpu" in r.fix and "nvidia" not in r.fix.lower(), name
    # the NVIDIA wording stays NVIDIA's, and the host's vendor decides when the text does not
    assert "modprobe nvidia" in diagnose(_recorded("driver-not-loaded-04.txt")).fix
    assert "modprobe amdgpu" in diagnose("ROCk module is NOT loaded", Context(vendor="amd")).fix


def test_rocminfo_warning_from_an_image_without_lsmod_is_no_failure() -> None:
    # the module is loaded; rocminfo's check needs `lsmod` (kmod), which the image lacks
    assert diagnose(_recorded("no-failure-rocminfo-without-lsmod.txt")).key == "unknown"


def test_a_driver_library_missing_on_the_host_itself() -> None:
    r = diagnose(_recorded("driver-libs-missing-on-host-01.txt"))  # tensorflow#6233
    assert (r.key, r.at_fault) == ("driver-libs-missing-on-host", "kernel-driver")
    assert (r.facts["kernel_module_version"], r.facts["hostname"]) == ("367.57", "zsx-All-Series")
    assert "ldconfig -p" in r.fix and "gpu-not-requested" in r.also_matched
    # the same TensorFlow diagnostics in a container (Docker's 12-hex hostname): a container without the driver
    assert diagnose(_recorded("gpu-not-requested-05.txt")).key == "gpu-not-requested"
    # an engine in the context or the text is never the bare host
    text = _recorded("driver-libs-missing-on-host-03.txt")
    assert diagnose(text, Context(engine="docker")).key == "gpu-not-requested"
    assert diagnose("$ docker run img\n" + text).key == "gpu-not-requested"


def test_rocblas_without_kernels_for_the_gpu_is_the_amd_arch_not_in_the_image() -> None:
    for name, arch in (
        ("gpu-arch-not-in-image-11.txt", "gfx1103"),
        ("gpu-arch-not-in-image-12.txt", "gfx1201"),
        ("gpu-arch-not-in-image-13.txt", "gfx1201"),
    ):
        r = diagnose(_recorded(name))
        assert (r.key, r.facts["gpu_arch"], r.facts["vendor"]) == ("gpu-arch-not-in-image", arch, "amd"), name
    listed = diagnose(_recorded("gpu-arch-not-in-image-13.txt")).facts["image_archs"]
    assert "gfx942" in listed and "gfx1201" not in listed


def test_gpus_busy_in_an_exclusive_compute_mode() -> None:
    r = diagnose(_recorded("gpu-busy-or-exclusive-01.txt"))  # DIGITS#2005: "E. Process" in nvidia-smi
    assert (r.key, r.at_fault, r.facts["cuda_error"]) == ("gpu-busy-or-exclusive", "kernel-driver", 46)
    assert r.facts["compute_modes"] == ["Exclusive_Process"] and "-c DEFAULT" in r.fix
    assert diagnose(_recorded("gpu-busy-or-exclusive-03.txt")).facts["compute_modes"] == ["Exclusive_Thread"]
    # a healthy nvidia-smi table in Default mode names no compute mode and is no failure
    assert diagnose((DATA / "h200" / "nvidia-smi.txt").read_text()).key == "unknown"
