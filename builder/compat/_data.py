"""Loaders for the packaged compatibility tables in ``builder/compat/data/*.csv``.

Each file starts with ``#`` comment lines naming its source; the first non-comment line is the CSV
header. Loaders are cached (the files are read once per process) and return frozen dataclasses.
Users extend the knowledge by adding rows (see ``docs/compat.md``); no code change is needed.
The only I/O in ``builder.compat`` is reading these packaged files (and fleet files, in ``fleets``).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import re
from importlib import resources

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from builder.errors import ConfigError

DATA_PACKAGE = "builder.compat"
DATA_DIR = "data"


def data_text(name: str) -> str:
    """Text of one packaged data file (``builder/compat/data/<name>``)."""
    return resources.files(DATA_PACKAGE).joinpath(DATA_DIR, name).read_text(encoding="utf-8")


def read_table(name: str) -> tuple[tuple[str, ...], list[dict[str, str]]]:
    """(source comment lines, rows) of a packaged CSV; values are stripped strings ("" when empty)."""
    text = data_text(name)
    comments: list[str] = []
    body: list[str] = []
    for line in text.splitlines():
        if not body and line.startswith("#"):
            comments.append(line.lstrip("# ").rstrip())
        elif line.strip() and not line.startswith("#"):
            body.append(line)
    rows = []
    for raw in csv.DictReader(io.StringIO("\n".join(body))):
        rows.append({k.strip(): (v or "").strip() for k, v in raw.items() if k is not None})
    return tuple(comments), rows


def version(text: str, *, where: str) -> Version:
    """Parse a version (driver ``550.144.03``, CUDA ``12.8``); ConfigError naming ``where`` when invalid."""
    try:
        return Version(text.strip().lstrip(">=").strip())
    except InvalidVersion:
        raise ConfigError(f"{where}: {text!r} is not a version", hint="fix the row in builder/compat/data") from None


def specifier(text: str, *, where: str) -> SpecifierSet:
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise ConfigError(
            f"{where}: {text!r} is not a PEP 440 specifier", hint="fix the row in builder/compat/data"
        ) from None


def major_minor(v: Version) -> str:
    return f"{v.major}.{v.minor}"


# --------------------------------------------------------------------------------------------- CUDA -> driver


@dataclasses.dataclass(frozen=True)
class CudaDriverRow:
    """One row of ``cuda-driver.csv``: a CUDA toolkit release and its Linux x86_64 minimum driver.

    ``minor_floor`` is the minor-version-compatibility floor of the major line (None before CUDA 11)."""

    toolkit: str  # "CUDA 12.8 GA"
    cuda: str  # "12.8"
    min_driver: str  # "570.26"
    branch: str  # "R570"
    minor_floor: str | None  # "525.60.13"
    line: int  # 1-based line number in the file (for "the row used")

    @property
    def source(self) -> str:
        return f"builder/compat/data/cuda-driver.csv line {self.line}: {self.toolkit}"


@functools.cache
def cuda_driver_rows() -> tuple[CudaDriverRow, ...]:
    """Rows of ``cuda-driver.csv`` (source: NVIDIA CUDA Toolkit Release Notes, Table 3)."""
    text = data_text("cuda-driver.csv")
    out = []
    header_seen = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#") or not line.strip():
            continue
        if not header_seen:
            header_seen = True
            continue
        fields = next(csv.reader([line]))
        toolkit, cuda, linux_min, _win, branch, floor = (f.strip() for f in fields[:6])
        where = f"cuda-driver.csv line {number}"
        version(cuda, where=where)
        version(linux_min, where=where)
        floor_v = floor.lstrip(">=").strip() if floor.startswith(">=") else None
        out.append(
            CudaDriverRow(
                toolkit=toolkit,
                cuda=cuda,
                min_driver=linux_min.lstrip(">=").strip(),
                branch=branch,
                minor_floor=floor_v,
                line=number,
            )
        )
    return tuple(out)


# ------------------------------------------------------------------------------------- official CUDA images


@dataclasses.dataclass(frozen=True)
class CudaImageRow:
    """One official ``nvidia/cuda`` image release (``cuda-images.csv``)."""

    image_release: str  # "12.8.1"
    cuda: str  # "12.8"
    exempt_branches: tuple[int, ...]  # (470, 535, 550, 560, 565)
    exempt_brands: tuple[str, ...]  # in image order
    arm64_exemptions: bool
    os: tuple[str, ...]  # ("ubuntu20.04", "ubuntu22.04", "ubuntu24.04")
    evidence: str

    @property
    def known_requirement(self) -> bool:
        return bool(self.exempt_branches and self.exempt_brands)


@functools.cache
def cuda_image_rows() -> tuple[CudaImageRow, ...]:
    _, rows = read_table("cuda-images.csv")
    out = []
    for i, r in enumerate(rows):
        where = f"cuda-images.csv row {i + 1}"
        version(r["image_release"], where=where)
        branches = tuple(int(b.lstrip("Rr")) for b in r["exempt_branches"].split())
        out.append(
            CudaImageRow(
                image_release=r["image_release"],
                cuda=r["cuda"],
                exempt_branches=branches,
                exempt_brands=tuple(r["exempt_brands"].split()),
                arm64_exemptions=r["arm64_exemptions"].lower() == "yes",
                os=tuple(r["os"].split()),
                evidence=r["evidence"],
            )
        )
    return tuple(sorted(out, key=lambda row: Version(row.image_release)))


# ------------------------------------------------------------------------------------------------ GPUs


@dataclasses.dataclass(frozen=True)
class GpuRow:
    vendor: str  # "nvidia" | "amd"
    gpu: str  # "H100"
    brand_class: str  # "datacenter" | "professional" | "consumer"
    arch_name: str  # "Hopper"
    target: str  # "9.0" | "gfx942"
    brand: str  # hook brand ("nvidia", "tesla", ...); "" for AMD
    names: tuple[str, ...]  # gpu + aliases


@functools.cache
def gpu_rows() -> tuple[GpuRow, ...]:
    _, rows = read_table("gpus.csv")
    out = []
    for r in rows:
        aliases = tuple(a.strip() for a in r["aliases"].split(";") if a.strip())
        out.append(
            GpuRow(
                vendor=r["vendor"],
                gpu=r["gpu"],
                brand_class=r["brand_class"],
                arch_name=r["arch_name"],
                target=r["compute_capability_or_gfx"],
                brand=r["brand"],
                names=(r["gpu"], *aliases),
            )
        )
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class AmdDeviceRow:
    """One row of ``amd-devices.csv``: an AMD GPU's PCI device id, its name and gfx target."""

    device_id: str  # "0x74a1" (lower case)
    name: str  # "AMD Instinct MI300X"
    gfx_target: str  # "gfx942"


