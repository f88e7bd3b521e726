"""nvidia-smi parsers: the default table (every layout), ``-q``, ``-L``, ``-q -x`` (XML) and
``--query-gpu=... --format=csv``.

Parsers work on the *kind* of output (``key : value`` trees, ``|``-separated table cells, CSV headers),
not on one sample's text. Facts (docs/checks.md): "CUDA Version" is the newest CUDA the *driver* supports;
from branch R610 the header reads ``KMD Version`` / ``CUDA UMD Version``; the banner ``NVIDIA-SMI x`` is
the tool's version and may differ from the driver's, so the driver field wins (nvidia-smi documentation:
https://docs.nvidia.com/deploy/nvidia-smi/index.html).
"""

from __future__ import annotations

import dataclasses
import re

from builder.checks.host.accumulator import (
    BUS_RE,
    MEM_RE,
    Accumulator,
    GpuAccumulator,
    normalize_bus_id,
    read_int,
    read_mib,
    read_version,
    strip_transcript,
)
from builder.checks.host.model import MigDevice, clean

_HDR_DRIVER = re.compile(r"\b(?:Driver|KMD)\s+Version\s*:\s*([^\s|]+)", re.I)
_HDR_CUDA = re.compile(r"\bCUDA\s+(?:UMD\s+)?Version\s*:\s*(\[N/A\]|Not Found|[^\s|]+)", re.I)
_HDR_SMI = re.compile(r"NVIDIA-SMI\s+(?:version\s*:\s*)?(\d[\w.]*)", re.I)
_GPU_ROW = re.compile(r"^\s*(\d+)\s+(\S.*?)(?:\s+(On|Off|N/A|WDDM|TCC))?\s*$")
_MIG_ROW = re.compile(r"^\s*(\d+)\s+(\d+|N/A)\s+(\d+|N/A)\s+(\d+|N/A)\s*$")


def parse_nvidia_smi_table(text: str, acc: Accumulator | None = None) -> Accumulator:
    """Parse nvidia-smi's default output (any layout: legacy 80-column, R5xx 89-column, R580,
    R610 ``KMD Version``), including the "MIG devices" table. Returns the accumulator."""
    acc = acc or Accumulator()
    lines = strip_transcript(text.splitlines())
    found = _read_table_header(lines, acc)
    walk = _TableWalk(acc)
    for line in lines:
        walk.line(line)
    walk.close_block()
    if found or walk.found:
        acc.sources.append("nvidia-smi")
    return acc


def _read_table_header(lines: list[str], acc: Accumulator) -> bool:
    """The banner line(s): driver (``Driver``/``KMD Version``), CUDA (``CUDA``/``CUDA UMD Version``), the
    tool's version. True when a driver version was read."""
    found = False
    for line in lines:
        if "NVIDIA-SMI" in line or re.search(r"(Driver|KMD) Version", line):
            d = _HDR_DRIVER.search(line)
            c = _HDR_CUDA.search(line)
            s = _HDR_SMI.search(line)
            if (d and "|" in line) or (d and "NVIDIA-SMI" in line):
                acc.set("driver_version", read_version(d.group(1)))
                found = True
                if c:
                    cv = read_version(c.group(1))
                    acc.set("cuda_version", cv)
                    if cv is None:
                        acc.notes.append(f"nvidia-smi reports CUDA Version {c.group(1).strip()!r}: unknown")
                if s:
                    acc.set("smi_version", s.group(1))
    return found


def _table_section(line: str, stripped: str) -> str | None:
    """The table a header line opens: "gpu", "mig" or "proc"; None for any other line."""
    if "Bus-Id" in line and stripped.startswith("|"):
        return "gpu"
    if re.search(r"MIG devices", line):
        return "mig"
    if re.search(r"\bProcesses\b", line) and stripped.startswith("|"):
        return "proc"
    return None


