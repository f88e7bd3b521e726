"""Hardware topology from ``nvidia-smi topo -m`` and ``rocm-smi --showtopo``: GPU-GPU links, CPU and
NUMA affinity per GPU, and a summary of the fabric (all NVLink, partly NVLink, PCIe only).

``nvidia-smi topo -m`` prints a matrix: a header of device columns (``GPU0`` ..., NICs such as
``NIC0`` / ``mlx5_0``) then ``CPU Affinity``, ``NUMA Affinity`` and ``GPU NUMA ID`` (older drivers:
``CPU Affinity`` only), one row per device, and a legend
(https://docs.nvidia.com/deploy/nvidia-smi/index.html, "topo"; real outputs in
tests/data/topology/ with their public URLs). Link codes, per that legend: ``X`` self; ``NV#`` a
bonded set of # NVLinks; ``PIX`` at most one PCIe bridge; ``PXB`` several PCIe bridges; ``PHB`` a
PCIe host bridge; ``NODE`` PCIe plus the interconnect between host bridges within a NUMA node;
``SYS`` (``SOC`` in old drivers) PCIe plus the SMP interconnect between NUMA nodes.

``rocm-smi --showtopo`` prints "Weight between two GPUs", "Hops between two GPUs", "Link Type
between two GPUs" (``XGMI`` / ``PCIE``) matrices and "Numa Nodes" lines
(https://github.com/ROCm/rocm_smi_lib, ``rocm_smi.py`` ``showTopo``).

Pure parsers (text in, frozen values out) plus :func:`probe_topology`, which runs the tool on this
host through :mod:`builder.process`. Parsers never raise on odd input: what they cannot read is
left out and named in ``notes``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Literal

from typing_extensions import TypedDict

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

#: ANSI escape sequences (newer nvidia-smi underlines the header on a terminal)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU = re.compile(r"^GPU(\d+)$")
_NV = re.compile(r"^NV(\d+)$")
#: the legend's PCIe codes, nearest first
PCIE_CODES = ("PIX", "PXB", "PHB", "NODE", "SYS")
_OLD_CODES = {"SOC": "SYS"}

Fabric = Literal["nvlink-all", "nvlink-partial", "xgmi-all", "xgmi-partial", "pcie", "single", "unknown", "none"]


class LinkDocument(TypedDict):
    """One GPU pair: ``a`` < ``b`` (indices), ``code`` as the tool printed it, ``kind`` (``nvlink``,
    ``xgmi``, ``pcie``), ``links`` (bonded NVLinks; None otherwise), ``weight`` / ``hops`` (rocm-smi)."""

    a: int
    b: int
    code: str
    kind: str
    links: int | None
    weight: int | None
    hops: int | None


class TopoGpuDocument(TypedDict):
    index: int
    cpu_affinity: str | None
    numa_affinity: str | None
    gpu_numa_id: str | None


class TopologyDocument(TypedDict):
    """The topology recorded in ``benchmark/v1`` / ``test-result/v1`` (docs/evidence.md)."""

    source: str | None
    fabric: Fabric
    gpus: list[TopoGpuDocument]
    links: list[LinkDocument]
    numa_nodes: list[str]
    pcie: list[PcieDocument]
    nvlink: list[NvlinkStateDocument]
    notes: list[str]


@dataclasses.dataclass(frozen=True)
class Link:
    a: int
    b: int
    code: str
    kind: str
    links: int | None = None
    weight: int | None = None
    hops: int | None = None

    def to_json(self) -> LinkDocument:
        return {
            "a": self.a,
            "b": self.b,
            "code": self.code,
            "kind": self.kind,
            "links": self.links,
            "weight": self.weight,
            "hops": self.hops,
        }


@dataclasses.dataclass(frozen=True)
class TopoGpu:
    """One GPU's affinity: ``cpu_affinity`` as printed (``0-47,96-143``), ``numa_affinity`` (``0``),
    ``gpu_numa_id`` (None when ``N/A``)."""

    index: int
    cpu_affinity: str | None = None
    numa_affinity: str | None = None
    gpu_numa_id: str | None = None

    def to_json(self) -> TopoGpuDocument:
        return {
            "index": self.index,
            "cpu_affinity": self.cpu_affinity,
            "numa_affinity": self.numa_affinity,
            "gpu_numa_id": self.gpu_numa_id,
        }


class PcieDocument(TypedDict):
    bus_id: str
    gen_current: int | None
    gen_max: int | None
    width_current: int | None
    width_max: int | None


class NvlinkStateDocument(TypedDict):
    gpu: int
    name: str
    active: int
    inactive: int
    gbps_per_link: float | None


@dataclasses.dataclass(frozen=True)
class Pcie:
    """A GPU's PCIe link (``nvidia-smi -q``, "GPU Link Info"): generation and width (lanes), current
    and max; None when the tool says N/A. A GPU running below its max (``gen_current < gen_max``) is
    the usual cause of low host-device bandwidth."""

    bus_id: str
    gen_current: int | None = None
    gen_max: int | None = None
    width_current: int | None = None
    width_max: int | None = None

    def to_json(self) -> PcieDocument:
        return {
            "bus_id": self.bus_id,
            "gen_current": self.gen_current,
            "gen_max": self.gen_max,
            "width_current": self.width_current,
            "width_max": self.width_max,
        }


@dataclasses.dataclass(frozen=True)
class NvlinkState:
    """One GPU's NVLinks (``nvidia-smi nvlink -s``): how many are active and ``<inactive>``, and the
    speed an active link reports (GB/s, the tool's own figure)."""

    gpu: int
    name: str
    active: int
    inactive: int
    gbps_per_link: float | None = None

    def to_json(self) -> NvlinkStateDocument:
        return {
            "gpu": self.gpu,
            "name": self.name,
            "active": self.active,
            "inactive": self.inactive,
            "gbps_per_link": self.gbps_per_link,
        }


@dataclasses.dataclass(frozen=True)
class Topology:
    """GPU-GPU links (each pair once, ``a < b``), per-GPU affinity, ``source`` (the tool), ``notes``;
    ``pcie`` (each GPU's PCIe generation and width) and ``nvlink`` (active/inactive links per GPU)."""

    source: str | None = None
    gpus: tuple[TopoGpu, ...] = ()
    links: tuple[Link, ...] = ()
    notes: tuple[str, ...] = ()
    pcie: tuple[Pcie, ...] = ()
    nvlink: tuple[NvlinkState, ...] = ()

    @property
    def fabric(self) -> Fabric:
        """``nvlink-all`` (every GPU pair on NVLink, e.g. NVSwitch), ``nvlink-partial``, ``xgmi-all`` /
        ``xgmi-partial`` (AMD), ``pcie`` (no GPU pair on NVLink/XGMI), ``single`` (one GPU), ``unknown``
        (several GPUs, no link read), ``none`` (no GPU)."""
        if not self.gpus:
            return "none"
        if len(self.gpus) == 1:
            return "single"
        if not self.links:
            return "unknown"
        for kind in ("nvlink", "xgmi"):
            n = sum(1 for link in self.links if link.kind == kind)
            if n:
                pairs = len(self.gpus) * (len(self.gpus) - 1) // 2
                return (
                    "nvlink-all"
                    if kind == "nvlink" and n == pairs
                    else ("nvlink-partial" if kind == "nvlink" else ("xgmi-all" if n == pairs else "xgmi-partial"))
                )
        return "pcie"

    @property
    def numa_nodes(self) -> tuple[str, ...]:
        """The NUMA nodes the GPUs are near, each once, in GPU order."""
        return tuple(dict.fromkeys(g.numa_affinity for g in self.gpus if g.numa_affinity is not None))

    def link(self, a: int, b: int) -> Link | None:
        lo, hi = min(a, b), max(a, b)
        return next((x for x in self.links if x.a == lo and x.b == hi), None)

    def to_json(self) -> TopologyDocument:
        return {
            "source": self.source,
            "fabric": self.fabric,
            "gpus": [g.to_json() for g in self.gpus],
            "links": [x.to_json() for x in self.links],
            "numa_nodes": list(self.numa_nodes),
            "pcie": [p.to_json() for p in self.pcie],
            "nvlink": [n.to_json() for n in self.nvlink],
            "notes": list(self.notes),
        }


def _na(value: str | None) -> str | None:
    return None if value is None or value.strip() in ("", "N/A") else value.strip()


def _nvidia_link(a: int, b: int, code: str) -> Link:
    code = _OLD_CODES.get(code, code)
    m = _NV.match(code)
    if m:
        return Link(a, b, code, "nvlink", links=int(m.group(1)))
    return Link(a, b, code, "pcie" if code in PCIE_CODES else "unknown")


def parse_nvidia_topo(text: str) -> Topology:
    """``nvidia-smi topo -m`` output as a :class:`Topology` (ANSI escapes, a ``$ command`` line,
    ``#`` comments and the legend are skipped; space- or tab-aligned)."""
    lines = [_ANSI.sub("", ln).rstrip() for ln in text.splitlines()]
    header: list[str] | None = None
    notes: list[str] = []
    gpus: list[TopoGpu] = []
    links: dict[tuple[int, int], Link] = {}
    for ln in lines:
        s = ln.strip()
        if not s or s.startswith(("#", "$")):
            continue
        if s.startswith("Legend"):
            break
        if header is None:
            cols = [c.strip() for c in re.split(r"\t|\s{2,}", s) if c.strip()]
            if cols and _GPU.match(cols[0]):
                header = cols
            continue
        tokens = s.split()
        if not tokens or not _GPU.match(tokens[0]):
            continue  # NIC rows: GPU-NIC links are not GPU topology
        row = int(_GPU.match(tokens[0]).group(1))  # type: ignore[union-attr]
        devices = [c for c in header if c not in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")]
        extra = [c for c in header if c in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")]
        values = tokens[1:]
        if len(values) < len(devices):
            notes.append(f"GPU{row}: {len(values)} values for {len(devices)} device columns")
        for col, code in zip(devices, values, strict=False):
            m = _GPU.match(col)
            if m is None or code == "X":
                continue
            other = int(m.group(1))
            key = (min(row, other), max(row, other))
            links.setdefault(key, _nvidia_link(*key, code))
        rest = dict(zip(extra, values[len(devices) :], strict=False))
        gpus.append(
            TopoGpu(row, _na(rest.get("CPU Affinity")), _na(rest.get("NUMA Affinity")), _na(rest.get("GPU NUMA ID")))
        )
    if header is None:
        notes.append("no topology matrix header (GPU0 ...) found")
    seen = {g.index for g in gpus}
    for _a, b in list(links):
        if b not in seen:
            notes.append(f"GPU{b} is a column but has no row (output cut?)")
            break
    return Topology("nvidia-smi topo -m", tuple(gpus), tuple(links[k] for k in sorted(links)), tuple(notes))


_ROCM_SECTION = re.compile(r"=+\s*(Weight|Hops|Link Type) between two GPUs\s*=+")
#: ``GPU[0]\t\t: (Topology) Numa Node: 0``; older rocm-smi prints ``GPU 0          : ...``
_ROCM_NUMA = re.compile(r"^GPU\s*\[?(\d+)\]?\s*:\s*\(Topology\)\s*Numa (Node|Affinity):\s*(\S+)")


def parse_rocm_topo(text: str) -> Topology:
    """``rocm-smi --showtopo`` output as a :class:`Topology`: link type, weight and hops per GPU
    pair; NUMA node per GPU."""
    section: str | None = None
    header: list[str] = []
    cells: dict[tuple[int, int], dict[str, str]] = {}
    numa: dict[int, dict[str, str]] = {}
    notes: list[str] = []
    for raw in text.splitlines():
        s = raw.strip()
        m = _ROCM_SECTION.search(s)
        if m:
            section, header = m.group(1), []
            continue
        n = _ROCM_NUMA.match(s)
        if n:
            numa.setdefault(int(n.group(1)), {})[n.group(2)] = n.group(3)
            section = None
            continue
        if section is None or not s or s.startswith("="):
            if s.startswith("=") and "Numa" in s:
                section = None
            continue
        tokens = s.split()
        if all(_GPU.match(t) for t in tokens):
            header = tokens
            continue
        if tokens and _GPU.match(tokens[0]) and header:
            row = int(tokens[0][3:])
            for col, value in zip(header, tokens[1:], strict=False):
                other = int(col[3:])
                if other != row:
                    cells.setdefault((min(row, other), max(row, other)), {})[section] = value
    indices = sorted({i for pair in cells for i in pair} | set(numa))
    gpus = tuple(
        TopoGpu(i, None, numa.get(i, {}).get("Affinity") or numa.get(i, {}).get("Node"), None) for i in indices
    )
    links = []
    for (a, b), v in sorted(cells.items()):
        code = v.get("Link Type", "?")
        kind = {"XGMI": "xgmi", "PCIE": "pcie"}.get(code.upper(), "unknown")
        weight = int(v["Weight"]) if v.get("Weight", "").isdigit() else None
        hops = int(v["Hops"]) if v.get("Hops", "").isdigit() else None
        links.append(Link(a, b, code, kind, None, weight, hops))
    if not cells:
        notes.append("no GPU matrix found")
    return Topology("rocm-smi --showtopo", gpus, tuple(links), tuple(notes))


_Q_GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_Q_VALUE = re.compile(r"^\s*(Max|Current)\s*:\s*(\S+)")


def _int(text: str) -> int | None:
    digits = text.rstrip("x")
    return int(digits) if digits.isdigit() else None


def parse_nvidia_pcie(text: str) -> tuple[Pcie, ...]:
    """Each GPU's PCIe generation and width from ``nvidia-smi -q`` (the ``GPU <bus id>`` blocks, their
    "GPU Link Info": "PCIe Generation" and "Link Width", ``Max`` / ``Current``; ``16x`` -> 16)."""
    out: list[Pcie] = []
    bus: str | None = None
    part: str | None = None
    values: dict[str, int | None] = {}
    for raw in text.splitlines():
        m = _Q_GPU.match(raw.strip())
        if m:
            if bus is not None:
                out.append(
                    Pcie(
                        bus,
                        values.get("gen_current"),
                        values.get("gen_max"),
                        values.get("width_current"),
                        values.get("width_max"),
                    )
                )
            bus, part, values = m.group(1), None, {}
            continue
        s = raw.strip()
        if s == "PCIe Generation":
            part = "gen"
        elif s == "Link Width":
            part = "width"
        elif part and (v := _Q_VALUE.match(raw)) is not None:
            values.setdefault(f"{part}_{v.group(1).lower()}", _int(v.group(2)))
        elif s and not s.startswith(("Device ", "Host ")):
            part = None
    if bus is not None:
        out.append(
            Pcie(
                bus,
                values.get("gen_current"),
                values.get("gen_max"),
                values.get("width_current"),
                values.get("width_max"),
            )
        )
    return tuple(out)


_NVL_GPU = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: [^)]*\))?\s*$")
_NVL_LINK = re.compile(r"^Link \d+: (?:(?P<gbps>[0-9.]+) GB/s|<(?P<state>[a-z]+)>)")


