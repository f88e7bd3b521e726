"""AMD tool parsers: rocm-smi (``GPU[n] : key: value`` lines, ``--csv``, "Concise Info" tables including the
partition layout), ``amd-smi version``/``static`` and ``rocminfo`` agents (ROCm documentation:
https://rocm.docs.amd.com/projects/rocm_smi_lib/en/latest/, https://rocm.docs.amd.com/projects/amdsmi/en/latest/).
"""

from __future__ import annotations

import re
from typing import Any

from builder.checks.host.accumulator import (
    Accumulator,
    GpuAccumulator,
    normalize_bus_id,
    read_mib,
    strip_transcript,
)
from builder.checks.host.model import clean

_ROCM_LINE = re.compile(r"GPU\[(\d+)\]\s*:\s*([^:]+?)\s*:\s*(.*)$")
_ROCM_KEYS = {
    "card series": "_series",
    "card model": "_model",
    "card sku": "_sku",
    "device name": "name",
    "marketing name": "name",
    "gfx version": "gfx_target",
    "vbios version": "vbios",
    "pci bus": "bus_id",
    "device id": "device_id",
    "gpu id": "device_id",
    "compute partition": "partition",
    "memory partition": "_mem_partition",
    "vram total memory (b)": "memory_mib",
    "unique id": "uuid",
}


def _amd_name(series: str | None) -> str | None:
    s = clean(series)
    if s is None or re.fullmatch(r"0x[0-9a-fA-F]+", s):
        return None
    inner = re.search(r"\[((?:AMD )?(?:Instinct|Radeon)[^\]]*)\]", s)
    if inner:
        name = inner.group(1)
        return name if name.startswith("AMD") else "AMD " + name
    return s


def parse_rocm(text: str, acc: Accumulator | None = None) -> Accumulator:
    """Parse rocm-smi (``GPU[n] : key: value`` lines, ``--csv``, "Concise Info" tables including
    the partition layout), ``amd-smi version``/``static`` and ``rocminfo`` agents."""
    acc = acc or Accumulator()
    lines = strip_transcript(text.splitlines())
    # every reader runs (each may add facts); ``found`` when any of them read something
    found = False
    for reader in (_read_key_lines, _read_csv, _read_concise, _read_rocminfo, _read_amdsmi_static):
        found = reader(lines, acc) or found
    if found:
        acc.sources.append("rocm-smi/amd-smi")
    return acc


def _read_key_lines(lines: list[str], acc: Accumulator) -> bool:
    """Version lines and ``GPU[n] : key: value`` lines (rocm-smi, amd-smi version)."""
    found = False
    for line in lines:
        if re.search(r"ROCm System Management Interface|rocm-smi|AMDSMI|amd-smi|rocminfo|ROCk module", line):
            acc.vendor_hint.add("amd")
        m = re.search(r"^\s*Driver version:\s*(\S+)", line, re.I)
        if m:
            acc.set("driver_version", clean(m.group(1)))
            found = True
        m = re.search(r"ROCm version:\s*([^|\s]+)", line)
        if m:
            acc.set("rocm_version", clean(m.group(1)))
        m = re.search(r"amdgpu version:\s*([^|\s]+)", line)
        if m:
            acc.set("driver_version", clean(m.group(1)))
            found = True
        lm = _ROCM_LINE.search(line)
        if lm:
            idx = int(lm.group(1))
            key = lm.group(2).strip().lower()
            value = lm.group(3)
            gpu = acc.gpu_for(index=idx)
            gpu.set("index", idx)
            _rocm_set(gpu, key, value)
            acc.vendor_hint.add("amd")
            found = True
            if key == "driver version":
                acc.set("driver_version", clean(value))
    return found


def _read_csv(lines: list[str], acc: Accumulator) -> bool:
    """rocm-smi --csv: header "device,...", rows "card0,..." / "cardsystem,..."."""
    found = False
    header: list[str] | None = None
    for line in lines:
        s = line.strip()
        if s.lower().startswith("device,"):
            header = [h.strip().lower() for h in s.split(",")]
            continue
        if header and re.match(r"^card(\d+|system),", s):
            values = [v.strip() for v in s.split(",")]
            if len(values) < len(header):
                continue
            row = dict(zip(header, values[: len(header)], strict=True))
            if row["device"] == "cardsystem":
                if "driver version" in row:
                    acc.set("driver_version", clean(row["driver version"]))
                    found = True
                continue
            idx = int(row["device"][4:])
            gpu = acc.gpu_for(index=idx)
            gpu.set("index", idx)
            for k, v in row.items():
                _rocm_set(gpu, k, v)
            acc.vendor_hint.add("amd")
            found = True
        elif header and not s:
            header = None
    return found


