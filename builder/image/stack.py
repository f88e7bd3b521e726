"""The GPU stack actually installed in an image, from its files (not its labels): CUDA runtime, cuDNN,
NCCL, cuBLAS, ROCm/HIP, RCCL, the frameworks and the CUDA/ROCm they were built with, Python, the OS,
dpkg and Python packages, and the environment the GPU tools read.

Where each fact comes from (first found wins, in this order):

- shared-library file names: ``libcudart.so.12.8.90`` (the soname chain ends in the full version;
  https://docs.nvidia.com/cuda/cuda-runtime-api/ ), ``libcudnn.so.9.x.y``, ``libnccl.so.2.x.y``,
  ``libcublas.so.12.x.y``, ``libamdhip64.so.6.x.y``, ``librccl.so.1.x``;
- ``/usr/local/cuda*/version.json`` (CUDA toolkit 11.1+: ``{"cuda": {"version": "12.8.1"}}``;
  https://docs.nvidia.com/cuda/cuda-installation-guide-linux/);
- Python ``*.dist-info/METADATA`` ``Name`` / ``Version`` (PyPA core metadata,
  https://packaging.python.org/en/latest/specifications/core-metadata/): ``nvidia-cuda-runtime-cu12``,
  ``nvidia-cudnn-cu12``, ``nvidia-nccl-cu12``, ``torch`` (``2.7.0+cu128``), ...;
- ``torch/version.py`` (``cuda = '12.8'``, ``hip = ...``; written by PyTorch's setup,
  https://github.com/pytorch/pytorch/blob/main/tools/generate_torch_version.py);
- ``/opt/rocm*/.info/version`` (ROCm install layout,
  https://rocm.docs.amd.com/projects/install-on-linux/en/latest/);
- ``/var/lib/dpkg/status`` and ``/var/lib/dpkg/status.d/*`` (dpkg database, ``Package`` / ``Status`` /
  ``Version`` stanzas; https://man7.org/linux/man-pages/man1/dpkg-query.1.html);
- ``/etc/os-release`` / ``/usr/lib/os-release`` (``PRETTY_NAME``;
  https://www.freedesktop.org/software/systemd/man/os-release.html);
- the config's environment: ``NVIDIA_REQUIRE_CUDA``, ``CUDA_VERSION``, ``NV_CUDNN_VERSION``,
  ``NCCL_VERSION``, ``ROCM_VERSION`` (set by NVIDIA's and AMD's base images).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from typing_extensions import TypedDict

from builder.registry.manifest import load_json

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

#: environment variables recorded in the stack
STACK_ENV = ("NVIDIA_REQUIRE_CUDA", "CUDA_VERSION", "NV_CUDNN_VERSION", "NCCL_VERSION", "ROCM_VERSION", "HIP_VERSION")

_LIBS = {
    "cuda_runtime": re.compile(r"^libcudart\.so\.(\d+\.\d+\.\d+)$"),
    "cudnn": re.compile(r"^libcudnn\.so\.(\d+\.\d+\.\d+)$"),
    "nccl": re.compile(r"^libnccl\.so\.(\d+\.\d+\.\d+)$"),
    "cublas": re.compile(r"^libcublas\.so\.(\d+\.\d+\.\d+(?:\.\d+)?)$"),
    "hip": re.compile(r"^libamdhip64\.so\.(\d+\.\d+\.\d+)(?:-\d+)?$"),
    "rccl": re.compile(r"^librccl\.so\.(\d+\.\d+(?:\.\d+)?)$"),
}
#: Python distributions that carry one of those libraries (the ``-cuNN`` suffix is optional)
_WHEELS = {
    "cuda_runtime": re.compile(r"^nvidia-cuda-runtime(-cu\d+)?$"),
    "cudnn": re.compile(r"^nvidia-cudnn(-cu\d+)?$"),
    "nccl": re.compile(r"^nvidia-nccl(-cu\d+)?$"),
    "cublas": re.compile(r"^nvidia-cublas(-cu\d+)?$"),
}
_DPKG = {
    "cuda_runtime": re.compile(r"^cuda-cudart-\d+-\d+$"),
    "cudnn": re.compile(r"^(libcudnn\d+(-cuda-\d+)?|cudnn\d*-cuda-\d+)$"),
    "nccl": re.compile(r"^libnccl2$"),
    "cublas": re.compile(r"^libcublas-\d+-\d+$"),
    "hip": re.compile(r"^hip-runtime-amd$"),
    "rccl": re.compile(r"^rccl$"),
}
FRAMEWORKS = ("torch", "tensorflow", "jax", "jaxlib", "paddlepaddle-gpu", "vllm", "transformers")


_STACK_NAMES = frozenset({"METADATA", "status", "os-release", "version.json", "version.py"})


def is_stack_file(path: str) -> bool:
    """Is ``path`` (absolute) one of the small files the stack is read from?"""
    name = path.rpartition("/")[2]
    if name not in _STACK_NAMES and not path.startswith(("/var/lib/dpkg/status.d/", "/opt/rocm")):
        return False
    p = PurePosixPath(path)
    name = p.name
    parent = p.parent.name
    if name == "METADATA" and parent.endswith(".dist-info"):
        return True
    if path in ("/var/lib/dpkg/status", "/etc/os-release", "/usr/lib/os-release"):
        return True
    if p.parent == PurePosixPath("/var/lib/dpkg/status.d"):
        return True
    if name == "version.json" and str(p.parent).startswith("/usr/local/cuda"):
        return True
    if name.startswith("version") and parent == ".info" and str(p).startswith("/opt/rocm"):
        return True
    return name == "version.py" and parent == "torch"


class FrameworkDocument(TypedDict):
    """A framework found in the image: its version and the CUDA / ROCm its build targets."""

    name: str
    version: str
    cuda: str | None
    rocm: str | None
    path: str


class StackDocument(TypedDict):
    """``builder inspect --json`` ``stack``: versions read from the image's files (None: not found);
    ``sources`` says where each came from."""

    os: str | None
    python: list[str]
    cuda_runtime: str | None
    cuda_toolkit: str | None
    cudnn: str | None
    nccl: str | None
    cublas: str | None
    rocm: str | None
    hip: str | None
    rccl: str | None
    frameworks: list[FrameworkDocument]
    python_packages: dict[str, str]
    dpkg_packages: dict[str, str]
    env: dict[str, str]
    sources: dict[str, str]


@dataclasses.dataclass(frozen=True)
class Framework:
    """A framework distribution (``torch 2.7.0+cu128``) and the CUDA / ROCm line of its build."""

    name: str
    version: str
    cuda: str | None
    rocm: str | None
    path: str

    def to_json(self) -> FrameworkDocument:
        return {"name": self.name, "version": self.version, "cuda": self.cuda, "rocm": self.rocm, "path": self.path}


@dataclasses.dataclass(frozen=True)
class Stack:
    """The installed GPU stack (see the module docstring for the sources). ``python``: the Python
    versions with a ``site-packages`` or ``dist-packages`` in use (``3.11``)."""

    os: str | None = None
    python: tuple[str, ...] = ()
    cuda_runtime: str | None = None
    cuda_toolkit: str | None = None
    cudnn: str | None = None
    nccl: str | None = None
    cublas: str | None = None
    rocm: str | None = None
    hip: str | None = None
    rccl: str | None = None
    frameworks: tuple[Framework, ...] = ()
    python_packages: Mapping[str, str] = dataclasses.field(default_factory=dict)
    dpkg_packages: Mapping[str, str] = dataclasses.field(default_factory=dict)
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def cuda(self) -> str | None:
        """The CUDA line the image's GPU code runs with (``12.8``): the framework build's, else the
        installed runtime's, else the toolkit's, else ``CUDA_VERSION``."""
        for fw in self.frameworks:
            if fw.cuda:
                return fw.cuda
        for v in (self.cuda_runtime, self.cuda_toolkit, self.env.get("CUDA_VERSION")):
            if v:
                return ".".join(v.split(".")[:2])
        return None

    @property
    def rocm_line(self) -> str | None:
        """The ROCm line (``6.4``) of the framework build, else the installed ROCm, else ``ROCM_VERSION``."""
        for fw in self.frameworks:
            if fw.rocm:
                return ".".join(fw.rocm.split(".")[:2])
        for v in (self.rocm, self.hip, self.env.get("ROCM_VERSION")):
            if v:
                return ".".join(v.split(".")[:2])
        return None

    def to_json(self) -> StackDocument:
        return {
            "os": self.os,
            "python": list(self.python),
            "cuda_runtime": self.cuda_runtime,
            "cuda_toolkit": self.cuda_toolkit,
            "cudnn": self.cudnn,
            "nccl": self.nccl,
            "cublas": self.cublas,
            "rocm": self.rocm,
            "hip": self.hip,
            "rccl": self.rccl,
            "frameworks": [f.to_json() for f in self.frameworks],
            "python_packages": dict(self.python_packages),
            "dpkg_packages": dict(self.dpkg_packages),
            "env": dict(self.env),
            "sources": dict(self.sources),
        }


def _metadata(text: str) -> tuple[str, str] | None:
    name = version = None
    for line in text.splitlines():
        if not line.strip():
            break  # the body starts after the first blank line
        key, _, value = line.partition(":")
        if key == "Name":
            name = value.strip()
        elif key == "Version":
            version = value.strip()
    return (name, version) if name and version else None


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def dpkg_packages(text: str) -> dict[str, str]:
    """``Package`` -> ``Version`` of the installed stanzas (``Status: install ok installed``; a
    ``status.d`` file has no Status line and counts as installed)."""
    out: dict[str, str] = {}
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line[:1].isspace():
                continue
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        status = fields.get("Status", "install ok installed")
        if fields.get("Package") and fields.get("Version") and status.endswith(" installed"):
            out[fields["Package"]] = fields["Version"]
    return out


def _os_name(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return None


def _torch_version_py(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key in ("__version__", "cuda", "hip"):
        m = re.search(rf"^{key}\s*(?::\s*[\w.\[\]| ]+)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
        if m:
            out[key] = m.group(1)
    return out


def _dotted(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version))


@dataclasses.dataclass
class _Files:
    """What the kept stack files say (accumulated by :func:`_read_files`)."""

    packages: dict[str, str] = dataclasses.field(default_factory=dict)
    package_paths: dict[str, str] = dataclasses.field(default_factory=dict)
    dpkg: dict[str, str] = dataclasses.field(default_factory=dict)
    os_name: str | None = None
    toolkit: str | None = None
    rocm: str | None = None
    torch_py: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)


def _cuda_json(text: str) -> str | None:
    try:
        doc = load_json(text)
    except ValueError:
        return None
    v = (doc.get("cuda") or {}).get("version") if isinstance(doc, dict) else None
    return v if isinstance(v, str) else None


def _read_files(files: Mapping[str, str], sources: dict[str, str]) -> _Files:
    out = _Files()
    for path, text in sorted(files.items()):
        name = PurePosixPath(path).name
        if name == "METADATA":
            meta = _metadata(text)
            if meta:
                out.packages[_canonical(meta[0])] = meta[1]
                out.package_paths[_canonical(meta[0])] = path
        elif path == "/var/lib/dpkg/status" or path.startswith("/var/lib/dpkg/status.d/"):
            out.dpkg.update(dpkg_packages(text))
        elif path.endswith("os-release"):
            out.os_name = out.os_name or _os_name(text)
        elif name == "version.json":
            v = _cuda_json(text)
            if v and (out.toolkit is None or path.startswith("/usr/local/cuda/")):
                out.toolkit = v
                sources["cuda_toolkit"] = path
        elif path.startswith("/opt/rocm") and "/.info/" in path:
            v = text.strip().split("-")[0]
            if v:
                out.rocm = v
                sources["rocm"] = path
        elif name == "version.py":
            out.torch_py[str(PurePosixPath(path).parent.parent)] = _torch_version_py(text)
    return out


def _from_packages(found: dict[str, str], sources: dict[str, str], facts: _Files) -> None:
    """Library versions the file names did not give, from the wheels, then from dpkg."""
    for key, rx in _WHEELS.items():
        match = next((p for p in sorted(facts.packages) if key not in found and rx.match(p)), None)
        if match:
            found[key] = facts.packages[match]
            sources[key] = facts.package_paths[match]
    for key, rx in _DPKG.items():
        match = next((p for p in sorted(facts.dpkg) if key not in found and rx.match(p)), None)
        if match:
            found[key] = facts.dpkg[match].split("-")[0].split("+")[0].split(":")[-1]
            sources[key] = f"dpkg {match}"


def _frameworks(facts: _Files) -> tuple[Framework, ...]:
    out: list[Framework] = []
    for fw in FRAMEWORKS:
        if fw not in facts.packages:
            continue
        version = facts.packages[fw]
        site = str(PurePosixPath(facts.package_paths[fw]).parent.parent)
        tv = facts.torch_py.get(site, {}) if fw == "torch" else {}
        cuda, rocm = tv.get("cuda"), tv.get("hip")
        local = re.search(r"\+(cu|rocm)(\d[\d.]*)$", version)
        if local and cuda is None and rocm is None:
            digits = local.group(2)
            if local.group(1) == "cu":
                cuda = digits if "." in digits else f"{digits[:-1]}.{digits[-1]}"
            else:
                rocm = digits
        out.append(Framework(fw, version, cuda, rocm, facts.package_paths[fw]))
    return tuple(out)


def read_stack(paths: Iterable[str], files: Mapping[str, str], env: Mapping[str, str]) -> Stack:
    """The stack from the image's merged ``paths``, the kept stack ``files`` (path -> text) and the
    config's ``env``. Pure."""
    sources: dict[str, str] = {}
    found: dict[str, str] = {}
    pythons: set[str] = set()
    for path in paths:
        name = path.rpartition("/")[2]
        if not name.startswith("lib") and "-packages/" not in path:
            continue
        for key, rx in _LIBS.items():
            m = rx.match(name)
            if m and (key not in found or _dotted(m.group(1)) > _dotted(found[key])):
                found[key] = m.group(1)
                sources[key] = path
        m = re.search(r"/python(\d+\.\d+)/(site|dist)-packages/", path)
        if m:
            pythons.add(m.group(1))
    facts = _read_files(files, sources)
    _from_packages(found, sources, facts)
    return Stack(
        os=facts.os_name,
        python=tuple(sorted(pythons, key=_dotted)),
        cuda_runtime=found.get("cuda_runtime"),
        cuda_toolkit=facts.toolkit,
        cudnn=found.get("cudnn"),
        nccl=found.get("nccl"),
        cublas=found.get("cublas"),
        rocm=facts.rocm,
        hip=found.get("hip"),
        rccl=found.get("rccl"),
        frameworks=_frameworks(facts),
        python_packages=dict(sorted(facts.packages.items())),
        dpkg_packages=dict(sorted(facts.dpkg.items())),
        env={k: env[k] for k in STACK_ENV if env.get(k)},
        sources=sources,
    )


__all__ = ["STACK_ENV", "Framework", "FrameworkDocument", "Stack", "StackDocument", "is_stack_file", "read_stack"]
