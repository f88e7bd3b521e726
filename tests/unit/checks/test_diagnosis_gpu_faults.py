"""Diagnosis of GPU faults and of the stack's permissions and libraries, over real recorded outputs
(tests/data/errors/<kind>-NN.txt, the thread's URL on line 1): a program's faulting kernel, the driver failing to
initialise or losing a GPU, the driver's Xid lines in their printed forms, user-space libraries missing from the
image (and not the driver's libcuda), NVML's Insufficient Permissions, and rocm-smi's amdgpu check.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.checks.diagnosis import Context, Diagnosis, diagnose
from builder.checks.diagnosis.faults import xid_codes
from tests.unit.checks.test_diagnosis import message

if TYPE_CHECKING:
    from tests.conftest import Cli

DATA = Path(__file__).resolve().parents[2] / "data" / "errors"


def d(name: str, ctx: Context | None = None) -> Diagnosis:
    """The diagnosis of a recording's message (its ``# Source:`` header and description line left out)."""
    return diagnose(message(name), ctx)


# --- a program's kernel that faulted on the GPU: the image, not the host -----------------------------------------


@pytest.mark.parametrize(
    ("name", "cuda_error"),
    [
        ("gpu-program-fault-01.txt", 4),  # torch 0.x THC: "cuda runtime error (4) : unspecified launch failure"
        ("gpu-program-fault-02.txt", 700),  # torch 2.x: "CUDA error: an illegal memory access was encountered"
        ("gpu-program-fault-03.txt", 719),  # cuda-memcheck: CUDA_ERROR_LAUNCH_FAILED (error 719)
    ],
)
def test_a_faulting_kernel_is_the_program_in_the_image(name: str, cuda_error: int) -> None:
    r = d(name)
    assert (r.key, r.at_fault, r.noticed_by) == ("gpu-program-fault", "image-user-space", "image-user-space")
    assert r.facts["cuda_error"] == cuda_error
    assert "CUDA_LAUNCH_BLOCKING=1" in r.fix and "compute-sanitizer" in r.fix
    assert any("dmesg" in a["decided_by"] for a in r.facts["alternatives"]), "names what would make it the GPU"


def test_rocm_memory_access_fault_names_the_node_and_address() -> None:
    r = d("gpu-program-fault-04.txt")
    assert r.key == "gpu-program-fault"
    assert r.facts["gpu_node"] == 2
    assert r.facts["address"] == "0x7fc133800000"
    assert r.facts["reason"] == "Page not present or supervisor privilege"


@pytest.mark.parametrize(
    ("name", "xid", "bus"),
    [("gpu-program-fault-05.txt", 31, "0000:01:00"), ("gpu-program-fault-06.txt", 13, "0000:cb:00")],
)
def test_program_xids_in_the_drivers_dmesg_form(name: str, xid: int, bus: str) -> None:
    r = d(name)
    assert r.key == "gpu-program-fault"
    assert r.facts["xid"] == [xid]
    assert r.facts["pci_bus"] == bus


def test_a_hardware_xid_beside_a_program_fault_is_the_hardware() -> None:
    # the same node's log: the application's Xid 13 and, after it, the GPU falling off the bus
    text = message("gpu-program-fault-06.txt") + message("gpu-fallen-off-bus-03.txt")
    r = diagnose(text)
    assert (r.key, r.at_fault) == ("gpu-fallen-off-bus", "kernel-driver")
    assert r.facts["xid"] == 79
    assert "gpu-program-fault" in r.also_matched


# --- the driver could not initialise or lost the GPU -------------------------------------------------------------


def test_rm_init_adapter_failed_is_the_driver_not_an_invisible_gpu() -> None:
    # nvidia-smi says "No devices were found" (no-gpu-visible alone); dmesg says why: the GSP firmware did not start
    r = d("gpu-driver-fault-01.txt")
    assert (r.key, r.at_fault) == ("gpu-driver-fault", "kernel-driver")
    assert r.facts["rm_init_status"] == "0x62:0x65:1792"
    assert r.facts["gsp"] is True
    assert r.facts["pci_bus"] == "0000:98:00.0"
    assert "no-gpu-visible" in r.also_matched
    assert "NVreg_EnableGpuFirmware=0" in r.fix


