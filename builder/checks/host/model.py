"""Host facts: what GPUs, driver, fabric manager, container toolkit and engine a host has.

Frozen values only (standard library), built by the parsers (:mod:`builder.checks.host.assemble`), the live
probe (:mod:`builder.checks.host.probing`) or a saved hostinfo JSON document
(:mod:`builder.checks.host.schema`). ``to_json`` writes the document (schema ``builder/hostinfo/v1``,
docs/checks.md); unknown values are None, never an error.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Literal

from typing_extensions import TypedDict

from builder.errors import HostProbeError
from builder.models import Vendor

if TYPE_CHECKING:
    from collections.abc import Mapping


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


# ------------------------------------------------------------------------------ the saved document


class MigDeviceDocument(TypedDict):
    """One MIG device (:class:`MigDevice`)."""

    gpu: int
    gi: int | None
    ci: int | None
    mig_dev: int | None
    memory_mib: int | None


class HostGpuDocument(TypedDict):
    """One GPU (:class:`HostGpu`); unknown values are null."""

    index: int | None
    name: str | None
    name_truncated: bool
    brand: str | None
    brand_source: str | None
    architecture: str | None
    memory_mib: int | None
    compute_capability: str | None
    gfx_target: str | None
    bus_id: str | None
    uuid: str | None
    vbios: str | None
    firmware: str | None
    mig_mode: str | None
    mig_devices: list[MigDeviceDocument]
    partition: str | None
    partition_index: int | None
    device_id: str | None
    fabric_state: str | None
    fabric_status: str | None
    virtualization: str | None
    derived: list[str]


class CdiSpecDocument(TypedDict):
    """One CDI spec file (:class:`CdiSpec`)."""

    path: str
    kind: str | None
    devices: list[str]
    cdi_version: str | None


class ToolkitDocument(TypedDict):
    """The NVIDIA Container Toolkit pieces (:class:`ToolkitInfo`); ``present``: any of them found."""

    nvidia_ctk: str | None
    nvidia_ctk_version: str | None
    runtime_hook: str | None
    container_cli_version: str | None
    runtime: str | None
    cdi_specs: list[CdiSpecDocument]
    present: bool


class EngineDocument(TypedDict):
    """The container engine (:class:`EngineInfo`); ``oci_runtime_kind``: runc, runsc, kata, crun, ..."""

    name: str
    version: str | None
    default_runtime: str | None
    runtimes: list[str]
    cgroup_driver: str | None
    cgroup_version: str | None
    cdi_spec_dirs: list[str]
    os: str | None
    kernel: str | None
    oci_runtime_kind: str | None


class HostInfoDocument(TypedDict):
    """``builder hostinfo --json`` (schema ``builder/hostinfo/v1``, docs/checks.md): the host's vendor,
    driver, the newest CUDA the driver supports, GPUs, fabric manager, container toolkit and engine, the
    failure recognised in the probed output (``diagnosis``), which tools were read (``sources``) and notes.
    ``gpu_count`` and ``mig_enabled`` are derived (ignored when read back)."""

    vendor: Vendor
    driver_version: str | None
    cuda_version: str | None
    smi_version: str | None
    rocm_version: str | None
    gpus: list[HostGpuDocument]
    physical_gpu_count: int | None
    partition_mode: str | None
    fabric_manager: str | None
    toolkit: ToolkitDocument | None
    engine: EngineDocument | None
    diagnosis: str | None
    diagnosis_detail: str | None
    sources: list[str]
    notes: list[str]
    schema: Literal["builder/hostinfo/v1"]
    gpu_count: int
    mig_enabled: bool


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

    def to_json(self) -> MigDeviceDocument:
        return {"gpu": self.gpu, "gi": self.gi, "ci": self.ci, "mig_dev": self.mig_dev, "memory_mib": self.memory_mib}


@dataclasses.dataclass(frozen=True)
class HostGpu:
    """One GPU the host reports (or, on a partitioned AMD GPU, one logical device); what the tables say
    about a GPU *model* is ``builder.compat.GpuInfo``.

    ``brand``: ``nvidia-smi -q`` "Product Brand" as printed (``NVIDIA``, ``GeForce``, ``NVIDIA RTX``) when
    present, else derived from the name by ``builder.compat`` (``brand_source`` ``"name"``; the same text,
    ``builder.compat.product_brand``). ``compute_capability``: "9.0" (NVIDIA); ``gfx_target``:
    "gfx942" (AMD). ``memory_mib``: total framebuffer in MiB. ``derived``: names of fields not
    read from the tool but derived from the GPU name, the PCI device id or the device id in amd-smi's UUID.
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

    def to_json(self) -> HostGpuDocument:
        return {
            "index": self.index,
            "name": self.name,
            "name_truncated": self.name_truncated,
            "brand": self.brand,
            "brand_source": self.brand_source,
            "architecture": self.architecture,
            "memory_mib": self.memory_mib,
            "compute_capability": self.compute_capability,
            "gfx_target": self.gfx_target,
            "bus_id": self.bus_id,
            "uuid": self.uuid,
            "vbios": self.vbios,
            "firmware": self.firmware,
            "mig_mode": self.mig_mode,
            "mig_devices": [m.to_json() for m in self.mig_devices],
            "partition": self.partition,
            "partition_index": self.partition_index,
            "device_id": self.device_id,
            "fabric_state": self.fabric_state,
            "fabric_status": self.fabric_status,
            "virtualization": self.virtualization,
            "derived": list(self.derived),
        }