@functools.cache
def amd_device_rows() -> tuple[AmdDeviceRow, ...]:
    """Rows of ``amd-devices.csv`` (sources in the file's header)."""
    _, rows = read_table("amd-devices.csv")
    return tuple(AmdDeviceRow(r["device_id"].lower(), r["name"], r["gfx_target"]) for r in rows)


# ------------------------------------------------------------------------------------ GPU generations


@dataclasses.dataclass(frozen=True)
class GpuArchRow:
    """One row of ``gpu-archs.csv``: which CUDA releases and driver branches support an NVIDIA architecture.

    ``last_cuda_major`` / ``last_driver_branch`` are None while support is ongoing."""

    architecture: str  # "Kepler"
    capabilities: tuple[str, ...]  # ("3.5", "3.7")
    first_cuda: str  # "6.0"
    last_cuda_major: int | None  # 11
    min_driver_branch: int  # 331 (R331)
    last_driver_branch: int | None  # 470 (R470)
    evidence: str
    line: int  # 1-based line number in the file (for "the row used")

    @property
    def source(self) -> str:
        caps = " ".join(self.capabilities)
        return f"builder/compat/data/gpu-archs.csv line {self.line}: {self.architecture} {caps}"


def _branch(text: str, *, where: str) -> int | None:
    t = text.strip().lstrip("Rr")
    if not t:
        return None
    if not t.isdigit():
        raise ConfigError(
            f"{where}: {text!r} is not a driver branch like R470", hint="fix the row in builder/compat/data"
        )
    return int(t)


@functools.cache
def gpu_arch_rows() -> tuple[GpuArchRow, ...]:
    """Rows of ``gpu-archs.csv`` (source: NVIDIA "CUDA Toolkit, Driver, and Architecture Matrix"; header lines)."""
    text = data_text("gpu-archs.csv")
    out = []
    header: list[str] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#") or not line.strip():
            continue
        fields = [f.strip() for f in next(csv.reader([line]))]
        if header is None:
            header = fields
            continue
        r = dict(zip(header, fields, strict=False))
        where = f"gpu-archs.csv line {number}"
        version(r["first_cuda"], where=where)
        last_major = r.get("last_cuda_major", "")
        if last_major and not last_major.isdigit():
            raise ConfigError(f"{where}: last_cuda_major {last_major!r} is not a number", hint="e.g. 12")
        min_branch = _branch(r["min_driver_branch"], where=where)
        if min_branch is None:
            raise ConfigError(f"{where}: min_driver_branch is empty", hint="e.g. R570")
        out.append(
            GpuArchRow(
                architecture=r["architecture"],
                capabilities=tuple(r["compute_capabilities"].split()),
                first_cuda=r["first_cuda"],
                last_cuda_major=int(last_major) if last_major else None,
                min_driver_branch=min_branch,
                last_driver_branch=_branch(r.get("last_driver_branch", ""), where=where),
                evidence=r.get("evidence", ""),
                line=number,
            )
        )
    return tuple(out)