@pytest.mark.parametrize(
    ("name", "minor"),
    [("gpu-driver-fault-02.txt", 5), ("gpu-driver-fault-03.txt", 0)],  # 550-era and 358-era wording
)
def test_rm_init_adapter_in_both_wordings(name: str, minor: int) -> None:
    r = d(name)
    assert r.key == "gpu-driver-fault"
    assert r.facts["device_minor"] == minor


def test_gsp_rpc_timeout() -> None:
    r = d("gpu-driver-fault-04.txt")
    assert (r.key, r.noticed_by) == ("gpu-driver-fault", "kernel-driver")
    assert r.facts["gsp"] is True


# --- one Xid grammar -----------------------------------------------------------------------------------------------


def test_xid_codes_read_every_printed_form() -> None:
    assert xid_codes(message("gpu-ecc-error-04.txt")) == (48, 64)
    assert xid_codes(message("gpu-fallen-off-bus-03.txt")) == (79,)
    assert xid_codes(message("gpu-program-fault-05.txt")) == (31,)
    assert xid_codes("Xid error 95 on GPU 3") == (95,)
    assert xid_codes("NVRM: GPU at PCI:0000:01:00: GPU-1234") == ()


@pytest.mark.parametrize(("name", "xid"), [("gpu-ecc-error-04.txt", 48), ("gpu-ecc-error-05.txt", 94)])
def test_ecc_xids_in_the_drivers_dmesg_form(name: str, xid: int) -> None:
    # before: the driver's "Xid (PCI:0000:07:00): 48" form was not read (only "Xid 48"); these were unknown
    r = d(name)
    assert (r.key, r.at_fault) == ("gpu-ecc-error", "kernel-driver")
    assert r.facts["xid"] == xid


def test_gpu_is_lost_is_the_bus() -> None:
    r = d("gpu-fallen-off-bus-05.txt")
    assert (r.key, r.at_fault) == ("gpu-fallen-off-bus", "kernel-driver")
    assert r.facts["pci_bus"] == "0000:02:00.0"


# --- user-space libraries missing from the image --------------------------------------------------------------------


def test_a_dependency_of_a_requested_library_is_named() -> None:
    r = d("gpu-libraries-missing-in-image-01.txt")
    assert (r.key, r.at_fault) == ("gpu-libraries-missing-in-image", "image-user-space")
    assert r.facts["missing_libraries"] == ["libnvJitLink.so.12"]
    assert r.facts["requested"] == ["libcusolver.so.11"]


@pytest.mark.parametrize(
    ("name", "missing"),
    [
        ("gpu-libraries-missing-in-image-02.txt", ["libcublas.so.11"]),
        ("gpu-libraries-missing-in-image-03.txt", ["libcudnn.so.8"]),
        ("gpu-libraries-missing-in-image-04.txt", ["libcudnn.so.5"]),
    ],
)
def test_missing_user_space_libraries(name: str, missing: list[str]) -> None:
    r = d(name)
    assert r.key == "gpu-libraries-missing-in-image"
    assert r.facts["missing_libraries"] == missing
    assert "nvidia-" in r.fix and "driver" in r.summary


def test_the_drivers_libcuda_missing_under_a_cudnn_load_is_not_the_image() -> None:
    # https://github.com/TinyLLaVA/TinyLLaVA_Factory/issues/134: cuDNN asked for, the loader failed on libcuda.so
    text = (
        "Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot open shared object file: "
        "No such file or directory\nPlease make sure libcudnn_cnn_infer.so.8 is in your library path!\n"
    )
    r = diagnose(text)
    assert r.key != "gpu-libraries-missing-in-image"
    assert r.key == "gpu-not-requested"


def test_tensorflow_without_libcuda_is_not_the_image() -> None:
    text = message("gpu-not-requested-05.txt") + (
        "W tensorflow/core/common_runtime/gpu/gpu_device.cc:1850] Cannot dlopen some GPU libraries.\n"
    )
    assert diagnose(text).key == "gpu-not-requested"


# --- NVML: Insufficient Permissions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "engine", "noticed_by"),
    [
        ("nvml-insufficient-permissions-01.txt", "podman", "image-user-space"),
        ("nvml-insufficient-permissions-02.txt", "docker", "container-toolkit"),
        ("nvml-insufficient-permissions-03.txt", "docker", "image-user-space"),
    ],
)
def test_nvml_insufficient_permissions(name: str, engine: str, noticed_by: str) -> None:
    r = d(name)
    assert (r.key, r.at_fault, r.noticed_by) == ("nvml-insufficient-permissions", "container-engine", noticed_by)
    assert r.facts["engine"] == engine
    assert "container_use_devices" in r.fix