@dataclasses.dataclass(frozen=True)
class CdiSpec:
    """One CDI spec file: path, ``kind`` (``nvidia.com/gpu``) and its device names."""

    path: str
    kind: str | None
    devices: tuple[str, ...] = ()
    cdi_version: str | None = None

    def to_json(self) -> CdiSpecDocument:
        return {"path": self.path, "kind": self.kind, "devices": list(self.devices), "cdi_version": self.cdi_version}


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

    def to_json(self) -> ToolkitDocument:
        return {
            "nvidia_ctk": self.nvidia_ctk,
            "nvidia_ctk_version": self.nvidia_ctk_version,
            "runtime_hook": self.runtime_hook,
            "container_cli_version": self.container_cli_version,
            "runtime": self.runtime,
            "cdi_specs": [c.to_json() for c in self.cdi_specs],
            "present": self.present,
        }


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

    def to_json(self) -> EngineDocument:
        return {
            "name": self.name,
            "version": self.version,
            "default_runtime": self.default_runtime,
            "runtimes": list(self.runtimes),
            "cgroup_driver": self.cgroup_driver,
            "cgroup_version": self.cgroup_version,
            "cdi_spec_dirs": list(self.cdi_spec_dirs),
            "os": self.os,
            "kernel": self.kernel,
            "oci_runtime_kind": self.oci_runtime_kind,
        }


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

    def to_json(self) -> HostInfoDocument:
        """The saved document (``schema`` = builder/hostinfo/v1); ``from_json`` reads it back."""
        return {
            "vendor": self.vendor,
            "driver_version": self.driver_version,
            "cuda_version": self.cuda_version,
            "smi_version": self.smi_version,
            "rocm_version": self.rocm_version,
            "gpus": [g.to_json() for g in self.gpus],
            "physical_gpu_count": self.physical_gpu_count,
            "partition_mode": self.partition_mode,
            "fabric_manager": self.fabric_manager,
            "toolkit": self.toolkit.to_json() if self.toolkit is not None else None,
            "engine": self.engine.to_json() if self.engine is not None else None,
            "diagnosis": self.diagnosis,
            "diagnosis_detail": self.diagnosis_detail,
            "sources": list(self.sources),
            "notes": list(self.notes),
            "schema": "builder/hostinfo/v1",
            "gpu_count": len(self.gpus),
            "mig_enabled": self.mig_enabled,
        }

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
