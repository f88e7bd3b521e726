"""The GPU code read from ELF files equals what the vendors' own tools report.

CUDA: NVIDIA's ``cuobjdump -all --list-elf --list-ptx`` (PyPI ``nvidia-cuda-cuobjdump``) on the real
bitsandbytes 0.50.2 libraries, and on libraries made here by NVIDIA's ``ptxas`` + ``fatbinary`` with the
arch-specific (``sm_90a``, ``sm_100a``), family (``sm_100f``, ``sm_120f``) and compressed entries no wheel
at hand carries. cuobjdump names a family cubin by its base (``sm_100f`` -> ``sm_100``) but keeps the
suffix on PTX; the comparison says so.

HIP: LLVM's ``clang-offload-bundler --list``. On a whole ``.hip_fatbin`` section the tool FAILS ("Src size
is incorrect": a section holds one compressed bundle per translation unit); the test shows that, then
splits the section at each bundle's own total size (its CCOB header) and lists every bundle.
"""

from __future__ import annotations

import struct
import subprocess
import zlib
from typing import TYPE_CHECKING

import pytest
import zstandard

from builder.image.elf import scan_bytes, scan_files
from tests import gpu_code

if TYPE_CHECKING:
    from pathlib import Path

CUDA_LIBS = [
    "libbitsandbytes_cuda118.so",
    "libbitsandbytes_cuda126.so",
    "libbitsandbytes_cuda128.so",
    "libbitsandbytes_cuda130.so",
]
ROCM_LIBS = ["libbitsandbytes_rocm64.so", "libbitsandbytes_rocm72.so", "libbitsandbytes_rocm714.so"]


def _cuobjdump_view(sass: tuple[str, ...]) -> set[str]:
    """Our SASS targets as cuobjdump names them: a family cubin under its base name."""
    return {s.removesuffix("f") if s.endswith("f") else s for s in sass}


@pytest.mark.parametrize("name", CUDA_LIBS)
def test_cuda_targets_of_pypi_libraries_equal_cuobjdump(name: str) -> None:
    lib = gpu_code.bitsandbytes_lib(name)
    [code] = scan_files([str(lib)])
    sass, ptx = gpu_code.cuobjdump_targets(lib)
    assert _cuobjdump_view(code.sass) == sass
    assert set(code.ptx) == ptx
    assert code.ptx_isa is not None


def test_known_targets_of_bitsandbytes_cuda128() -> None:
    """The library bitsandbytes loads with CUDA 12.8: Blackwell SASS and compute_120 PTX (ISA 8.7)."""
    [code] = scan_files([str(gpu_code.bitsandbytes_lib("libbitsandbytes_cuda128.so"))])
    assert code.sass == ("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")
    assert code.ptx == ("compute_120",)
    assert code.ptx_isa == "8.7"
    assert "lz4" in code.compression


@pytest.mark.parametrize(
    ("sass", "ptx", "isa", "compress"),
    [
        (("sm_80", "sm_90a", "sm_100a", "sm_100f", "sm_120f"), ("compute_100f", "compute_100a"), "8.8", False),
        (("sm_90",), ("compute_90",), "7.8", False),
        (("sm_80", "sm_120"), ("compute_120",), "8.7", True),
    ],
)
def test_made_fatbins_in_a_shared_object(
    tmp_path: Path, sass: tuple[str, ...], ptx: tuple[str, ...], isa: str, compress: bool
) -> None:
    fb = gpu_code.make_fatbin(tmp_path / "k.fatbin", sass=sass, ptx=ptx, isa=isa, compress=compress)
    lib = gpu_code.make_library(tmp_path / "libk.so", fb)
    [code] = scan_files([str(lib)])
    assert set(code.sass) == set(sass)
    assert set(code.ptx) == set(ptx)
    assert code.ptx_isa == isa
    assert ("zstd" in code.compression) == compress
    ref_sass, ref_ptx = gpu_code.cuobjdump_targets(lib)
    assert _cuobjdump_view(code.sass) == ref_sass
    assert set(code.ptx) == {p.replace("sm_", "compute_") for p in ref_ptx}


def test_fatbin_outside_nv_fatbin_is_found(tmp_path: Path) -> None:
    """A fat binary embedded in another section (as some builds put it in .rodata) is still read."""
    fb = gpu_code.make_fatbin(tmp_path / "k.fatbin", sass=("sm_86",))
    lib = gpu_code.make_library(tmp_path / "libk.so", fb, section=".rodata.kernels")
    [code] = scan_files([str(lib)])
    assert code.sass == ("sm_86",)