def test_nvml_no_permission_of_pynvml_on_a_mig_device() -> None:
    r = d("nvml-insufficient-permissions-04.txt")
    assert r.key == "nvml-insufficient-permissions"
    assert "MIG" in r.fix


def test_cause_hint_from_the_text() -> None:
    failed = "Failed to initialize NVML: Insufficient Permissions\n"
    text = "$ getenforce\nEnforcing\n$ docker run --gpus all ubuntu nvidia-smi\n" + failed
    assert diagnose(text).facts["cause_hint"] == "selinux"
    text = "nvidia-smi -L\n  MIG 1g.10gb Device 0: (UUID: MIG-0a1b2c3d-...)\n" + failed
    assert diagnose(text).facts["cause_hint"] == "mig"


# --- AMD: rocm-smi / amd-smi's amdgpu check ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["driver-not-loaded-08.txt", "driver-not-loaded-09.txt"])
def test_rocm_smi_amdgpu_not_found_is_the_amd_driver(name: str) -> None:
    r = d(name)
    assert (r.key, r.at_fault) == ("driver-not-loaded", "kernel-driver")
    assert "amdgpu" in r.summary and "modprobe amdgpu" in r.fix, "the AMD answer, not NVIDIA's"


def test_amd_smi_wording() -> None:
    # https://github.com/ROCm/amdsmi/issues/172 (amd-smi 26.1: "Unable to get devices, driver not initialized")
    text = (
        "ERROR:root:Unable to get devices, driver not initialized (amdgpu not found in modules)\n"
        "ERROR:root:Unable to detect any GPU devices, check amdgpu version and module status (sudo modprobe amdgpu)\n"
    )
    r = diagnose(text)
    assert r.key == "driver-not-loaded" and "amdgpu" in r.summary


# --- CUDA's unknown error at initialisation: the nvidia_uvm module --------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cuda_error"),
    [
        ("nvidia-uvm-unavailable-01.txt", 999),  # torch 1.13 after suspend: "CUDA unknown error - this may be ..."
        ("nvidia-uvm-unavailable-02.txt", 30),  # CUDA 6 sample: "cudaGetDeviceCount returned 30" (no uvm module)
        ("nvidia-uvm-unavailable-03.txt", 30),  # cutorch: "error=30 : unknown error"
        ("nvidia-uvm-unavailable-04.txt", 999),  # a Go binding: "panic: CUDA_ERROR_UNKNOWN"
        ("nvidia-uvm-unavailable-05.txt", 999),  # TensorFlow: "failed call to cuInit: CUDA_ERROR_UNKNOWN"
    ],
)
def test_cuda_unknown_error_is_the_uvm_module(name: str, cuda_error: int) -> None:
    r = d(name)
    assert (r.key, r.at_fault) == ("nvidia-uvm-unavailable", "kernel-driver")
    assert r.facts["cuda_error"] == cuda_error
    assert "modprobe nvidia_uvm" in r.fix and "/dev/nvidia-uvm" in r.fix


def test_the_unknown_error_is_weaker_than_a_named_kind() -> None:
    text = message("driver-not-loaded-01.txt") + "failed call to cuInit: CUDA_ERROR_UNKNOWN\n"
    r = diagnose(text)
    assert r.key == "driver-not-loaded"
    assert "nvidia-uvm-unavailable" in r.also_matched


# --- PTX from a newer compiler than the driver: the driver is too old -----------------------------------------------


@pytest.mark.parametrize(
    "name", ["driver-too-old-for-image-09.txt", "driver-too-old-for-image-10.txt", "driver-too-old-for-image-11.txt"]
)
def test_unsupported_ptx_toolchain_is_an_old_driver(name: str) -> None:
    r = d(name)
    assert (r.key, r.at_fault) == ("driver-too-old-for-image", "kernel-driver")


def test_unsupported_ptx_with_the_image_cuda_names_the_minimum_driver() -> None:
    r = d("driver-too-old-for-image-09.txt", Context(image_cuda="11.3"))
    assert r.facts["host_driver"] == "460.80"  # from the log's "NVRM version" line
    assert r.facts["min_driver"].startswith("465.")
    assert "465." in r.summary


