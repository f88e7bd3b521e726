"""Diagnosis of GPU/container failures by layer: which layer *noticed* and which one is *wrong*.

``diagnose(text, context=None) -> Diagnosis`` reads any error output (docker/podman/compose
stderr, Kubernetes events, nvidia-smi, PyTorch/TensorFlow/CUDA messages, rocminfo, Slurm logs)
and names a failure kind by *patterns over the kind of failure* (error codes, NVML/CUDA/HIP
error names, hook phrases, structure), never by one sample's exact text.

Layers (bottom to top, docs/diagnosis.md): ``kernel-driver``, ``fabric-manager``,
``container-toolkit``, ``container-engine``, ``run-options``, ``image-user-space``,
``framework-build``.

Facts (sources in docs/diagnosis.md): CUDA runtime errors 35 insufficient driver, 100 no
device, 802 system not yet initialized (fabric manager), 804 forward compatibility on
unsupported hardware, 209/48 no kernel image for the device; ``cudaDriverGetVersion`` encodes
1000*major + 10*minor; nvidia-container-cli names only the *last* clause of
``NVIDIA_REQUIRE_CUDA`` it evaluated; the minimum Linux driver of each CUDA line is the lowest
minimum among that line's rows of NVIDIA's release-notes table.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from builder.errors import NotFoundError

LAYERS = (
    "kernel-driver",
    "fabric-manager",
    "container-toolkit",
    "container-engine",
    "run-options",
    "image-user-space",
    "framework-build",
)

#: Lowest Linux x86_64 minimum driver of each CUDA X.Y line. Source: NVIDIA CUDA Toolkit
#: Release Notes, table "CUDA Toolkit and Corresponding Driver Versions" (the row named).
#: Used only when ``builder.compat.min_driver`` is not available.
MIN_DRIVER_FALLBACK: dict[str, tuple[str, str]] = {
    "9.0": ("384.81", "CUDA 9.0 (9.0.76)"),
    "9.1": ("390.46", "CUDA 9.1 (9.1.85)"),
    "9.2": ("396.26", "CUDA 9.2 (9.2.88)"),
    "10.0": ("410.48", "CUDA 10.0.130"),
    "10.1": ("418.39", "CUDA 10.1 (10.1.105)"),
    "10.2": ("440.33", "CUDA 10.2.89"),
    "11.0": ("450.36.06", "CUDA 11.0.1 RC"),
    "11.1": ("455.23", "CUDA 11.1 GA"),
    "11.2": ("460.27.03", "CUDA 11.2.0 GA"),
    "11.3": ("465.19.01", "CUDA 11.3.1 Update 1"),
    "11.4": ("470.42.01", "CUDA 11.4.0 GA"),
    "11.5": ("495.29.05", "CUDA 11.5 Update 2"),
    "11.6": ("510.39.01", "CUDA 11.6 GA"),
    "11.7": ("515.43.04", "CUDA 11.7 GA"),
    "11.8": ("520.61.05", "CUDA 11.8 GA"),
    "12.0": ("525.60.13", "CUDA 12.0 GA"),
    "12.1": ("530.30.02", "CUDA 12.1 Update 1"),
    "12.2": ("535.54.03", "CUDA 12.2 GA"),
    "12.3": ("545.23.06", "CUDA 12.3 GA"),
    "12.4": ("550.54.14", "CUDA 12.4 GA"),
    "12.5": ("555.42.02", "CUDA 12.5 GA"),
    "12.6": ("560.28.03", "CUDA 12.6 GA"),
    "12.8": ("570.26", "CUDA 12.8 GA"),
    "12.9": ("575.51.03", "CUDA 12.9 GA"),
    "13.0": ("580.65.06", "CUDA 13.0 GA"),
    "13.1": ("590.44.01", "CUDA 13.1 GA"),
    "13.2": ("595.45.04", "CUDA 13.2 GA"),
}

CUDA_ERRORS = {
    3: "initialization error",
    35: "cudaErrorInsufficientDriver",
    48: "no kernel image is available (legacy code)",
    100: "cudaErrorNoDevice",
    209: "cudaErrorNoKernelImageForDevice",
    802: "cudaErrorSystemNotReady",
    803: "cudaErrorSystemDriverMismatch",
    804: "cudaErrorCompatNotSupportedOnDevice",
}


@dataclasses.dataclass(frozen=True)
class Context:
    """What is known besides the message (all optional): host vendor, driver version, the
    newest CUDA the driver supports, GPU name/brand/arch, the image's NVIDIA_REQUIRE_CUDA,
    CUDA version and compiled GPU architectures, NVIDIA_DRIVER_CAPABILITIES used."""

    vendor: str | None = None
    driver_version: str | None = None
    driver_cuda: str | None = None
    gpu_name: str | None = None
    gpu_brand: str | None = None
    gpu_arch: str | None = None  # "sm_90" / "gfx942"
    require_cuda: str | None = None
    image_cuda: str | None = None
    image_archs: tuple[str, ...] = ()
    driver_capabilities: str | None = None


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """The answer: ``key`` (failure kind), ``at_fault`` (layer that is wrong), ``noticed_by``
    (layer that reported it), ``summary``, ``fix`` (names the layer to change), ``facts``,
    ``evidence`` (the lines matched), ``also_matched`` (other kinds that matched, weaker)."""

    key: str
    at_fault: str
    noticed_by: str
    summary: str
    fix: str
    facts: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    evidence: tuple[str, ...] = ()
    also_matched: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "diagnosis": self.key,
            "at_fault": self.at_fault,
            "noticed_by": self.noticed_by,
            "summary": self.summary,
            "fix": self.fix,
            "facts": dict(self.facts),
            "evidence": list(self.evidence),
            "also_matched": list(self.also_matched),
        }


@dataclasses.dataclass(frozen=True)
class Rule:
    key: str
    at_fault: str
    noticed_by: str
    summary: str
    fix: str
    patterns: tuple[re.Pattern[str], ...]
    facts: Callable[[str, Context], dict[str, Any]] | None = None
    unless: tuple[re.Pattern[str], ...] = ()


def _p(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.I | re.M) for p in patterns)


# --------------------------------------------------------------------------------------------
# fact extractors
# --------------------------------------------------------------------------------------------


def _cuda_error(text: str) -> int | None:
    for m in re.finditer(
        r"(?:\berror\b|\bcode\b|\bCUDA error\b)\s*[=:]?\s*\(?\s*(\d{1,3})\s*\)?"
        r"|returned\s+(\d{2,3})\b|runtime error\s*\((\d{1,3})\)",
        text,
        re.I,
    ):
        n = int(next(g for g in m.groups() if g))
        if n in CUDA_ERRORS:
            return n
    for n, name in CUDA_ERRORS.items():
        if name.startswith("cudaError") and name.lower() in text.lower():
            return n
    return None


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def min_driver(cuda: str) -> tuple[str | None, str | None]:
    """(minimum Linux driver, source row) for CUDA ``X.Y`` (helper A's table when available)."""
    mm = ".".join(cuda.split(".")[:2])
    try:
        from builder import compat

        r = compat.min_driver_row(mm)
        return str(r.min_driver), str(r.source)
    except Exception:
        pass
    row = MIN_DRIVER_FALLBACK.get(mm)
    return (row[0], row[1]) if row else (None, None)


def _driver_cuda_from_found_version(text: str) -> str | None:
    m = re.search(r"found version (\d{4,6})", text) or re.search(r"Found CUDA (?:driver )?version (\d{4,6})", text)
    if not m:
        return None
    n = int(m.group(1))
    return f"{n // 1000}.{(n % 1000) // 10}"


def evaluate_require(require: str, *, driver: str | None, driver_cuda: str | None, brand: str | None) -> dict[str, Any]:
    """Evaluate an ``NVIDIA_REQUIRE_CUDA`` expression (space-separated terms OR-ed, comma-separated
    constraints AND-ed; ``cuda>=X.Y``, ``driver>=N``, ``driver<N``, ``brand=NAME``, ``arch=``).

    Uses helper A's evaluator (``builder.compat``) when present; this fallback implements the
    grammar of nvidia-container-toolkit's ``requirements`` package. Returns ``satisfied``
    (True/False/None when a needed fact is unknown), ``failing`` (each term with its failed
    constraints) and ``would_satisfy`` (human statements of what would make it pass)."""
    terms = [t for t in require.split() if t]
    results: list[dict[str, Any]] = []
    any_true = False
    any_unknown = False
    for term in terms:
        failed: list[str] = []
        unknown = False
        for c in term.split(","):
            m = re.match(r"^(cuda|driver|brand|arch)\s*(>=|<=|==|=|<|>)\s*(\S+)$", c.strip(), re.I)
            if not m:
                continue
            name, op, value = m.group(1).lower(), m.group(2), m.group(3)
            have = {"cuda": driver_cuda, "driver": driver, "brand": brand, "arch": None}[name]
            if have is None:
                unknown = True
                continue
            if name in ("cuda", "driver"):
                a, b = _version_key(have), _version_key(value)
                ok = {
                    ">=": a >= b,
                    "<=": a <= b,
                    ">": a > b,
                    "<": a < b,
                    "=": a[: len(b)] == b,
                    "==": a[: len(b)] == b,
                }[op]
            else:
                ok = have.lower().replace(" ", "") == value.lower()
            if not ok:
                failed.append(c.strip())
        if not failed and not unknown:
            any_true = True
        if unknown and not failed:
            any_unknown = True
        results.append({"term": term, "failed": failed, "unknown": unknown})
    satisfied: bool | None = True if any_true else (None if any_unknown else False)
    would: list[str] = []
    cuda_terms = [r for r in results if r["term"].startswith("cuda>=")]
    for r in cuda_terms:
        need = r["term"].split(">=", 1)[1].split(",")[0]
        drv, row = min_driver(need)
        if drv:
            would.append(f"a driver >= {drv} (supports CUDA {need}; {row})")
    branches = sorted(
        {
            m.group(1)
            for r in results
            for m in [re.search(r"driver>=(\d+),driver<(\d+)", r["term"])]
            if m and int(m.group(2)) == int(m.group(1)) + 1
        },
        key=int,
    )
    if branches:
        brands = sorted({m.group(1) for r in results for m in [re.search(r"brand=([\w]+)", r["term"])] if m})
        would.append(
            "or (with forward compatibility, cuda-compat in the image) a data-center/professional GPU "
            f"(brand {', '.join(brands)}) on driver branch " + ", ".join(f"R{b}" for b in branches)
        )
    return {
        "satisfied": satisfied,
        "failing": [r for r in results if r["failed"]],
        "would_satisfy": would,
    }


def _facts_driver_too_old(text: str, ctx: Context) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    m = re.search(r"unsatisfied condition:\s*([^,\n\\\"]+)", text)
    cond = m.group(1).strip() if m else None
    if cond:
        facts["hook_condition"] = cond
    need = None
    cm = re.search(r"\bcuda\s*>=\s*(\d+\.\d+)", cond or "") or re.search(r"--require=cuda>=(\d+\.\d+)", text)
    if cm:
        need = cm.group(1)
    if need is None and ctx.image_cuda:
        need = ".".join(ctx.image_cuda.split(".")[:2])
    if need is None and ctx.require_cuda:
        rm = re.search(r"cuda>=(\d+\.\d+)", ctx.require_cuda)
        need = rm.group(1) if rm else None
    if need:
        facts["image_cuda"] = need
        drv, row = min_driver(need)
        if drv:
            facts["min_driver"] = drv
            facts["min_driver_source"] = row
    found = _driver_cuda_from_found_version(text)
    if found:
        facts["driver_cuda"] = found
    elif ctx.driver_cuda:
        facts["driver_cuda"] = ctx.driver_cuda
    if ctx.driver_version:
        facts["driver_version"] = ctx.driver_version
    err = _cuda_error(text)
    if err is None and re.search(r"insufficient|InsufficientDriver", text, re.I):
        err = 35
    if err:
        facts["cuda_error"] = err
    if cond and not cond.replace(" ", "").startswith("cuda>="):
        facts["note"] = (
            f"the hook names only the last clause it evaluated ({cond}); it does not mean the driver is "
            "too new - the whole NVIDIA_REQUIRE_CUDA expression failed"
        )
    if ctx.require_cuda:
        ev = evaluate_require(
            ctx.require_cuda, driver=ctx.driver_version, driver_cuda=ctx.driver_cuda, brand=ctx.gpu_brand
        )
        facts["require_cuda_evaluation"] = ev
        try:  # helper A's evaluator: the same grammar, with the GPU table and exemption rules
            from builder import compat

            v = compat.check_compat(
                driver=ctx.driver_version,
                gpu=ctx.gpu_name,
                brand=ctx.gpu_brand,
                require=ctx.require_cuda,
                cuda=ctx.image_cuda,
                driver_cuda_version=ctx.driver_cuda,
            )
            facts["compat_verdict"] = {"verdict": v.verdict, "min_driver": v.min_driver, "reasons": list(v.reasons)}
        except Exception:
            pass
        if ev["would_satisfy"]:
            facts["would_satisfy"] = ev["would_satisfy"]
        if not need:
            rm = re.search(r"cuda>=(\d+\.\d+)", ctx.require_cuda)
            if rm:
                facts["image_cuda"] = rm.group(1)
                drv, row = min_driver(rm.group(1))
                facts["min_driver"], facts["min_driver_source"] = drv, row
    return facts


def _facts_error_code(text: str, ctx: Context) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    err = _cuda_error(text)
    if err is None:
        low = text.lower()
        if "not yet initialized" in low or "systemnotready" in low or "system_not_ready" in low:
            err = 802
        elif "forward compatibility" in low or "compatnotsupported" in low:
            err = 804
    if err:
        facts["cuda_error"] = err
        facts["cuda_error_name"] = CUDA_ERRORS.get(err)
    if ctx.gpu_name:
        facts["gpu"] = ctx.gpu_name
    if ctx.driver_version:
        facts["driver_version"] = ctx.driver_version
    return facts


def _facts_forward_compat(text: str, ctx: Context) -> dict[str, Any]:
    facts = _facts_error_code(text, ctx)
    facts["cuda_error"] = 804
    facts["cuda_error_name"] = CUDA_ERRORS[804]
    brand = (ctx.gpu_brand or "").lower()
    if brand:
        facts["gpu_class"] = "consumer" if brand in ("geforce", "titan", "geforcertx", "titanrtx") else "data-center"
    else:
        facts["gpu_class"] = "consumer (forward compatibility is refused only on GeForce/TITAN-class GPUs)"
    return facts


def _facts_arch(text: str, ctx: Context) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    sm = re.search(r"capability (sm_\d+)", text)
    gfx = re.findall(r"\b(gfx\d{3,4}[a-z]?)\b", text)
    if sm:
        facts["gpu_arch"] = sm.group(1)
        facts["vendor"] = "nvidia"
    elif gfx or re.search(r"hipError|HSA|ROCm|rocm", text):
        facts["vendor"] = "amd"
        if gfx:
            facts["gpu_arch"] = gfx[0]
    elif ctx.gpu_arch:
        facts["gpu_arch"] = ctx.gpu_arch
    else:
        facts["vendor"] = "nvidia" if re.search(r"cuda|CUDA", text) else None
    sup = re.search(r"supports CUDA capabilities ((?:sm_\d+\s*)+)", text)
    if sup:
        facts["image_archs"] = sup.group(1).split()
    elif ctx.image_archs:
        facts["image_archs"] = list(ctx.image_archs)
    if ctx.gpu_arch and "gpu_arch" not in facts:
        facts["gpu_arch"] = ctx.gpu_arch
    err = _cuda_error(text)
    if err in (48, 209):
        facts["cuda_error"] = err
    return facts


def _facts_mismatch(text: str, ctx: Context) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    m = re.search(r"NVML library version:\s*([\d.]+)", text)
    if m:
        facts["user_space_version"] = m.group(1)
    m = re.search(r"kernel module has version ([\d.]+)", text)
    if m:
        facts["kernel_module_version"] = m.group(1)
    return facts


def _facts_perm(text: str, ctx: Context) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    m = re.search(r"(/dev/(?:kfd|dri/\w+|nvidia\w*))", text)
    if m:
        facts["device"] = m.group(1)
    g = re.search(r'member of "?(\w+)"? group', text)
    if g:
        facts["group_hint"] = g.group(1)
    return facts


def _facts_cdi(text: str, ctx: Context) -> dict[str, Any]:
    m = re.search(r"unresolvable CDI devices?\s*:?\s*([\w./-]+=[\w:.,-]+)", text, re.I)
    return {"cdi_device": m.group(1)} if m else {}


def _facts_tool(text: str, ctx: Context) -> dict[str, Any]:
    m = re.search(r"\b(nvidia-smi|rocm-smi|amd-smi|rocminfo)\b", text)
    facts: dict[str, Any] = {"tool": m.group(1)} if m else {}
    if ctx.vendor:
        facts["host_vendor"] = ctx.vendor
    return facts


# --------------------------------------------------------------------------------------------
# the rules (order: most specific first)
# --------------------------------------------------------------------------------------------

RULES: tuple[Rule, ...] = (
    Rule(
        "cdi-device-unresolvable",
        "container-toolkit",
        "container-engine",
        "the engine was asked for a CDI device (e.g. nvidia.com/gpu=all) that no CDI spec on the host defines",
        "on the host: generate the spec (`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`), check that "
        "`nvidia-ctk cdi list` shows the device name requested and that the engine reads that directory; "
        "or run with `--gpus` instead of CDI",
        _p(
            r"unresolvable CDI devices?",
            r"CDI device injection failed",
            r"failed to inject CDI devices",
            r"could not resolve CDI device",
            r"setting up CDI devices",
        ),
        _facts_cdi,
    ),
    Rule(
        "container-toolkit-missing",
        "container-toolkit",
        "container-engine",
        "the engine has no GPU device driver: the NVIDIA Container Toolkit (nvidia-container-runtime-hook) "
        "is not installed or not registered with the engine",
        "on the host: install the NVIDIA Container Toolkit, run `nvidia-ctk runtime configure --runtime=docker` "
        "and restart dockerd (the hook must be on dockerd's PATH when it starts)",
        _p(
            r"could not select device driver .{0,20}with capabilities",
            r"unknown or invalid runtime name:?\s*nvidia",
            r"nvidia-container-runtime(-hook)?[\\\"']*:? executable file not found",
            r"exec: \"nvidia-container-runtime",
            r"fork/exec /usr/bin/nvidia-container-runtime.*no such file",
            r"no such file or directory.*nvidia-container-runtime-hook",
            r"Unknown runtime specified nvidia",
            r"runtime \"nvidia\" binary not installed",
        ),
    ),
    Rule(
        "driver-library-mismatch",
        "kernel-driver",
        "kernel-driver",
        "the loaded NVIDIA kernel module and the driver's user-space libraries (NVML/libcuda) have different "
        "versions: the driver was upgraded without reloading the module",
        "on the host: reboot, or unload and reload the nvidia kernel modules, so that module and libraries match; "
        "pin driver packages against unattended upgrades",
        _p(
            r"Driver/library version mismatch",
            r"API mismatch: the NVIDIA kernel module has version",
            r"cudaErrorSystemDriverMismatch",
            r"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
            r"\berror 803\b",
            r"system has unsupported display driver / cuda driver combination",
        ),
        _facts_mismatch,
    ),
    Rule(
        "device-cgroup-lost",
        "container-engine",
        "kernel-driver",
        "NVML lost access to the GPU device nodes inside a running container: the host's systemd reloaded the "
        "device cgroup rules (systemd cgroup driver without /dev/char symlinks)",
        "re-run in a fresh container to recover now; fix it on the host: `nvidia-ctk system create-dev-char-symlinks "
        "--create-all` (and the udev rule), or use the cgroupfs cgroup driver, so reloads keep GPU access",
        _p(r"Failed to initialize NVML: Unknown Error", r"NVML: Unknown Error", r"nvmlInit.*Unknown Error"),
        _facts_error_code,
    ),
    Rule(
        "fabric-manager-not-ready",
        "fabric-manager",
        "image-user-space",
        "CUDA could not initialise (error 802, system not yet initialized): on an NVSwitch system the "
        "nvidia-fabricmanager service is not running or does not match the driver version",
        "on the host: install and start nvidia-fabricmanager of exactly the driver's version "
        "(`systemctl enable --now nvidia-fabricmanager`), wait until `nvidia-smi -q` shows Fabric State Completed",
        _p(
            r"system not yet initialized",
            r"cudaErrorSystemNotReady",
            r"CUDA_ERROR_SYSTEM_NOT_READY",
            r"\berror\s*[=:]?\s*\(?802\b",
            r"code=802",
            r"returned 802\b",
            r"fabric manager.*(not|never).*(running|Completed)",
        ),
        _facts_error_code,
    ),
    Rule(
        "forward-compat-unsupported",
        "kernel-driver",
        "image-user-space",
        "the image's CUDA is newer than the driver and tried forward compatibility (cuda-compat), which works "
        "only on data-center/professional GPUs and listed driver branches (CUDA error 804)",
        "on the host: install a driver that supports the image's CUDA natively (see min_driver), or use an image "
        "built for an older CUDA line; on consumer GPUs forward compatibility never works",
        _p(
            r"forward compatibility was attempted on non supported HW",
            r"cudaErrorCompatNotSupportedOnDevice",
            r"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
            r"\berror\s*[=:]?\s*804\b",
            r"code=804",
        ),
        _facts_forward_compat,
    ),
    Rule(
        "driver-too-old-for-image",
        "kernel-driver",
        "image-user-space",
        "the host driver is older than the CUDA in the image requires",
        "on the host: upgrade the driver to the minimum the image's CUDA needs (or run an image built for the CUDA "
        "the driver supports); do not set NVIDIA_DISABLE_REQUIRE to hide it",
        _p(
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
        ),
        _facts_driver_too_old,
    ),
    Rule(
        "gpu-arch-not-in-image",
        "framework-build",
        "image-user-space",
        "the framework in the image was not compiled for this GPU's architecture (compute capability / gfx target)",
        "in the image: rebuild or pick a variant whose compiled architectures include this GPU (e.g. cu128+ wheels "
        "for Blackwell sm_100/sm_120; PYTORCH_ROCM_ARCH with the gfx target); HSA_OVERRIDE_GFX_VERSION is only a "
        "user-level workaround",
        _p(
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
        ),
        _facts_arch,
    ),
    Rule(
        "probe-python-missing",
        "image-user-space",
        "image-user-space",
        "the image has no Python interpreter for the device-check probe (builder's probe runs with the image's "
        "own python3: /opt/venv/bin/python3, python3 on PATH, /usr/local/bin/python3, /usr/bin/python3)",
        "in the image: install python3 (>= 3.6; e.g. `apt-get install -y --no-install-recommends python3`) or "
        "check an image that has its framework's Python; the probe cannot run without it",
        _p(r"builder: no python3 in the image"),
    ),
    Rule(
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
        _p(
            r"error gathering device information while adding custom device \"?/dev/[\w/.-]+\"?:\s*"
            r"no such file or directory",
            r"(?:stat|lstat|open)\s+/dev/(?:kfd|dri/renderD\d+|nvidia[\w-]*):\s*no such file or directory",
        ),
        _facts_perm,
    ),
    Rule(
        "device-permission-denied",
        "run-options",
        "image-user-space",
        "the container user cannot open the GPU device nodes: it lacks the groups that own /dev/kfd and "
        "/dev/dri/renderD* (video/render) - the management tool may still work",
        "in the run options: add `--group-add` with the numeric gid that owns /dev/kfd and /dev/dri/renderD* on the "
        "host (video and render), or run as a user in those groups; for rootless engines map those groups",
        _p(
            r"Unable to open /dev/kfd read-write:\s*(Permission denied|Operation not permitted)",
            r"(open|opening)\s+/dev/(kfd|dri/renderD\d+).*(Permission denied|Operation not permitted|EACCES)",
            r"/dev/(kfd|dri/renderD\d+).*Permission denied",
            r"Permission denied.*/dev/(kfd|dri/renderD\d+|nvidia\w*)",
            r"failed to open /dev/nvidia\w*.*permission denied",
            r"is not member of \"?\w+\"? group, the default DRM access group",
        ),
        _facts_perm,
    ),
    Rule(
        "driver-not-loaded",
        "kernel-driver",
        "kernel-driver",
        "the NVIDIA kernel driver is not loaded (or not installed) on the host, so nothing can talk to the GPU",
        "on the host: install/load the NVIDIA driver for this kernel (DKMS rebuild after a kernel upgrade, "
        "`modprobe nvidia`, blacklist nouveau), then check `nvidia-smi` before starting containers",
        _p(
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
        ),
    ),
    Rule(
        "no-gpu-visible",
        "kernel-driver",
        "image-user-space",
        "the driver is reachable but reports no usable CUDA device",
        "on the host: check that `nvidia-smi -L` lists the GPU (PCI passthrough, a GPU fallen off the bus, "
        "hybrid-graphics mode, MIG mode enabled without instances); then check NVIDIA_VISIBLE_DEVICES / the "
        "device request",
        _p(
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
            r"No visible GPU devices",
        ),
        _facts_error_code,
    ),
    Rule(
        "driver-capabilities-missing",
        "run-options",
        "image-user-space",
        "the GPU was given to the container, but NVIDIA_DRIVER_CAPABILITIES did not include the capability this "
        "program needs (compute for CUDA, video for NVENC/NVDEC), so those driver libraries were not injected",
        "in the run options or the image: set NVIDIA_DRIVER_CAPABILITIES to include what is needed "
        "(e.g. `compute,utility`, `video`, or `all`)",
        _p(
            r"Cannot load libnvidia-encode\.so",
            r"Cannot load libnvcuvid\.so",
            r"unable to load libnvcuvid",
            r"libnvidia-encode\.so\.1: cannot open shared object file",
            r"NVIDIA_DRIVER_CAPABILITIES",
        ),
    ),
    Rule(
        "gpu-not-requested",
        "run-options",
        "image-user-space",
        "the container was started without a GPU request, so no driver libraries or device nodes are inside it",
        "in the run options: start it with `--gpus all` (or a CDI device `--device nvidia.com/gpu=all`; in compose "
        "`deploy.resources.reservations.devices`, in Kubernetes `resources.limits: nvidia.com/gpu`)",
        _p(
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
        ),
        None,
    ),
    Rule(
        "framework-without-gpu-support",
        "framework-build",
        "image-user-space",
        "the framework in the image is a CPU-only build (no CUDA/ROCm support compiled in or installed)",
        "in the image: install the framework's GPU build for the image's CUDA/ROCm line (e.g. the cu128 / rocm6.4 "
        "PyTorch wheel index, jax[cuda12]); rebuild the variant",
        _p(
            r"Torch not compiled with CUDA enabled",
            r"a CUDA-enabled jaxlib is not installed",
            r"No GPU/TPU found, falling back to CPU",
        ),
        None,
    ),
    Rule(
        "wrong-vendor-tool",
        "run-options",
        "image-user-space",
        "a vendor tool for the other GPU vendor was run (nvidia-smi on an AMD host or rocm-smi on an NVIDIA host)",
        "detect the vendor first (/dev/nvidiactl vs /dev/kfd, PCI vendor 10de vs 1002) and run that vendor's "
        "tools and device options",
        _p(r"\b(nvidia-smi|rocm-smi|amd-smi|rocminfo)\b.*(command not found|not found|No such file)"),
        _facts_tool,
    ),
)

RULES_BY_KEY = {r.key: r for r in RULES}

_TOOLKIT_NOTICE = re.compile(
    r"nvidia-container-cli|prestart hook|running hook|error running hook|nvidia-container-runtime", re.I
)
_ENGINE_NOTICE = re.compile(
    r"Error response from daemon|OCI runtime|failed to create shim|Error: setting up CDI|kubelet|"
    r"failed to create containerd task|^docker:|Error: (crun|runc|OCI)",
    re.I | re.M,
)
_FRAMEWORK_NOTICE = re.compile(r"torch|tensorflow|jax|cupy|Traceback", re.I)


def _noticed_by(rule: Rule, text: str) -> str:
    if rule.key in ("container-toolkit-missing", "cdi-device-unresolvable"):
        return "container-engine"
    if _TOOLKIT_NOTICE.search(text):
        return "container-toolkit"
    if _ENGINE_NOTICE.search(text):
        return "container-engine"
    if rule.noticed_by == "image-user-space" and _FRAMEWORK_NOTICE.search(text):
        return "image-user-space"
    if re.search(r"nvidia-smi|NVML|NVIDIA-SMI", text) and rule.key in (
        "driver-not-loaded",
        "driver-library-mismatch",
        "device-cgroup-lost",
    ):
        return "kernel-driver"
    return rule.noticed_by


def _first_lines(text: str, pattern: re.Pattern[str]) -> list[str]:
    out = []
    for line in text.splitlines():
        if pattern.search(line):
            out.append(line.strip()[:400])
            if len(out) >= 3:
                break
    if not out:
        m = pattern.search(text)
        if m:
            out.append(text[max(0, m.start() - 80) : m.end() + 80].strip().replace("\n", " ")[:400])
    return out


def _resolve_ambiguity(matches: list[Rule], text: str, ctx: Context) -> list[Rule]:
    """Context-dependent choices between kinds that share phrases."""
    keys = [r.key for r in matches]
    vendor = (ctx.vendor or "").lower()
    tool_missing = re.search(r"\b(nvidia-smi|rocm-smi|amd-smi|rocminfo)\b:? (command )?not found", text)
    if tool_missing:
        tool = tool_missing.group(1)
        nvidia_tool = tool == "nvidia-smi"
        amd_context = vendor == "amd" or re.search(r"/dev/kfd|ROCm|rocm-smi|amdgpu|Instinct|Radeon", text)
        nvidia_context = vendor == "nvidia" or re.search(r"/dev/nvidia|NVIDIA-SMI|CUDA Version", text)
        wrong = (nvidia_tool and amd_context) or (not nvidia_tool and nvidia_context)
        if wrong and "wrong-vendor-tool" in keys:
            matches = [RULES_BY_KEY["wrong-vendor-tool"]] + [r for r in matches if r.key != "wrong-vendor-tool"]
        elif "wrong-vendor-tool" in keys and nvidia_tool:
            matches = [r for r in matches if r.key != "wrong-vendor-tool"] + [RULES_BY_KEY["wrong-vendor-tool"]]
    # NVIDIA_DRIVER_CAPABILITIES named with a "no driver" symptom: it is the capabilities
    if "driver-capabilities-missing" in keys and "gpu-not-requested" in keys:
        caps = ctx.driver_capabilities
        if re.search(r"NVIDIA_DRIVER_CAPABILITIES", text) or (
            caps is not None and "compute" not in caps and "all" not in caps
        ):
            matches = [RULES_BY_KEY["driver-capabilities-missing"]] + [
                r for r in matches if r.key != "driver-capabilities-missing"
            ]
    if "gpu-not-requested" in keys and ctx.driver_capabilities is not None:
        caps = ctx.driver_capabilities
        if (
            "compute" not in caps
            and "all" not in caps
            and re.search(r"libcuda|no NVIDIA driver|Driver was not detected", text)
        ):
            matches = [RULES_BY_KEY["driver-capabilities-missing"]] + [
                r for r in matches if r.key != "driver-capabilities-missing"
            ]
    return matches


def diagnose(text: str, context: Context | None = None) -> Diagnosis:
    """Name the failure kind in ``text`` (any tool's output), the layer at fault and the fix.

    Returns key ``unknown`` (quoting the lines it could not place) when nothing matches."""
    ctx = context or Context()
    if not text.strip():
        return _empty()
    matches = [
        r for r in RULES if any(p.search(text) for p in r.patterns) and not any(u.search(text) for u in r.unless)
    ]
    matches = _resolve_ambiguity(matches, text, ctx)
    if not matches:
        return _unknown(text, ctx)
    rule = matches[0]
    facts = rule.facts(text, ctx) if rule.facts else {}
    facts = {k: v for k, v in facts.items() if v is not None}
    evidence: list[str] = []
    for p in rule.patterns:
        if p.search(text):
            evidence.extend(_first_lines(text, p))
            break
    summary = rule.summary
    fix = rule.fix
    if rule.key == "driver-too-old-for-image":
        if facts.get("image_cuda") and facts.get("min_driver"):
            summary = f"the image needs CUDA {facts['image_cuda']}, which needs a driver >= {facts['min_driver']}" + (
                f"; the driver supports CUDA {facts['driver_cuda']}" if facts.get("driver_cuda") else ""
            )
            fix = (
                f"on the host: upgrade the driver to >= {facts['min_driver']} (CUDA {facts['image_cuda']}), or run a "
                "variant built for the CUDA line the driver supports"
            )
        else:
            # the minimum driver depends on the image's CUDA, which this text does not name: say so
            # instead of pointing at a fact that is not there
            if facts.get("driver_cuda"):
                summary = (
                    f"the driver supports only CUDA {facts['driver_cuda']}, older than the CUDA runtime in the image"
                )
            fix = (
                "on the host: upgrade the driver to one that supports the image's CUDA"
                + (f" (this driver supports CUDA {facts['driver_cuda']} at most)" if facts.get("driver_cuda") else "")
                + ", or run an image built for the CUDA the driver supports; "
                + (
                    f"the minimum driver for CUDA {facts['image_cuda']} is not in builder's table "
                    "(builder/compat/data/cuda-driver.csv)"
                    if facts.get("image_cuda")
                    else "the minimum driver depends on the image's CUDA version, which this message does not name: "
                    "pass `--image-cuda X.Y` or `--require-cuda EXPR` (the image's NVIDIA_REQUIRE_CUDA) to name it"
                )
                + "; do not set NVIDIA_DISABLE_REQUIRE to hide it"
            )
        if facts.get("would_satisfy"):
            fix += "; would satisfy NVIDIA_REQUIRE_CUDA: " + "; ".join(facts["would_satisfy"])
    if rule.key == "forward-compat-unsupported" and ctx.image_cuda:
        drv, _row = min_driver(ctx.image_cuda)
        if drv:
            facts["min_driver"] = drv
            facts["image_cuda"] = ctx.image_cuda
    if rule.key == "forward-compat-unsupported":
        named = (
            f"(>= {facts['min_driver']} for CUDA {facts['image_cuda']})"
            if facts.get("min_driver") and facts.get("image_cuda")
            else "(the minimum depends on the image's CUDA version: pass `--image-cuda X.Y` or `--require-cuda EXPR` "
            "to name it)"
        )
        fix = fix.replace("(see min_driver)", named)
    if rule.key == "gpu-arch-not-in-image" and facts.get("gpu_arch"):
        summary = f"the framework in the image has no code for {facts['gpu_arch']}" + (
            f" (compiled for {' '.join(facts['image_archs'])})" if facts.get("image_archs") else ""
        )
    return Diagnosis(
        key=rule.key,
        at_fault=rule.at_fault,
        noticed_by=_noticed_by(rule, text),
        summary=summary,
        fix=fix,
        facts=facts,
        evidence=tuple(dict.fromkeys(evidence)),
        also_matched=tuple(r.key for r in matches[1:]),
    )


_ERRORISH = re.compile(r"error|fail|denied|not found|cannot|unable|fatal|panic|exception|refused|invalid", re.I)


def _unknown(text: str, ctx: Context) -> Diagnosis:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    quoted = [line for line in lines if _ERRORISH.search(line)][:5] or lines[-5:]
    return Diagnosis(
        key="unknown",
        at_fault="unknown",
        noticed_by="unknown",
        summary="no known GPU/container failure kind matched; the lines that look like errors are quoted",
        fix="read the quoted lines; `builder hostinfo` shows the host's driver, toolkit and engine facts",
        facts={"quoted": quoted},
        evidence=tuple(quoted),
    )


def _empty() -> Diagnosis:
    return Diagnosis(
        key="unknown",
        at_fault="unknown",
        noticed_by="unknown",
        summary="the input was empty: there is no error text to diagnose",
        fix="pass the failing command's error output: a file, or `-` for standard input "
        "(`docker run ... 2>&1 | builder diagnose -`); sample messages are in tests/data/errors/",
        facts={"input": "empty"},
    )


def read_input(path: Path | str) -> str:
    """The text of ``path`` (undecodable bytes replaced) for ``diagnose``.

    Raises NotFoundError naming the file when it does not exist, is a directory or cannot be
    read (permissions); its hint names ``builder diagnose -`` (standard input) and the samples."""
    p = Path(path)
    hint = "`builder diagnose -` reads the error text from standard input; sample messages are in tests/data/errors/"
    if not p.exists():
        raise NotFoundError(f"error file {p} does not exist", hint=hint, path=str(p))
    if p.is_dir():
        raise NotFoundError(f"error file {p} is a directory, not a file", hint=hint, path=str(p))
    try:
        return p.read_text(errors="replace")
    except OSError as exc:
        raise NotFoundError(
            f"error file {p} cannot be read: {exc.strerror or exc}", hint=hint, path=str(p), errno=exc.errno
        ) from exc


def diagnose_many(texts: Sequence[str], context: Context | None = None) -> Diagnosis:
    """Diagnose the concatenation of several outputs (stderr of each step)."""
    return diagnose("\n".join(t for t in texts if t), context)


__all__ = [
    "CUDA_ERRORS",
    "LAYERS",
    "MIN_DRIVER_FALLBACK",
    "RULES",
    "Context",
    "Diagnosis",
    "Rule",
    "diagnose",
    "diagnose_many",
    "evaluate_require",
    "min_driver",
    "read_input",
]
