"""Failure kinds noticed while a GPU program runs: libraries in the image that do not match the framework (cuDNN)
or are missing from it (the CUDA/ROCm user-space libraries the loader could not open), NCCL/RCCL collectives (shared
memory, the network, RDMA's locked-memory limit, ranks that disagree), the GPU hardware (fallen off the bus,
uncorrectable ECC errors, rows pending a reset) and the host platform (WSL, Hyper-V GPU-PV).

Sources of the facts: NCCL troubleshooting (shared memory in containers, ``--shm-size``/``--ipc=host``, IB/RoCE
settings, PCIe ACS): https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html; work completion
status codes (``IBV_WC_LOC_PROT_ERR`` = 4, ``IBV_WC_RETRY_EXC_ERR`` = 12):
https://github.com/linux-rdma/rdma-core/blob/master/libibverbs/verbs.h; NVIDIA Xid errors (79
fallen off the bus, 48/63/64/94/95 ECC and row remapping): https://docs.nvidia.com/deploy/xid-errors/index.html;
CUDA error 214 ``cudaErrorECCUncorrectable``:
https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html (and 46 ``cudaErrorDevicesUnavailable``:
compute mode Prohibited / Exclusive_Process, or long-running kernels); GPU memory error management (page
retirement, row remapping): https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html; CUDA on WSL (WSL 2
only; no Linux driver inside WSL): https://docs.nvidia.com/cuda/wsl-user-guide/index.html; cuDNN version rules of
TensorFlow and PyTorch: their messages (quoted in tests/data/errors/cudnn-version-mismatch-*.txt).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from builder.checks.diagnosis.faults import xid_codes, xid_pattern
from builder.checks.diagnosis.model import FailureRule, patterns

if TYPE_CHECKING:
    from builder.checks.diagnosis.model import Context


def _version(text: str) -> str:
    """``"(8, 5, 0)"`` / ``"8.5.0"`` / ``"7102"`` (1000*major + 100*minor + patch) -> ``"8.5.0"`` / ``"7.1.2"``."""
    t = text.strip()
    if t.startswith("("):
        return ".".join(p.strip() for p in t.strip("()").split(","))
    if re.fullmatch(r"\d{4}", t):  # cuDNN 7/8 and JAX's 4-digit form: 8906 = 8.9.6
        n = int(t)
        return f"{n // 1000}.{(n % 1000) // 100}.{n % 100}"
    if re.fullmatch(r"\d{5}", t):  # cuDNN 9's CUDNN_VERSION: 90100 = 9.1.0
        n = int(t)
        return f"{n // 10000}.{(n % 10000) // 100}.{n % 100}"
    return t


def facts_cudnn(text: str, _ctx: Context) -> dict[str, Any]:
    m = re.search(
        r"Loaded runtime CuDNN library:\s*([\d.]+)\s+but source was compiled with:\s*([\d.]+)", text
    ) or re.search(
        r"cuDNN version (?:incompatibility|mismatch): PyTorch was compiled\s+against\s+(\(.*?\)|\d+)\s+but "
        r"(?:found runtime version|linked against)\s+(\(.*?\)|\d+)",
        text,
    )
    if not m:  # JAX's own checks: "Found cuDNN version 8600, but JAX was built against version 8906"
        jax = re.search(r"Found cuDNN version (\d+), but JAX was built against version (\d+)", text)
        if jax:
            return {"cudnn_compiled_with": _version(jax.group(2)), "cudnn_loaded": _version(jax.group(1))}
        outdated = re.search(
            r"Outdated cuDNN installation found\.\s*Version JAX was built against: (\d+)\s*Minimum supported: (\d+)"
            r"\s*Installed version: (\d+)",
            text,
        )
        if outdated:
            return {
                "cudnn_compiled_with": _version(outdated.group(1)),
                "cudnn_minimum": _version(outdated.group(2)),
                "cudnn_loaded": _version(outdated.group(3)),
            }
        return {}
    if m.re.pattern.startswith("Loaded"):
        runtime, compiled = m.group(1), m.group(2)
    else:
        compiled, runtime = m.group(1), m.group(2)
    return {"cudnn_compiled_with": _version(compiled), "cudnn_loaded": _version(runtime)}


#: ibv_wc_status values NCCL prints as "status=N" / "error N" (rdma-core libibverbs/verbs.h)
_IB_STATUS = {
    4: "IBV_WC_LOC_PROT_ERR",
    5: "IBV_WC_WR_FLUSH_ERR",
    10: "IBV_WC_REM_ACCESS_ERR",
    12: "IBV_WC_RETRY_EXC_ERR",
    13: "IBV_WC_RNR_RETRY_EXC_ERR",
}


def nccl_versions(text: str) -> list[str]:
    """The NCCL versions the ranks of a log disagree on: each rank's banner (``NCCL version 2.19.3``) compared with
    the others, and each pip package (``nvidia-nccl-cu12==2.20.5`` per node) with the same package on the other
    nodes; ``[]`` when they agree (a cu11 and a cu12 wheel side by side are two packages, not a disagreement)."""
    seen: dict[str, list[str]] = {}
    for banner, package, pinned in re.findall(
        r"NCCL version:?\s*(\d+\.\d+\.\d+)|(nvidia-nccl-cu\d+)==(\d+\.\d+\.\d+)", text
    ):
        key, version = (package, pinned) if package else ("banner", banner)
        seen.setdefault(key, [])
        if version not in seen[key]:
            seen[key].append(version)
    return next((versions for versions in seen.values() if len(versions) > 1), [])


def facts_nccl(text: str, ctx: Context) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    m = re.search(r"NCCL version:?\s*(\d+\.\d+\.\d+)", text)
    if m:
        facts["nccl_version"] = m.group(1)
    if nccl_versions(text):
        facts["nccl_versions"] = nccl_versions(text)
    m = re.search(r"shared memory segment (\S+) \(size (\d+)\)", text)
    if m:
        facts["segment"], facts["segment_bytes"] = m.group(1), int(m.group(2))
    m = re.search(r"(?:status|error)[= ](\d+)[, ]+opcode", text)
    if m:
        facts["ib_status"] = int(m.group(1))
        if facts["ib_status"] in _IB_STATUS:
            facts["ib_status_name"] = _IB_STATUS[facts["ib_status"]]
    if ctx.engine:
        facts["engine"] = ctx.engine
    return facts


def facts_hardware(text: str, _ctx: Context) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    m = re.search(r"\b([0-9A-Fa-f]{3,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f])?)\b", text)
    if m:
        facts["pci_bus"] = m.group(1)
    xids = xid_codes(text)
    if xids:  # the hardware code over a program's Xid 13/31/43 reported beside it
        facts["xid"] = next((c for c in xids if c in (79, 48, 63, 64, 94, 95)), xids[0])
    code = re.search(r"code #?(\d{3})|\((\d{2,3}) vs\. 0\)", text)
    if code:
        facts["cuda_error"] = int(code.group(1) or code.group(2))
    return facts


#: nvidia-smi's compute mode: the table's "Compute M." column, or ``nvidia-smi -q``'s "Compute Mode"
_COMPUTE_MODES = {"e. process": "Exclusive_Process", "e. thread": "Exclusive_Thread", "prohibited": "Prohibited"}


def facts_busy(text: str, _ctx: Context) -> dict[str, Any]:
    """CUDA error 46 and the compute modes nvidia-smi shows for the GPUs (``Exclusive_Process`` ...)."""
    facts: dict[str, Any] = {}
    if re.search(r"\b46\b|DevicesUnavailable|DEVICE_UNAVAILABLE|busy or unavailable", text):
        facts["cuda_error"] = 46
    modes = [
        _COMPUTE_MODES[m.lower()]
        for m in re.findall(r"\|\s+(?:\d+%|N/A)\s+(E\. Process|E\. Thread|Prohibited)\s+\|", text, re.I)
    ]
    modes += re.findall(r"Compute Mode\s*:\s*(Exclusive_Process|Exclusive_Thread|Prohibited)", text)
    if modes:
        facts["compute_modes"] = modes
    return facts


def facts_wsl(text: str, _ctx: Context) -> dict[str, Any]:
    m = re.search(r"\b(\d+\.\d+\.\d+-\d+-Microsoft)\b", text)
    if m:
        return {"kernel": m.group(1), "wsl": 1}
    m = re.search(r"\b(\d+\.\d+\.\d+[\w.-]*-microsoft-standard-WSL2)\b", text)
    return {"kernel": m.group(1), "wsl": 2} if m else {}


#: CUDA and ROCm user-space libraries a framework loads from the image (the toolkit's runtime, math and DNN libraries;
#: never the driver's libcuda / libnvidia-*, which the GPU request injects)
_USER_SPACE_LIB = (
    r"lib(?:cudart|cublas(?:Lt)?|cufft|curand|cusolver(?:Mg)?|cusparse(?:Lt)?|cudnn\w*|nvJitLink|nvrtc\w*|nccl|"
    r"nvinfer\w*|cupti|npp\w*|amdhip64|rocblas|rocsolver|rocfft|hipfft|hipblas(?:lt)?|MIOpen|rccl|hsa-runtime64)"
    r"\.so(?:\.\d+)*"
)
#: a library the dynamic loader could not open: TensorFlow's dso_loader ("dlerror: X: cannot open"), ImportError /
#: OSError of Python, ld.so ("error while loading shared libraries: X"), cuDNN's "Could not load library ... Error: X"
_CANNOT_OPEN = r"(?:^|[\s:'\"(])(lib[\w.+-]+\.so[\w.]*): cannot open shared object file"


def facts_missing_libraries(text: str, _ctx: Context) -> dict[str, Any]:
    """``missing_libraries``: the user-space libraries the loader could not open (``["libnvJitLink.so.12"]``);
    ``requested``: the libraries the framework asked for when that differs (TensorFlow's ``Could not load dynamic
    library 'libcusolver.so.11'`` failing on a dependency)."""
    missing = [lib for lib in re.findall(_CANNOT_OPEN, text, re.M) if re.fullmatch(_USER_SPACE_LIB, lib)]
    missing += re.findall(r"Couldn't open CUDA library (" + _USER_SPACE_LIB + ")", text)
    requested = re.findall(r"Could not load (?:dynamic )?library '?(lib[\w.+-]+\.so[\w.]*?)'?[;.] ", text)
    facts: dict[str, Any] = {}
    if missing:
        facts["missing_libraries"] = list(dict.fromkeys(missing))
    if requested and set(requested) != set(missing):
        facts["requested"] = list(dict.fromkeys(requested))
    jax = re.findall(r"Unable to load (CUDA|cu[A-Z]\w+|NCCL)\.|The (cu[A-Z]\w+) library was not found", text)
    if jax:
        facts["jax_components"] = list(dict.fromkeys(a or b for a, b in jax))
    if not missing and re.search(r"cudart_stub\.cc:\d+\] Could not find cuda drivers", text):
        facts["note"] = (
            "TensorFlow's cudart_stub says 'Could not find cuda drivers' when it cannot load the CUDA runtime "
            "(libcudart) of the CUDA line it was built for, whatever the driver; `pip install tensorflow[and-cuda]` "
            "installs it"
        )
    return facts


#: WSL (and Hyper-V GPU paravirtualization, which shares its dxgkrnl path /usr/lib/wsl/lib)
_WSL = r"(?:\bWSL\b|\b\d+\.\d+\.\d+-\d+-Microsoft\b|microsoft-standard-WSL2|/usr/lib/wsl/lib)"
_NO_DRIVER = (
    r"(?:couldn't communicate with the NVIDIA driver|No devices were found|no CUDA-capable device|"
    # NVML's operating-system error: Windows does not expose the GPU to the WSL VM (a GPU in TCC mode)
    r"GPU access blocked by the operating system)"
)

RULES: tuple[FailureRule, ...] = (
    FailureRule(
        "cudnn-version-mismatch",
        "image-user-space",
        "image-user-space",
        "the framework loaded an older cuDNN than it was built with (an older libcudnn on LD_LIBRARY_PATH or in the "
        "image shadows the one the framework needs)",
        "in the image: ship the cuDNN the framework was built with (its pip `nvidia-cudnn-cu*` wheel or the matching "
        "libcudnn package), and remove the older libcudnn from LD_LIBRARY_PATH / /usr/local/cuda/lib64",
        patterns(
            r"Loaded runtime CuDNN library:\s*[\d.]+\s+but source was compiled with",
            r"cuDNN version (?:incompatibility|mismatch): PyTorch was compiled\s+against",
            # JAX's version checks (jax/_src/lib/__init__.py; https://github.com/MIT-REALM/gcbfplus/issues/1)
            r"Found cuDNN version \d+, but JAX was built against version \d+",
            r"Outdated cuDNN installation found",
        ),
        facts_cudnn,
    ),
    FailureRule(
        "gpu-libraries-missing-in-image",
        "image-user-space",
        "image-user-space",
        "the framework could not load a CUDA/ROCm user-space library it needs (cuDNN, cuBLAS, the CUDA runtime, "
        "nvJitLink, hipBLAS ...): the image does not ship it, or not where the loader looks; these come with the "
        "image, not with the driver or the GPU request",
        "in the image: install the libraries of the CUDA/ROCm line the framework was built for (its pip "
        "`nvidia-*-cuNN` wheels, a `-cudnn-runtime` CUDA base image, the ROCm math libraries) and make them "
        "findable (ldconfig or LD_LIBRARY_PATH); an LD_LIBRARY_PATH naming another CUDA's libraries shadows the "
        "framework's own pip wheels (JAX: unset it); `tf.sysconfig.get_build_info()` / `torch.version.cuda` name the "
        "versions expected",
        patterns(
            _CANNOT_OPEN.replace(r"(lib[\w.+-]+\.so[\w.]*)", "(?:" + _USER_SPACE_LIB + ")"),
            r"Couldn't open CUDA library " + _USER_SPACE_LIB,
            r"Cannot dlopen some GPU libraries",
            r"Unable to load cuDNN DSO",
            # TensorFlow's stub of the CUDA runtime says "drivers" when it cannot load libcudart
            # (https://github.com/tensorflow/tensorflow/blob/master/third_party/xla/xla/tsl/cuda/cudart_stub.cc)
            r"cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine",
            # JAX's CUDA plugin checks each library it loads (jax_plugins/xla_cuda12: _check_cuda_versions); the
            # "CUDA-enabled jaxlib is not installed" warning after it is a consequence, not a CPU build
            r"Unable to load (?:CUDA|cu[A-Z]\w+|NCCL)\. (?:Is it installed\?|\(Set TF_CPP)",
            r"The cu[A-Z]\w+ library was not found",
        ),
        facts_missing_libraries,
        # the driver's own library missing is another layer (gpu-not-requested / driver-libs-not-injected)
        unless=patterns(
            r"(?:^|[\s:'\"(])libcuda\.so(?:\.1)?: cannot open shared object file",
            r"Couldn't open CUDA library libcuda\.so",
        ),
    ),
    FailureRule(
        "nccl-shm-too-small",
        "run-options",
        "image-user-space",
        "NCCL could not create its shared-memory segment in /dev/shm: the container's /dev/shm is too small "
        "(Docker's default is 64 MB) or full",
        "in the run options: `--shm-size=1g` (or more) or `--ipc=host`; Kubernetes: mount an emptyDir "
        "`medium: Memory` at /dev/shm; `NCCL_SHM_DISABLE=1` works around it at a cost in speed",
        patterns(
            r"Error while creating shared memory segment",
            r"posix_fallocate failed\s*:\s*No space left on device",
            r"failed to extend /dev/shm/nccl",
            r"\bncclShmOpen\b",
        ),
        facts_nccl,
    ),
    FailureRule(
        "nccl-rank-mismatch",
        "image-user-space",
        "image-user-space",
        "NCCL ranks disagree about the operation: different NCCL versions or settings on different nodes (or "
        "different collective calls in the program)",
        "make every rank run the same image (the same NCCL) with the same NCCL_* environment "
        "(`NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ENV` shows it), then check that all ranks issue the same collectives",
        patterns(
            r"collective mismatch error",
            r"Mismatched collective detected",
            r"receiving \d+ bytes instead of \d+",
            r"NCCL version mismatch",
        ),
        facts_nccl,
    ),
    FailureRule(
        "rdma-memlock-too-small",
        "run-options",
        "image-user-space",
        "registering memory with the InfiniBand/RoCE device failed with ENOMEM ('Cannot allocate memory'): the "
        "process's locked-memory limit (`ulimit -l`) is too small for RDMA - containers get 64 MiB, login shells "
        "often 8 MiB",
        "in the run options: `--ulimit memlock=-1` (docker/podman), `ulimit -l unlimited` in the job or "
        "/etc/security/limits.conf (memlock unlimited; Slurm: PropagateResourceLimits), then check `ulimit -l` where "
        "the ranks run (inside `mpirun`/`srun`); the NCCL troubleshooting guide's InfiniBand section",
        patterns(
            r"ibv_\w+(?:\(\))? failed(?: with error)?:? Cannot allocate memory",
            r"Call to ibv_\w+ failed with error Cannot allocate memory",
        ),
        facts_nccl,
    ),
    FailureRule(
        "nccl-network-failure",
        "interconnect",
        "image-user-space",
        "NCCL's transport between GPUs failed: InfiniBand/RoCE work completions with an error (status 12: retries "
        "exceeded - a link, route or RoCE GID that does not reach the peer; status 4: local protection - memory "
        "registration / GPUDirect RDMA), or no peer-to-peer access between two GPUs",
        "in the interconnect: check the links and HCAs (`ibstat`, `ibv_devinfo`, the switch's port counters) and "
        "reproduce with nccl-tests before blaming the job; for RoCE set NCCL_IB_GID_INDEX to a RoCE v2 GID, and pick "
        "the HCAs/interface with NCCL_IB_HCA / NCCL_SOCKET_IFNAME; in containers pass /dev/infiniband with "
        "`--cap-add IPC_LOCK --ulimit memlock=-1` and host networking; for P2P check `nvidia-smi topo -m` and "
        "PCIe ACS / IOMMU settings (NCCL_P2P_DISABLE=1 works around it at a cost in speed)",
        patterns(
            r"NET/IBP? ?:\s*Got completion from peer",
            r"NET/IB\s*:.*(?:failed|error \d+)",
            r"\bibv_(?:create_qp|reg_mr|modify_qp)\b.*failed",
            r"peer access is not supported between these two devices",
        ),
        facts_nccl,
    ),
    FailureRule(
        "nccl-system-error",
        "run-options",
        "image-user-space",
        "an NCCL system call failed (ncclSystemError, 'unhandled system error'): in containers most often /dev/shm "
        "is too small; otherwise a socket/network failure",
        "rerun with `NCCL_DEBUG=INFO` to see the failing call; in a container first try `--shm-size=1g` or "
        "`--ipc=host`, otherwise check the network NCCL picked (NCCL_SOCKET_IFNAME)",
        patterns(r"unhandled system error", r"\bncclSystemError\b"),
        facts_nccl,
    ),
    FailureRule(
        "gpu-fallen-off-bus",
        "kernel-driver",
        "kernel-driver",
        "the GPU stopped responding on the PCIe bus (Xid 79, 'fallen off the bus'): the driver lost it - power, "
        "thermals, a PCIe/riser fault or a hardware failure, not the container",
        "on the host: drain the node, read `dmesg | grep -i xid`; reset or reboot to recover (`nvidia-smi -r` where "
        "supported); check power, cooling and seating; replace the GPU if it happens again",
        patterns(
            r"fallen off the bus",
            xid_pattern(79),
            r"Unable to determine the device handle for GPU.*Unknown Error",
            r"\bGPU_IS_LOST\b|\bGpuIsLost\b",
            # nvidia-smi once the driver has lost the GPU (https://github.com/JosephKJ/OWOD/issues/81)
            r"GPU is lost\.\s+Reboot the system",
        ),
        facts_hardware,
    ),
    FailureRule(
        "gpu-ecc-error",
        "kernel-driver",
        "image-user-space",
        "the GPU reported an uncorrectable ECC memory error (CUDA error 214; Xid 48/63/64/94/95): a hardware memory "
        "fault; pages pending retirement or rows pending remapping need a GPU reset",
        "on the host: drain the node, check `nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER`; reset the GPU or "
        "reboot to retire pages / remap rows; replace the GPU when errors recur",
        patterns(
            r"uncorrectable ECC error",
            r"ECC_UNCORRECTABLE|cudaErrorECCUncorrectable",
            xid_pattern(48, 63, 64, 94, 95),
            r"uncorrectable double bit error",
            # nvidia-smi -q: rows or pages waiting for a GPU reset (https://github.com/leptonai/gpud/pull/80)
            r"(?s)Remapped Rows\s*\n.{0,300}?\bPending\s*:\s*Yes",
            r"Pending Page Blacklist\s*:\s*Yes",
            r"Remapping Failure Occurred\s*:\s*Yes",
        ),
        facts_hardware,
    ),
    FailureRule(
        "gpu-busy-or-exclusive",
        "kernel-driver",
        "image-user-space",
        "CUDA could not get a GPU (error 46, devices busy or unavailable): the GPUs are in Exclusive_Process / "
        "Exclusive_Thread compute mode and another process already holds them, in Prohibited mode, or filled by "
        "long-running work of another process",
        "on the host: `nvidia-smi` shows each GPU's compute mode (`Compute M.`) and the processes holding it; stop the "
        "process that holds the GPU or give each job its own GPU (CUDA_VISIBLE_DEVICES, the scheduler's GPU request); "
        "an administrator can set the mode back with `nvidia-smi -i N -c DEFAULT` (Prohibited allows no process)",
        patterns(
            r"all CUDA-capable devices are busy or unavailable",
            r"CUDA-capable device\(s\) is/are busy or unavailable",
            r"cudaErrorDevicesUnavailable",
            r"CUDA_ERROR_DEVICE_UNAVAILABLE",
            r"\bcuda runtime error \(46\)",
        ),
        facts_busy,
    ),
    FailureRule(
        "wsl-gpu-unavailable",
        "kernel-driver",
        "kernel-driver",
        "the GPU is used from WSL, where it only works under WSL 2 with the Windows NVIDIA driver: WSL 1 has no GPU, "
        "and a Linux driver installed inside WSL cannot talk to the GPU; a GPU in TCC mode (data-center GPUs' default "
        "on Windows) is not shared with WSL ('GPU access blocked by the operating system')",
        "on Windows: `wsl -l -v`; convert the distribution to WSL 2 (`wsl --set-version <distro> 2`); install only "
        "the Windows NVIDIA driver (no Linux driver inside WSL; the CUDA toolkit only, WSL-Ubuntu packages); put the "
        "GPU in WDDM mode where the driver allows it (`nvidia-smi -i 0 -dm 0` on Windows, then reboot)",
        patterns(rf"(?s){_WSL}.*{_NO_DRIVER}", rf"(?s){_NO_DRIVER}.*{_WSL}"),
        facts_wsl,
    ),
)


__all__ = ["RULES", "nccl_versions"]
