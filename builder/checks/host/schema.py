"""The saved-JSON schema of host facts (``builder hostinfo --json``, schema ``builder/hostinfo/v1``).

Outside data (a saved file, a fleet inventory, a hand-written host), so it is validated with
pydantic before :meth:`HostInfo.from_json` builds the frozen values (:func:`hostinfo_from_json`):
a wrong shape (``"gpus": "x"``,
a GPU that is not an object, a number where a version string belongs) or an empty object is a
``HostProbeError`` naming the field, never a crash. Unknown keys are ignored (``to_json`` writes
derived keys such as ``gpu_count``; newer versions may add more). ``vendor`` is required: it is
the one field every hostinfo document has, and without it ``{}`` would read as "a host with no
GPUs".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from builder.checks.host.model import HostInfo
from builder.compat.drivers import parse_cuda, parse_driver
from builder.errors import ConfigError, HostProbeError
from builder.models import Vendor


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class MigDeviceDoc(_Model):
    gpu: int
    gi: int | None = None
    ci: int | None = None
    mig_dev: int | None = None
    memory_mib: int | None = None


class GpuDoc(_Model):
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
    firmware: str | None = None
    mig_mode: str | None = None
    mig_devices: list[MigDeviceDoc] = []
    partition: str | None = None
    partition_index: int | None = None
    device_id: str | None = None
    fabric_state: str | None = None
    fabric_status: str | None = None
    virtualization: str | None = None
    derived: list[str] = []


class CdiSpecDoc(_Model):
    path: str
    kind: str | None = None
    devices: list[str] = []
    cdi_version: str | None = None


class ToolkitDoc(_Model):
    nvidia_ctk: str | None = None
    nvidia_ctk_version: str | None = None
    runtime_hook: str | None = None
    container_cli_version: str | None = None
    runtime: str | None = None
    cdi_specs: list[CdiSpecDoc] = []


class EngineDoc(_Model):
    name: str = "docker"
    version: str | None = None
    default_runtime: str | None = None
    runtimes: list[str] = []
    cgroup_driver: str | None = None
    cgroup_version: str | None = None
    cdi_spec_dirs: list[str] = []
    os: str | None = None
    kernel: str | None = None


class HostInfoDoc(_Model):
    vendor: Vendor
    driver_version: str | None = None
    cuda_version: str | None = None
    smi_version: str | None = None
    rocm_version: str | None = None
    gpus: list[GpuDoc] = []
    physical_gpu_count: int | None = None
    partition_mode: str | None = None
    fabric_manager: str | None = None
    toolkit: ToolkitDoc | None = None
    engine: EngineDoc | None = None
    diagnosis: str | None = None
    diagnosis_detail: str | None = None
    sources: list[str] = []
    notes: list[str] = []

    @field_validator("cuda_version")
    @classmethod
    def _cuda(cls, value: str | None) -> str | None:
        """The driver's CUDA version as nvidia-smi prints it (``12.8``): the compat tables' parser."""
        if value is not None:
            _version(parse_cuda, value, "CUDA version")
        return value

    @field_validator("rocm_version")
    @classmethod
    def _rocm(cls, value: str | None) -> str | None:
        if value is not None and not _DOTTED.fullmatch(value.strip()):
            raise ValueError(f"{value!r} is not a ROCm version (e.g. 6.3 or 6.3.1)")
        return value

    @field_validator("driver_version")
    @classmethod
    def _driver(cls, value: str | None, info: ValidationInfo) -> str | None:
        """An NVIDIA driver version is what nvidia-smi prints (``550.144.03``: the compat tables'
        parser); an AMD one (amdgpu, as amd-smi / rocm-smi print it: ``6.10.5``, or a kernel's
        ``6.8.0-45-generic``) starts with a number. Either way not a word such as ``banana``."""
        if value is None:
            return value
        if info.data.get("vendor") == "amd":
            if not _AMD_DRIVER.fullmatch(value.strip()):
                raise ValueError(f"{value!r} is not an amdgpu driver version (e.g. 6.10.5)")
        else:
            _version(parse_driver, value, "driver version", example="550.144.03")
        return value


#: a dotted version (ROCm releases: https://rocm.docs.amd.com/en/latest/release/versions.html)
_DOTTED = re.compile(r"\d+(\.\d+)*")
#: an amdgpu driver version: a number first (amd-smi "Driver version: 6.10.5"; inbox kernels print the
#: kernel release, https://rocm.docs.amd.com/projects/amdsmi/en/latest/how-to/amdsmi-cli-tool.html)
_AMD_DRIVER = re.compile(r"\d+(\.\d+)*([-+~._][0-9A-Za-z.+~_-]*)?")


def _version(parse: Callable[..., object], value: str, what: str, example: str = "12.8") -> None:
    """``parse(value)`` (builder.compat's one definition of the version kind) as a field check:
    ValueError (a pydantic field problem naming the field) instead of ConfigError."""
    try:
        parse(value)
    except ConfigError:
        raise ValueError(f"{value!r} is not a {what.replace('_', ' ')} (e.g. {example})") from None


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(document)"


def validate(data: object, *, source: str = "hostinfo JSON") -> dict[str, Any]:
    """``data`` checked against the hostinfo shape; returns it as plain JSON (unknown keys dropped,
    defaults filled). Raises HostProbeError naming ``source`` and every bad field
    (``details['problems']``: ``[{"field", "problem"}]``)."""
    if isinstance(data, Mapping) and not data:
        raise HostProbeError(
            f"{source}: an empty JSON object is not a hostinfo document (no vendor, driver or GPUs)",
            hint="save one with `builder hostinfo --json > host.json`; it needs at least `vendor`",
            path=source,
            problems=[{"field": "vendor", "problem": "missing"}],
        )
    try:
        doc = HostInfoDoc.model_validate(data)
    except ValidationError as exc:
        problems = [
            {"field": _where(tuple(e["loc"])), "problem": e["msg"].removeprefix("Value error, ")} for e in exc.errors()
        ]
        shown = "; ".join(f"{p['field']}: {p['problem']}" for p in problems[:5])
        more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
        raise HostProbeError(
            f"{source} is not a valid hostinfo document: {shown}{more}",
            hint="compare with `builder hostinfo --json` (vendor: nvidia|amd|none; gpus: a list of objects "
            "with name, memory_mib, compute_capability ...), or pass the raw nvidia-smi/rocm-smi output",
            path=source,
            problems=problems,
        ) from None
    return doc.model_dump()


def hostinfo_from_json(data: object, *, source: str = "hostinfo JSON") -> HostInfo:
    """Host facts from outside JSON: :func:`validate`, then :meth:`HostInfo.from_json`. Raises HostProbeError
    naming ``source`` and every bad field."""
    return HostInfo.from_json(validate(data, source=source))


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