@dataclasses.dataclass
class _TableWalk:
    """One pass over nvidia-smi's ``|``-bordered tables: the current table (``state``: "gpu" | "mig" |
    "proc" | None), whether its header is being read, the GPU block being read and its last row's cells."""

    acc: Accumulator
    state: str | None = None
    in_header: bool = False
    block: GpuAccumulator | None = None
    last_cells: list[str] = dataclasses.field(default_factory=list)
    found: bool = False

    def line(self, line: str) -> None:
        stripped = line.strip()
        if not stripped:
            return
        section = _table_section(line, stripped)
        if section is not None:
            self.state, self.in_header = section, True
            return
        if stripped.startswith(("|=", "+=")):
            self.in_header = False
            return
        if stripped.startswith("+") or re.match(r"^\|[-+ ]*-{5,}", stripped):
            # row separator: the GPU block's last row is complete; keep state
            self.close_block()
            return
        if not stripped.startswith("|") or self.in_header or self.state is None:
            return
        cells = [c.strip() for c in stripped.strip("|").split("|")]
        if self.state == "gpu":
            self._gpu_row(cells)
        elif self.state == "mig":
            self._mig_row(cells)

    def close_block(self) -> None:
        """Read "MIG M." from the GPU block's last row (once)."""
        if self.state == "gpu" and self.block is not None and self.last_cells:
            _close_gpu_block(self.block, self.last_cells)
            self.last_cells = []

    def _gpu_row(self, cells: list[str]) -> None:
        m = _GPU_ROW.match(cells[0]) if cells else None
        if m and (len(cells) < 2 or BUS_RE.search(cells[1]) or "..." in cells[0] or len(cells) >= 3):
            self.close_block()
            idx = int(m.group(1))
            bm = BUS_RE.search(cells[1]) if len(cells) > 1 else None
            bus = bm.group(1) if bm else None
            block = self.acc.gpu_for(index=idx, bus=bus)
            block.set("index", idx)
            name = m.group(2).strip()
            if name.endswith("..."):
                block.set("name_truncated", True)
                name = name[:-3].rstrip()
            block.set("name", clean(name))
            self.acc.vendor_hint.add("nvidia")
            self.found = True
            self.block = block
            self.last_cells = cells
        elif self.block is not None:
            mem = MEM_RE.search(" ".join(cells))
            if mem:
                self.block.set("memory_mib", int(mem.group(2)))
            self.last_cells = cells

    def _mig_row(self, cells: list[str]) -> None:
        m = _MIG_ROW.match(cells[0]) if cells else None
        if not m:
            return
        mem = MEM_RE.search(cells[1]) if len(cells) > 1 else None
        index = int(m.group(1))
        device = MigDevice(
            index, read_int(m.group(2)), read_int(m.group(3)), read_int(m.group(4)), int(mem.group(2)) if mem else None
        )
        gpu = self.acc.gpu_for(index=index)
        gpu.set("index", index)
        gpu.set("mig_mode", "Enabled")
        gpu.mig.append(device)
        self.acc.vendor_hint.add("nvidia")
        self.found = True


def _close_gpu_block(block: GpuAccumulator, cells: list[str]) -> None:
    """The last row of a GPU block holds "MIG M." in its last cell (Enabled/Disabled/N/A)."""
    if not cells:
        return
    last = cells[-1].strip()
    if last in ("Enabled", "Disabled"):
        block.set("mig_mode", last)


KV_RE = re.compile(r"^(\s*)(\S.*?)\s+:\s?(.*)$")
_Q_GPU = re.compile(r"^\s*GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_Q_GPU_KEYS = {
    "product name": "name",
    "product brand": "brand",
    "product architecture": "architecture",
    "vbios version": "vbios",
    "gsp firmware version": "firmware",
    "gpu uuid": "uuid",
    "mig mode/current": "mig_mode",
    "fb memory usage/total": "memory_mib",
    "pci/bus id": "bus_id",
    "fabric/state": "fabric_state",
    "fabric/status": "fabric_status",
    "gpu virtualization mode/virtualization mode": "virtualization",
    "minor number": "_minor",
    "compute capability": "compute_capability",
    "serial number": "_serial",
}


_Q_HOST_PATHS = frozenset(
    {"driver version", "kmd version", "cuda version", "cuda umd version", "nvidia-smi version", "attached gpus"}
)


def _q_host_field(acc: Accumulator, path: str, value: str) -> bool:
    """One host-level ``-q`` field (a path in ``_Q_HOST_PATHS``); True for the driver and CUDA versions
    (they mark the text as ``nvidia-smi -q`` output)."""
    if path in ("driver version", "kmd version"):
        acc.set("driver_version", read_version(value))
        return True
    if path in ("cuda version", "cuda umd version"):
        cv = read_version(value)
        acc.set("cuda_version", cv)
        if cv is None and clean(value) is None:
            acc.notes.append(f"nvidia-smi -q reports CUDA Version {value.strip()!r}: unknown")
        return True
    if path == "nvidia-smi version":
        acc.set("smi_version", read_version(value))
    else:  # attached gpus
        acc.set("_attached", read_int(value))
    return False


