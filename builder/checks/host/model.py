"""Host facts: what GPUs, driver, fabric manager, container toolkit and engine a host has.

Frozen values only (standard library), built by the parsers (:mod:`builder.checks.host.assemble`), the live
probe (:mod:`builder.checks.host.probing`) or a saved hostinfo JSON document
(:mod:`builder.checks.host.schema`). ``to_json`` writes the document (schema ``builder/hostinfo/v1``,
docs/checks.md); unknown values are None, never an error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from builder.errors import HostProbeError

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
class HostGpu:
    """One GPU the host reports (or, on a partitioned AMD GPU, one logical device); what the tables say
    about a GPU *model* is ``builder.compat.GpuInfo``.

    ``brand``: ``nvidia-smi -q`` "Product Brand" as printed (``NVIDIA``, ``GeForce``, ``NVIDIA RTX``) when
    present, else derived from the name by ``builder.compat`` (``brand_source`` ``"name"``; the same text,
    ``builder.compat.product_brand``). ``compute_capability``: "9.0" (NVIDIA); ``gfx_target``:
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
    gpus: tuple[HostGpu, ...] = ()
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
    def from_json(cls, data: Mapping[str, Any]) -> HostInfo:
        """Inverse of ``to_json`` for a document already in that shape (unknown keys are ignored).

        Outside JSON goes through :func:`builder.checks.host.schema.hostinfo_from_json`, which validates it
        first (a wrong shape is a HostProbeError naming the field). Raises HostProbeError for an unknown
        vendor."""

        def pick(klass: type[Any], raw: Mapping[str, Any] | None) -> dict[str, Any]:
            if raw is None:
                return {}
            names = {f.name for f in dataclasses.fields(klass)}
            return {k: v for k, v in raw.items() if k in names}

        gpus = []
        for g in data.get("gpus") or ():
            kw = pick(HostGpu, g)
            kw["mig_devices"] = tuple(MigDevice(**pick(MigDevice, m)) for m in g.get("mig_devices") or ())
            kw["derived"] = tuple(g.get("derived") or ())
            gpus.append(HostGpu(**kw))
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
