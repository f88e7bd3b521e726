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