def _q_gpu_field(gpu: GpuAccumulator, target: str, value: str) -> None:
    """One GPU field of ``-q`` (``target`` from ``_Q_GPU_KEYS``); brand and name override other sources."""
    v: object = clean(value)
    if target == "memory_mib":
        v = read_mib(value)
    elif target == "bus_id":
        v = normalize_bus_id(value)
    elif target == "_minor":
        target, v = "index", read_int(value)
    elif target == "brand" and v is not None:
        gpu.set("brand_source", "nvidia-smi -q")
    if not target.startswith("_"):
        gpu.set(target, v, override=target in ("brand", "name"))


def parse_nvidia_smi_q(text: str, acc: Accumulator | None = None) -> Accumulator:
    """Parse ``nvidia-smi -q`` (``key : value`` tree by indentation). Fragments (no ``GPU``
    header) are attributed to one implicit GPU."""
    acc = acc or Accumulator()
    stack: list[tuple[int, str]] = []
    gpu: GpuAccumulator | None = None
    found = False
    for raw in strip_transcript(text.splitlines()):
        if not raw.strip() or raw.strip().startswith("="):
            continue
        gm = _Q_GPU.match(raw)
        if gm:
            gpu = acc.gpu_for(bus=gm.group(1))
            stack = []
            found = True
            acc.vendor_hint.add("nvidia")
            continue
        indent = len(raw) - len(raw.lstrip(" \t"))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        m = KV_RE.match(raw)
        if not m:
            if indent > 0:  # sections are indented; column-0 text is prompts, comments, banners
                stack.append((indent, raw.strip()))
            continue
        key = m.group(2).strip()
        value = m.group(3)
        path = "/".join([s for _, s in stack] + [key]).lower()
        if path in _Q_HOST_PATHS:
            found = _q_host_field(acc, path, value) or found
        elif path in _Q_GPU_KEYS or key.lower() in ("product name", "vbios version", "gpu uuid"):
            target = _Q_GPU_KEYS.get(path) or _Q_GPU_KEYS[key.lower()]
            if gpu is None:
                gpu = acc.gpu_for(position=0) if acc.gpus else acc.gpu_for()
                acc.notes.append("nvidia-smi -q fragment without a GPU header: fields attributed to one GPU")
            _q_gpu_field(gpu, target, value)
            found = True
            acc.vendor_hint.add("nvidia")
    if found:
        acc.sources.append("nvidia-smi -q")
    return acc


# --------------------------------------------------------------------------------------------
# nvidia-smi -L
# --------------------------------------------------------------------------------------------

_L_GPU = re.compile(r"^\s*GPU (\d+): (.+?) \(UUID: (GPU-[^)\s]+)\)")
_L_MIG = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)\s]+)\)")


def parse_nvidia_smi_list(text: str, acc: Accumulator | None = None) -> Accumulator:
    """Parse ``nvidia-smi -L`` (``GPU 0: NAME (UUID: GPU-...)`` and indented ``MIG`` lines)."""
    acc = acc or Accumulator()
    gpu: GpuAccumulator | None = None
    found = False
    for line in text.splitlines():
        m = _L_GPU.match(line)
        if m:
            idx = int(m.group(1))
            gpu = acc.gpu_for(index=idx)
            gpu.set("index", idx)
            gpu.set("name", clean(m.group(2)))
            gpu.set("uuid", m.group(3))
            found = True
            continue
        mm = _L_MIG.match(line)
        if mm and gpu is not None:
            gpu.set("mig_mode", "Enabled")
            gpu.mig.append(MigDevice(int(gpu.fields.get("index") or 0), None, None, int(mm.group(2)), None))
    if found:
        acc.vendor_hint.add("nvidia")
        acc.sources.append("nvidia-smi -L")
    return acc


# --------------------------------------------------------------------------------------------
# nvidia-smi -q -x (XML)
# --------------------------------------------------------------------------------------------

_XML_GPU = {
    "product_name": "name",
    "product_brand": "brand",
    "product_architecture": "architecture",
    "vbios_version": "vbios",
    "gsp_firmware_version": "firmware",
    "uuid": "uuid",
    "minor_number": "index",
    "mig_mode/current_mig": "mig_mode",
    "fb_memory_usage/total": "memory_mib",
    "fabric/state": "fabric_state",
    "fabric/status": "fabric_status",
    "gpu_virtualization_mode/virtualization_mode": "virtualization",
}