# ------------------------------------------------------------------------------------------------ ROCm


@dataclasses.dataclass(frozen=True)
class RocmRow:
    rocm: str  # "6.3.3"
    os: tuple[str, ...]  # normalized: ("ubuntu24.04", "ubuntu22.04", "rhel9.5", ..., "debian12")
    os_text: str
    gfx_targets: tuple[str, ...]
    kmd_tested: tuple[str, ...]  # ("6.3", "6.2", "6.1")
    provenance: str


_DISTRO = {
    "ubuntu": "ubuntu",
    "rhel": "rhel",
    "sles": "sles",
    "oracle linux": "ol",
    "debian": "debian",
    "azure linux": "azurelinux",
    "centos": "centos",
    "rocky linux": "rocky",
}


def normalize_os_list(text: str) -> tuple[str, ...]:
    """``"Ubuntu 24.04.2; Ubuntu 22.04.5; RHEL 9.5, 9.4; Debian 12"`` -> ``("ubuntu24.04", "ubuntu22.04",
    "rhel9.5", "rhel9.4", "debian12")``: the distro's id and major(.minor for Ubuntu) version, patch dropped."""
    out: list[str] = []
    for group in text.split(";"):
        m = re.match(r"([A-Za-z][A-Za-z ]*?)\s+(\d.*)$", group.strip())
        if not m:
            continue
        distro = _DISTRO.get(m.group(1).strip().lower(), m.group(1).strip().lower().replace(" ", ""))
        for listed in m.group(2).split(","):
            version = listed.strip()
            if distro == "ubuntu":
                version = ".".join(version.split(".")[:2])
            name = f"{distro}{version}"
            if name not in out:
                out.append(name)
    return tuple(out)


@functools.cache
def rocm_rows() -> tuple[RocmRow, ...]:
    _, rows = read_table("rocm.csv")
    out = []
    for i, r in enumerate(rows):
        version(r["rocm_version"], where=f"rocm.csv row {i + 1}")
        out.append(
            RocmRow(
                rocm=r["rocm_version"],
                os=normalize_os_list(r["os_support"]),
                os_text=r["os_support"],
                gfx_targets=tuple(g.strip() for g in r["gfx_targets"].split(";") if g.strip()),
                kmd_tested=tuple(
                    k.strip().removesuffix(".x") for k in r["kmd_tested_userspace"].split(",") if k.strip()
                ),
                provenance=r.get("provenance", ""),
            )
        )
    return tuple(sorted(out, key=lambda row: Version(row.rocm), reverse=True))


# ------------------------------------------------------------------------------------------- frameworks


@dataclasses.dataclass(frozen=True)
class WheelRow:
    """One row of ``framework-wheels.csv``: a framework release range with wheels for one accelerator line."""

    framework: str
    versions: SpecifierSet
    kind: str  # cuda | rocm | cpu
    accel: str  # "12.8" | "6.4" | ""
    accel_versions: SpecifierSet
    wheel: str  # "cu128" | "rocm6.4" | "cpu" | "jax[cuda12]" | ...
    status: str  # stable | experimental
    python: SpecifierSet
    platforms: tuple[str, ...]
    provenance: str


@functools.cache
def wheel_rows() -> tuple[WheelRow, ...]:
    _, rows = read_table("framework-wheels.csv")
    out = []
    for i, r in enumerate(rows):
        where = f"framework-wheels.csv row {i + 1}"
        out.append(
            WheelRow(
                framework=r["framework"],
                versions=specifier(r["versions"], where=where),
                kind=r["kind"],
                accel=r["accel"],
                accel_versions=specifier(r["accel_versions"], where=where),
                wheel=r["wheel"],
                status=r["status"] or "stable",
                python=specifier(r["python"], where=where),
                platforms=tuple(r["platforms"].split()),
                provenance=r["provenance"],
            )
        )
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class ArchRow:
    framework: str
    versions: SpecifierSet
    kind: str
    accel_versions: SpecifierSet
    platforms: tuple[str, ...]  # () = every platform
    archs: tuple[str, ...]
    evidence: str


@functools.cache
def arch_rows() -> tuple[ArchRow, ...]:
    _, rows = read_table("framework-archs.csv")
    out = []
    for i, r in enumerate(rows):
        where = f"framework-archs.csv row {i + 1}"
        out.append(
            ArchRow(
                framework=r["framework"],
                versions=specifier(r["versions"], where=where),
                kind=r["kind"],
                accel_versions=specifier(r["accel_versions"], where=where),
                platforms=tuple(r.get("platforms", "").split()),
                archs=tuple(r["archs"].split()),
                evidence=r.get("evidence", ""),
            )
        )
    return tuple(out)
