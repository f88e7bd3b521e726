"""Fact extractors of the failure kinds: what a message (and the :class:`Context`) says about error codes,
the image's CUDA, the driver, the GPU and the device nodes.

GPU, driver and ``NVIDIA_REQUIRE_CUDA`` knowledge is ``builder.compat``'s (minimum driver per CUDA line,
the requirement evaluator, brand classes); nothing here keeps a second table. ``cudaDriverGetVersion``
encodes 1000*major + 10*minor (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART____VERSION.html);
nvidia-container-cli names only the *last* clause of ``NVIDIA_REQUIRE_CUDA`` it evaluated.
"""

from __future__ import annotations

import re
from typing import Any

from builder import compat
from builder.checks.diagnosis.model import CUDA_ERRORS, Context, captured
from builder.compat.generations import capability
from builder.errors import NotFoundError


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


def min_driver(cuda: str) -> tuple[str | None, str | None]:
    """(minimum Linux driver, the ``cuda-driver.csv`` row used) for CUDA ``X.Y`` (``builder.compat``);
    (None, None) when the line is not in the table."""
    try:
        row = compat.min_driver_row(".".join(cuda.split(".")[:2]))
    except NotFoundError:
        return None, None
    return row.min_driver, row.source


def _driver_cuda_from_found_version(text: str) -> str | None:
    m = re.search(r"found version (\d{4,6})", text) or re.search(r"Found CUDA (?:driver )?version (\d{4,6})", text)
    if not m:
        return None
    n = int(m.group(1))
    return f"{n // 1000}.{(n % 1000) // 10}"


def host_driver_cuda(ctx: Context) -> str | None:
    """The newest CUDA the host driver supports: the context's (nvidia-smi "CUDA Version"), else from the
    driver version through ``compat.driver_cuda``; None when neither is known."""
    if ctx.driver_cuda:
        return ctx.driver_cuda
    return compat.driver_cuda(ctx.driver_version) if ctx.driver_version else None


def evaluate_requirement(ctx: Context) -> compat.Evaluation | None:
    """``compat.evaluate`` of the context's ``NVIDIA_REQUIRE_CUDA`` against its host facts (brand normalised
    to the hook's vocabulary; unknown facts leave the result undetermined, never a silent match or refusal).
    None without a requirement."""
    if not ctx.require_cuda:
        return None
    host = compat.Host(
        driver=ctx.driver_version,
        cuda=host_driver_cuda(ctx),
        brand=compat.normalize_brand(ctx.gpu_brand),
        arch=capability(ctx.gpu_arch),
    )
    return compat.evaluate(ctx.require_cuda, host)


def _needed_cuda(text: str, cond: str | None, named: str | None, ctx: Context) -> str | None:
    """The CUDA X.Y the image needs: the hook's condition, ``--require=cuda>=``, what nvidia-docker 1 named, the
    context's image CUDA or NVIDIA_REQUIRE_CUDA; None when nothing names it."""
    cm = re.search(r"\bcuda\s*>=\s*(\d+\.\d+)", cond or "") or re.search(r"--require=cuda>=(\d+\.\d+)", text)
    if cm:
        return cm.group(1)
    if named:
        return named
    if ctx.image_cuda:
        return ".".join(ctx.image_cuda.split(".")[:2])
    rm = re.search(r"cuda>=(\d+\.\d+)", ctx.require_cuda or "")
    return rm.group(1) if rm else None


def facts_driver_too_old(text: str, ctx: Context) -> dict[str, Any]:
    """The hook condition, the image's CUDA and its minimum driver, the driver's CUDA, the requirement's
    evaluation and compat verdict (with ``ctx.require_cuda``), what would satisfy it."""
    facts: dict[str, Any] = {}
    m = re.search(r"unsatisfied condition:\s*([^,\n\\\"]+)", text)
    cond = m.group(1).strip() if m else None
    if cond:
        facts["hook_condition"] = cond
    old = re.search(r"unsupported CUDA version: driver (\d+\.\d+) < image (\d+\.\d+)", text)  # nvidia-docker 1
    need = _needed_cuda(text, cond, old.group(2) if old else None, ctx)
    if need:
        facts["image_cuda"] = need
        drv, row = min_driver(need)
        if drv:
            facts["min_driver"] = drv
            facts["min_driver_source"] = row
    found = _driver_cuda_from_found_version(text) or (old.group(1) if old else None)
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
    ev = evaluate_requirement(ctx)
    if ev is not None:
        facts["require_cuda_evaluation"] = ev.to_json()
        v = compat.check_compat(
            driver=ctx.driver_version,
            gpu=ctx.gpu_name,
            brand=ctx.gpu_brand,
            require=ctx.require_cuda,
            cuda=ctx.image_cuda,
            driver_cuda_version=ctx.driver_cuda,
        )
        facts["compat_verdict"] = {"verdict": v.verdict, "min_driver": v.min_driver, "reasons": list(v.reasons)}
        if ev.satisfy:
            facts["would_satisfy"] = list(ev.satisfy)
    if ctx.require_cuda and not need:
        rm = re.search(r"cuda>=(\d+\.\d+)", ctx.require_cuda)
        if rm:
            facts["image_cuda"] = rm.group(1)
            drv, row = min_driver(rm.group(1))
            facts["min_driver"], facts["min_driver_source"] = drv, row
    return facts


