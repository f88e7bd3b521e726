"""JSON output of the AMD tools: ``rocm-smi --json`` (``{"card0": {"Card Series": ...}, "system": {...}}``) and
``amd-smi static|list --json`` (a list of ``{"gpu": 0, "asic": {...}, "bus": {...}, "driver": {...}}``; from
amd-smi 26 wrapped as ``{"gpu_data": [...]}``, ROCm/rocm-systems#223).

The documents come as tools print them: after a shell prompt or Python warnings, and, when pasted into a bug
report, sometimes cut off. A complete document is read by its structure; a cut one by its complete
``"key": "value"`` pairs per GPU (``"gpu": N`` starts a GPU), so a paste that stops after the bus id still
gives the GPU's name, PCI id and gfx target, never a made-up value. Key names: rocm_smi_lib's ``rocm_smi.py``
(https://github.com/ROCm/rocm_smi_lib) and amd-smi's CLI (https://rocm.docs.amd.com/projects/amdsmi/en/latest/);
recorded outputs in tests/data/host-formats/.
"""

from __future__ import annotations

import json
import re
from typing import Any

from builder import compat
from builder.checks.host.accumulator import Accumulator, GpuAccumulator, normalize_bus_id, read_mib, read_version
from builder.checks.host.model import clean

#: rocm-smi --json keys (lower case) -> HostGpu fields
_ROCM_JSON_KEYS = {
    "card series": "series",
    "card model": "model",
    "device name": "name",
    "marketing name": "name",
    "device id": "device_id",
    "gfx version": "gfx_target",
    "pci bus": "bus_id",
    "vbios version": "vbios",
    "unique id": "uuid",
    "vram total memory (b)": "memory_mib",
    "compute partition": "partition",
}
#: amd-smi JSON keys (in any nested object of one GPU) -> HostGpu fields
_AMDSMI_KEYS = {
    "market_name": "name",
    "device_id": "device_id",
    "target_graphics_version": "gfx_target",
    "bdf": "bus_id",
    "uuid": "uuid",
    "compute_partition": "partition",
}
_PAIR = re.compile(r'"(\w+)"\s*:\s*(?:"([^"]*)"|(-?\d+))')


def find_json(text: str) -> tuple[Any, str] | None:
    """The first JSON document in ``text`` (a line starting with ``{`` or ``[``, after prompts or warnings):
    ``(value, "")`` when it parses, ``(None, rest)`` with the text from its start when it is cut off; None when
    no line starts a JSON document."""
    m = re.search(r"^\s*[\[{]\s*$|^\s*[\[{]\s*[\"{\[\]}\d-]", text, re.M)
    if not m:
        return None
    start = m.start() + (len(m.group(0)) - len(m.group(0).lstrip()))
    rest = text[start:]
    try:
        value, _end = json.JSONDecoder().raw_decode(rest)
    except json.JSONDecodeError:
        return None, rest
    return value, ""


def is_rocm_smi_json(value: object) -> bool:
    """``rocm-smi --json``: an object whose keys are ``cardN`` (and ``system``)."""
    return isinstance(value, dict) and any(re.fullmatch(r"card\d+", str(k)) for k in value)


def amd_smi_gpus(value: object) -> list[dict[str, Any]] | None:
    """The per-GPU objects of ``amd-smi ... --json`` (a list of ``{"gpu": N, ...}`` or ``{"gpu_data": [...]}``);
    None for any other document."""
    items = value.get("gpu_data") if isinstance(value, dict) else value
    if isinstance(items, list) and items and all(isinstance(i, dict) and "gpu" in i for i in items):
        return items
    return None


def read_rocm_smi_json(value: dict[str, Any], acc: Accumulator) -> None:
    """``rocm-smi --json`` cards into ``acc`` (driver version from ``system``)."""
    for card, fields in value.items():
        if not isinstance(fields, dict):
            continue
        if card == "system":
            for k, v in fields.items():
                if str(k).lower() == "driver version":
                    acc.set("driver_version", read_version(str(v)))
            continue
        cm = re.fullmatch(r"card(\d+)", str(card))
        if not cm:
            continue
        gpu = acc.gpu_for(index=int(cm.group(1)))
        gpu.set("index", int(cm.group(1)))
        for k, v in fields.items():
            target = _ROCM_JSON_KEYS.get(str(k).lower())
            if target:
                _set(gpu, target, str(v))
    acc.vendor_hint.add("amd")
    acc.sources.append("rocm-smi --json")


