"""The failure kinds builder recognises, most specific first: patterns over the *kind* of failure (error
codes, NVML/CUDA/HIP error names, hook phrases, structure), never one sample's exact text. Sources of each
kind's facts: docs/diagnosis.md.
"""

from __future__ import annotations

from builder.checks.diagnosis.facts import (
    facts_arch,
    facts_cdi,
    facts_driver_too_old,
    facts_error_code,
    facts_forward_compat,
    facts_mismatch,
    facts_perm,
    facts_tool,
)
from builder.checks.diagnosis.faults import RULES as FAULT_RULES
from builder.checks.diagnosis.faults import UVM_UNAVAILABLE
from builder.checks.diagnosis.integration import HOST_LIBS_MISSING, NOT_INJECTED, facts_capabilities
from builder.checks.diagnosis.integration import RULES as INTEGRATION_RULES
from builder.checks.diagnosis.model import FailureRule, patterns
from builder.checks.diagnosis.runtime import RULES as RUNTIME_RULES

_BASE_RULES: tuple[FailureRule, ...] = (
    FailureRule(
        "cdi-device-unresolvable",
        "container-toolkit",
        "container-engine",
        "the engine was asked for a CDI device (e.g. nvidia.com/gpu=all) that no CDI spec on the host defines",
        "on the host: generate the spec (`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`), check that "
        "`nvidia-ctk cdi list` shows the device name requested and that the engine reads that directory; "
        "or run with `--gpus` instead of CDI",
        patterns(
            r"unresolvable CDI devices?",
            r"CDI device injection failed",
            r"failed to inject CDI devices",
            r"could not resolve CDI device",
            r"setting up CDI devices",
        ),
        facts_cdi,
    ),
    FailureRule(
        "container-toolkit-missing",
        "container-toolkit",
        "container-engine",
        "the engine has no GPU device driver: the NVIDIA Container Toolkit (nvidia-container-runtime-hook) "
        "is not installed or not registered with the engine",
        "on the host: install the NVIDIA Container Toolkit, run `nvidia-ctk runtime configure --runtime=docker` "
        "and restart dockerd (the hook must be on dockerd's PATH when it starts)",
        patterns(
            r"could not select device driver .{0,20}with capabilities",
            r"unknown or invalid runtime name:?\s*nvidia",
            r"nvidia-container-runtime(-hook)?[\\\"']*:? executable file not found",
            r"exec: \"nvidia-container-runtime",
            r"fork/exec /usr/bin/nvidia-container-runtime.*no such file",
            r"no such file or directory.*nvidia-container-runtime-hook",
            r"Unknown runtime specified nvidia",
            r"runtime \"nvidia\" binary not installed",
        ),
        unless=patterns(r"could not select device driver \\?\"cdi\\?\""),  # the engine's CDI switch: cdi-not-enabled
    ),
    FailureRule(
        "driver-library-mismatch",
        "kernel-driver",
        "kernel-driver",
        "the loaded NVIDIA kernel module and the driver's user-space libraries (NVML/libcuda) have different "
        "versions: the driver was upgraded without reloading the module",
        "on the host: reboot, or unload and reload the nvidia kernel modules, so that module and libraries match; "
        "pin driver packages against unattended upgrades",
        patterns(
            r"Driver/library version mismatch",
            r"API mismatch: the NVIDIA kernel module has version",
            # NVRM's own wording, 367-595 (https://github.com/Frogging-Family/nvidia-all/issues/394)
            r"API mismatch: the client (?:'[^']*' \(pid \d+\)\s*)?(?:NVRM:\s*)?has the version",
            r"cudaErrorSystemDriverMismatch",
            r"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
            r"\berror 803\b",
            r"system has unsupported display driver / cuda driver combination",
        ),
        facts_mismatch,
    ),
    FailureRule(
        "device-cgroup-lost",
        "container-engine",
        "kernel-driver",
        "NVML lost access to the GPU device nodes inside a running container: the host's systemd reloaded the "
        "device cgroup rules (systemd cgroup driver without /dev/char symlinks)",
        "re-run in a fresh container to recover now; fix it on the host: `nvidia-ctk system create-dev-char-symlinks "
        "--create-all` (and the udev rule), or use the cgroupfs cgroup driver, so reloads keep GPU access",
        patterns(r"Failed to initialize NVML: Unknown Error", r"NVML: Unknown Error", r"nvmlInit.*Unknown Error"),
        facts_error_code,
    ),
    FailureRule(
        "fabric-manager-not-ready",
        "fabric-manager",
        "image-user-space",
        "CUDA could not initialise (error 802, system not yet initialized): on an NVSwitch system the "
        "nvidia-fabricmanager service is not running or does not match the driver version",
        "on the host: install and start nvidia-fabricmanager of exactly the driver's version "
        "(`systemctl enable --now nvidia-fabricmanager`), wait until `nvidia-smi -q` shows Fabric State Completed",
        patterns(
            r"system not yet initialized",
            r"cudaErrorSystemNotReady",
            r"CUDA_ERROR_SYSTEM_NOT_READY",
            r"\berror\s*[=:]?\s*\(?802\b",
            r"code=802",
            r"returned 802\b",
            r"fabric manager.*(not|never).*(running|Completed)",
        ),
        facts_error_code,
    ),
    FailureRule(
        "forward-compat-unsupported",
        "kernel-driver",
        "image-user-space",
        "the image's CUDA is newer than the driver and tried forward compatibility (cuda-compat), which works "
        "only on data-center/professional GPUs and listed driver branches (CUDA error 804)",
        "on the host: install a driver that supports the image's CUDA natively (see min_driver), or use an image "
        "built for an older CUDA line; on consumer GPUs forward compatibility never works",
        patterns(
            r"forward compatibility was attempted on non supported HW",
            r"cudaErrorCompatNotSupportedOnDevice",
            r"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
            r"\berror\s*[=:]?\s*804\b",
            r"code=804",
            r"returned 804\b",
        ),
        facts_forward_compat,
    ),
    FailureRule(
        "driver-too-old-for-image",
        "kernel-driver",
        "image-user-space",
        "the host driver is older than the CUDA in the image requires",
        "on the host: upgrade the driver to the minimum the image's CUDA needs (or run an image built for the CUDA "
        "the driver supports); do not set NVIDIA_DISABLE_REQUIRE to hide it",
        patterns(
            r"requirement error: unsatisfied condition",
            r"CUDA driver version is insufficient for CUDA runtime version",
            r"cudaErrorInsufficientDriver",
            r"CUDA_ERROR_INSUFFICIENT_DRIVER",
            r"NVIDIA driver on your system is too old",
            r"driver version is insufficient",
            r"\bcuda runtime error \(35\)",
            r"\berror\s*[=:]?\s*35\b.*(driver|CUDA)",
            r"returned 35\b",
            r"Found CUDA (?:driver )?version \d{4,6}, but \w+ was built against version",
            r"built for NVIDIA Driver Release [\d.]+ or later",
            r"compatibility mode is UNAVAILABLE",
            # nvidia-docker 1's own check (https://github.com/NVIDIA/nvidia-docker/issues/177)
            r"unsupported CUDA version: driver [\d.]+ < image [\d.]+",
            # PTX from a newer CUDA compiler than the driver can JIT (CUDA error 222): the driver is older than the
            # CUDA the image was built with (https://github.com/li-plus/chatglm.cpp/issues/12)
            r"the provided PTX was compiled with an unsupported toolchain",
            r"cudaErrorUnsupportedPtxVersion|CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
        ),
        facts_driver_too_old,
    ),
    FailureRule(
        "gpu-arch-not-in-image",
        "framework-build",
        "image-user-space",
        "the framework in the image (or a GPU library it loads, such as rocBLAS's Tensile kernels) was not compiled "
        "for this GPU's architecture (compute capability / gfx target)",
        "in the image: rebuild or pick a variant whose compiled architectures include this GPU (e.g. cu128+ wheels "
        "for Blackwell sm_100/sm_120; PYTORCH_ROCM_ARCH with the gfx target); HSA_OVERRIDE_GFX_VERSION is only a "
        "user-level workaround",
        patterns(
            r"hipErrorNoBinaryForGpu",
            r"Unable to find code object for all current devices",
            r"no kernel image is available for execution on the device",
            r"cudaErrorNoKernelImageForDevice",
            r"CUDA_ERROR_NO_BINARY_FOR_GPU",
            r"with CUDA capability sm_\d+ is not compatible with the current PyTorch installation",
            r"is not compatible with the current PyTorch installation",
            r"PyTorch no longer supports this GPU because it is too old",
            r"is not in the framework's compiled list",
            r"hipErrorInvalidDeviceFunction",
            r"invalid device function",
            r"HSA_(?:STATUS_)?ERROR_INVALID_ISA",
            # NGC containers: a GPU newer ("not yet supported in this version") or older than the release supports
            r"Detected NVIDIA .{1,80}? GPU, which is not (?:yet )?supported",
            r"No (?:NVIDIA )?supported GPU\(s\) detected to run this container",
            # rocBLAS without Tensile kernels for the GPU (the AMD math library the frameworks load)
            r"TensileLibrary[\w.]*: .{0,60}for GPU arch ?: ?gfx",
            # cuBLAS status 8: a routine the GPU's compute capability does not support
            # (https://docs.nvidia.com/cuda/cublas/index.html#cublasstatus-t)
            r"CUBLAS_STATUS_ARCH_MISMATCH",
        ),
        facts_arch,
    ),
    FailureRule(
        "probe-python-missing",
        "image-user-space",
        "image-user-space",
        "the image has no Python interpreter for the device-check probe (builder's probe runs with the image's "
        "own python3: /opt/venv/bin/python3, python3 on PATH, /usr/local/bin/python3, /usr/bin/python3)",
        "in the image: install python3 (>= 3.6; e.g. `apt-get install -y --no-install-recommends python3`) or "
        "check an image that has its framework's Python; the probe cannot run without it",
        patterns(r"builder: no python3 in the image"),
    ),
    FailureRule(
        "gpu-device-node-missing",
        "kernel-driver",
        "container-engine",
        "a GPU device node passed with --device does not exist on the host (/dev/kfd, /dev/dri/renderD*, "
        "/dev/nvidia*): the kernel driver that creates it (amdgpu with KFD, nvidia) is not loaded, or there is "
        "no such GPU (Docker Desktop/WSL have no /dev/kfd)",
        "on the host: load the kernel driver and confirm the node exists before starting containers (AMD: "
        "`modprobe amdgpu`, `dmesg | grep -i kfd`, `ls -l /dev/kfd /dev/dri/renderD*`, the amdgpu-dkms of the "
        "ROCm release for older kernels; NVIDIA: `nvidia-smi`, `nvidia-modprobe`); `--privileged` does not create "
        "a missing node",
        patterns(
            r"error gathering device information while adding custom device \"?/dev/[\w/.-]+\"?:\s*"
            r"no such file or directory",
            r"(?:stat|lstat|open)\s+/dev/(?:kfd|dri/renderD\d+|nvidia[\w-]*(?:/[\w-]+)?):\s*no such file or directory",
        ),
        facts_perm,
    ),
    FailureRule(
        "device-permission-denied",
        "run-options",
        "image-user-space",
        "the container user cannot open the GPU device nodes: it lacks the groups that own /dev/kfd and "
        "/dev/dri/renderD* (video/render) - the management tool may still work",
        "in the run options: add `--group-add` with the numeric gid that owns /dev/kfd and /dev/dri/renderD* on the "
        "host (video and render), or run as a user in those groups; for rootless engines map those groups",
        patterns(
            r"Unable to open /dev/kfd read-write:\s*(Permission denied|Operation not permitted)",
            r"(open|opening)\s+/dev/(kfd|dri/renderD\d+).*(Permission denied|Operation not permitted|EACCES)",
            r"/dev/(kfd|dri/renderD\d+).*Permission denied",
            r"Permission denied.*/dev/(kfd|dri/renderD\d+|nvidia[\w-]*)",
            r"failed to open /dev/nvidia[\w-]*.*permission denied",
            r"is not member of \"?\w+\"? group, the default DRM access group",
        ),
        facts_perm,
    ),
    FailureRule(
        "driver-not-loaded",
        "kernel-driver",
        "kernel-driver",
        "the NVIDIA kernel driver is not loaded (or not installed) on the host, so nothing can talk to the GPU",
        "on the host: install/load the NVIDIA driver for this kernel (DKMS rebuild after a kernel upgrade, "
        "`modprobe nvidia`, blacklist nouveau), then check `nvidia-smi` before starting containers",
        patterns(
            r"couldn't communicate with the NVIDIA driver",
            r"NVIDIA-SMI has failed because",
            r"nvml error: driver not loaded",
            r"Failed to initialize NVML: Driver Not Loaded",
            r"NVML_ERROR_DRIVER_NOT_LOADED",
            r"DriverNotLoaded",
            r"kernel driver does not appear to be running on this host",
            r"NVRM: No NVIDIA (graphics adapter|GPU) (probed|found)",
            r"/proc/driver/nvidia/version does not exist",
            r"nvidia-container-cli: initialization error: load library failed: libnvidia-ml",
            # rocminfo's check of the amdgpu KFD ("ROCk") module
            r"ROCk module is NOT (?:loaded|live)",
            # rocm-smi / amd-smi read /sys/module/amdgpu/initstate (https://github.com/ROCm/amdsmi/issues/172)
            r"amdgpu not found in modules",
        ),
        # rocminfo runs `lsmod`: in an image without kmod the check fails although the module is loaded
        # (ROCm/tensorflow-upstream#1364, ROCm/rocminfo#49) - a misleading warning, not this kind
        unless=patterns(r"lsmod: (?:command )?not found"),
    ),
    FailureRule(
        "no-gpu-visible",
        "kernel-driver",
        "image-user-space",
        "the driver is reachable but reports no usable CUDA device",
        "on the host: check that `nvidia-smi -L` lists the GPU (PCI passthrough, a GPU fallen off the bus, "
        "hybrid-graphics mode, MIG mode enabled without instances); then check NVIDIA_VISIBLE_DEVICES / the "
        "device request",
        patterns(
            r"no cuda-capable device is detected",
            r"cudaErrorNoDevice",
            r"CUDA_ERROR_NO_DEVICE",
            r"No CUDA GPUs are available",
            r"No devices were found",
            r"\bcuda runtime error \(100\)",
            r"invalid device ordinal",
            r"no NVIDIA GPU device is present",
            r"WARNING: No AMD GPUs specified",
            r"hipErrorNoDevice",
            r"No HIP GPUs are available",
            r"no ROCm-capable device is detected",
            r"HIP_ERROR_NoDevice",
            r"No visible GPU devices",
            # slurmd's NVML autodetection (https://github.com/ComputeCanada/puppet-magic_castle/pull/276)
            r"MIG mode is enabled, but no MIG devices were found",
            # rocBLAS found no HIP device (https://github.com/ollama/ollama/issues/6423)
            r"Could not initialize Tensile host: No devices found",
        ),
        facts_error_code,
    ),
    FailureRule(
        "driver-capabilities-missing",
        "run-options",
        "image-user-space",
        "the GPU was given to the container, but NVIDIA_DRIVER_CAPABILITIES did not include the capability this "
        "program needs (compute for CUDA, video for NVENC/NVDEC), so those driver libraries were not injected",
        "in the run options or the image: set NVIDIA_DRIVER_CAPABILITIES to include what is needed "
        "(e.g. `compute,utility`, `video`, or `all`)",
        patterns(
            r"Cannot load libnvidia-encode\.so",
            r"Cannot load libnvcuvid\.so",
            r"unable to load libnvcuvid",
            r"libnvidia-encode\.so\.1: cannot open shared object file",
        ),
        facts_capabilities,  # a symptom with NVIDIA_DRIVER_CAPABILITIES lacking compute/utility: matching.py
    ),
    FailureRule(
        "gpu-not-requested",
        "run-options",
        "image-user-space",
        "the container was started without a GPU request, so no driver libraries or device nodes are inside it",
        "in the run options: start it with `--gpus all` (or a CDI device `--device nvidia.com/gpu=all`; in compose "
        "`deploy.resources.reservations.devices`, in Kubernetes `resources.limits: nvidia.com/gpu`)",
        patterns(
            r"Found no NVIDIA driver on your system",
            r"The NVIDIA Driver was not detected",
            r"libcuda\.so(\.1)?: cannot open shared object file",
            r"Cannot load libcuda\.so",
            r"could not load libcuda|libcuda reported version is: Not found",
            r"NVIDIA-SMI couldn't find libnvidia-ml\.so",
            r"exec:? \\*\"nvidia-smi\\*\": executable file not found",
            r"exec nvidia-smi failed: No such file or directory",
            r"CUDA driver initialization failed, you might not have a CUDA gpu",
            r"\bnvidia-smi: (command )?not found",
            # ROCm in a container without /dev/kfd (the host's module is loaded: rocminfo says so)
            r"Unable to open /dev/kfd read-write: No such file or directory",
        ),
        None,
    ),
    FailureRule(
        "framework-without-gpu-support",
        "framework-build",
        "image-user-space",
        "the framework in the image is a CPU-only build (no CUDA/ROCm support compiled in or installed)",
        "in the image: install the framework's GPU build for the image's CUDA/ROCm line (e.g. the cu128 / rocm6.4 "
        "PyTorch wheel index, jax[cuda12]); rebuild the variant",
        patterns(
            r"Torch not compiled with CUDA enabled",
            r"a CUDA-enabled jaxlib is not installed",
            r"No GPU/TPU found, falling back to CPU",
            # torch.utils.collect_env of a CPU-only build (https://github.com/pytorch/pytorch/blob/main/torch/utils/collect_env.py)
            r"PyTorch version: [\w.]+\+cpu\b",
            r"(?s)CUDA used to build PyTorch: (?:None|Could not collect).*(?:Is CUDA available: False|GPU models and "
            r"configuration: (?:GPU 0|NVIDIA|\S*GeForce|\S*Tesla))",
        ),
        None,
    ),
    FailureRule(
        "wrong-vendor-tool",
        "run-options",
        "image-user-space",
        "a vendor tool for the other GPU vendor was run (nvidia-smi on an AMD host or rocm-smi on an NVIDIA host)",
        "detect the vendor first (/dev/nvidiactl vs /dev/kfd, PCI vendor 10de vs 1002) and run that vendor's "
        "tools and device options",
        patterns(r"\b(nvidia-smi|rocm-smi|amd-smi|rocminfo)\b.*(command not found|not found|No such file)"),
        facts_tool,
    ),
)

