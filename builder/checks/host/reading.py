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
from builder.checks.host.amdjson import (
    amd_smi_gpus,
    find_json,
    is_rocm_smi_json,
    read_amd_smi_json,
    read_cut_json,
    read_rocm_smi_json,
)
from builder.checks.host.assemble import assemble
from builder.checks.host.containercli import parse_container_cli_info
from builder.checks.host.dockerinfo import engine_from_docker_info, parse_docker_info_text
from builder.checks.host.nvidia import (
    parse_nvidia_smi_csv,
    parse_nvidia_smi_list,
    parse_nvidia_smi_q,
    parse_nvidia_smi_table,
    parse_nvidia_smi_xml,
)
from builder.checks.host.schema import HostInfoDoc, hostinfo_from_json
from builder.errors import HostProbeError, NotFoundError

if TYPE_CHECKING:
    from builder.checks.host.model import HostInfo


#: the formats ``parse_text`` recognises, for messages that say which ones it knows
KNOWN_FORMATS = (
    "nvidia-smi (default table, -q, -L, -q -x), nvidia-smi --query-gpu=... --format=csv (with or without "
    "header/units), nvidia-container-cli info, rocm-smi (default, --showproductname, -a, --csv, --json), "
    "amd-smi (default table, version, list, static, static/list --json), rocminfo, docker info (text or JSON), "
    "a `builder hostinfo --json` document"
)

_KNOWN_SHORT = (
    "builder reads nvidia-smi, nvidia-container-cli info, rocm-smi, amd-smi, rocminfo and docker info output "
    "(text or their JSON) and hostinfo JSON (docs/checks.md lists every layout)"
)


def _shape(data: object) -> str:
    if isinstance(data, dict):
        return "keys: " + ", ".join(map(str, list(data)[:6]))
    return f"a JSON {type(data).__name__}"


def _known_json(data: object, source: str) -> HostInfo | None:
    """A JSON document builder knows that is not a hostinfo document (docker info, rocm-smi --json,
    amd-smi --json), None otherwise."""
    acc = Accumulator()
    if isinstance(data, dict) and ("ServerVersion" in data or "Runtimes" in data):
        e = engine_from_docker_info(data)
        acc.engine = dataclasses.asdict(e)
        acc.sources.append("docker info")
        return assemble(acc)
    if is_rocm_smi_json(data) and isinstance(data, dict):
        read_rocm_smi_json(data, acc)
        return assemble(acc)
    items = amd_smi_gpus(data)
    if items is not None:
        read_amd_smi_json(items, acc)
        return assemble(acc)
    if isinstance(data, dict) and (not data or set(data) & set(HostInfoDoc.model_fields)):
        return hostinfo_from_json(data, source=source)
    raise HostProbeError(
        f"{source}: a JSON document, but not one builder knows ({_shape(data)})",
        hint=_KNOWN_SHORT,
        path=source,
    )


def parse_text(text: str, *, source: str = "hostinfo JSON") -> HostInfo:
    """Parse saved tool output of any supported kind (several concatenated are fine; :data:`KNOWN_FORMATS`).

    A JSON document (after a shell prompt or warnings, too) is read by its shape: ``docker info``,
    ``rocm-smi --json``, ``amd-smi ... --json``, or a hostinfo document; a cut-off amd-smi/rocm-smi paste by its
    complete fields. Raises HostProbeError naming ``source`` when the JSON is none of these (the formats builder
    knows are listed), is not a valid hostinfo document (the field is named), or starts like a JSON object but
    does not parse and holds no GPU fields."""
    stripped = text.lstrip()
    found_json = find_json(text)
    if found_json is not None:
        data, rest = found_json
        if rest:
            acc = Accumulator()
            if read_cut_json(rest, acc):
                return assemble(acc)
        elif isinstance(data, dict | list):
            return _known_json(data, source) or assemble(Accumulator())
    if stripped.startswith("{"):
        try:
            json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise HostProbeError(
                f"{source}: starts like JSON but does not parse: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                hint="save a hostinfo document with `builder hostinfo --json`, or pass the raw tool output",
                path=source,
            ) from None
    acc = Accumulator()
    parse_nvidia_smi_table(text, acc)
    parse_nvidia_smi_q(text, acc)
    parse_nvidia_smi_csv(text, acc)
    if "nvidia_smi_log" in text:
        parse_nvidia_smi_xml(text, acc)
    if "(UUID: GPU-" in text:
        parse_nvidia_smi_list(text, acc)
    parse_container_cli_info(text, acc)
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
            f"{source}: no nvidia-smi, rocm-smi, amd-smi, nvidia-container-cli, rocminfo or docker info output "
            "recognised",
            hint=_KNOWN_SHORT + "; save the tool's own output (a shell transcript is fine)",
            path=source,
        )
    return info


def load_host(path: Path) -> HostInfo:
    """The host loader fleets use (``builder.compat.fleets.HostLoader``): :func:`load_hostinfo`."""
    return load_hostinfo(path)


__all__ = ["KNOWN_FORMATS", "load_host", "load_hostinfo", "parse_saved", "parse_text"]