def parse_nvidia_smi_xml(text: str, acc: Accumulator | None = None) -> Accumulator:
    """Parse ``nvidia-smi -q -x`` (``<nvidia_smi_log>``); HTML-escaped copies are unescaped."""
    import html
    import xml.etree.ElementTree as ET

    acc = acc or Accumulator()
    start = text.find("<nvidia_smi_log")
    if start < 0:
        unescaped = html.unescape(text.replace("&nbsp;", " "))
        start = unescaped.find("<nvidia_smi_log")
        if start < 0:
            return acc
        text = unescaped
    end = text.find("</nvidia_smi_log>", start)
    body = text[start : end + len("</nvidia_smi_log>")] if end > 0 else text[start:]
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        # truncated copies: keep what the regexes can read
        for tag, key in (("driver_version", "driver_version"), ("cuda_version", "cuda_version")):
            m = re.search(rf"<{tag}>([^<]*)</{tag}>", body)
            if m:
                acc.set(key, read_version(m.group(1)))
        names = re.findall(r"<product_name>([^<]*)</product_name>", body)
        for i, n in enumerate(names):
            g = acc.gpu_for(position=i) if i < len(acc.gpus) else acc.gpu_for()
            g.set("name", clean(n))
        brands = re.findall(r"<product_brand>([^<]*)</product_brand>", body)
        for i, b in enumerate(brands[: len(acc.gpus)]):
            acc.gpus[i].set("brand", clean(b), override=True)
            acc.gpus[i].set("brand_source", "nvidia-smi -q")
        acc.vendor_hint.add("nvidia")
        acc.sources.append("nvidia-smi -q -x (partial)")
        return acc
    acc.set("driver_version", read_version(root.findtext("driver_version")))
    acc.set("cuda_version", read_version(root.findtext("cuda_version")))
    for gel in root.findall("gpu"):
        gpu = acc.gpu_for(bus=gel.get("id"))
        for path, target in _XML_GPU.items():
            raw = gel.findtext(path)
            v: object = clean(raw)
            if target == "memory_mib":
                v = read_mib(raw)
            elif target == "index":
                v = read_int(raw)
            elif target == "brand" and v is not None:
                gpu.set("brand_source", "nvidia-smi -q")
            gpu.set(target, v, override=target in ("brand", "name"))
    acc.vendor_hint.add("nvidia")
    acc.sources.append("nvidia-smi -q -x")
    return acc


# --------------------------------------------------------------------------------------------
# nvidia-smi --query-gpu=... --format=csv
# --------------------------------------------------------------------------------------------

_CSV_FIELDS = {
    "index": "index",
    "name": "name",
    "gpu_name": "name",
    "driver_version": "_driver",
    "compute_cap": "compute_capability",
    "pci.bus_id": "bus_id",
    "gpu_bus_id": "bus_id",
    "memory.total": "memory_mib",
    "vbios_version": "vbios",
    "uuid": "uuid",
    "gpu_uuid": "uuid",
    "mig.mode.current": "mig_mode",
    "serial": "_serial",
    "inforom.img": "_inforom",
    "pci.device_id": "device_id",
    "gpu_serial": "_serial",
}
_CSV_TOKEN = re.compile(r"^[a-z][a-z0-9_.]*(\s*\[[^\]]+\])?$")


_QUERY_CMD = re.compile(r"--query-gpu[= ]([\w.,]+).*--format[= ]csv,([\w,]*noheader[\w,]*)")
_GPU_NAME_VALUE = re.compile(r"^(?:NVIDIA|Tesla|Quadro|GeForce|TITAN|GRID|RTX)\b", re.I)
_UUID_VALUE = re.compile(r"^GPU-[0-9a-f-]{8,}$", re.I)
_DRIVER_VALUE = re.compile(r"^\d{3}\.\d{2,3}(?:\.\d{2})?$")