def facts_error_code(text: str, ctx: Context) -> dict[str, Any]:
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


def facts_forward_compat(text: str, ctx: Context) -> dict[str, Any]:
    facts = facts_error_code(text, ctx)
    facts["cuda_error"] = 804
    facts["cuda_error_name"] = CUDA_ERRORS[804]
    brand = compat.normalize_brand(ctx.gpu_brand)
    info = compat.gpu_info(ctx.gpu_name) if ctx.gpu_name else None
    gpu_class = compat.brand_class(brand) if brand else (info.gpu_class if info else "unknown")
    if gpu_class == "unknown":
        facts["gpu_class"] = "consumer (forward compatibility is refused only on GeForce/TITAN-class GPUs)"
    else:
        facts["gpu_class"] = gpu_class
    return facts


def facts_arch(text: str, ctx: Context) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    sm = re.search(r"capability (sm_\d+)", text)
    gfx = re.findall(r"GPU arch ?: ?(gfx[0-9a-f]{3,4})\b", text) or re.findall(r"\b(gfx\d{3,4}[a-z]?)\b", text)
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
    tensile = sorted(set(re.findall(r"TensileLibrary(?:_lazy)?_(gfx[0-9a-f]{3,4})\.dat", text)))
    if sup:
        facts["image_archs"] = sup.group(1).split()
    elif tensile:  # rocBLAS lists the Tensile libraries it has, one per gfx target
        facts["image_archs"] = tensile
    elif ctx.image_archs:
        facts["image_archs"] = list(ctx.image_archs)
    if ctx.gpu_arch and "gpu_arch" not in facts:
        facts["gpu_arch"] = ctx.gpu_arch
    err = _cuda_error(text)
    if err in (48, 209):
        facts["cuda_error"] = err
    ngc = re.search(r"Detected NVIDIA (?:NVIDIA )?(.{1,80}?) GPU, which is not (yet )?supported", text)
    if ngc:  # an NGC banner: the container release does not support this GPU (too new, or "not supported": too old)
        facts["gpu"], facts["vendor"] = ngc.group(1).strip(), "nvidia"
        facts["gpu_newer_than_image"] = bool(ngc.group(2))
        info = compat.gpu_info(facts["gpu"])
        if info is not None and "gpu_arch" not in facts:
            facts["gpu_arch"] = info.sm
    return facts


def facts_mismatch(text: str, _ctx: Context) -> dict[str, Any]:
    """``user_space_version`` (NVML's library version, or the NVRM client's) and ``kernel_module_version``, in the
    wordings of drivers 367-595 (``the client has the version X, but ... this kernel module has the version Y``;
    595 names the client process; syslog may join the lines with ``#012``)."""
    return captured(
        text,
        {
            "user_space_version": r"NVML library version:\s*([\d.]+)|the client (?:'[^']*' \(pid \d+\)\s*)?"
            r"(?:NVRM:\s*)?has the version ([\d.]*\d)",
            "kernel_module_version": r"kernel module has (?:the )?version ([\d.]*\d)|kernel module has\s*"
            r"(?:#012)?(?:NVRM:\s*)?the version ([\d.]*\d)",
        },
    )


def facts_perm(text: str, _ctx: Context) -> dict[str, Any]:
    # device names keep their hyphens: /dev/nvidia-uvm, /dev/nvidia-caps/nvidia-cap1 (never cut to /dev/nvidia)
    return captured(
        text,
        {"device": r"(/dev/(?:kfd|dri/[\w-]+|nvidia[\w-]*(?:/[\w-]+)?))", "group_hint": r'member of "?(\w+)"? group'},
    )


def facts_cdi(text: str, _ctx: Context) -> dict[str, Any]:
    return captured(text, {"cdi_device": r"(?i)unresolvable CDI devices?\s*:?\s*([\w./-]+=[\w:.,-]+)"})


def facts_tool(text: str, ctx: Context) -> dict[str, Any]:
    m = re.search(r"\b(nvidia-smi|rocm-smi|amd-smi|rocminfo)\b", text)
    facts: dict[str, Any] = {"tool": m.group(1)} if m else {}
    if ctx.vendor:
        facts["host_vendor"] = ctx.vendor
    return facts


__all__ = [
    "evaluate_requirement",
    "facts_arch",
    "facts_cdi",
    "facts_driver_too_old",
    "facts_error_code",
    "facts_forward_compat",
    "facts_mismatch",
    "facts_perm",
    "facts_tool",
    "host_driver_cuda",
    "min_driver",
]