def test_files_that_are_not_elf_are_not_read(tmp_path: Path) -> None:
    fb = gpu_code.make_fatbin(tmp_path / "k.fatbin", sass=("sm_86",))
    assert scan_bytes("/k.fatbin", fb.read_bytes()) is None  # a bare fatbin file is no ELF member
    assert scan_bytes("/x.so", b"\x7fELF" + b"\x50\xed\x55\xba" + b"\x00" * 64) is None  # a magic, no container


def _hip_section(lib: Path, tmp_path: Path) -> bytes:
    out = tmp_path / (lib.name + ".hip_fatbin")
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.hip_fatbin", str(lib), str(out)], check=True)
    return out.read_bytes()


def _bundles(section: bytes) -> list[bytes]:
    """Split a section at each compressed bundle's own total size (CCOB v2: u32, v3: u64)."""
    out = []
    pos = section.find(b"CCOB")
    while pos >= 0:
        version = struct.unpack_from("<H", section, pos + 4)[0]
        total = struct.unpack_from("<I" if version == 2 else "<Q", section, pos + 8)[0]
        out.append(section[pos : pos + total])
        pos = section.find(b"CCOB", pos + total)
    return out


def _bundler_list(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [gpu_code.offload_bundler(), "--list", "--type=o", f"--input={path}"],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("name", ROCM_LIBS)
def test_hip_targets_of_pypi_libraries_equal_clang_offload_bundler(name: str, tmp_path: Path) -> None:
    lib = gpu_code.bitsandbytes_lib(name)
    [code] = scan_files([str(lib)])
    section = _hip_section(lib, tmp_path)
    whole = tmp_path / "section.bin"
    whole.write_bytes(section)
    refused = _bundler_list(whole)
    assert refused.returncode != 0  # the reference tool cannot read a section of several bundles
    listed: set[str] = set()
    bundles = _bundles(section)
    for i, bundle in enumerate(bundles):
        part = tmp_path / f"bundle{i}.bin"
        part.write_bytes(bundle)
        r = _bundler_list(part)
        assert r.returncode == 0, r.stderr
        listed |= {line.split("--", 1)[1] for line in r.stdout.split() if line.startswith("hipv4-amdgcn")}
    assert set(code.gfx) == listed
    assert code.containers == len(bundles)
    assert code.compression == ("zstd",)


@pytest.fixture(scope="module")
def plain_bundle(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A plain bundle made by clang-offload-bundler from two real code objects of bitsandbytes'
    ROCm 7.2 library, with xnack/sramecc features in the target ids."""
    tmp = tmp_path_factory.mktemp("bundle")
    lib = gpu_code.bitsandbytes_lib("libbitsandbytes_rocm72.so")
    first = tmp / "first.bin"
    first.write_bytes(_bundles(_hip_section(lib, tmp))[0])
    bundler = gpu_code.offload_bundler()
    outs = [tmp / "host.o", tmp / "a.o", tmp / "b.o"]
    subprocess.run(
        [
            bundler,
            "--unbundle",
            "--type=o",
            f"--input={first}",
            "--targets=host-x86_64-unknown-linux-gnu-,hipv4-amdgcn-amd-amdhsa--gfx90a,hipv4-amdgcn-amd-amdhsa--gfx942",
            *(f"--output={o}" for o in outs),
        ],
        check=True,
        capture_output=True,
    )
    plain = tmp / "plain.bundle"
    subprocess.run(
        [
            bundler,
            "--type=o",
            f"--output={plain}",
            *(f"--input={o}" for o in outs),
            "--targets=host-x86_64-unknown-linux-gnu-,hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-,"
            "hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
        ],
        check=True,
        capture_output=True,
    )
    return plain.read_bytes()


def _ccob(plain: bytes, version: int, method: int) -> bytes:
    """A compressed bundle in CCOB ``version`` (1-3) with zlib (0) or zstd (1) around ``plain``
    (clang-offload-bundler 22 writes only v2/v3 with zstd; it reads all six, checked below)."""
    data = zlib.compress(plain) if method == 0 else zstandard.ZstdCompressor().compress(plain)
    if version == 1:
        return struct.pack("<4sHHIQ", b"CCOB", 1, method, len(plain), 0) + data
    if version == 2:
        return struct.pack("<4sHHIIQ", b"CCOB", 2, method, 24 + len(data), len(plain), 0) + data
    return struct.pack("<4sHHQQQ", b"CCOB", 3, method, 32 + len(data), len(plain), 0) + data


@pytest.mark.parametrize("form", ["plain", "v1-zlib", "v1-zstd", "v2-zlib", "v2-zstd", "v3-zlib", "v3-zstd"])
def test_bundle_forms_with_features(form: str, plain_bundle: bytes, tmp_path: Path) -> None:
    if form == "plain":
        bundle = plain_bundle
    else:
        v, method = form.split("-")
        bundle = _ccob(plain_bundle, int(v[1]), 0 if method == "zlib" else 1)
    raw = tmp_path / "bundle.bin"
    raw.write_bytes(bundle)
    ref = _bundler_list(raw)
    assert ref.returncode == 0, ref.stderr
    expected = {line.split("--", 1)[1] for line in ref.stdout.split() if "amdgcn" in line}
    assert expected == {"gfx90a:xnack-", "gfx942:sramecc+:xnack-"}
    lib = gpu_code.make_library(tmp_path / "libhip.so", raw, section=".hip_fatbin")
    [code] = scan_files([str(lib)])
    assert set(code.gfx) == expected
    assert code.compression == (("none",) if form == "plain" else (form.split("-")[1],))


def test_corrupt_compressed_bundle_is_skipped_not_fatal(plain_bundle: bytes) -> None:
    bad = _ccob(plain_bundle, 3, 1)
    bad = bad[:40] + bytes(64) + bad[104:]
    assert scan_bytes("/x.so", b"\x7fELF" + bytes(60) + bad) is None


def test_amdgpu_code_object_files_name_their_target(tmp_path: Path) -> None:
    """Every code object in a real bundle (bitsandbytes' ROCm 7.2 library, unbundled by LLVM's
    clang-offload-bundler) names in its ELF header the processor its bundle id says; as a file of its own
    (a kernel library's .co/.hsaco) it is read from the header alone."""
    from builder.image.amdgpu import code_object_target

    lib = gpu_code.bitsandbytes_lib("libbitsandbytes_rocm72.so")
    first = tmp_path / "first.bin"
    first.write_bytes(_bundles(_hip_section(lib, tmp_path))[0])
    listed = _bundler_list(first).stdout.split()
    targets = [t for t in listed if "amdgcn" in t]
    outs = [tmp_path / f"co{i}.o" for i in range(len(listed))]
    subprocess.run(
        [
            gpu_code.offload_bundler(),
            "--unbundle",
            "--type=o",
            f"--input={first}",
            f"--targets={','.join(listed)}",
            *(f"--output={o}" for o in outs),
        ],
        check=True,
        capture_output=True,
    )
    checked = 0
    for bundle_id, out in zip(listed, outs, strict=True):
        if bundle_id not in targets:
            continue
        processor = bundle_id.split("--", 1)[1].split(":")[0]
        header = out.read_bytes()[:64]
        assert code_object_target(header) is not None, bundle_id
        assert str(code_object_target(header)).split(":")[0] == processor
        [code] = scan_files([str(out)])
        assert code.code_object and code.gfx[0].split(":")[0] == processor
        checked += 1
    assert checked == len(targets) >= 10
    assert code_object_target(gpu_code.bitsandbytes_lib("libbitsandbytes_cpu.so").read_bytes()[:64]) is None  # x86-64


def test_code_object_files_of_a_directory_are_judged_as_one_library() -> None:
    """rocBLAS-style kernel libraries ship one code object per target in one directory; the runtime loads
    the GPU's: the directory is one library with every target (a missing one is `none` naming it)."""
    from builder.compat.kernels import kernel_verdict
    from builder.image.elf import GpuCode
    from builder.image.inspection import _grouped

    files = tuple(
        GpuCode(f"/opt/rocm/lib/rocblas/library/TensileLibrary_{t}.co", gfx=(t,), code_object=True)
        for t in ("gfx90a:xnack-", "gfx942")
    )
    [lib] = _grouped((*files, GpuCode("/usr/lib/libother.so", sass=("sm_80",))))[1:]
    assert lib.path == "/opt/rocm/lib/rocblas/library/"
    assert kernel_verdict(lib, "gfx942").verdict == "native"
    assert kernel_verdict(lib, "gfx90a:xnack-").verdict == "native"
    missing = kernel_verdict(lib, "gfx1030")
    assert missing.verdict == "none" and missing.reason.startswith("rocblas/library/: no code object for gfx1030")