def _csv_row(acc: Accumulator, names: list[str], values: list[str], position: int) -> None:
    """One CSV row of ``--query-gpu`` (field ``names`` -> ``values``) into the GPU it describes."""
    row = dict(zip(names, values, strict=True))
    idx = read_int(row.get("index")) if "index" in row else None
    bus = row.get("pci.bus_id") or row.get("gpu_bus_id")
    gpu = acc.gpu_for(index=idx, bus=clean(bus), position=position if idx is None and not bus else None)
    for name, value in row.items():
        target = _CSV_FIELDS.get(name)
        if target is None:
            continue
        v: object = clean(value)
        if target == "_driver":
            acc.set("driver_version", read_version(value))
            continue
        if target.startswith("_"):
            continue
        if target == "index":
            v = read_int(value)
        elif target == "memory_mib":
            v = read_mib(value)
        elif target == "bus_id":
            v = normalize_bus_id(value)
        elif target == "name" and isinstance(v, str) and v.endswith("..."):
            gpu.set("name_truncated", True)
        gpu.set(target, v, override=target == "name")


def _read_noheader(lines: list[str], acc: Accumulator) -> bool:
    """``--format=csv,noheader[,nounits]`` rows: the field names come from the command line when the
    transcript shows it (``nvidia-smi --query-gpu=a,b --format=csv,noheader``); without it, a row is read
    only by the shape of its values (a GPU name, a ``GPU-`` UUID, a PCI bus id, a driver version), never guessed
    from bare numbers."""
    found = False
    i = 0
    while i < len(lines):
        cmd = _QUERY_CMD.search(lines[i])
        if cmd:
            names = [n.strip() for n in cmd.group(1).split(",") if n.strip()]
            i, rows = _csv_rows(acc, names, lines, i + 1)
            found = found or rows > 0
            continue
        i += 1
    if found:
        return True
    position = 0
    for line in lines:
        s = line.strip()
        if s.startswith(("|", "+", "#", "$")) or ", " not in s:
            continue
        values = [clean(v) for v in s.split(",")]
        shapes: dict[str, str] = {}
        for v in values:
            if v is None:
                continue
            if _UUID_VALUE.match(v):
                shapes["uuid"] = v
            elif BUS_RE.fullmatch(v):
                shapes["pci.bus_id"] = v
            elif _DRIVER_VALUE.match(v):
                shapes["driver_version"] = v
            elif _GPU_NAME_VALUE.match(v) and "name" not in shapes:
                shapes["name"] = v
        if not ({"name", "uuid"} & shapes.keys()):
            continue
        _csv_row(acc, list(shapes), list(shapes.values()), position)
        position += 1
        found = True
    return found


def _csv_rows(acc: Accumulator, names: list[str], lines: list[str], i: int) -> tuple[int, int]:
    """Read the rows of one CSV section from ``lines[i]`` on (each non-blank line with one value per
    name in ``names``) into ``acc``; returns (the index of the first line after them, rows read)."""
    position = 0
    while i < len(lines) and lines[i].strip() and len(lines[i].split(",")) == len(names):
        _csv_row(acc, names, [v.strip() for v in lines[i].split(",")], position)
        position += 1
        i += 1
    return i, position


def parse_nvidia_smi_csv(text: str, acc: Accumulator | None = None) -> Accumulator:
    """Parse ``nvidia-smi --query-gpu=FIELDS --format=csv`` output (with header, or ``noheader``/``nounits``:
    :func:`_read_noheader`; several sections allowed). Rows are matched to GPUs by ``pci.bus_id``, else
    ``index``, else order. A field nvidia-smi refuses (``Field "x" is not a valid field to query``) is noted.
    Units: ``memory.total`` in MiB with or without the `` MiB`` suffix (nvidia-smi ``--help-query-gpu``)."""
    acc = acc or Accumulator()
    lines = strip_transcript(text.splitlines())
    i = 0
    found = False
    while i < len(lines):
        line = lines[i].strip()
        bad = re.search(r'Field "([^"]+)" is not a valid field to query', line)
        if bad:
            acc.notes.append(f"nvidia-smi does not know the query field {bad.group(1)!r} (older driver)")
            acc.vendor_hint.add("nvidia")
        tokens = [t.strip() for t in line.split(",")]
        if tokens and all(_CSV_TOKEN.match(t) for t in tokens) and any(t.split(" [")[0] in _CSV_FIELDS for t in tokens):
            names = [t.split(" [")[0].strip() for t in tokens]
            i, rows = _csv_rows(acc, names, lines, i + 1)
            if rows:
                found = True
                acc.vendor_hint.add("nvidia")
            continue
        i += 1
    if not found and _read_noheader(lines, acc):
        found = True
        acc.vendor_hint.add("nvidia")
    if found:
        acc.sources.append("nvidia-smi --query-gpu")
    return acc
