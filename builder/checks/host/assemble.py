"""Collected tool output -> :class:`~builder.checks.host.model.HostInfo`: vendor, GPU order, partitions,
fabric state, and the facts derived from GPU names and PCI ids.

Derived facts come from ``builder.compat`` (the one owner of GPU knowledge): an NVIDIA GPU without a
reported brand gets ``compat.brand_from_name`` in nvidia-smi's wording (``compat.product_brand``), a GPU
without a compute capability / architecture gets ``compat.gpu_info``'s, an AMD GPU known only by its PCI
device id gets ``compat.amd_device``'s name and gfx target. Each derived field is listed in
``HostGpu.derived``. Failures recognised in the tools' own error output set ``HostInfo.diagnosis``
(:func:`builder.checks.diagnosis.diagnose`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from builder import compat
from builder.checks.host.model import EngineInfo, HostGpu, HostInfo
from builder.checks.host.nvidia import KV_RE

if TYPE_CHECKING:
    from builder.checks.host.accumulator import Accumulator, GpuAccumulator
    from builder.models import Vendor

_GPU_FIELDS = {f.name for f in dataclasses.fields(HostGpu)}


def _vendor(acc: Accumulator) -> Vendor:
    nvidia = "nvidia" in acc.vendor_hint
    amd = "amd" in acc.vendor_hint
    if nvidia and amd:
        return "amd" if any(g.fields.get("gfx_target") or g.fields.get("_series") for g in acc.gpus) else "nvidia"
    return "nvidia" if nvidia else "amd" if amd else "none"


def _derive_nvidia(f: dict[str, Any], derived: list[str]) -> None:
    """Brand, compute capability and architecture of an NVIDIA GPU from its name, where the tools did not say."""
    name = f.get("name")
    if not name:
        return
    if f.get("brand") is None:
        brand = compat.brand_from_name(name)
        if brand:
            f["brand"], f["brand_source"] = compat.product_brand(brand), "name"
            derived.append("brand")
    info = compat.gpu_info(name)
    if info is None or info.vendor != "nvidia":
        return
    if f.get("compute_capability") is None:
        f["compute_capability"] = info.compute_capability
        derived.append("compute_capability")
    if f.get("architecture") is None:
        f["architecture"] = info.architecture
        derived.append("architecture")


def _derive_amd(f: dict[str, Any], derived: list[str]) -> None:
    """Name and gfx target of an AMD GPU from its PCI device id (else the gfx target from its name), where the
    tools did not say."""
    row = compat.amd_device(f.get("device_id"))
    if row is None and f.get("device_id") is None:
        # amd-smi list prints no name: its UUID carries the PCI device id
        row = compat.amd_device_from_uuid(f.get("uuid"))
        if row is not None:
            f["device_id"] = row.device_id
            derived.append("device_id")
    if row is None:
        info = compat.gpu_info(f["name"]) if f.get("name") and f.get("gfx_target") is None else None
        if info is not None and info.vendor == "amd" and info.gfx_target:
            f["gfx_target"] = info.gfx_target
            derived.append("gfx_target")
        return
    if f.get("name") is None:
        f["name"] = row.name
        derived.append("name")
    if f.get("gfx_target") is None:
        f["gfx_target"] = row.gfx_target
        derived.append("gfx_target")


def _gpu(g: GpuAccumulator, vendor: Vendor) -> HostGpu:
    f = {k: v for k, v in g.fields.items() if k in _GPU_FIELDS}
    derived: list[str] = []
    if vendor == "nvidia":
        _derive_nvidia(f, derived)
    elif vendor == "amd":
        _derive_amd(f, derived)
    if g.mig:
        f["mig_devices"] = tuple(g.mig)
        f.setdefault("mig_mode", "Enabled")
    f["derived"] = tuple(derived)
    return HostGpu(**f)


def assemble(acc: Accumulator, *, text_for_diagnosis: str | None = None, vendor: Vendor | None = None) -> HostInfo:
    """The host facts in ``acc``; ``vendor`` when known (else from what was parsed); ``text_for_diagnosis``:
    raw tool output whose error lines are diagnosed (``driver-not-loaded`` ...). Never raises for missing facts."""
    if vendor is None:
        vendor = _vendor(acc)
    ordered = sorted(
        acc.gpus,
        key=lambda g: (g.fields.get("index") is None, g.fields.get("index") or 0, g.fields.get("bus_id") or ""),
    )
    gpus = [_gpu(g, vendor) for g in ordered]
    physical: int | None = len(gpus) or None
    partition_mode = None
    partitions = [g.partition for g in gpus if g.partition]
    if any(g.partition_index is not None for g in gpus):
        physical = sum(1 for g in gpus if g.partition_index == 0)
        partition_mode = partitions[0] if partitions else None
    elif vendor == "amd" and any(g.device_id for g in gpus) and any(g.device_id is None for g in gpus):
        # secondary partitions of a partitioned MI300 report N/A ids
        physical = sum(1 for g in gpus if g.device_id is not None)
        partition_mode = "partitioned (secondary devices report N/A)"
    elif vendor == "amd" and all(g.bus_id for g in gpus) and gpus:
        physical = len({(g.bus_id or "").rsplit(".", 1)[0] for g in gpus})
    notes = list(dict.fromkeys(acc.notes))
    if physical is not None and physical != len(gpus):
        notes.append(f"{len(gpus)} logical devices on {physical} physical GPUs (partitioned)")
    fabric = acc.top.get("fabric_manager")
    if fabric is None:
        states = {g.fabric_state for g in gpus if g.fabric_state}
        if states:
            fabric = sorted(states)[0] if len(states) == 1 else ",".join(sorted(states))
    diagnosis = detail = None
    if text_for_diagnosis:
        diagnosis, detail = diagnose_tool_output(text_for_diagnosis)
        if diagnosis == "driver-not-loaded" and vendor == "none":
            vendor = "nvidia"
    engine = EngineInfo(**acc.engine) if acc.engine else None
    return HostInfo(
        vendor=vendor,
        driver_version=acc.top.get("driver_version"),
        cuda_version=acc.top.get("cuda_version") if vendor == "nvidia" else None,
        smi_version=acc.top.get("smi_version"),
        rocm_version=acc.top.get("rocm_version"),
        gpus=tuple(gpus),
        physical_gpu_count=physical,
        partition_mode=partition_mode,
        fabric_manager=fabric,
        engine=engine,
        diagnosis=diagnosis,
        diagnosis_detail=detail,
        sources=tuple(dict.fromkeys(acc.sources)),
        notes=tuple(notes),
    )


def diagnose_tool_output(text: str) -> tuple[str | None, str | None]:
    """(diagnosis key, summary) of the lines of ``text`` that are not table/tree output; (None, None) when
    nothing is recognised."""
    free = [
        line
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith(("|", "+")) and not KV_RE.match(line)
    ]
    if not free:
        return None, None
    from builder.checks.diagnosis import diagnose  # the rules' patterns: only for error lines

    result = diagnose("\n".join(free))
    if result.key == "unknown":
        return None, None
    return result.key, result.summary


__all__ = ["assemble", "diagnose_tool_output"]
