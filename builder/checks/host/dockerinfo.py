"""``docker info`` (JSON from ``docker info --format '{{json .}}'``, or the human text) -> engine facts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from builder.checks.host.accumulator import Accumulator
from builder.checks.host.model import EngineInfo, clean


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


def parse_docker_info_text(text: str, acc: Accumulator | None = None) -> Accumulator:
    """Human ``docker info`` output: Server Version, Runtimes, Default Runtime, Cgroup Driver."""
    acc = acc or Accumulator()
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