def _read_concise(lines: list[str], acc: Accumulator) -> bool:
    """rocm-smi "Concise Info" tables, including the partition layout and device id columns."""
    found = False
    cols: list[str] | None = None
    for line in lines:
        s = line.strip()
        if re.match(r"^(GPU|Device)\s+.*(Temp|SCLK|VRAM)", s):
            cols = s.split()
            continue
        if cols is None:
            continue
        if s.startswith("="):
            if cols and "rows" in cols:
                cols = None
            continue
        m = re.match(r"^(\d+)\s+", s)
        if not m:
            continue
        idx = int(m.group(1))
        gpu = acc.gpu_for(index=idx)
        gpu.set("index", idx)
        pm = re.search(r"\b(NPS\d|N/A),\s*(SPX|DPX|TPX|QPX|CPX|N/A),\s*(\d+)\b", s)
        if pm:
            gpu.set("partition", clean(pm.group(2)))
            gpu.set("partition_index", int(pm.group(3)))
        dm = re.search(r"\b(0x[0-9a-fA-F]{4}),\s*\d+", s)
        if dm:
            gpu.set("device_id", dm.group(1).lower())
        acc.vendor_hint.add("amd")
        found = True
    return found


def _read_rocminfo(lines: list[str], acc: Accumulator) -> bool:
    """rocminfo GPU agents (``Name: gfx...``, ``Marketing Name``), matched to GPUs by position."""
    found = False
    for block in re.split(r"\*{5,}", "\n".join(lines)):
        if re.search(r"Device Type:\s*GPU", block):
            name = re.search(r"^\s*Name:\s*(gfx\w+)", block, re.M)
            market = re.search(r"Marketing Name:\s*(.+)", block)
            if name:
                pos = sum(1 for g in acc.gpus if g.fields.get("_rocminfo"))
                gpu = acc.gpu_for(position=pos) if pos < len(acc.gpus) else acc.gpu_for()
                gpu.set("_rocminfo", True)
                gpu.set("gfx_target", name.group(1), override=True)
                if market:
                    gpu.set("name", clean(market.group(1)))
                acc.vendor_hint.add("amd")
                found = True
    return found


def _read_amdsmi_static(lines: list[str], acc: Accumulator) -> bool:
    """amd-smi static blocks (``GPU: n`` then ``KEY: value`` lines)."""
    found = False
    for block in re.split(r"(?m)^GPU:\s*", "\n".join(lines))[1:]:
        im = re.match(r"(\d+)", block)
        if not im:
            continue
        idx = int(im.group(1))
        gpu = acc.gpu_for(index=idx)
        gpu.set("index", idx)
        for key, target in (
            ("MARKET_NAME", "name"),
            ("TARGET_GRAPHICS_VERSION", "gfx_target"),
            ("BDF", "bus_id"),
            ("DEVICE_ID", "device_id"),
            ("COMPUTE_PARTITION", "partition"),
        ):
            km = re.search(rf"^\s*{key}:\s*(.+)$", block, re.M)
            if km:
                gpu.set(target, normalize_bus_id(km.group(1)) if target == "bus_id" else clean(km.group(1)))
        acc.vendor_hint.add("amd")
        found = True
    return found


def _rocm_set(gpu: GpuAccumulator, key: str, value: str) -> None:
    target = _ROCM_KEYS.get(key)
    if target is None:
        return
    v: Any = clean(value)
    if target == "_series":
        gpu.set("name", _amd_name(value))
        gpu.set("_series", v)
        return
    if target.startswith("_"):
        gpu.set(target, v)
        return
    if target == "bus_id":
        v = normalize_bus_id(value)
    elif target == "memory_mib":
        v = read_mib(value)
    elif target == "device_id" and v:
        v = v.lower()
    gpu.set(target, v)
