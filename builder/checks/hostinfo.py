"""Host probe: what GPUs, driver, fabric manager, container toolkit and engine a host has.

Two ways in:

* ``parse_text(text)`` / ``load_hostinfo(path)``: saved output of the vendor tools (``nvidia-smi``
  default table, ``nvidia-smi -q``, ``nvidia-smi --query-gpu=... --format=csv``, ``rocm-smi``
  in its layouts, ``amd-smi version``/``static``, ``rocminfo``, ``docker info``), raw or several
  concatenated (a shell transcript), or a hostinfo JSON document written by ``to_json()``.
  The format is detected from the content.
* ``probe_host(...)``: the live host (device nodes, PCI vendor ids in sysfs, the tools on PATH,
  ``/proc/driver/nvidia/version``, CDI spec directories, ``docker info``).

Parsers work on the *kind* of output (``key : value`` trees, ``|``-separated table cells, CSV
headers, ``GPU[n] : key: value`` lines), not on one sample's text. Missing fields and
``N/A``, ``[N/A]``, ``Not Found``, ``Unknown`` are ``None`` (unknown), never an error.

Facts used (docs/checks.md lists sources): nvidia-smi's "CUDA Version" is the newest CUDA the
*driver* supports; from branch R610 the header reads ``KMD Version`` / ``CUDA UMD Version``;
the banner ``NVIDIA-SMI x`` is the tool's version and may differ from the driver's, so the
driver field wins; brands come from ``-q`` "Product Brand" and only as a fallback from the name;
PCI vendor 0x10de is NVIDIA, 0x1002 AMD.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from builder.errors import HostProbeError, NotFoundError

Vendor = Literal["nvidia", "amd", "none"]

#: Values the vendor tools print for "unknown".
UNKNOWN_VALUES = frozenset(
    {
        "",
        "n/a",
        "[n/a]",
        "na",
        "not found",
        "[not found]",
        "unknown",
        "[unknown]",
        "[unknown error]",
        "not supported",
        "[not supported]",
        "not available",
        "none",
        "-",
        "(null)",
        "unsupported",
    }
)

SCHEMA = "builder/hostinfo/v1"


def clean(value: str | None) -> str | None:
    """Strip a tool value; unknown markers (``N/A``, ``[N/A]``, ``Not Found`` ...) become None."""
    if value is None:
        return None
    v = value.strip().strip('"').strip()
    if v.lower() in UNKNOWN_VALUES:
        return None
    return v


# --------------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MigDevice:
    """One MIG device from nvidia-smi's "MIG devices" table: parent GPU index, GPU instance,
    compute instance, MIG device index, memory in MiB."""

    gpu: int
    gi: int | None
    ci: int | None
    mig_dev: int | None
    memory_mib: int | None


@dataclasses.dataclass(frozen=True)
class GpuInfo:
    """One GPU (or, on a partitioned AMD GPU, one logical device).

    ``brand``: from ``nvidia-smi -q`` "Product Brand" when present, else derived from the name
    (``brand_source`` says which). ``compute_capability``: "9.0" (NVIDIA); ``gfx_target``:
    "gfx942" (AMD). ``memory_mib``: total framebuffer in MiB. ``derived``: names of fields not
    read from the tool but derived from the GPU name or PCI device id.
    """

    index: int | None = None
    name: str | None = None
    name_truncated: bool = False
    brand: str | None = None
    brand_source: str | None = None
    architecture: str | None = None
    memory_mib: int | None = None
    compute_capability: str | None = None
    gfx_target: str | None = None
    bus_id: str | None = None
    uuid: str | None = None
    vbios: str | None = None
    firmware: str | None = None  # GSP firmware (NVIDIA) / other firmware
    mig_mode: str | None = None  # "Enabled" | "Disabled" | None
    mig_devices: tuple[MigDevice, ...] = ()
    partition: str | None = None  # AMD compute partition (SPX/DPX/CPX) / memory partition
    partition_index: int | None = None
    device_id: str | None = None  # PCI device id "0x74a1"
    fabric_state: str | None = None  # nvidia-smi -q Fabric/State ("Completed", "In Progress")
    fabric_status: str | None = None
    virtualization: str | None = None
    derived: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class CdiSpec:
    """One CDI spec file: path, ``kind`` (``nvidia.com/gpu``) and its device names."""

    path: str
    kind: str | None
    devices: tuple[str, ...] = ()
    cdi_version: str | None = None


@dataclasses.dataclass(frozen=True)
class ToolkitInfo:
    """NVIDIA Container Toolkit pieces found on the host (None: not found)."""

    nvidia_ctk: str | None = None  # path
    nvidia_ctk_version: str | None = None
    runtime_hook: str | None = None  # nvidia-container-runtime-hook path
    container_cli_version: str | None = None
    runtime: str | None = None  # nvidia-container-runtime path
    cdi_specs: tuple[CdiSpec, ...] = ()

    @property
    def present(self) -> bool:
        return bool(self.nvidia_ctk or self.runtime_hook or self.runtime)


@dataclasses.dataclass(frozen=True)
class EngineInfo:
    """Container engine facts from ``docker info``."""

    name: str = "docker"
    version: str | None = None
    default_runtime: str | None = None
    runtimes: tuple[str, ...] = ()
    cgroup_driver: str | None = None
    cgroup_version: str | None = None
    cdi_spec_dirs: tuple[str, ...] = ()
    os: str | None = None
    kernel: str | None = None

    @property
    def oci_runtime_kind(self) -> str | None:
        """``runc`` | ``runsc`` (gVisor) | ``kata`` | ``crun`` | ``nvidia`` | other, from the default runtime."""
        rt = (self.default_runtime or "").lower()
        for kind in ("runsc", "kata", "crun", "nvidia", "youki", "runc"):
            if kind in rt:
                return kind
        return rt or None


@dataclasses.dataclass(frozen=True)
class HostInfo:
    """What a host offers. ``vendor``: ``nvidia`` | ``amd`` | ``none``. ``driver_version``:
    the kernel driver's version (NVIDIA "580.65.06"; AMD amdgpu/kernel string).
    ``cuda_version``: the newest CUDA the NVIDIA driver supports (None: unknown or N/A).
    ``diagnosis``: key of a failure recognised in the probed output (``driver-not-loaded`` ...)."""

    vendor: Vendor = "none"
    driver_version: str | None = None
    cuda_version: str | None = None
    smi_version: str | None = None
    rocm_version: str | None = None
    gpus: tuple[GpuInfo, ...] = ()
    physical_gpu_count: int | None = None
    partition_mode: str | None = None
    fabric_manager: str | None = None  # "running" | "inactive" | "Completed" | ... | None
    toolkit: ToolkitInfo | None = None
    engine: EngineInfo | None = None
    diagnosis: str | None = None
    diagnosis_detail: str | None = None
    sources: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def gpu_names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.gpus if g.name)

    @property
    def mig_enabled(self) -> bool:
        return any((g.mig_mode or "").lower() == "enabled" or g.mig_devices for g in self.gpus)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (``schema`` = builder/hostinfo/v1); ``from_json`` reads it back."""
        d = dataclasses.asdict(self)
        d["schema"] = SCHEMA
        d["gpu_count"] = len(self.gpus)
        d["mig_enabled"] = self.mig_enabled
        if self.engine is not None:
            d["engine"]["oci_runtime_kind"] = self.engine.oci_runtime_kind
        if self.toolkit is not None:
            d["toolkit"]["present"] = self.toolkit.present
        return d

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, source: str = "hostinfo JSON") -> HostInfo:
        """Inverse of ``to_json`` (tolerates missing optional keys; unknown keys are ignored).

        Raises HostProbeError naming ``source`` and the field when ``data`` is not a hostinfo
        document (``builder.checks.hostinfo_schema``: ``vendor`` required, ``gpus`` a list of
        objects, versions strings ...)."""
        data = _validated(data, source)

        def pick(klass: type[Any], raw: Mapping[str, Any] | None) -> dict[str, Any]:
            if raw is None:
                return {}
            names = {f.name for f in dataclasses.fields(klass)}
            return {k: v for k, v in raw.items() if k in names}

        gpus = []
        for g in data.get("gpus") or ():
            kw = pick(GpuInfo, g)
            kw["mig_devices"] = tuple(MigDevice(**pick(MigDevice, m)) for m in g.get("mig_devices") or ())
            kw["derived"] = tuple(g.get("derived") or ())
            gpus.append(GpuInfo(**kw))
        toolkit = None
        if data.get("toolkit"):
            tk = pick(ToolkitInfo, data["toolkit"])
            tk["cdi_specs"] = tuple(
                CdiSpec(**{**pick(CdiSpec, s), "devices": tuple(s.get("devices") or ())})
                for s in data["toolkit"].get("cdi_specs") or ()
            )
            toolkit = ToolkitInfo(**tk)
        engine = None
        if data.get("engine"):
            en = pick(EngineInfo, data["engine"])
            en["runtimes"] = tuple(en.get("runtimes") or ())
            en["cdi_spec_dirs"] = tuple(en.get("cdi_spec_dirs") or ())
            engine = EngineInfo(**en)
        top = pick(cls, data)
        vendor = top.get("vendor", "none")
        if vendor not in ("nvidia", "amd", "none"):
            raise HostProbeError(f"hostinfo JSON: vendor must be nvidia, amd or none, not {vendor!r}")
        top.update(
            gpus=tuple(gpus),
            toolkit=toolkit,
            engine=engine,
            sources=tuple(top.get("sources") or ()),
            notes=tuple(top.get("notes") or ()),
        )
        return cls(**top)


