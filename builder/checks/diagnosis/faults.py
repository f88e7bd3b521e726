"""GPU faults while work runs or the driver starts: NVLink errors (Xid 74, 144-150), the kernel driver failing to
initialise or to keep control of a GPU (``RmInitAdapter failed``, GSP firmware RPC timeouts, Xid 119/120; amdgpu's
init failures), the toolkit's driver service timing out, the open kernel modules refusing a GPU without GSP, a
program's kernel that faulted on the GPU (illegal address, launch failure; Xid 13/31/43; ROCm's "Memory access
fault by GPU node") and CUDA's unknown error at initialisation (the nvidia_uvm module: :data:`UVM_UNAVAILABLE`).
One grammar reads the driver's Xid lines in all their printed forms (:data:`XID`, :func:`xid_codes`).

Sources of the facts:
- Xid catalogue (74 NVLink error, 144-150 NVLink errors of NVLink 5 systems, 45 preemptive cleanup "caused by
  previous Xid"; 13 Graphics Engine Exception, 31 GPU memory page fault, 43 GPU stopped processing: causes
  include a user application fault; 119/120 GSP RPC timeout / GSP error; 79 fallen off the bus; 48/63/64/94/95
  memory errors): https://docs.nvidia.com/deploy/xid-errors/index.html
- the dmesg form ``NVRM: Xid (PCI:0000:01:00): 31, pid=..., ...`` as NVIDIA's driver prints it:
  https://github.com/autumnai/collenchyma-blas/issues/14 (352), https://github.com/leptonai/gpud/pull/46 (550),
  https://github.com/NVIDIA/gpu-operator/issues/1146; gpud's reports print ``XID 79(...)``:
  https://github.com/leptonai/gpud/issues/604
- CUDA error codes (700 ``cudaErrorIllegalAddress``, 715 ``cudaErrorIllegalInstruction``, 716
  ``cudaErrorMisalignedAddress``, 719 ``cudaErrorLaunchFailure``, 710 ``cudaErrorAssert``; 4 was
  ``cudaErrorLaunchFailure`` before CUDA 10.1): https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html
- GSP firmware (driver 510+ offloads GPU initialisation to it; RPC timeouts are Xid 119):
  https://github.com/Azure/azurehpc/pull/714, https://github.com/NVIDIA/open-gpu-kernel-modules/issues/446
- ``RmInitAdapter failed! (0x62:0x65:1792)`` with ``Cannot initialize GSP firmware RM``:
  https://github.com/NVIDIA/open-gpu-kernel-modules/issues/789
- the open kernel modules need the GSP (Turing and newer): https://download.nvidia.com/XFree86/Linux-x86_64/515.43.04/README/gsp.html,
  https://github.com/NVIDIA/open-gpu-kernel-modules (README: supported GPUs); refused GPUs:
  https://github.com/NVIDIA/open-gpu-kernel-modules/issues/696, https://github.com/negativo17/nvidia-driver/issues/158
- the toolkit's driver service timing out without persistence mode (the maintainers' answer):
  https://github.com/NVIDIA/nvidia-container-toolkit/issues/202, https://github.com/NVIDIA/nvidia-container-toolkit/issues/556
- CUDA's unknown error at initialisation and the nvidia_uvm module (reloading it, or creating /dev/nvidia-uvm with
  ``nvidia-modprobe -u``, fixes it; after suspend/resume): https://github.com/pytorch/pytorch/issues/49081,
  https://github.com/pytorch/pytorch/issues/88639, https://github.com/gorgonia/cu/issues/2,
  https://github.com/NVlabs/nvbio-gpl/issues/7 (``cudaGetDeviceCount returned 30``)
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from builder.checks.diagnosis.model import FailureRule, captured, patterns

if TYPE_CHECKING:
    from builder.checks.diagnosis.model import Context

#: the start of an Xid report up to its code, in every printed form: the driver's ``NVRM: Xid (PCI:0000:01:00): 31,``
#: (with or without the ``PCI:`` prefix), ``Xid 79`` / ``XID 79(...)`` of health checkers, ``Xid error 48``
XID = r"\bXid\b(?:\s*\((?:PCI:)?[0-9A-Fa-f]{1,8}(?::[0-9A-Fa-f]{1,8}){1,3}(?:\.[0-9A-Fa-f])?\))?\s*:?\s*(?:error\s*)?"
_XID_CODE = re.compile(XID + r"(\d{1,3})\b", re.I)


def xid_pattern(*codes: int) -> str:
    """The pattern of an Xid report with one of ``codes`` (``xid_pattern(79)`` matches ``NVRM: Xid
    (PCI:0000:3b:00): 79, ...`` and ``XID 79(GPU has fallen off the bus)``)."""
    return XID + r"(?:" + "|".join(str(c) for c in codes) + r")\b"


def xid_codes(text: str) -> tuple[int, ...]:
    """The Xid codes ``text`` reports, in order of first appearance: ``(48, 64)``; ``()`` when none."""
    return tuple(dict.fromkeys(int(m.group(1)) for m in _XID_CODE.finditer(text)))


#: CUDA error names and numbers of a faulting kernel -> the code (runtime API numbering)
_FAULT_CODES = (
    (r"illegal memory access|cudaErrorIllegalAddress|CUDA_ERROR_ILLEGAL_ADDRESS", 700),
    (r"illegal instruction|cudaErrorIllegalInstruction|CUDA_ERROR_ILLEGAL_INSTRUCTION", 715),
    (r"misaligned address|cudaErrorMisalignedAddress|CUDA_ERROR_MISALIGNED_ADDRESS", 716),
    (r"unspecified launch failure|cudaErrorLaunchFailure|CUDA_ERROR_LAUNCH_FAILED", 719),
    (r"device-side assert|cudaErrorAssert|CUDA_ERROR_ASSERT|thread: \[[\d,]+\] Assertion", 710),
)


def _pci_bus(text: str) -> str | None:
    m = re.search(r"\b(?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f])?)\b", text)
    return m.group(1) if m else None


def facts_program_fault(text: str, _ctx: Context) -> dict[str, Any]:
    """``cuda_error`` (700/715/716/719, or the legacy number printed), ``xid`` codes, ``pci_bus``, and for ROCm the
    ``gpu_node`` and faulting ``address``."""
    facts: dict[str, Any] = {}
    legacy = re.search(r"cuda runtime error \((\d+)\)|\(error (\d+)\) due to", text)
    for pattern, code in _FAULT_CODES:
        if re.search(pattern, text, re.I):
            facts["cuda_error"] = int(legacy.group(1) or legacy.group(2)) if legacy else code
            break
    xids = xid_codes(text)
    if xids:
        facts["xid"] = list(xids)
    bus = _pci_bus(text)
    if bus:
        facts["pci_bus"] = bus
    m = re.search(r"thread: \[[\d,]+\] Assertion `([^`]+)` failed", text)
    if m:
        facts["assertion"] = m.group(1)
    m = re.search(r"Memory access fault by GPU node-(\d+).*?on address (\S+?)\.? Reason: ([^.\n]+)", text)
    if m:
        facts.update(gpu_node=int(m.group(1)), address=m.group(2), reason=m.group(3).strip())
    return facts


def facts_driver_fault(text: str, _ctx: Context) -> dict[str, Any]:
    """``pci_bus``, the ``rm_init_status`` triple of ``RmInitAdapter failed! (a:b:c)``, ``gsp`` (True when the
    GSP firmware is named), ``xid`` codes and the ``device_minor``."""
    facts: dict[str, Any] = {}
    bus = _pci_bus(text)
    if bus:
        facts["pci_bus"] = bus
    m = re.search(r"RmInitAdapter failed! \((0x[0-9a-f]+:0x[0-9a-f]+:\d+)\)", text, re.I)
    if m:
        facts["rm_init_status"] = m.group(1)
    if re.search(r"\bGSP\b|kgsp", text):
        facts["gsp"] = True
    xids = xid_codes(text)
    if xids:
        facts["xid"] = list(xids)
    found = captured(
        text,
        {
            "device_minor": r"device (?:bearing )?minor number (\d+)",
            "ip_block": r"init of IP block <(\w+)> failed",
            "probe_error": r"amdgpu: probe of \S+ failed with error (-\d+)",
            "firmware": r"Failed to load firmware \"?([\w/.-]+)",
        },
    )
    for number in ("device_minor", "probe_error"):
        if number in found:
            found[number] = int(found[number])
    return facts | found


def facts_uvm(text: str, _ctx: Context) -> dict[str, Any]:
    """``cuda_error``: 999 for CUDA_ERROR_UNKNOWN / torch's unknown error, 30 for the legacy code, or the number
    TensorFlow prints."""
    facts: dict[str, Any] = {}
    m = re.search(r"UNKNOWN ERROR \((\d+)\)|returned (30)\b|error=(30)\b|runtime error \((30)\)", text)
    if m:
        facts["cuda_error"] = int(next(g for g in m.groups() if g))
    elif re.search(r"CUDA_ERROR_UNKNOWN|CUDA unknown error", text):
        facts["cuda_error"] = 999
    return facts


def facts_open_module(text: str, _ctx: Context) -> dict[str, Any]:
    """``pci_bus`` and ``pci_id`` (``10de:1b82``) of the GPU the open module refused."""
    m = re.search(r"The NVIDIA GPU ([0-9A-Fa-f:.]+) \(PCI ID: ([0-9a-f]{4}:[0-9a-f]{4})\)", text)
    return {"pci_bus": m.group(1), "pci_id": m.group(2)} if m else {}


def facts_nvlink(text: str, _ctx: Context) -> dict[str, Any]:
    """``xid`` codes (the NVLink ones, also those named by ``caused by previous Xid N``), ``links`` (numbers), and
    ``fatal`` when an NVLink Xid says Fatal."""
    facts: dict[str, Any] = {}
    codes = [c for c in xid_codes(text) if c == 74 or 144 <= c <= 150]
    codes += [int(c) for c in re.findall(r"caused by previous Xid (\d+)", text) if int(c) not in codes]
    if codes:
        facts["xid"] = list(dict.fromkeys(codes))
    links = re.findall(r"\bLink (-?\d+)\b", text)
    if links:
        facts["links"] = list(dict.fromkeys(int(n) for n in links))
    if re.search(r"\bFatal XC\d", text):
        facts["fatal"] = True
    return facts


RULES: tuple[FailureRule, ...] = (
    FailureRule(
        "nvlink-error",
        "interconnect",
        "kernel-driver",
        "the driver reported NVLink errors (Xid 74; Xid 144-150 on NVLink 5 / NVLink-switch systems, 'Fatal' or "
        "'Nonfatal' with the link number): a link between GPUs (or to the switch) is failing; work on those GPUs "
        "stops with Xid 45 'caused by previous Xid'",
        "in the interconnect: read the link counters (`nvidia-smi nvlink -s` / `-e`), the fabric manager's log and "
        "dmesg; a fatal NVLink Xid needs the GPUs reset (drain the node first); reseat bridges/cables or run DCGM "
        "diagnostics (`dcgmi diag -r 3`) when one link keeps failing; nonfatal events alone are to be watched",
        patterns(
            xid_pattern(74, 144, 145, 146, 147, 148, 149, 150),
            r"caused by previous Xid (?:74|14[4-9]|150)\b",
            r"knvlink\w+: .{0,80}failed",
        ),
        facts_nvlink,
    ),
    FailureRule(
        "gpu-driver-fault",
        "kernel-driver",
        "kernel-driver",
        "the NVIDIA kernel driver could not initialise the GPU or lost control of it (RmInitAdapter failed; the "
        "GPU's GSP firmware stopped answering, Xid 119/120): programs then see no device or hang",
        "on the host: read `dmesg | grep NVRM`; reset the GPU or reboot; install the driver's current release of "
        "its branch (GSP timeouts are fixed there, e.g. 525.105.17); with the proprietary module the GSP firmware "
        "can be turned off (`NVreg_EnableGpuFirmware=0`); if it persists on one GPU, drain the node and have the "
        "GPU checked (`nvidia-bug-report.sh`)",
        patterns(
            r"RmInitAdapter failed",
            r"rm_init_adapter failed",
            r"Cannot initialize GSP firmware",
            r"Timeout (?:after \d+s )?(?:of )?waiting for RPC (?:response )?from (?:GPU\d+ )?GSP",
            r"_kgspLogRpcTimeout|_kgspIsHeartbeatTimedOut|GSP Timeout\b",
            xid_pattern(119, 120),
            # amdgpu (https://github.com/ROCm/amdgpu/pull/113, https://github.com/ROCm/rocm-install-on-linux/issues/615)
            r"amdgpu.{0,60}Fatal error during GPU init",
            r"amdgpu_device_ip_init failed",
            r"\*ERROR\* (?:hw|sw)_init of IP block <\w+> failed",
            r"amdgpu: probe of \S+ failed with error -\d+",
        ),
        facts_driver_fault,
        # a module and user space of different versions explain the failed init (the firmware of one of them missing)
        unless=patterns(r"API mismatch: the (?:client|NVIDIA kernel module)"),
    ),
    FailureRule(
        "driver-init-timeout",
        "kernel-driver",
        "container-toolkit",
        "the toolkit's driver service timed out while the kernel driver initialised the GPUs: without persistence "
        "mode (nvidia-persistenced) every container start re-initialises them, which can take longer than the "
        "toolkit waits (many GPUs, after a resume from hibernation, a GPU that is slow or failing to come up)",
        "on the host: keep the driver initialised - `systemctl enable --now nvidia-persistenced` (or `nvidia-smi "
        "-pm 1`); check `nvidia-smi` answers quickly and dmesg for Xid / RmInitAdapter errors; update the container "
        "toolkit; reboot after a hibernation",
        patterns(r"nvidia-container-cli: initialization error: driver (?:rpc )?error: (?:timed out|failed to process)"),
        facts_driver_fault,
    ),
    FailureRule(
        "open-module-unsupported-gpu",
        "kernel-driver",
        "kernel-driver",
        "the host runs NVIDIA's open kernel modules (the default flavour from driver 560), which need a GPU with the "
        "GSP processor (Turing / GTX 16xx and newer): this GPU has none, so the driver leaves it uninitialised",
        "on the host: install the proprietary kernel module flavour of the same driver (the package without "
        "`-open`, `.run -m=kernel`, or the distribution's switch, e.g. negativo17's /etc/nvidia/kernel.conf), or "
        "pin a branch that still ships it for this GPU; then reload the module or reboot",
        patterns(
            r"not supported by open\s+(?:NVRM:\s+)?nvidia\.ko because it does not include the required GPU",
        ),
        facts_open_module,
    ),
    FailureRule(
        "gpu-program-fault",
        "image-user-space",
        "image-user-space",
        "a GPU kernel of the program (or a library it loads) faulted: an illegal or misaligned memory access, an "
        "illegal instruction, an unspecified launch failure or a failed device-side assertion (CUDA 700/715/716/719/"
        "710; Xid 13/31/43; ROCm 'Memory access fault by GPU node'); the CUDA context is lost and every later call "
        "fails",
        "in the image: rerun with `CUDA_LAUNCH_BLOCKING=1` (ROCm: `AMD_SERIALIZE_KERNEL=3`) to find the kernel, "
        "and `compute-sanitizer` to find the access; try the framework's current release; if the same image passes "
        "on another GPU, or the host's dmesg shows memory or bus Xids (48, 63, 64, 79, 94, 95) at the same time, "
        "treat the GPU as faulty instead",
        patterns(
            r"an illegal memory access was encountered",
            r"unspecified launch failure",
            r"(?:CUDA|HIP|cuda)[^\n]{0,40}misaligned address",
            r"an illegal instruction was encountered",
            r"cudaError(?:IllegalAddress|LaunchFailure|MisalignedAddress|IllegalInstruction)\b",
            r"CUDA_ERROR_(?:ILLEGAL_ADDRESS|LAUNCH_FAILED|MISALIGNED_ADDRESS|ILLEGAL_INSTRUCTION)\b",
            r"hipError(?:IllegalAddress|LaunchFailure)\b",
            r"Memory access fault by GPU node-\d+",
            xid_pattern(13, 31, 43),
            # a device-side assertion of the program (CUDA 710): the kernel's own check failed
            r"device-side assert(?:ion)? triggered|cudaErrorAssert\b|CUDA_ERROR_ASSERT\b",
            r"block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion `",
        ),
        facts_program_fault,
    ),
)

#: CUDA's unknown error at initialisation: weaker evidence than every other kind, so it is matched after them
UVM_UNAVAILABLE = FailureRule(
    "nvidia-uvm-unavailable",
    "kernel-driver",
    "image-user-space",
    "CUDA could not initialise and gave only an unknown error (CUDA 999 CUDA_ERROR_UNKNOWN, legacy 30; torch "
    "'CUDA unknown error'): most often the nvidia_uvm kernel module is not loaded, broken after a suspend/resume, "
    "or its device node /dev/nvidia-uvm is missing",
    "on the host: reload the module (`sudo modprobe -r nvidia_uvm && sudo modprobe nvidia_uvm`; after a "
    "suspend/resume stop the GPU programs first), create the device nodes (`sudo nvidia-modprobe -u -c 0`), check "
    "`ls -l /dev/nvidia-uvm*`; a container given raw devices needs /dev/nvidia-uvm and /dev/nvidia-uvm-tools too; "
    "if it persists, reboot",
    patterns(
        r"CUDA unknown error - this may be due to an incorrectly set up environment",
        r"failed call to cuInit: (?:CUDA_ERROR_UNKNOWN|UNKNOWN ERROR \(\d+\))",
        r"\bCUDA_ERROR_UNKNOWN\b",
        r"cudaGetDeviceCount returned 30\b",
        r"\berror=30 : unknown error",
        r"cuda runtime error \(30\)",
        r"could not insert '?nvidia[\w-]*uvm'?",
    ),
    facts_uvm,
)


__all__ = ["RULES", "UVM_UNAVAILABLE", "XID", "xid_codes", "xid_pattern"]