#: the summary and fix of a kind on an AMD host (the kinds' texts name NVIDIA's driver): kind -> (summary, fix)
AMD_ANSWERS: dict[str, tuple[str, str]] = {
    "driver-not-loaded": (
        'the amdgpu kernel driver, or its KFD ("ROCk") part that ROCm needs, is not loaded on the host (or there is '
        "no GPU ROCm can use), so nothing can run on the GPU",
        "on the host: load amdgpu (`modprobe amdgpu`; the amdgpu-dkms package after a kernel upgrade), check "
        "`dmesg | grep -i -E 'amdgpu|kfd'` and that /dev/kfd exists, and that the GPU is one ROCm supports; "
        "then check `rocminfo` lists a GPU agent before starting containers; rocm-smi/amd-smi's 'amdgpu not found in "
        "modules' is wrong when amdgpu is built into the kernel (CONFIG_DRM_AMDGPU=y): then /dev/kfd exists and "
        "rocminfo lists the GPU",
    ),
    "gpu-not-requested": (
        "the container was started without the AMD GPU device nodes (/dev/kfd, /dev/dri/renderD*): the host's amdgpu "
        "driver is loaded, but nothing inside can reach the GPU",
        "in the run options: `--device /dev/kfd --device /dev/dri --group-add video --group-add render` (docker, "
        "podman; compose `devices:`), `--rocm` for apptainer (with `--containall` also `--bind /dev/kfd,/dev/dri`), "
        "or the AMD device plugin's `amd.com/gpu` in Kubernetes",
    ),
    "no-gpu-visible": (
        "ROCm found no GPU it can use: the process cannot open /dev/kfd and /dev/dri/renderD* (not passed to the "
        "container, or the user lacks the groups that own them), or the GPU is not one this ROCm release supports",
        "check `rocminfo` lists a gfx agent where the program runs; in a container pass `--device /dev/kfd "
        "--device /dev/dri` with `--group-add video --group-add render` (the host's gids); check the GPU's gfx "
        "target against the ROCm release's supported GPUs (HSA_OVERRIDE_GFX_VERSION is only a user-level "
        "workaround)",
    ),
    "gpu-driver-fault": (
        "the amdgpu kernel driver could not initialise the GPU ('Fatal error during GPU init'; an IP block's init "
        "failed, the probe failed): firmware missing or not matching the driver, BIOS settings (large BARs), a VM "
        "without working passthrough, or a hardware fault",
        "on the host: `dmesg | grep -i amdgpu` names the failing IP block; install the amdgpu-dkms and its firmware "
        "of the ROCm release; probe error -12 (out of memory for the BARs): enable Above 4G Decoding and Resizable "
        "BAR in the BIOS; in a VM check the passthrough/SR-IOV setup; reboot, and have the GPU checked if it "
        "persists",
    ),
}

#: every kind, most specific first: the integration and runtime kinds carry more specific evidence than the base kinds
RULES: tuple[FailureRule, ...] = (
    *INTEGRATION_RULES,
    *RUNTIME_RULES,
    *FAULT_RULES,
    *_BASE_RULES,
    UVM_UNAVAILABLE,
    NOT_INJECTED,
    HOST_LIBS_MISSING,
)

RULES_BY_KEY = {r.key: r for r in RULES}


__all__ = ["AMD_ANSWERS", "RULES", "RULES_BY_KEY"]