# --- nvidia-smi -q: rows waiting for a reset ------------------------------------------------------------------------


def test_remapped_rows_pending_is_a_memory_error() -> None:
    r = d("gpu-ecc-error-06.txt")
    assert (r.key, r.at_fault) == ("gpu-ecc-error", "kernel-driver")
    assert "reset" in r.fix


def test_remapped_rows_not_pending_is_no_failure() -> None:
    healthy = message("gpu-ecc-error-06.txt").replace(": 4", ": 0").replace("Yes", "No")
    assert diagnose(healthy).key == "unknown"


# --- as `builder check` sees them: the host's facts as context, through the CLI --------------------------------------

NEW = (
    "gpu-program-fault",
    "gpu-driver-fault",
    "gpu-libraries-missing-in-image",
    "nvml-insufficient-permissions",
    "open-module-unsupported-gpu",
    "gpu-device-unknown",
    "driver-init-timeout",
    "nvlink-error",
)
#: kinds of round 6 with two recordings (the CLI test below takes them too)
NEW_TWO = ("k8s-gpu-unschedulable", "rdma-memlock-too-small")
#: the recordings from AMD hosts (the context is then an MI300X's rocm-smi)
AMD = {
    "gpu-program-fault-04.txt",
    "driver-not-loaded-08.txt",
    "driver-not-loaded-09.txt",
    *(f"gpu-driver-fault-0{n}.txt" for n in (5, 6, 7)),
}
RECORDED = sorted(
    [p.name for key in (*NEW, *NEW_TWO, "nvidia-uvm-unavailable") for p in DATA.glob(f"{key}-0*.txt")]
    + ["driver-not-loaded-08.txt", "driver-not-loaded-09.txt"]
)
HOSTS = Path(__file__).resolve().parents[2] / "data"


def test_every_new_kind_has_its_recordings() -> None:
    for key in (*NEW, "nvidia-uvm-unavailable"):
        files = [n for n in RECORDED if n.rsplit("-", 1)[0] == key]
        assert len(files) >= 3, (key, files)
        assert all((DATA / n).read_text().startswith("# Source: https://github.com/") for n in files)


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_outputs_with_the_host_as_context(cli: Cli, name: str) -> None:
    host = HOSTS / ("compat/fleets/hosts/mi300x-rocm-smi.txt" if name in AMD else "h200/hostinfo.json")
    doc = cli("diagnose", "-", "--host", str(host), "--json", stdin=message(name)).json()
    assert doc["diagnosis"] == name.rsplit("-", 1)[0], (name, doc["diagnosis"], doc["evidence"])
    assert doc["evidence"], "the matched lines are quoted"


def test_human_output_names_the_layer(cli: Cli) -> None:
    out = cli("diagnose", "-", stdin=message("gpu-driver-fault-01.txt")).stderr
    assert "gpu-driver-fault" in out and "kernel-driver" in out and "0x62:0x65:1792" in out


# --- more wordings: TensorFlow's cudart stub, JAX's cuDNN checks, amdgpu's init, rocBLAS without a device ---------


@pytest.mark.parametrize("name", ["gpu-libraries-missing-in-image-05.txt", "gpu-libraries-missing-in-image-06.txt"])
def test_tensorflows_could_not_find_cuda_drivers_is_the_cuda_runtime(name: str) -> None:
    # the message says "drivers"; the stub failed to load libcudart (TF 2.13 tsl and the newer xla/tsl path)
    r = d(name)
    assert (r.key, r.at_fault) == ("gpu-libraries-missing-in-image", "image-user-space")
    assert "libcudart" in r.facts["note"]


@pytest.mark.parametrize(
    ("name", "compiled", "loaded"),
    [("cudnn-version-mismatch-05.txt", "8.9.6", "8.6.0"), ("cudnn-version-mismatch-06.txt", "8.9.7", "8.9.7")],
)
def test_jax_cudnn_checks(name: str, compiled: str, loaded: str) -> None:
    r = d(name)
    assert (r.key, r.at_fault) == ("cudnn-version-mismatch", "image-user-space")
    assert (r.facts["cudnn_compiled_with"], r.facts["cudnn_loaded"]) == (compiled, loaded)


