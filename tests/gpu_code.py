"""Real GPU code for the image-truth tests: PyPI wheels with GPU libraries, NVIDIA's own tools and LLVM's
bundler, downloaded by ``scripts/setup`` (``pip download`` into ``.builder/cache/gpu-wheels``) and
fetched here again when missing.

- ``bitsandbytes`` 0.50.2 (https://pypi.org/project/bitsandbytes/0.50.2/): ``libbitsandbytes_cuda1xx.so``
  (one CUDA fat binary per CUDA line) and ``libbitsandbytes_rocm*.so`` (compressed CCOB v2/v3 HIP
  bundles);
- ``nvidia-cuda-runtime-cu12`` 12.6.77 / 12.8.90 (``libcudart.so.12`` + dist-info);
- ``nvidia-cuda-cuobjdump`` and ``nvidia-cuda-nvcc`` 13.5.37: NVIDIA's ``cuobjdump`` (the reference
  reader) and ``ptxas`` / ``fatbinary`` (to make fat binaries with exactly the targets a test needs);
- ``clang-offload-bundler`` from Debian's ``clang-tools-22`` (the reference for HIP bundles).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from typing import TYPE_CHECKING

import pytest

from tests.conftest import ROOT, _unavailable

if TYPE_CHECKING:
    from pathlib import Path

WHEELS = ROOT / ".builder" / "cache" / "gpu-wheels"
#: requirement -> wheel file name prefix
PINS = {
    "bitsandbytes==0.50.2": "bitsandbytes-0.50.2-",
    "nvidia-cuda-runtime-cu12==12.6.77": "nvidia_cuda_runtime_cu12-12.6.77-",
    "nvidia-cuda-runtime-cu12==12.8.90": "nvidia_cuda_runtime_cu12-12.8.90-",
    "nvidia-cuda-cuobjdump==13.5.37": "nvidia_cuda_cuobjdump-13.5.37-",
    "nvidia-cuda-nvcc==13.5.37": "nvidia_cuda_nvcc-13.5.37-",
}
PTX_KERNEL = """.version {isa}
.target {target}
.address_size 64
.visible .entry builder_probe_kernel(.param .u64 p) {{ ret; }}
"""


def wheel(requirement: str) -> Path:
    """The downloaded wheel of ``requirement`` (one of :data:`PINS`), fetched with pip when missing."""
    prefix = PINS[requirement]
    found = sorted(WHEELS.glob(prefix + "*.whl"))
    if not found:
        WHEELS.mkdir(parents=True, exist_ok=True)
        pip = ROOT / ".venv" / "bin" / "pip"
        r = subprocess.run(
            [str(pip), "download", "-q", "--no-deps", "--only-binary", ":all:", requirement, "-d", str(WHEELS)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        found = sorted(WHEELS.glob(prefix + "*.whl"))
        if r.returncode != 0 or not found:
            _unavailable(f"the wheel {requirement} ({r.stderr.strip()[-300:]})")
    return found[0]


def extracted(requirement: str) -> Path:
    """The wheel unpacked under ``.builder/cache/gpu-wheels/<name>/`` (once)."""
    whl = wheel(requirement)
    target = WHEELS / whl.name.removesuffix(".whl")
    stamp = target / ".complete"
    if not stamp.exists():
        with zipfile.ZipFile(whl) as z:
            z.extractall(target)
        for p in target.rglob("bin/*"):
            p.chmod(0o755)
        stamp.touch()
    return target


def nvidia_tool(name: str) -> str:
    """``cuobjdump`` (nvidia-cuda-cuobjdump) or ``ptxas`` / ``fatbinary`` (nvidia-cuda-nvcc)."""
    req = "nvidia-cuda-cuobjdump==13.5.37" if name == "cuobjdump" else "nvidia-cuda-nvcc==13.5.37"
    found = sorted(extracted(req).glob(f"nvidia/*/bin/{name}"))
    if not found:
        _unavailable(f"{name} in {req}")
    return str(found[0])


def offload_bundler() -> str:
    """LLVM's ``clang-offload-bundler`` (Debian ``clang-tools-22``; CCOB v3 needs LLVM 20+)."""
    for candidate in ("clang-offload-bundler", *(f"/usr/lib/llvm-{v}/bin/clang-offload-bundler" for v in (22, 21, 20))):
        path = shutil.which(candidate) or (candidate if os.access(candidate, os.X_OK) else None)
        if path:
            return path
    _unavailable("clang-offload-bundler (Debian clang-tools-22)")
    raise AssertionError("unreachable")