def _validated(data: Any, source: str) -> Mapping[str, Any]:
    """``data`` checked by the pydantic model (builder.checks.hostinfo_schema). Without pydantic
    (``python -m builder.checks.hostinfo`` on a bare GPU host) only the outer shape is checked."""
    import importlib

    try:
        schema: Any = importlib.import_module("builder.checks.hostinfo_schema")
    except ImportError:  # standard library only: the outer shape
        schema = None
    if schema is not None:
        return dict(schema.validate(data, source=source))
    if not isinstance(data, Mapping) or "vendor" not in data or not isinstance(data.get("gpus") or [], list):
        raise HostProbeError(f"{source} is not a valid hostinfo document (needs vendor; gpus a list)")
    if not all(isinstance(g, Mapping) for g in data.get("gpus") or []):
        raise HostProbeError(f"{source} is not a valid hostinfo document: gpus: each GPU must be an object")
    return data


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------

_BUS_RE = re.compile(r"\b([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\b")
_MEM_RE = re.compile(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB", re.I)
_TRANSCRIPT_PREFIX = re.compile(r"^(?:<[^>]+>|[\w.-]+)\s+(?:out|err):\s?")


def normalize_bus_id(bus: str | None) -> str | None:
    """``00000000:17:00.0`` / ``0000:17:00.0`` -> ``0000:17:00.0`` (lower case, 4-digit domain)."""
    b = clean(bus)
    if b is None:
        return None
    m = _BUS_RE.search(b)
    if not m:
        return b.lower()
    dom, rest = m.group(1).split(":", 1)
    return f"{int(dom, 16):04x}:{rest}".lower()


def _int(value: str | None) -> int | None:
    v = clean(value)
    if v is None:
        return None
    m = re.search(r"-?\d+", v)
    return int(m.group(0)) if m else None


def _mib(value: str | None) -> int | None:
    """ "81559 MiB" -> 81559; "80 GiB" -> 81920; bytes (large bare numbers) -> MiB."""
    v = clean(value)
    if v is None:
        return None
    m = re.search(r"([\d.]+)\s*([KMGT]i?B|B)?", v, re.I)
    if not m:
        return None
    num = float(m.group(1))
    unit = (m.group(2) or "").upper().replace("I", "")
    factor = {"B": 1 / 2**20, "KB": 1 / 1024, "MB": 1, "GB": 1024, "TB": 1024 * 1024}.get(unit)
    if factor is None:  # bare number: bytes when huge, else MiB
        factor = 1 / 2**20 if num > 10**7 else 1
    return round(num * factor)


def _strip_transcript(lines: Iterable[str]) -> list[str]:
    """Remove a per-line prefix added by a log collector (``<node> out: ``) when most lines have it."""
    raw = [line.rstrip("\r\n") for line in lines]
    prefixed = sum(1 for line in raw if _TRANSCRIPT_PREFIX.match(line))
    if prefixed < 3:
        return raw
    return [line[m.end() :] if (m := _TRANSCRIPT_PREFIX.match(line)) else line for line in raw]


# GPU name -> brand / architecture / compute capability (fallback when the tool does not say).
# Source: NVIDIA CUDA GPUs list (developer.nvidia.com/cuda-gpus), shared/cases/compat/gpu-arch.csv.
_NAME_FACTS: tuple[tuple[str, str, str, str], ...] = (
    # regex, brand, architecture, compute capability
    (r"\bB300\b|GB300", "NVIDIA", "Blackwell", "10.3"),
    (r"\bB200\b|\bB100\b|GB200", "NVIDIA", "Blackwell", "10.0"),
    (r"RTX PRO \d+ Blackwell|RTX 50\d0|RTX 5090", "", "Blackwell", "12.0"),
    (r"\bH200\b|\bH100\b|\bH800\b|\bH20\b|GH200", "NVIDIA", "Hopper", "9.0"),
    (r"\bL40S?\b|\bL4\b|\bL20\b|RTX 40\d0|RTX \d000 Ada|RTX 6000 Ada", "", "Ada Lovelace", "8.9"),
    (r"\bA100\b|\bA800\b|\bA30\b", "NVIDIA", "Ampere", "8.0"),
    (r"\bA10G?\b|\bA40\b|\bA16\b|\bA2\b|RTX A\d+|RTX 30\d0", "", "Ampere", "8.6"),
    (r"\bT4\b|RTX 20\d0|TITAN RTX|Quadro RTX|GTX 16\d0", "", "Turing", "7.5"),
    (r"\bV100\b|TITAN V\b", "", "Volta", "7.0"),
    (r"\bP100\b", "", "Pascal", "6.0"),
    (r"\bP4\b|\bP40\b|GTX 10\d0|TITAN Xp?\b", "", "Pascal", "6.1"),
    (r"\bK80\b", "", "Kepler", "3.7"),
)


def brand_from_name(name: str | None) -> str | None:
    """Product brand derived from a GPU name (fallback only: prefer ``-q`` "Product Brand").

    GeForce/TITAN -> ``GeForce``/``Titan``; Tesla -> ``Tesla``; Quadro -> ``Quadro``; RTX A-series
    and RTX PRO -> ``NVIDIA RTX``; GRID vGPU -> ``GRID``; data-center (A100/H100/H200/B200/L40 ...)
    -> ``NVIDIA``.
    """
    if not name:
        return None
    n = name.upper()
    if "QUADRO" in n:
        return "Quadro"
    if "TITAN" in n:
        return "Titan"
    if "TESLA" in n:
        return "Tesla"
    if "GRID" in n:
        return "GRID"
    if re.search(r"RTX (A\d+|PRO)|RTX \d000 ADA", n):
        return "NVIDIA RTX"
    if "GEFORCE" in n or re.search(r"\b(GTX|RTX) ?\d{3,4}\b", n):
        return "GeForce"
    if re.search(r"\b([ABHL]\d{1,3}S?|GH200|GB200|B\d00)\b", n):
        return "NVIDIA"
    return None


def facts_from_name(name: str | None) -> tuple[str | None, str | None]:
    """(architecture, compute capability) for an NVIDIA GPU name, or (None, None)."""
    if not name:
        return None, None
    try:  # helper A's table when it is there
        from builder import compat

        info = compat.gpu_info(name)
        cc = getattr(info, "compute_capability", None)
        arch = getattr(info, "architecture", None)
        if cc:
            return (str(arch) if arch else None), str(cc)
    except Exception:
        pass
    for pattern, _brand, arch, cc in _NAME_FACTS:
        if re.search(pattern, name, re.I):
            return arch, cc
    return None, None


# AMD PCI device id -> (name, gfx target). Source: AMD ROCm GPU specifications table and the
# kernel's amdgpu_drv.c device list.
_AMD_DEVICE_IDS: dict[str, tuple[str, str]] = {
    "0x66a1": ("AMD Instinct MI50/MI60", "gfx906"),
    "0x738c": ("AMD Instinct MI100", "gfx908"),
    "0x7408": ("AMD Instinct MI250X", "gfx90a"),
    "0x740c": ("AMD Instinct MI250X/MI250", "gfx90a"),
    "0x74a1": ("AMD Instinct MI300X", "gfx942"),
    "0x74a0": ("AMD Instinct MI300A", "gfx942"),
    "0x731f": ("AMD Radeon RX 5700 (Navi 10)", "gfx1010"),
    "0x73bf": ("AMD Radeon RX 6800/6900 (Navi 21)", "gfx1030"),
    "0x744c": ("AMD Radeon RX 7900 (Navi 31)", "gfx1100"),
}


# --------------------------------------------------------------------------------------------
# mutable accumulators used while parsing
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Gpu:
    fields: dict[str, Any] = dataclasses.field(default_factory=dict)
    mig: list[MigDevice] = dataclasses.field(default_factory=list)

    def set(self, key: str, value: Any, *, override: bool = False) -> None:
        if value is None:
            return
        if override or self.fields.get(key) is None:
            self.fields[key] = value


@dataclasses.dataclass
class _Acc:
    vendor_hint: set[str] = dataclasses.field(default_factory=set)
    top: dict[str, Any] = dataclasses.field(default_factory=dict)
    gpus: list[_Gpu] = dataclasses.field(default_factory=list)
    sources: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    engine: dict[str, Any] = dataclasses.field(default_factory=dict)

    def set(self, key: str, value: Any, *, override: bool = False) -> None:
        if value is None:
            return
        if override or self.top.get(key) is None:
            self.top[key] = value

    def gpu_for(self, *, index: int | None = None, bus: str | None = None, position: int | None = None) -> _Gpu:
        """Find or create the GPU matching bus id, else index, else position."""
        nb = normalize_bus_id(bus) if bus else None
        if nb:
            for g in self.gpus:
                if g.fields.get("bus_id") == nb:
                    return g
            # an index match whose bus is unknown
            if index is not None:
                for g in self.gpus:
                    if g.fields.get("index") == index and g.fields.get("bus_id") is None:
                        g.set("bus_id", nb)
                        return g
        elif index is not None:
            for g in self.gpus:
                if g.fields.get("index") == index:
                    return g
        elif position is not None and position < len(self.gpus):
            return self.gpus[position]
        g = _Gpu()
        if nb:
            g.set("bus_id", nb)
        if index is not None:
            g.set("index", index)
        self.gpus.append(g)
        return g


# --------------------------------------------------------------------------------------------
# nvidia-smi: default table
# --------------------------------------------------------------------------------------------

_HDR_DRIVER = re.compile(r"\b(?:Driver|KMD)\s+Version\s*:\s*([^\s|]+)", re.I)
_HDR_CUDA = re.compile(r"\bCUDA\s+(?:UMD\s+)?Version\s*:\s*(\[N/A\]|Not Found|[^\s|]+)", re.I)
_HDR_SMI = re.compile(r"NVIDIA-SMI\s+(?:version\s*:\s*)?(\d[\w.]*)", re.I)
_GPU_ROW = re.compile(r"^\s*(\d+)\s+(\S.*?)(?:\s+(On|Off|N/A|WDDM|TCC))?\s*$")
_MIG_ROW = re.compile(r"^\s*(\d+)\s+(\d+|N/A)\s+(\d+|N/A)\s+(\d+|N/A)\s*$")


def _version(v: str | None) -> str | None:
    c = clean(v)
    if c is None or not re.match(r"^\d", c):
        return None
    return c.rstrip(".,")


def parse_nvidia_smi_table(text: str, acc: _Acc | None = None) -> _Acc:
    """Parse nvidia-smi's default output (any layout: legacy 80-column, R5xx 89-column, R580,
    R610 ``KMD Version``), including the "MIG devices" table. Returns the accumulator."""
    acc = acc or _Acc()
    lines = _strip_transcript(text.splitlines())
    found = False
    for line in lines:
        if "NVIDIA-SMI" in line or re.search(r"(Driver|KMD) Version", line):
            d = _HDR_DRIVER.search(line)
            c = _HDR_CUDA.search(line)
            s = _HDR_SMI.search(line)
            if (d and "|" in line) or (d and "NVIDIA-SMI" in line):
                acc.set("driver_version", _version(d.group(1)))
                found = True
                if c:
                    cv = _version(c.group(1))
                    acc.set("cuda_version", cv)
                    if cv is None:
                        acc.notes.append(f"nvidia-smi reports CUDA Version {c.group(1).strip()!r}: unknown")
                if s:
                    acc.set("smi_version", s.group(1))
    state = None  # "gpu" | "mig" | "proc" | None
    in_header = False
    block: _Gpu | None = None
    last_cells: list[str] = []
    mig_current: list[Any] | None = None
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        if "Bus-Id" in line and stripped.startswith("|"):
            state, in_header = "gpu", True
            continue
        if re.search(r"MIG devices", line):
            state, in_header = "mig", True
            continue
        if re.search(r"\bProcesses\b", line) and stripped.startswith("|"):
            state, in_header = "proc", True
            continue
        if stripped.startswith(("|=", "+=")):
            in_header = False
            continue
        if stripped.startswith("+") or re.match(r"^\|[-+ ]*-{5,}", stripped):
            # row separator: close the MIG row of MIG devices; keep state
            if state == "gpu" and block is not None and last_cells:
                _close_gpu_block(block, last_cells)
                last_cells = []
            mig_current = None
            continue
        if not stripped.startswith("|") or in_header or state is None:
            continue
        cells = [c.strip() for c in stripped.strip("|").split("|")]
        if state == "gpu":
            m = _GPU_ROW.match(cells[0]) if cells else None
            if m and (len(cells) < 2 or _BUS_RE.search(cells[1]) or "..." in cells[0] or len(cells) >= 3):
                if block is not None and last_cells:
                    _close_gpu_block(block, last_cells)
                idx = int(m.group(1))
                bm = _BUS_RE.search(cells[1]) if len(cells) > 1 else None
                bus = bm.group(1) if bm else None
                block = acc.gpu_for(index=idx, bus=bus)
                block.set("index", idx)
                name = m.group(2).strip()
                if name.endswith("..."):
                    block.set("name_truncated", True)
                    name = name[:-3].rstrip()
                block.set("name", clean(name))
                acc.vendor_hint.add("nvidia")
                found = True
                last_cells = cells
            elif block is not None:
                mem = _MEM_RE.search(" ".join(cells))
                if mem:
                    block.set("memory_mib", int(mem.group(2)))
                last_cells = cells
        elif state == "mig":
            m = _MIG_ROW.match(cells[0]) if cells else None
            if m:
                mem = _MEM_RE.search(cells[1]) if len(cells) > 1 else None
                mig_current = [
                    int(m.group(1)),
                    _int(m.group(2)),
                    _int(m.group(3)),
                    _int(m.group(4)),
                    int(mem.group(2)) if mem else None,
                ]
                gpu = acc.gpu_for(index=int(m.group(1)))
                gpu.set("index", int(m.group(1)))
                gpu.set("mig_mode", "Enabled")
                gpu.mig.append(MigDevice(*mig_current))
                acc.vendor_hint.add("nvidia")
                found = True
    if state == "gpu" and block is not None and last_cells:
        _close_gpu_block(block, last_cells)
    if found:
        acc.sources.append("nvidia-smi")
    return acc


def _close_gpu_block(block: _Gpu, cells: list[str]) -> None:
    """The last row of a GPU block holds "MIG M." in its last cell (Enabled/Disabled/N/A)."""
    if not cells:
        return
    last = cells[-1].strip()
    if last in ("Enabled", "Disabled"):
        block.set("mig_mode", last)


# --------------------------------------------------------------------------------------------
# nvidia-smi -q
# --------------------------------------------------------------------------------------------

_Q_KV = re.compile(r"^(\s*)(\S.*?)\s+:\s?(.*)$")
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


def parse_nvidia_smi_q(text: str, acc: _Acc | None = None) -> _Acc:
    """Parse ``nvidia-smi -q`` (``key : value`` tree by indentation). Fragments (no ``GPU``
    header) are attributed to one implicit GPU."""
    acc = acc or _Acc()
    stack: list[tuple[int, str]] = []
    gpu: _Gpu | None = None
    found = False
    for raw in _strip_transcript(text.splitlines()):
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
        m = _Q_KV.match(raw)
        if not m:
            if indent > 0:  # sections are indented; column-0 text is prompts, comments, banners
                stack.append((indent, raw.strip()))
            continue
        key = m.group(2).strip()
        value = m.group(3)
        path = "/".join([s for _, s in stack] + [key]).lower()
        if path in ("driver version", "kmd version"):
            acc.set("driver_version", _version(value))
            found = True
        elif path in ("cuda version", "cuda umd version"):
            cv = _version(value)
            acc.set("cuda_version", cv)
            if cv is None and clean(value) is None:
                acc.notes.append(f"nvidia-smi -q reports CUDA Version {value.strip()!r}: unknown")
            found = True
        elif path == "nvidia-smi version":
            acc.set("smi_version", _version(value))
        elif path == "attached gpus":
            acc.set("_attached", _int(value))
        elif path in _Q_GPU_KEYS or key.lower() in ("product name", "vbios version", "gpu uuid"):
            target = _Q_GPU_KEYS.get(path) or _Q_GPU_KEYS[key.lower()]
            if gpu is None:
                gpu = acc.gpu_for(position=0) if acc.gpus else acc.gpu_for()
                acc.notes.append("nvidia-smi -q fragment without a GPU header: fields attributed to one GPU")
            v: Any = clean(value)
            if target == "memory_mib":
                v = _mib(value)
            elif target == "bus_id":
                v = normalize_bus_id(value)
            elif target == "_minor":
                target, v = "index", _int(value)
            elif target == "brand" and v is not None:
                gpu.set("brand_source", "nvidia-smi -q")
            if not target.startswith("_"):
                gpu.set(target, v, override=target in ("brand", "name"))
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


def parse_nvidia_smi_list(text: str, acc: _Acc | None = None) -> _Acc:
    """Parse ``nvidia-smi -L`` (``GPU 0: NAME (UUID: GPU-...)`` and indented ``MIG`` lines)."""
    acc = acc or _Acc()
    gpu: _Gpu | None = None
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


def parse_nvidia_smi_xml(text: str, acc: _Acc | None = None) -> _Acc:
    """Parse ``nvidia-smi -q -x`` (``<nvidia_smi_log>``); HTML-escaped copies are unescaped."""
    import html
    import xml.etree.ElementTree as ET

    acc = acc or _Acc()
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
                acc.set(key, _version(m.group(1)))
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
    acc.set("driver_version", _version(root.findtext("driver_version")))
    acc.set("cuda_version", _version(root.findtext("cuda_version")))
    for gel in root.findall("gpu"):
        gpu = acc.gpu_for(bus=gel.get("id"))
        for path, target in _XML_GPU.items():
            raw = gel.findtext(path)
            v: Any = clean(raw)
            if target == "memory_mib":
                v = _mib(raw)
            elif target == "index":
                v = _int(raw)
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


def parse_nvidia_smi_csv(text: str, acc: _Acc | None = None) -> _Acc:
    """Parse ``nvidia-smi --query-gpu=FIELDS --format=csv`` output (with header; several
    sections allowed). Rows are matched to GPUs by ``pci.bus_id``, else ``index``, else order.
    A field nvidia-smi refuses (``Field "x" is not a valid field to query``) is noted."""
    acc = acc or _Acc()
    lines = _strip_transcript(text.splitlines())
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
            i += 1
            position = 0
            while i < len(lines) and lines[i].strip() and len(lines[i].split(",")) == len(names):
                values = [v.strip() for v in lines[i].split(",")]
                row = dict(zip(names, values, strict=True))
                idx = _int(row.get("index")) if "index" in row else None
                bus = row.get("pci.bus_id") or row.get("gpu_bus_id")
                gpu = acc.gpu_for(index=idx, bus=clean(bus), position=position if idx is None and not bus else None)
                for name, value in row.items():
                    target = _CSV_FIELDS.get(name)
                    if target is None:
                        continue
                    v: Any = clean(value)
                    if target == "_driver":
                        acc.set("driver_version", _version(value))
                        continue
                    if target.startswith("_"):
                        continue
                    if target == "index":
                        v = _int(value)
                    elif target == "memory_mib":
                        v = _mib(value)
                    elif target == "bus_id":
                        v = normalize_bus_id(value)
                    elif target == "name" and v and v.endswith("..."):
                        gpu.set("name_truncated", True)
                    gpu.set(target, v, override=target == "name")
                position += 1
                i += 1
                found = True
                acc.vendor_hint.add("nvidia")
            continue
        i += 1
    if found:
        acc.sources.append("nvidia-smi --query-gpu")
    return acc


# --------------------------------------------------------------------------------------------
# rocm-smi / amd-smi / rocminfo
# --------------------------------------------------------------------------------------------

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


def parse_rocm(text: str, acc: _Acc | None = None) -> _Acc:
    """Parse rocm-smi (``GPU[n] : key: value`` lines, ``--csv``, "Concise Info" tables including
    the partition layout), ``amd-smi version``/``static`` and ``rocminfo`` agents."""
    acc = acc or _Acc()
    lines = _strip_transcript(text.splitlines())
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
    # CSV (rocm-smi --csv): header "device,...", rows "card0,..." / "cardsystem,..."
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
    # Concise tables
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
    # rocminfo agents
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
    # amd-smi static blocks
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
    if found:
        acc.sources.append("rocm-smi/amd-smi")
    return acc


def _rocm_set(gpu: _Gpu, key: str, value: str) -> None:
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
        v = _mib(value)
    elif target == "device_id" and v:
        v = v.lower()
    gpu.set(target, v)


# --------------------------------------------------------------------------------------------
# docker info
# --------------------------------------------------------------------------------------------


def engine_from_docker_info(info: Mapping[str, Any]) -> EngineInfo:
    """``docker info --format '{{json .}}'`` (a dict) -> EngineInfo."""
    runtimes = info.get("Runtimes") or {}
    return EngineInfo(
        name="docker",
        version=clean(str(info.get("ServerVersion") or "")),
        default_runtime=clean(str(info.get("DefaultRuntime") or "")),
        runtimes=tuple(sorted(runtimes)) if isinstance(runtimes, Mapping) else tuple(runtimes),
        cgroup_driver=clean(str(info.get("CgroupDriver") or "")),
        cgroup_version=clean(str(info.get("CgroupVersion") or "")),
        cdi_spec_dirs=tuple(info.get("CDISpecDirs") or ()),
        os=clean(str(info.get("OperatingSystem") or "")),
        kernel=clean(str(info.get("KernelVersion") or "")),
    )


def parse_docker_info_text(text: str, acc: _Acc | None = None) -> _Acc:
    """Human ``docker info`` output: Server Version, Runtimes, Default Runtime, Cgroup Driver."""
    acc = acc or _Acc()
    for key, target in (
        ("Server Version", "version"),
        ("Default Runtime", "default_runtime"),
        ("Cgroup Driver", "cgroup_driver"),
        ("Cgroup Version", "cgroup_version"),
        ("Operating System", "os"),
        ("Kernel Version", "kernel"),
    ):
        m = re.search(rf"^\s*{key}:\s*(.+)$", text, re.M)
        if m:
            acc.engine[target] = clean(m.group(1))
    m = re.search(r"^\s*Runtimes:\s*(.+)$", text, re.M)
    if m:
        acc.engine["runtimes"] = tuple(sorted(m.group(1).split()))
    m = re.search(r"^\s*CDI spec directories:\s*\n((?:\s+\S.*\n?)+)", text, re.M)
    if m:
        acc.engine["cdi_spec_dirs"] = tuple(x.strip() for x in m.group(1).splitlines() if x.strip())
    if acc.engine:
        acc.sources.append("docker info")
    return acc


# --------------------------------------------------------------------------------------------
# assemble
# --------------------------------------------------------------------------------------------

_GPU_FIELDS = {f.name for f in dataclasses.fields(GpuInfo)}


def _finish(acc: _Acc, *, text_for_diagnosis: str | None = None, vendor: Vendor | None = None) -> HostInfo:
    gpus: list[GpuInfo] = []
    nvidia = "nvidia" in acc.vendor_hint
    amd = "amd" in acc.vendor_hint
    if vendor is None:
        if nvidia and amd:
            vendor = "amd" if any(g.fields.get("gfx_target") or g.fields.get("_series") for g in acc.gpus) else "nvidia"
        else:
            vendor = "nvidia" if nvidia else "amd" if amd else "none"
    ordered = sorted(
        acc.gpus,
        key=lambda g: (g.fields.get("index") is None, g.fields.get("index") or 0, g.fields.get("bus_id") or ""),
    )
    for g in ordered:
        f = {k: v for k, v in g.fields.items() if k in _GPU_FIELDS}
        derived: list[str] = []
        if vendor == "nvidia":
            if f.get("brand") is None and f.get("name"):
                b = brand_from_name(f["name"])
                if b:
                    f["brand"], f["brand_source"] = b, "name"
                    derived.append("brand")
            if f.get("compute_capability") is None or f.get("architecture") is None:
                arch, cc = facts_from_name(f.get("name"))
                if f.get("compute_capability") is None and cc:
                    f["compute_capability"] = cc
                    derived.append("compute_capability")
                if f.get("architecture") is None and arch:
                    f["architecture"] = arch
                    derived.append("architecture")
        elif vendor == "amd":
            dev = (f.get("device_id") or "").lower()
            if dev in _AMD_DEVICE_IDS:
                name, gfx = _AMD_DEVICE_IDS[dev]
                if f.get("name") is None:
                    f["name"] = name
                    derived.append("name")
                if f.get("gfx_target") is None:
                    f["gfx_target"] = gfx
                    derived.append("gfx_target")
        if g.mig:
            f["mig_devices"] = tuple(g.mig)
            f.setdefault("mig_mode", "Enabled")
        f["derived"] = tuple(derived)
        gpus.append(GpuInfo(**f))
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
        diagnosis, detail = _diagnose_tool_output(text_for_diagnosis)
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


def _diagnose_tool_output(text: str) -> tuple[str | None, str | None]:
    """Run the diagnosis over the lines of ``text`` that are not table/tree output."""
    from builder.checks import diagnose

    free = [
        line
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith(("|", "+")) and not _Q_KV.match(line)
    ]
    if not free:
        return None, None
    result = diagnose.diagnose("\n".join(free))
    if result.key == "unknown":
        return None, None
    return result.key, result.summary


def parse_text(text: str, *, source: str = "hostinfo JSON") -> HostInfo:
    """Parse saved tool output of any supported kind (several concatenated are fine).

    Raises HostProbeError naming ``source`` when ``text`` is a JSON object that is neither
    ``docker info`` JSON nor a valid hostinfo document (the field is named), or starts like a
    JSON object but does not parse."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise HostProbeError(
                f"{source}: starts like JSON but does not parse: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                hint="save a hostinfo document with `builder hostinfo --json`, or pass the raw tool output",
                path=source,
            ) from None
        if isinstance(data, dict):
            if "ServerVersion" in data or "Runtimes" in data:
                acc = _Acc()
                e = engine_from_docker_info(data)
                acc.engine = dataclasses.asdict(e)
                acc.sources.append("docker info")
                return _finish(acc)
            return HostInfo.from_json(data, source=source)
    acc = _Acc()
    parse_nvidia_smi_table(text, acc)
    parse_nvidia_smi_q(text, acc)
    parse_nvidia_smi_csv(text, acc)
    if "nvidia_smi_log" in text:
        parse_nvidia_smi_xml(text, acc)
    if "(UUID: GPU-" in text:
        parse_nvidia_smi_list(text, acc)
    parse_rocm(text, acc)
    parse_docker_info_text(text, acc)
    if re.search(r"\bnvidia-smi\b|NVIDIA-SMI|NVML", text):
        acc.vendor_hint.add("nvidia") if not acc.vendor_hint else None
    return _finish(acc, text_for_diagnosis=text)


def load_hostinfo(path: Path | str) -> HostInfo:
    """Read saved output (raw tool output or hostinfo JSON, detected) from ``path``.

    Raises NotFoundError when the file does not exist, HostProbeError when it is unreadable or
    holds nothing recognisable (neither tool output nor a failure the diagnosis knows)."""
    p = Path(path)
    if not p.exists():
        raise NotFoundError(f"host description {p} does not exist", hint="pass a saved `builder hostinfo --json` file")
    try:
        text = p.read_text(errors="replace")
    except OSError as exc:
        raise HostProbeError(f"cannot read {p}: {exc}") from exc
    info = parse_text(text, source=str(p))
    if not info.sources and info.diagnosis is None and not text.lstrip().startswith("{"):
        raise HostProbeError(
            f"{p}: no nvidia-smi, rocm-smi, amd-smi, rocminfo or docker info output recognised",
            hint="save the tool output itself (nvidia-smi, nvidia-smi -q, --query-gpu=... --format=csv, rocm-smi) "
            "or `builder hostinfo --json`",
            path=str(p),
        )
    return info


# --------------------------------------------------------------------------------------------
# live probe
# --------------------------------------------------------------------------------------------

Runner = Callable[[Sequence[str], float], "tuple[int, str, str]"]

QUERY_FIELDS = "index,name,pci.bus_id,memory.total,driver_version,vbios_version,compute_cap,uuid,mig.mode.current"


def run_command(argv: Sequence[str], timeout: float = 20.0) -> tuple[int, str, str]:
    """Run a host tool; (exit code, stdout, stderr). 127 when not installed, 124 on timeout."""
    exe = shutil.which(argv[0])
    if exe is None:
        return 127, "", f"{argv[0]}: command not found"
    try:
        p = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return 124, "", f"{argv[0]}: timed out after {timeout:.0f} s"
    except OSError as exc:
        return 126, "", f"{argv[0]}: {exc}"
    return p.returncode, p.stdout, p.stderr


def detect_vendor(root: Path = Path("/")) -> tuple[Vendor, list[str]]:
    """Vendor from device nodes (/dev/nvidiactl, /dev/kfd) and PCI vendor ids of display-class
    devices in sysfs (0x10de NVIDIA, 0x1002 AMD). Returns (vendor, evidence)."""
    evidence: list[str] = []
    nv = (root / "dev/nvidiactl").exists() or (root / "proc/driver/nvidia/version").exists()
    amd = (root / "dev/kfd").exists()
    if nv:
        evidence.append("/dev/nvidiactl or /proc/driver/nvidia present")
    if amd:
        evidence.append("/dev/kfd present")
    pci = root / "sys/bus/pci/devices"
    vendors: set[str] = set()
    try:
        for dev in pci.iterdir() if pci.is_dir() else ():
            try:
                cls = (dev / "class").read_text().strip()
                ven = (dev / "vendor").read_text().strip().lower()
            except OSError:
                continue
            if cls.startswith(("0x03", "0x12")) and ven in ("0x10de", "0x1002"):
                vendors.add(ven)
    except OSError:
        pass
    if vendors:
        evidence.append("PCI display vendors: " + ",".join(sorted(vendors)))
    if nv or "0x10de" in vendors:
        return "nvidia", evidence
    if amd or "0x1002" in vendors:
        return "amd", evidence
    return "none", evidence


def find_cdi_specs(dirs: Iterable[Path]) -> tuple[CdiSpec, ...]:
    """CDI spec files (*.yaml, *.json) in ``dirs`` with their kind and device names."""
    specs: list[CdiSpec] = []
    for d in dirs:
        if not d.is_dir():
            continue
        for f in sorted(d.iterdir()):
            if f.suffix not in (".yaml", ".yml", ".json"):
                continue
            try:
                text = f.read_text()
            except OSError:
                continue
            kind = re.search(r'^\s*"?kind"?\s*:\s*"?([^"\s,]+)', text, re.M)
            ver = re.search(r'^\s*"?cdiVersion"?\s*:\s*"?([^"\s,]+)', text, re.M)
            names = re.findall(r'^\s*-?\s*"?name"?\s*:\s*"?([^"\s,]+)', text, re.M)
            specs.append(
                CdiSpec(
                    path=str(f),
                    kind=kind.group(1) if kind else None,
                    devices=tuple(dict.fromkeys(names)),
                    cdi_version=ver.group(1) if ver else None,
                )
            )
    return tuple(specs)


def probe_toolkit(
    run: Runner = run_command, cdi_dirs: Sequence[Path] = (Path("/etc/cdi"), Path("/var/run/cdi"))
) -> ToolkitInfo:
    """NVIDIA Container Toolkit binaries on PATH, their versions and the CDI specs."""
    ctk = shutil.which("nvidia-ctk")
    version = None
    if ctk:
        code, out, _ = run(["nvidia-ctk", "--version"], 10)
        m = re.search(r"version\s+(\d[\w.-]*)", out, re.I)
        version = m.group(1) if code == 0 and m else None
    cli_version = None
    if shutil.which("nvidia-container-cli"):
        code, out, _ = run(["nvidia-container-cli", "--version"], 10)
        m = re.search(r"(?:cli-)?version:?\s*(\d[\w.-]*)", out, re.I)
        cli_version = m.group(1) if code == 0 and m else None
    return ToolkitInfo(
        nvidia_ctk=ctk,
        nvidia_ctk_version=version,
        runtime_hook=shutil.which("nvidia-container-runtime-hook") or shutil.which("nvidia-container-toolkit"),
        container_cli_version=cli_version,
        runtime=shutil.which("nvidia-container-runtime"),
        cdi_specs=find_cdi_specs(cdi_dirs),
    )


def probe_fabric_manager(run: Runner = run_command) -> str | None:
    """``systemctl is-active nvidia-fabricmanager`` (``active``/``inactive``/``failed``), or None
    when systemd or the unit is not there."""
    if shutil.which("systemctl") is None:
        return None
    _code, out, _ = run(["systemctl", "is-active", "nvidia-fabricmanager"], 10)
    state = out.strip()
    if not state or "could not be found" in state:
        return None
    return state


def probe_host(
    *,
    run: Runner = run_command,
    root: Path = Path("/"),
    engine_info: Mapping[str, Any] | None = None,
) -> HostInfo:
    """Probe the live host: vendor, driver, GPUs, fabric manager, toolkit, CDI, engine.

    ``engine_info``: ``docker info`` JSON obtained by the caller through ``builder.engine``
    (None: the engine is not described). Tools that are missing or fail leave fields unknown;
    a failure the diagnosis recognises sets ``diagnosis``. Never raises for a missing tool."""
    vendor, evidence = detect_vendor(root)
    acc = _Acc()
    raw: list[str] = []
    if vendor == "nvidia" or shutil.which("nvidia-smi"):
        code, out, err = run(["nvidia-smi", f"--query-gpu={QUERY_FIELDS}", "--format=csv"], 30)
        if code == 0:
            parse_nvidia_smi_csv(out, acc)
        else:
            raw.append(out + err)
            # older drivers refuse compute_cap: retry without it
            code, out, err = run(
                ["nvidia-smi", f"--query-gpu={QUERY_FIELDS.replace(',compute_cap', '')}", "--format=csv"], 30
            )
            if code == 0:
                parse_nvidia_smi_csv(out, acc)
        code, out, err = run(["nvidia-smi", "-q"], 30)
        if code == 0:
            parse_nvidia_smi_q(out, acc)
        else:
            raw.append(out + err)
        code, out, err = run(["nvidia-smi"], 30)
        if code == 0:
            parse_nvidia_smi_table(out, acc)
        elif code != 127:
            raw.append(out + err)
        if code == 127 and vendor == "nvidia":
            acc.notes.append("nvidia-smi is not installed although an NVIDIA device is present")
        proc = root / "proc/driver/nvidia/version"
        if proc.exists():
            try:
                m = re.search(r"Kernel Module(?: for \w+)?\s+(\d[\d.]+)", proc.read_text())
                if m:
                    acc.set("driver_version", m.group(1))
                    acc.sources.append("/proc/driver/nvidia/version")
            except OSError:
                pass
        acc.set("fabric_manager", probe_fabric_manager(run))
        if vendor == "none" and (acc.gpus or raw):
            vendor = "nvidia"
    if vendor == "amd" or shutil.which("rocm-smi") or shutil.which("amd-smi"):
        for argv in (
            ["amd-smi", "version"],
            ["rocm-smi", "--showproductname", "--showdriverversion"],
            ["rocm-smi", "-i", "--showbus"],
            ["rocminfo"],
        ):
            code, out, err = run(argv, 30)
            if code == 0:
                parse_rocm(out, acc)
            elif code != 127:
                raw.append(out + err)
        amd_ver = root / "sys/module/amdgpu/version"
        if amd_ver.exists():
            with contextlib.suppress(OSError):
                acc.set("driver_version", amd_ver.read_text().strip() or None)
    acc.notes.extend(f"vendor evidence: {e}" for e in evidence)
    info = _finish(acc, text_for_diagnosis="\n".join(raw) if raw else None, vendor=vendor)
    toolkit = probe_toolkit(run, cdi_dirs=(root / "etc/cdi", root / "var/run/cdi"))
    engine = engine_from_docker_info(engine_info) if engine_info else None
    return dataclasses.replace(info, toolkit=toolkit, engine=engine)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m builder.checks.hostinfo [FILE]``: print hostinfo JSON (live host or FILE).
    For machines without the builder CLI installed (the device machine)."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    info = load_hostinfo(args[0]) if args else probe_host()
    sys.stdout.write(json.dumps(info.to_json(), indent=2) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())


__all__ = [
    "CdiSpec",
    "EngineInfo",
    "GpuInfo",
    "HostInfo",
    "MigDevice",
    "ToolkitInfo",
    "brand_from_name",
    "clean",
    "detect_vendor",
    "engine_from_docker_info",
    "facts_from_name",
    "load_hostinfo",
    "os",
    "parse_text",
    "probe_host",
]
