"""GPU names -> compute capability / gfx target, product brand and class; AMD PCI device ids.

The one owner of GPU knowledge (``builder.checks`` asks here). Sources: ``data/gpus.csv`` (NVIDIA
"CUDA GPUs - Compute Capability", https://developer.nvidia.com/cuda-gpus; AMD "GPU hardware
specifications", https://rocm.docs.amd.com/en/latest/reference/gpu-arch-specs.html) and
``data/amd-devices.csv``.

Brands have one vocabulary here: the *hook brand*, the NVML product brand lower-cased without spaces
(``nvidia-smi -q`` "Product Brand" ``NVIDIA RTX`` -> ``nvidiartx``, ``Quadro RTX`` -> ``quadrortx``),
which is what ``brand=`` constraints of ``NVIDIA_REQUIRE_CUDA`` compare against (NVML brand enum:
https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceEnumvs.html, ``nvmlBrandType_t``; requirement
grammar: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html).
:func:`product_brand` turns a hook brand back into the text nvidia-smi prints. Take the brand from the
host when known; :func:`brand_from_name` is only the fallback (A100/H100/H200 report ``NVIDIA``, older
data-center cards ``Tesla``, RTX A-series and RTX PRO ``NVIDIA RTX``, GeForce/TITAN are consumer).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import TYPE_CHECKING, Literal

from builder.compat._data import AmdDeviceRow, GpuRow, amd_device_rows, gpu_rows

if TYPE_CHECKING:
    from builder.models import GpuVendor

GpuClass = Literal["datacenter", "professional", "consumer", "virtual", "unknown"]

#: hook brand -> class. Source: libnvidia-container brand names (nvc_info) and NVIDIA's forward-compatibility
#: support statement (data-center and professional GPUs only; vGPU brands are listed in official exemptions).
BRAND_CLASS: dict[str, GpuClass] = {
    "tesla": "datacenter",
    "nvidia": "datacenter",
    "quadro": "professional",
    "quadrortx": "professional",
    "nvidiartx": "professional",
    "geforce": "consumer",
    "geforcertx": "consumer",
    "titan": "consumer",
    "titanrtx": "consumer",
    "grid": "virtual",
    "vapps": "virtual",
    "vpc": "virtual",
    "vcs": "virtual",
    "vws": "virtual",
    "cloudgaming": "virtual",
    "unknown": "unknown",
}

#: nvidia-smi "Product Brand" long forms -> hook brand.
_BRAND_ALIASES: dict[str, str] = {
    "nvidiavirtualapplications": "vapps",
    "nvidiavirtualpc": "vpc",
    "nvidiavirtualcomputeserver": "vcs",
    "virtualcomputeserver": "vcs",
    "nvidiartxvirtualworkstation": "vws",
    "nvidiavirtualworkstation": "vws",
    "nvidiacloudgaming": "cloudgaming",
    "quadrovirtualdatacenterworkstation": "vws",
}


#: hook brand -> "Product Brand" as ``nvidia-smi -q`` prints it (NVML ``nvmlBrandType_t`` names).
PRODUCT_BRANDS: dict[str, str] = {
    "tesla": "Tesla",
    "nvidia": "NVIDIA",
    "quadro": "Quadro",
    "quadrortx": "Quadro RTX",
    "nvidiartx": "NVIDIA RTX",
    "geforce": "GeForce",
    "geforcertx": "GeForce RTX",
    "titan": "Titan",
    "titanrtx": "Titan RTX",
    "grid": "GRID",
    "vapps": "NVIDIA Virtual Applications",
    "vpc": "NVIDIA Virtual PC",
    "vcs": "NVIDIA Virtual Compute Server",
    "vws": "NVIDIA RTX Virtual Workstation",
    "cloudgaming": "NVIDIA Cloud Gaming",
    "unknown": "Unknown",
}


def product_brand(brand: str) -> str:
    """Hook brand -> the "Product Brand" text nvidia-smi prints (``"nvidiartx"`` -> ``"NVIDIA RTX"``); a brand
    not in :data:`PRODUCT_BRANDS` is returned unchanged. ``normalize_brand(product_brand(b)) == b``."""
    return PRODUCT_BRANDS.get(brand, brand)


def amd_device(device_id: str | None) -> AmdDeviceRow | None:
    """An AMD GPU by PCI device id (``"0x74a1"`` -> MI300X, gfx942; case-insensitive), None when not listed
    in ``data/amd-devices.csv``."""
    if not device_id:
        return None
    wanted = device_id.strip().lower()
    return next((r for r in amd_device_rows() if r.device_id == wanted), None)


#: amd-smi's GPU UUID: a version-1 UUID whose first field is ``<asic serial byte><partition/function byte><PCI
#: device id>`` (``did`` is the low 16 bits of ``time_low``; ``time_mid`` 0, version 1, variant 2), as
#: ``amdsmi_uuid_gen`` writes it: https://github.com/ROCm/amdsmi/blob/0ceca28f4139dced5e9b5739a3f393780d7add48/
#: src/amd_smi/amd_smi_uuid.cc
_AMD_UUID_RE = re.compile(r"[0-9a-f]{4}([0-9a-f]{4})-0000-1[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def amd_device_from_uuid(uuid: str | None) -> AmdDeviceRow | None:
    """The AMD GPU whose PCI device id an amd-smi UUID carries (``"67ff740f-0000-1000-80c6-3ac3c3c637f9"`` ->
    0x740f, MI210); None for another UUID form or a device id not in ``data/amd-devices.csv``."""
    m = _AMD_UUID_RE.fullmatch((uuid or "").strip().lower())
    return amd_device("0x" + m.group(1)) if m else None


_GFX_RE = re.compile(r"(?:amdgcn-amd-amdhsa--)?gfx(\d{2,6})([0-9a-f]?)(?::[\w+-]+)*", re.I)


def normalize_gfx(value: str | int | None) -> str | None:
    """An AMD GPU's LLVM processor name (``"gfx90a"``, ``"gfx942"``, ``"gfx1100"``) from the forms tools print.

    Accepted: the LLVM name itself (``gfx90a``, ``gfx1201``), with an ISA prefix or feature suffix
    (``amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-``); the decimal concatenation some rocm-smi / amd-smi
    versions print (``gfx9010`` = major 9, minor 0, stepping 10 -> ``gfx90a``; stepping is a hex digit in
    LLVM names, https://llvm.org/docs/AMDGPUUsage.html#processors; the ``gfx9010`` form for an MI250X is
    shown in https://github.com/ROCm/rocm_smi_lib/issues/159); and KFD's ``gfx_target_version`` number
    (``90010`` = 10000*major + 100*minor + stepping, as in /sys/class/kfd/kfd/topology/nodes/N/properties;
    https://github.com/ROCm/ROCR-Runtime). Returns None for None, ``N/A``, generic ISA names
    (``gfx11-generic``) and anything that is not one of these forms; never raises."""
    if value is None:
        return None
    if isinstance(value, int):
        return _gfx_from_parts(value // 10000, (value // 100) % 100, value % 100)
    text = value.strip().lower()
    if re.fullmatch(r"\d{5,6}", text):
        n = int(text)
        return _gfx_from_parts(n // 10000, (n // 100) % 100, n % 100)
    m = _GFX_RE.fullmatch(text)
    if not m or "generic" in text:
        return None
    digits, letter = m.group(1), m.group(2)
    if letter:  # already the LLVM form: gfx90a, gfx90c
        return f"gfx{digits}{letter}"
    # a major of 1 or 2 digits (gfx6 .. gfx12), one minor digit, a stepping of 1 digit or a decimal 10..15
    for major_len in (2, 1):
        major, rest = digits[:major_len], digits[major_len:]
        if not 6 <= int(major) <= 15 or major.startswith("0"):
            continue
        if len(rest) == 2:
            return _gfx_from_parts(int(major), int(rest[0]), int(rest[1]))
        if len(rest) == 3 and 10 <= int(rest[1:]) <= 15:
            return _gfx_from_parts(int(major), int(rest[0]), int(rest[1:]))
    return None


def _gfx_from_parts(major: int, minor: int, stepping: int) -> str | None:
    if not (6 <= major <= 15 and 0 <= minor <= 15 and 0 <= stepping <= 15):
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


def normalize_brand(brand: str | None) -> str | None:
    """``"NVIDIA RTX"`` -> ``"nvidiartx"``, ``"GeForce"`` -> ``"geforce"``, ``"Tesla"`` -> ``"tesla"``,
    ``"Unknown"`` -> ``"unknown"`` (a brand NVML reports); ``None``/``""``/``N/A``/``[N/A]``/``Not Found`` -> None."""
    if brand is None:
        return None
    key = re.sub(r"[^a-z0-9]", "", brand.lower())
    if key in ("", "na", "notfound", "notsupported"):
        return None  # the field is missing: we do not know the brand
    # "Unknown" is a brand NVML reports (the hook's exemption lists include brand=unknown)
    return _BRAND_ALIASES.get(key, key)


#: product words of NVIDIA GPU names, in the order they are tried: (word, brand, brand when "RTX" is named too)
_NAME_BRANDS = (
    ("geforce", "geforce", "geforce"),
    ("titan", "titan", "titanrtx"),
    ("quadro", "quadro", "quadrortx"),
    ("tesla", "tesla", "tesla"),
)


def brand_from_name(name: str) -> str | None:
    """Fallback brand from a GPU name (nvidia-smi "Name"): None when it cannot be told (AMD, empty)."""
    n = name.strip().lower()
    if not n or n.startswith("amd") or "instinct" in n or "radeon" in n:
        return None
    if n.startswith("grid ") or " grid " in f" {n} ":
        return "grid"
    for word, brand, rtx_brand in _NAME_BRANDS:
        if word in n:
            return rtx_brand if "rtx" in n else brand
    info = gpu_info(name)
    if info is not None and info.brand:
        return info.brand
    if re.search(r"\brtx\b", n):
        return "nvidiartx"
    return None


@dataclasses.dataclass(frozen=True)
class GpuInfo:
    """What the tables say about a GPU model. ``target``: compute capability (``"9.0"``) or gfx target
    (``"gfx942"``); ``sm``: ``"sm_90"`` / ``"gfx942"``; ``brand``: the hook brand the card usually reports."""

    name: str  # the name asked for
    model: str  # the table's row ("H100")
    vendor: GpuVendor
    gpu_class: GpuClass
    arch_name: str
    target: str
    brand: str | None

    @property
    def sm(self) -> str:
        if self.vendor == "amd":
            return self.target
        major, _, minor = self.target.partition(".")
        return f"sm_{major}{minor or '0'}"

    @property
    def architecture(self) -> str:
        """Architecture name ("Hopper", "CDNA3"); same as ``arch_name``."""
        return self.arch_name

    @property
    def compute_capability(self) -> str | None:
        return self.target if self.vendor == "nvidia" else None

    @property
    def gfx_target(self) -> str | None:
        return self.target if self.vendor == "amd" else None


_DROP = {"nvidia", "amd", "grid"}


def _tokens(name: str) -> tuple[str, ...]:
    words = re.split(r"[\s\-_/(),]+", name.lower().replace("...", " "))
    return tuple(w for w in words if w)


@functools.cache
def _index() -> tuple[tuple[tuple[str, ...], GpuRow], ...]:
    out = []
    for row in gpu_rows():
        for n in row.names:
            toks = tuple(t for t in _tokens(n) if t not in _DROP)
            out.append((toks, row))
    # longest key first, so "GeForce RTX 4090" beats a shorter key and "L40S" never matches "L4"
    return tuple(sorted(out, key=lambda item: -len(item[0])))


@functools.cache
def gpu_info(name: str) -> GpuInfo | None:
    """Look a GPU name up as nvidia-smi / rocm-smi / amd-smi print it (``"NVIDIA H100 80GB HBM3"``,
    ``"Tesla T4"``, ``"NVIDIA A100-SXM4-40GB"``, ``"GRID A100D-1-20C"``, ``"AMD Instinct MI300X"``) or a gfx
    target (``"gfx90a"``). Whole-word match after dropping NVIDIA/AMD/GRID; None when unknown."""
    toks = tuple(t for t in _tokens(name) if t not in _DROP)
    if not toks:
        return None
    if len(toks) == 1 and re.fullmatch(r"gfx[0-9a-f]+", toks[0]):
        rows = [r for r in gpu_rows() if r.target == toks[0]]
        if rows:
            r = rows[0]
            return GpuInfo(name, r.gpu, "amd", _cls(r.brand_class), r.arch_name, r.target, None)
        return GpuInfo(name, toks[0], "amd", "unknown", "", toks[0], None)
    for key, row in _index():
        n = len(key)
        for start in range(len(toks) - n + 1):
            if toks[start : start + n] == key:
                vendor: GpuVendor = "amd" if row.vendor == "amd" else "nvidia"
                return GpuInfo(
                    name, row.gpu, vendor, _cls(row.brand_class), row.arch_name, row.target, row.brand or None
                )
    return None


def _cls(text: str) -> GpuClass:
    return text if text in ("datacenter", "professional", "consumer", "virtual") else "unknown"  # type: ignore[return-value]


def brand_class(brand: str | None) -> GpuClass:
    """Class of a hook brand (``"nvidia"`` -> datacenter, ``"geforce"`` -> consumer); unknown for None."""
    if brand is None:
        return "unknown"
    return BRAND_CLASS.get(brand, "unknown")


def sm_of(compute_capability: str) -> str:
    """``"8.6"`` -> ``"sm_86"``; ``"sm_86"`` and ``"gfx90a"`` pass through."""
    cc = compute_capability.strip().lower()
    if cc.startswith(("sm_", "gfx")):
        return cc
    major, _, minor = cc.partition(".")
    return f"sm_{major}{minor or '0'}"
