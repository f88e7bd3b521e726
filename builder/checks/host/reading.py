"""Saved host descriptions: raw tool output (``nvidia-smi`` in any layout, ``-q``, ``-L``, ``-q -x``,
``--query-gpu`` CSV, ``rocm-smi`` / ``amd-smi`` / ``rocminfo``, ``docker info``; raw or several concatenated,
as in a shell transcript) or a hostinfo JSON document. The format is detected from the content.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from builder.checks.host.accumulator import Accumulator
from builder.checks.host.amd import parse_rocm
from builder.checks.host.assemble import assemble
from builder.checks.host.dockerinfo import engine_from_docker_info, parse_docker_info_text
from builder.checks.host.nvidia import (
    parse_nvidia_smi_csv,
    parse_nvidia_smi_list,
    parse_nvidia_smi_q,
    parse_nvidia_smi_table,
    parse_nvidia_smi_xml,
)
from builder.checks.host.schema import hostinfo_from_json
from builder.errors import HostProbeError, NotFoundError

if TYPE_CHECKING:
    from builder.checks.host.model import HostInfo


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
                acc = Accumulator()
                e = engine_from_docker_info(data)
                acc.engine = dataclasses.asdict(e)
                acc.sources.append("docker info")
                return assemble(acc)
            return hostinfo_from_json(data, source=source)
    acc = Accumulator()
    parse_nvidia_smi_table(text, acc)
    parse_nvidia_smi_q(text, acc)
    parse_nvidia_smi_csv(text, acc)
    if "nvidia_smi_log" in text:
        parse_nvidia_smi_xml(text, acc)
    if "(UUID: GPU-" in text:
        parse_nvidia_smi_list(text, acc)
    parse_rocm(text, acc)
    parse_docker_info_text(text, acc)
    if re.search(r"\bnvidia-smi\b|NVIDIA-SMI|NVML", text) and not acc.vendor_hint:
        acc.vendor_hint.add("nvidia")
    return assemble(acc, text_for_diagnosis=text)


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
    return parse_saved(text, str(p))


def parse_saved(text: str, source: str) -> HostInfo:
    """Saved output from a file or standard input (``source`` names it): :func:`parse_text`, and
    HostProbeError when nothing in it is recognisable (empty input, an ``ssh host nvidia-smi`` that
    failed): never a host with no GPU made up from junk."""
    info = parse_text(text, source=source)
    if not info.sources and info.diagnosis is None and not text.lstrip().startswith("{"):
        raise HostProbeError(
            f"{source}: no nvidia-smi, rocm-smi, amd-smi, rocminfo or docker info output recognised",
            hint="save the tool output itself (nvidia-smi, nvidia-smi -q, --query-gpu=... --format=csv, rocm-smi) "
            "or `builder hostinfo --json`",
            path=source,
        )
    return info


def load_host(path: Path) -> HostInfo:
    """The host loader fleets use (``builder.compat.fleets.HostLoader``): :func:`load_hostinfo`."""
    return load_hostinfo(path)


__all__ = ["load_host", "load_hostinfo", "parse_saved", "parse_text"]
