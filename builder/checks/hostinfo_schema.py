"""Compatibility re-exports; import from builder.checks.host.schema."""

from __future__ import annotations

from builder.checks.host.schema import (
    CdiSpecDoc,
    EngineDoc,
    GpuDoc,
    HostInfoDoc,
    MigDeviceDoc,
    ToolkitDoc,
    hostinfo_from_json,
    validate,
)

__all__ = [
    "CdiSpecDoc",
    "EngineDoc",
    "GpuDoc",
    "HostInfoDoc",
    "MigDeviceDoc",
    "ToolkitDoc",
    "hostinfo_from_json",
    "validate",
]