def test_jax_outdated_cudnn_names_the_minimum() -> None:
    assert d("cudnn-version-mismatch-06.txt").facts["cudnn_minimum"] == "9.1.0"


@pytest.mark.parametrize(
    ("name", "facts"),
    [
        ("gpu-driver-fault-05.txt", {"probe_error": -12, "pci_bus": "0000:83:00.0"}),  # MI210, ROCm 7.1
        ("gpu-driver-fault-06.txt", {"ip_block": "gfx_v9_0", "firmware": "amdgpu/vega20_rlc.bin", "probe_error": -2}),
        ("gpu-driver-fault-07.txt", {"ip_block": "psp"}),  # V620 in a VM
    ],
)
def test_amdgpu_init_failure_is_the_driver_with_the_amd_answer(name: str, facts: dict[str, object]) -> None:
    r = d(name)
    assert (r.key, r.at_fault) == ("gpu-driver-fault", "kernel-driver")
    assert facts.items() <= dict(r.facts).items()
    assert "amdgpu" in r.summary and "Above 4G Decoding" in r.fix, "the AMD answer, not NVIDIA's GSP advice"
    assert "NVreg" not in r.fix


@pytest.mark.parametrize("name", ["no-gpu-visible-05.txt", "no-gpu-visible-06.txt"])
def test_rocblas_without_a_device(name: str) -> None:
    r = d(name)
    assert (r.key, r.at_fault) == ("no-gpu-visible", "kernel-driver")
    assert "/dev/kfd" in r.fix and "ROCm" in r.summary


# --- the open kernel modules on a GPU without GSP; a GPU request naming no device; Kubernetes, MIG, podman ---------


@pytest.mark.parametrize(
    ("name", "pci_id"),
    [
        ("open-module-unsupported-gpu-01.txt", "10de:1b82"),  # 560.35.03, GTX 1080 beside a supported GPU
        ("open-module-unsupported-gpu-02.txt", "10de:1d01"),  # 560.31 journal form, then "None ... initialized"
        ("open-module-unsupported-gpu-03.txt", "10de:1db5"),  # 515 built from source, dmesg
    ],
)
def test_open_module_on_a_gpu_without_gsp(name: str, pci_id: str) -> None:
    r = d(name)
    assert (r.key, r.at_fault) == ("open-module-unsupported-gpu", "kernel-driver")
    assert r.facts["pci_id"] == pci_id
    assert "proprietary" in r.fix


@pytest.mark.parametrize(
    ("name", "device", "meaning"),
    [
        ("gpu-device-unknown-01.txt", "1", "index"),  # docker --gpus 2 on a one-GPU host (escaped hook text)
        ("gpu-device-unknown-02.txt", "4", "index"),  # enroot with an index kept from a Slurm allocation
        ("gpu-device-unknown-03.txt", "MIG-GPU-932bfb2c-849a-2a22-1e84-9eff6bc02b39/1/0", "470"),
        ("gpu-device-unknown-04.txt", "/var/run/nvidia-container-devices", "volume mounts"),
    ],
)
def test_a_request_for_a_device_that_does_not_exist(name: str, device: str, meaning: str) -> None:
    r = d(name)
    assert (r.key, r.at_fault, r.noticed_by) == ("gpu-device-unknown", "run-options", "container-toolkit")
    assert r.facts["device"] == device
    assert meaning in r.facts["meaning"]


@pytest.mark.parametrize("name", ["k8s-runtime-not-configured-04.txt", "k8s-runtime-not-configured-05.txt"])
def test_runtime_class_without_the_containerd_runtime(name: str) -> None:
    r = d(name)
    assert (r.key, r.at_fault, r.noticed_by) == ("k8s-runtime-not-configured", "container-engine", "container-engine")
    assert r.facts["engine"] == "kubernetes"


def test_slurmd_mig_enabled_without_instances() -> None:
    r = d("no-gpu-visible-07.txt")
    assert (r.key, r.at_fault) == ("no-gpu-visible", "kernel-driver")
    assert "MIG mode enabled without instances" in r.fix


def test_podman_without_the_hook_is_a_missing_request_not_the_vendor() -> None:
    r = d("gpu-not-requested-06.txt")
    assert (r.key, r.at_fault) == ("gpu-not-requested", "run-options")


# --- NVRM's API mismatch in its wordings: user space and module of different versions --------------------------------


