"""AMD tool parsers: rocm-smi (``GPU[n] : key: value`` lines, ``--csv``, "Concise Info" tables including the
partition layout), ``amd-smi version``/``static`` and ``rocminfo`` agents (ROCm documentation:
https://rocm.docs.amd.com/projects/rocm_smi_lib/en/latest/, https://rocm.docs.amd.com/projects/amdsmi/en/latest/).
"""

from __future__ import annotations

import re
from typing import Any

from builder import compat
from builder.checks.host.accumulator import (
    BUS_RE,
    Accumulator,
    GpuAccumulator,
    normalize_bus_id,
    read_mib,
    read_version,
    strip_transcript,
)
from builder.checks.host.model import UNKNOWN_VALUES, clean

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
    for reader in (_read_key_lines, _read_csv, _read_concise, _read_rocminfo, _read_amdsmi_static, _read_amdsmi_table):
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
            acc.set("driver_version", read_version(m.group(1)))
            found = True
        m = re.search(r"ROCm version:\s*([^|\s]+)", line)
        if m:
            acc.set("rocm_version", clean(m.group(1)))
        m = re.search(r"amdgpu version:\s*([^|\s]+)", line)
        if m:
            _driver(acc, m.group(1), "amd-smi amdgpu version")
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
                acc.set("driver_version", read_version(value))
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
                    acc.set("driver_version", read_version(row["driver version"]))
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
        if all(c.lower() in UNKNOWN_VALUES or c in ("0%", "0.0%") for c in s.split()[1:]):
            # rocm-smi walks every DRM card: a row with no readable value is a non-AMD GPU (an integrated
            # Intel GPU; https://github.com/ROCm/ROC-smi/issues/40)
            acc.notes.append(f"rocm-smi row {idx} has no readable values: a non-AMD DRM device, not counted")
            continue
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
    """amd-smi static / list blocks (``GPU: n`` then ``KEY: value`` lines); other devices amd-smi lists (``AI_NIC:``,
    ``CPU:``) end a GPU's block and are never GPUs."""
    found = False
    for gpu_text in re.split(r"(?m)^GPU:\s*", "\n".join(lines))[1:]:
        block = re.split(r"(?m)^[A-Z][A-Z_]*:\s*\d+\s*$", gpu_text, maxsplit=1)[0]
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
            ("UUID", "uuid"),
        ):
            km = re.search(rf"^\s*{key}:\s*(.+)$", block, re.M)
            if km:
                raw = km.group(1)
                value = (
                    normalize_bus_id(raw)
                    if target == "bus_id"
                    else compat.normalize_gfx(raw)
                    if target == "gfx_target"
                    else clean(raw)
                )
                gpu.set(target, value.lower() if target == "device_id" and value else value)
        dm = re.search(r"^\s*DRIVER:\s*\n\s*NAME:\s*amdgpu\s*\n\s*VERSION:\s*(\S+)", block, re.M)
        if dm:
            _driver(acc, dm.group(1), "amd-smi static DRIVER VERSION")
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
        # rocm-smi 4.x prints the PCI device id as the "series" ("0x738c"): use it when it is a listed id
        if v and re.fullmatch(r"0x[0-9a-fA-F]{4}", v) and compat.amd_device(v):
            gpu.set("device_id", v.lower())
        return
    if target == "_model":
        # rocm-smi 6 prints the PCI device id as the "model", older versions the subsystem id
        if v and re.fullmatch(r"0x[0-9a-fA-F]{4}", v) and compat.amd_device(v):
            gpu.set("device_id", v.lower())
        elif v and not re.fullmatch(r"0x[0-9a-fA-F]+", v):
            gpu.set("name", v if v.startswith("AMD") else f"AMD {v}", override=False)
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
    elif target == "gfx_target":
        v = compat.normalize_gfx(value)
    gpu.set(target, v)


def _driver(acc: Accumulator, raw: str, where: str) -> None:
    """The amdgpu driver version, or a note when the tool printed something that is not a version."""
    version = read_version(raw)
    if version:
        acc.set("driver_version", version)
    elif clean(raw):
        acc.notes.append(f"{where} {raw[:40]!r} is not a version (ignored)")


_TABLE_ROW1 = re.compile(r"^\|\s*(" + BUS_RE.pattern[3:-3] + r")\s+(.*?)\s*\|")
_TABLE_ROW2 = re.compile(r"^\|\s*(\d+)\s+(\d+|N/A)\s+(\d+|N/A)\s+(\S+)\s*\|.*?(\d+|N/A)/(\d+)\s*MB\s*\|")


def _read_amdsmi_table(lines: list[str], acc: Accumulator) -> bool:
    """The ``amd-smi`` default table (amd-smi 26+, ROCm 7): per GPU a row ``| BDF  GPU-Name | ...`` and a row
    ``| GPU HIP-ID OAM-ID Partition-Mode | ... used/total MB |``; the header's ``amdgpu version`` and
    ``ROCm version`` are read by :func:`_read_key_lines`."""
    found = False
    in_table = False
    pending: GpuAccumulator | None = None
    for line in lines:
        s = line.strip()
        if re.search(r"\bBDF\s+GPU-Name\b", s):
            in_table = True
            continue
        if not in_table:
            continue
        if s.startswith("| Processes:"):
            break
        m1 = _TABLE_ROW1.match(s)
        if m1:
            bus = normalize_bus_id(m1.group(1))
            pending = acc.gpu_for(bus=bus)
            name = clean(m1.group(2))
            if name and name.startswith("..."):
                pending.set("name_truncated", True)
                name = name.lstrip(".")
            if name and re.fullmatch(r"0x[0-9a-fA-F]{4}", name):
                pending.set("device_id", name.lower())
            elif name:
                pending.set("name", name)
            acc.vendor_hint.add("amd")
            found = True
            continue
        m2 = _TABLE_ROW2.match(s)
        if m2 and pending is not None:
            pending.set("index", int(m2.group(1)))
            mode = clean(m2.group(4))
            if mode:
                pending.set("partition", mode.split("/")[0])
            pending.set("memory_mib", read_mib(m2.group(6) + " MB"))
            pending = None
    return found