def read_amd_smi_json(items: list[dict[str, Any]], acc: Accumulator) -> None:
    """``amd-smi static|list --json`` GPUs into ``acc``: name, PCI device id, gfx target, bus id, UUID,
    partition and the amdgpu driver version (``"driver": {"name": "amdgpu", "version": ...}``)."""
    for item in items:
        idx = item.get("gpu")
        gpu = acc.gpu_for(index=idx if isinstance(idx, int) else None)
        if isinstance(idx, int):
            gpu.set("index", idx)
        for key, val in _walk(item):
            target = _AMDSMI_KEYS.get(key)
            if target:
                _set(gpu, target, str(val))
        driver = item.get("driver")
        if isinstance(driver, dict) and str(driver.get("name", "amdgpu")).lower() == "amdgpu":
            acc.set("driver_version", read_version(str(driver.get("version") or driver.get("driver_version") or "")))
    acc.vendor_hint.add("amd")
    acc.sources.append("amd-smi --json")


def read_cut_json(rest: str, acc: Accumulator) -> bool:
    """A cut-off amd-smi / rocm-smi JSON paste: the complete ``"key": value`` pairs of each GPU (a GPU starts at
    ``"gpu": N`` or ``"cardN": {``). True when a GPU was read."""
    parts = re.split(r'(?="gpu"\s*:\s*\d+|"card\d+"\s*:\s*\{)', rest)
    found = False
    for part in parts:
        head = re.match(r'"gpu"\s*:\s*(\d+)|"card(\d+)"', part)
        if not head:
            continue
        idx = int(head.group(1) or head.group(2))
        keys = _AMDSMI_KEYS if head.group(1) else {k.replace(" ", "_"): v for k, v in _ROCM_JSON_KEYS.items()}
        pairs = [(k.lower() if head.group(1) else k.lower().replace(" ", "_"), s or n) for k, s, n in _pair_list(part)]
        if not any(k in keys for k, _ in pairs):
            continue
        gpu = acc.gpu_for(index=idx)
        gpu.set("index", idx)
        for k, v in pairs:
            if k in keys:
                _set(gpu, keys[k], v)
        found = True
    if found:
        acc.vendor_hint.add("amd")
        acc.sources.append("amd-smi/rocm-smi JSON (cut off)")
    return found


def _pair_list(part: str) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    for m in _PAIR.finditer(part):
        key, text_value, number = m.group(1), m.group(2), m.group(3)
        out.append((key, text_value or "", number or ""))
    # rocm-smi keys have spaces: "Card Series": "..."
    for m in re.finditer(r'"([^"]+)"\s*:\s*"([^"]*)"', part):
        if " " in m.group(1):
            out.append((m.group(1), m.group(2), ""))
    return out


def _walk(obj: object) -> list[tuple[str, Any]]:
    """Every (key, scalar) of nested objects, depth first (amd-smi groups fields: asic, bus, board ...)."""
    out: list[tuple[str, Any]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, dict | list):
                out.extend(_walk(v))
            else:
                out.append((str(k).lower(), v))
    elif isinstance(obj, list):
        for v in obj:
            out.extend(_walk(v))
    return out


def _set(gpu: GpuAccumulator, target: str, value: str) -> None:
    v = clean(value)
    if v is None:
        return
    if target == "series":
        # rocm-smi prints a name ("AMD INSTINCT MI200 (MCM) OAM ...", "Radeon RX 7900 XT") or, in old versions,
        # the PCI device id ("0x738c")
        if re.fullmatch(r"0x[0-9a-fA-F]{4}", v):
            if compat.amd_device(v):
                gpu.set("device_id", v.lower())
            return
        gpu.set("name", v)
        return
    if target == "model":
        # rocm-smi 6 prints the PCI device id here, older versions the subsystem id: only a listed device id
        if re.fullmatch(r"0x[0-9a-fA-F]{4}", v) and compat.amd_device(v):
            gpu.set("device_id", v.lower())
        return
    if target == "gfx_target":
        gpu.set("gfx_target", compat.normalize_gfx(v))
    elif target == "bus_id":
        gpu.set("bus_id", normalize_bus_id(v))
    elif target == "memory_mib":
        gpu.set("memory_mib", read_mib(v))
    elif target == "device_id":
        gpu.set("device_id", v.lower())
    else:
        gpu.set(target, v)


__all__ = [
    "amd_smi_gpus",
    "find_json",
    "is_rocm_smi_json",
    "read_amd_smi_json",
    "read_cut_json",
    "read_rocm_smi_json",
]