def parse_nvlink_status(text: str) -> tuple[NvlinkState, ...]:
    """Per GPU of ``nvidia-smi nvlink -s``: active links (a speed), inactive ones (``<inactive>``) and
    the speed of an active link."""
    out: list[NvlinkState] = []
    for raw in text.splitlines():
        s = raw.strip()
        g = _NVL_GPU.match(s)
        if g:
            out.append(NvlinkState(int(g.group(1)), g.group(2).strip(), 0, 0))
            continue
        link = _NVL_LINK.match(s)
        if link and out:
            last = out[-1]
            if link.group("gbps"):
                out[-1] = dataclasses.replace(last, active=last.active + 1, gbps_per_link=float(link.group("gbps")))
            else:
                out[-1] = dataclasses.replace(last, inactive=last.inactive + 1)
    return tuple(out)


def probe_topology(vendor: str, run: Callable[[Sequence[str]], tuple[int, str]] | None = None) -> Topology:
    """This host's topology: ``nvidia-smi topo -m`` with the PCIe links of ``nvidia-smi -q`` and the
    NVLink states of ``nvidia-smi nvlink -s`` (vendor ``nvidia``), or ``rocm-smi --showtopo``
    (``amd``); ``Topology()`` with a note when the tool is missing or fails; ``Topology()`` for a
    host without GPUs. ``run`` (tests) returns (exit code, stdout); default: :func:`builder.process.run`."""
    argv = {"nvidia": ["nvidia-smi", "topo", "-m"], "amd": ["rocm-smi", "--showtopo"]}.get(vendor)
    if argv is None:
        return Topology()
    if run is None:
        from builder import process

        def run(cmd: Sequence[str]) -> tuple[int, str]:
            try:
                p = process.run(list(cmd), timeout=60)
            except FileNotFoundError:
                return 127, ""
            return p.returncode, p.stdout

    code, out = run(argv)
    if code != 0:
        return Topology(" ".join(argv), notes=(f"{' '.join(argv)} exited with {code}",))
    if vendor != "nvidia":
        return parse_rocm_topo(out)
    topo = parse_nvidia_topo(out)
    q_code, q_out = run(["nvidia-smi", "-q"])
    n_code, n_out = run(["nvidia-smi", "nvlink", "-s"])  # exits non-zero on GPUs without NVLink
    return dataclasses.replace(
        topo,
        pcie=parse_nvidia_pcie(q_out) if q_code == 0 else (),
        nvlink=parse_nvlink_status(n_out) if n_code == 0 else (),
    )


__all__ = [
    "PCIE_CODES",
    "Fabric",
    "Link",
    "LinkDocument",
    "NvlinkState",
    "NvlinkStateDocument",
    "Pcie",
    "PcieDocument",
    "TopoGpu",
    "TopoGpuDocument",
    "Topology",
    "TopologyDocument",
    "parse_nvidia_pcie",
    "parse_nvidia_topo",
    "parse_nvlink_status",
    "parse_rocm_topo",
    "probe_topology",
]