@pytest.mark.parametrize(
    ("name", "user_space", "module"),
    [
        ("driver-library-mismatch-04.txt", "535.54.03", "530.30.02"),  # syslog, lines joined by #012
        ("driver-library-mismatch-05.txt", "595.84", "595.80"),  # 595 names the client process
        ("driver-library-mismatch-06.txt", "570.153.02", "570.144"),  # with the init failure it causes
    ],
)
def test_nvrm_api_mismatch(name: str, user_space: str, module: str) -> None:
    r = d(name)
    assert (r.key, r.at_fault) == ("driver-library-mismatch", "kernel-driver")
    assert (r.facts["user_space_version"], r.facts["kernel_module_version"]) == (user_space, module)


def test_nvml_mismatch_names_the_library_version() -> None:
    r = d("driver-library-mismatch-07.txt")  # 570: nvidia-smi adds "NVML library version: 570.124"
    assert r.key == "driver-library-mismatch" and r.facts["user_space_version"] == "570.124"


def test_the_mismatch_explains_the_failed_init() -> None:
    # the RmInitAdapter lines of a half-applied update are the mismatch's consequence, not a driver fault
    assert "RmInitAdapter failed" in message("driver-library-mismatch-06.txt")
    assert d("driver-library-mismatch-06.txt").key == "driver-library-mismatch"


@pytest.mark.parametrize("name", ["rdma-memlock-too-small-01.txt", "rdma-memlock-too-small-02.txt"])
def test_rdma_registration_enomem_is_the_memlock_limit_not_the_fabric(name: str) -> None:
    r = d(name)
    assert (r.key, r.at_fault) == ("rdma-memlock-too-small", "run-options")
    assert "--ulimit memlock=-1" in r.fix


def test_a_work_completion_error_stays_the_fabric() -> None:
    assert d("nccl-network-failure-01.txt").key == "nccl-network-failure"


@pytest.mark.parametrize(("name", "wsl"), [("wsl-gpu-unavailable-04.txt", 2), ("wsl-gpu-unavailable-05.txt", None)])
def test_nvml_blocked_by_the_operating_system_under_wsl(name: str, wsl: int | None) -> None:
    # WSL 2 with a data-center GPU in TCC mode; a Hyper-V GPU-PV guest (dxgkrnl's /usr/lib/wsl/lib)
    r = d(name)
    assert (r.key, r.at_fault) == ("wsl-gpu-unavailable", "kernel-driver")
    assert r.facts.get("wsl") == wsl
    assert "WDDM" in r.fix


def test_nvml_blocked_without_wsl_is_not_claimed() -> None:
    # the same NVML error with nothing naming WSL or GPU-PV: no kind is sure (an old nvidia-docker container
    # without devices printed it too: https://github.com/Kaixhin/dockerfiles/issues/1)
    assert diagnose("Failed to initialize NVML: GPU access blocked by the operating system\n").key == "unknown"


@pytest.mark.parametrize(
    "name", ["driver-init-timeout-01.txt", "driver-init-timeout-02.txt", "driver-init-timeout-03.txt"]
)
def test_the_toolkits_driver_service_timing_out_is_persistence_mode(name: str) -> None:
    # 2024 "driver rpc error: timed out" (legacy mode), 2021 "driver error: timed out" in an escaped hook, and the
    # same from `nvidia-container-cli -k -d /dev/tty info`
    r = d(name)
    assert (r.key, r.at_fault, r.noticed_by) == ("driver-init-timeout", "kernel-driver", "container-toolkit")
    assert "nvidia-persistenced" in r.fix


def test_rocm_container_without_dev_kfd_is_the_request() -> None:
    # rocminfo inside the container: the host's module is loaded, /dev/kfd was not passed
    r = d("gpu-not-requested-07.txt")
    assert (r.key, r.at_fault) == ("gpu-not-requested", "run-options")
    assert "--device /dev/kfd" in r.fix and "AMD" in r.summary


def test_rocm_no_device_in_tensorflows_rocm_driver() -> None:
    r = d("no-gpu-visible-08.txt")  # "could not retrieve ROCM device count: HIP_ERROR_NoDevice" under podman
    assert (r.key, r.at_fault) == ("no-gpu-visible", "kernel-driver")
    assert r.summary.startswith("ROCm found no GPU")