def bitsandbytes_lib(name: str) -> Path:
    """A library of the bitsandbytes 0.50.2 wheel (``libbitsandbytes_cuda128.so``)."""
    return extracted("bitsandbytes==0.50.2") / "bitsandbytes" / name


def cuda_runtime(version: str) -> Path:
    """The unpacked ``nvidia-cuda-runtime-cu12`` wheel (its ``nvidia/`` and ``*.dist-info/``)."""
    return extracted(f"nvidia-cuda-runtime-cu12=={version}")


def make_fatbin(
    out: Path, *, sass: tuple[str, ...] = (), ptx: tuple[str, ...] = (), isa: str = "8.7", compress: bool = False
) -> Path:
    """A fat binary made by NVIDIA's ``ptxas`` and ``fatbinary`` with exactly these targets
    (``sass=("sm_80", "sm_90a")``, ``ptx=("compute_90",)``)."""
    work = out.parent / (out.name + ".d")
    work.mkdir(parents=True, exist_ok=True)
    images: list[str] = []
    for target in sass:
        src = work / f"{target}.ptx"
        src.write_text(PTX_KERNEL.format(isa=isa, target=target))
        cubin = work / f"{target}.cubin"
        subprocess.run(
            [nvidia_tool("ptxas"), f"-arch={target}", str(src), "-o", str(cubin)], check=True, capture_output=True
        )
        images.append(f"--image3=kind=elf,sm={target.removeprefix('sm_')},file={cubin}")
    for target in ptx:
        arch = target.replace("compute_", "sm_")
        src = work / f"{target}.ptx"
        src.write_text(PTX_KERNEL.format(isa=isa, target=arch))
        images.append(f"--image3=kind=ptx,sm={arch.removeprefix('sm_')},file={src}")
    flags = ["--compress-all"] if compress else ["--compress=false"]
    subprocess.run(
        [nvidia_tool("fatbinary"), f"--create={out}", "-64", *flags, *images], check=True, capture_output=True
    )
    return out


def make_library(out: Path, fatbin: Path, *, section: str = ".nv_fatbin") -> Path:
    """A real x86-64 shared object (gcc) carrying ``fatbin`` in ``section``, as nvcc's host link puts it."""
    if shutil.which("gcc") is None or shutil.which("objcopy") is None:
        _unavailable("gcc and objcopy")
    src = out.with_suffix(".c")
    src.write_text("int builder_probe_symbol(void) { return 1; }\n")
    plain = out.with_suffix(".plain.so")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(plain), str(src)], check=True, capture_output=True)
    subprocess.run(
        [
            "objcopy",
            "--add-section",
            f"{section}={fatbin}",
            "--set-section-flags",
            f"{section}=alloc,readonly",
            str(plain),
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    return out


def cuobjdump_targets(path: Path) -> tuple[set[str], set[str]]:
    """(SASS, PTX) targets ``cuobjdump -all --list-elf --list-ptx`` lists for ``path``
    (``sm_90a.cubin`` -> ``sm_90a``; PTX ``sm_120.ptx`` -> ``compute_120``)."""
    r = subprocess.run(
        [nvidia_tool("cuobjdump"), "-all", "--list-elf", "--list-ptx", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    sass: set[str] = set()
    ptx: set[str] = set()
    for line in r.stdout.splitlines():
        name = line.split(":", 1)[-1].strip()
        if line.startswith("ELF file"):
            sass.add(name.rsplit(".", 2)[-2])
        elif line.startswith("PTX file"):
            ptx.add("compute_" + name.rsplit(".", 2)[-2].removeprefix("sm_"))
    if r.returncode != 0 and not (sass or ptx):
        pytest.fail(f"cuobjdump failed on {path}: {r.stderr.strip()}")
    return sass, ptx
