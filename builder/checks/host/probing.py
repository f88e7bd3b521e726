"""The live host probe: device nodes, PCI vendor ids in sysfs, the vendor tools on PATH,
``/proc/driver/nvidia/version``, the NVIDIA Container Toolkit, CDI spec directories, fabric manager.

Every tool runs through :mod:`builder.process` (``builder --debug`` echoes it). PCI vendor 0x10de is
NVIDIA, 0x1002 AMD (https://pci-ids.ucw.cz/read/PC/10de, https://pci-ids.ucw.cz/read/PC/1002).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder import process
from builder.checks.host.accumulator import Accumulator
from builder.checks.host.amd import parse_rocm
from builder.checks.host.assemble import assemble
from builder.checks.host.dockerinfo import engine_from_docker_info
from builder.checks.host.model import CdiSpec, HostInfo, ToolkitInfo
from builder.checks.host.nvidia import parse_nvidia_smi_csv, parse_nvidia_smi_q, parse_nvidia_smi_table

if TYPE_CHECKING:
    from builder.models import Vendor

Runner = Callable[[Sequence[str], float], "tuple[int, str, str]"]

QUERY_FIELDS = "index,name,pci.bus_id,memory.total,driver_version,vbios_version,compute_cap,uuid,mig.mode.current"


def run_command(argv: Sequence[str], timeout: float = 20.0) -> tuple[int, str, str]:
    """Run a host tool; (exit code, stdout, stderr). 127 when not installed, 124 on timeout."""
    exe = shutil.which(argv[0])
    if exe is None:
        return 127, "", f"{argv[0]}: command not found"
    try:
        p = process.run([exe, *argv[1:]], timeout=timeout)
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
        devices = list(pci.iterdir()) if pci.is_dir() else []
    except OSError as exc:  # sysfs unreadable (a restricted container): say so, decide from device nodes
        evidence.append(f"{pci} unreadable ({exc.strerror or exc})")
        devices = []
    for dev in devices:
        try:
            cls = (dev / "class").read_text().strip()
            ven = (dev / "vendor").read_text().strip().lower()
        except OSError:
            continue  # a device that vanished or hides its class: not a GPU we can name
        if cls.startswith(("0x03", "0x12")) and ven in ("0x10de", "0x1002"):
            vendors.add(ven)
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


def _probe_nvidia(run: Runner, root: Path, acc: Accumulator, raw: list[str], *, device_seen: bool) -> None:
    """nvidia-smi (``--query-gpu`` CSV, ``-q``, the default table), ``/proc/driver/nvidia/version`` and the
    fabric manager into ``acc``; the output of failed tools is appended to ``raw`` for the diagnosis.
    ``device_seen``: :func:`detect_vendor` found NVIDIA evidence (a missing nvidia-smi is then noted)."""
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
    if code == 127 and device_seen:
        acc.notes.append("nvidia-smi is not installed although an NVIDIA device is present")
    proc = root / "proc/driver/nvidia/version"
    if proc.exists():
        try:
            m = re.search(r"Kernel Module(?: for \w+)?\s+(\d[\d.]+)", proc.read_text())
        except OSError as exc:
            acc.notes.append(f"{proc} unreadable ({exc.strerror or exc})")
            m = None
        if m:
            acc.set("driver_version", m.group(1))
            acc.sources.append("/proc/driver/nvidia/version")
    acc.set("fabric_manager", probe_fabric_manager(run))


def _probe_amd(run: Runner, root: Path, acc: Accumulator, raw: list[str]) -> None:
    """amd-smi, rocm-smi, rocminfo and ``/sys/module/amdgpu/version`` into ``acc``; the output of failed
    tools is appended to ``raw`` for the diagnosis."""
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
        try:
            acc.set("driver_version", amd_ver.read_text().strip() or None)
        except OSError as exc:
            acc.notes.append(f"{amd_ver} unreadable ({exc.strerror or exc})")


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
    acc = Accumulator()
    raw: list[str] = []
    if vendor == "nvidia" or shutil.which("nvidia-smi"):
        _probe_nvidia(run, root, acc, raw, device_seen=vendor == "nvidia")
        if vendor == "none" and (acc.gpus or raw):
            vendor = "nvidia"
    if vendor == "amd" or shutil.which("rocm-smi") or shutil.which("amd-smi"):
        _probe_amd(run, root, acc, raw)
    acc.notes.extend(f"vendor evidence: {e}" for e in evidence)
    info = assemble(acc, text_for_diagnosis="\n".join(raw) if raw else None, vendor=vendor)
    toolkit = probe_toolkit(run, cdi_dirs=(root / "etc/cdi", root / "var/run/cdi"))
    engine = engine_from_docker_info(engine_info) if engine_info else None
    return dataclasses.replace(info, toolkit=toolkit, engine=engine)


__all__ = [
    "QUERY_FIELDS",
    "Runner",
    "detect_vendor",
    "find_cdi_specs",
    "probe_fabric_manager",
    "probe_host",
    "probe_toolkit",
    "run_command",
]