def test_cpu_faults_are_not_gpu_faults() -> None:
    # the shell's report of SIGILL (a CPU without AVX running a TensorFlow wheel) and a kernel trap line name no GPU
    assert diagnose("Illegal instruction (core dumped)\n").key == "unknown"
    assert diagnose("kernel: traps: python3[4242] misaligned address\n").key == "unknown"
    assert diagnose("RuntimeError: CUDA error: misaligned address\n").key == "gpu-program-fault"


@pytest.mark.parametrize(
    ("name", "xids", "fatal"),
    [
        ("nvlink-error-01.txt", [144, 149], True),  # Nonfatal then Fatal NVLink 5 Xids
        ("nvlink-error-02.txt", [149, 145], True),
        ("nvlink-error-03.txt", [149, 145], False),  # 590: Xid 45 lines "caused by previous Xid 149/145"
    ],
)
def test_nvlink_xids_are_the_interconnect(name: str, xids: list[int], fatal: bool) -> None:
    r = d(name)
    assert (r.key, r.at_fault, r.noticed_by) == ("nvlink-error", "interconnect", "kernel-driver")
    assert r.facts["xid"] == xids
    assert r.facts.get("fatal", False) is fatal
    assert "nvidia-smi nvlink" in r.fix


def test_nvlink_link_discovery_failure() -> None:
    assert d("nvlink-error-04.txt").key == "nvlink-error"  # knvlinkDiscoverPostRxDetLinks_GH100 ... failed


@pytest.mark.parametrize(
    ("name", "component"),
    [
        ("gpu-libraries-missing-in-image-07.txt", "cuSPARSE"),  # JAX 0.6.x traceback, then the CPU fallback warning
        ("gpu-libraries-missing-in-image-08.txt", "cuSPARSE"),
        ("gpu-libraries-missing-in-image-09.txt", "cuSPARSE"),  # versions_helpers: "library was not found"
        ("gpu-libraries-missing-in-image-10.txt", "CUDA"),  # older JAX: "Unable to load CUDA."
    ],
)
def test_jax_plugin_that_cannot_load_a_cuda_library_is_not_a_cpu_build(name: str, component: str) -> None:
    # before: "a CUDA-enabled jaxlib is not installed" (printed after the failed check) made it a CPU build
    r = d(name)
    assert (r.key, r.at_fault) == ("gpu-libraries-missing-in-image", "image-user-space")
    assert r.facts["jax_components"] == [component]
    assert "LD_LIBRARY_PATH" in r.fix


def test_a_jax_cpu_build_alone_stays_the_framework() -> None:
    text = (
        "An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed. Falling back to cpu."
    )
    assert diagnose(text).key == "framework-without-gpu-support"


@pytest.mark.parametrize("name", ["gpu-program-fault-07.txt", "gpu-program-fault-08.txt"])
def test_a_device_side_assertion_is_the_program(name: str) -> None:
    # torch 2.x (Indexing.cu, then the RuntimeError) and torch 1.x THC (the assertion lines alone)
    r = d(name)
    assert (r.key, r.at_fault) == ("gpu-program-fault", "image-user-space")
    assert (r.facts["cuda_error"], r.facts["assertion"]) == (710, "srcIndex < srcSelectDimSize")


@pytest.mark.parametrize("name", ["gpu-arch-not-in-image-14.txt", "gpu-arch-not-in-image-15.txt"])
def test_cublas_arch_mismatch_is_the_gpu_arch(name: str) -> None:
    # cuBLAS status 8 on Kepler (K40m, K80: compute capability 3.x); the host's facts name the architecture
    r = d(name, Context(gpu_arch="sm_37"))
    assert (r.key, r.at_fault) == ("gpu-arch-not-in-image", "framework-build")
    assert r.facts["gpu_arch"] == "sm_37"


@pytest.mark.parametrize(
    ("name", "nodes", "insufficient"), [("k8s-gpu-unschedulable-01.txt", 6, 6), ("k8s-gpu-unschedulable-02.txt", 2, 1)]
)
def test_scheduler_without_a_free_gpu(name: str, nodes: int, insufficient: int) -> None:
    r = d(name)
    assert (r.key, r.at_fault) == ("k8s-gpu-unschedulable", "container-engine")
    assert (r.facts["nodes"], r.facts["insufficient_gpu"], r.facts["engine"]) == (nodes, insufficient, "kubernetes")
    assert "Allocatable" in r.fix
