"""Compatibility re-exports; import from builder.checks.host.model, builder.checks.host.reading,
builder.checks.host.probing (and builder.checks.host.dockerinfo).

``python -m builder.checks.hostinfo`` still prints this host's JSON; the entry point is
``python -m builder.checks.host``.
"""

from __future__ import annotations

from builder.checks.host.__main__ import main
from builder.checks.host.dockerinfo import engine_from_docker_info
from builder.checks.host.model import CdiSpec, EngineInfo, HostGpu, HostInfo, MigDevice, ToolkitInfo, clean
from builder.checks.host.probing import detect_vendor, probe_host
from builder.checks.host.reading import load_hostinfo, parse_text

__all__ = [
    "CdiSpec",
    "EngineInfo",
    "HostGpu",
    "HostInfo",
    "MigDevice",
    "ToolkitInfo",
    "clean",
    "detect_vendor",
    "engine_from_docker_info",
    "load_hostinfo",
    "main",
    "parse_text",
    "probe_host",
]

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
