"""AMD GPU code objects shipped as files of their own (``*.co``, ``*.hsaco``: rocBLAS/hipBLASLt Tensile
libraries, MIOpen kernels, ``hipModuleLoad`` blobs): ELF files of machine ``EM_AMDGPU`` whose header names
the processor and its xnack/sramecc settings in ``e_flags``.

Sources: LLVM AMDGPU usage, "ELF Header" (``e_machine`` 224 ``EM_AMDGPU``, ``EI_OSABI`` 64
``ELFOSABI_AMDGPU_HSA``, ``EI_ABIVERSION`` 1 = code object v3, 2 = v4, 3 = v5, 4 = v6) and "AMDGPU ELF Header
e_flags" (``EF_AMDGPU_MACH`` = ``e_flags & 0xff``; v3: ``EF_AMDGPU_FEATURE_XNACK_V3`` 0x100,
``EF_AMDGPU_FEATURE_SRAMECC_V3`` 0x200; v4+: ``EF_AMDGPU_FEATURE_XNACK_V4`` 0x300 = unsupported 0x000, any
0x100, off 0x200, on 0x300, ``EF_AMDGPU_FEATURE_SRAMECC_V4`` 0xc00 = unsupported, any 0x400, off 0x800, on
0xc00), https://llvm.org/docs/AMDGPUUsage.html#elf-header; the processor numbers as LLVM's own test
lists them, https://github.com/llvm/llvm-project/blob/b243be31f0e2ce555ff2dfb3e2e58bf7420f25c7/llvm/test/CodeGen/AMDGPU/elf-header-flags-mach.ll
(checked against the code objects in bitsandbytes' ROCm bundles, ``tests/unit/image/test_gpu_code.py``).
"""

from __future__ import annotations

import struct

EM_AMDGPU = 224
#: ``EF_AMDGPU_MACH`` -> processor (GCN and later; r600 targets carry no ROCm code)
MACH: dict[int, str] = {
    0x20: "gfx600", 0x21: "gfx601", 0x3A: "gfx602", 0x22: "gfx700", 0x23: "gfx701", 0x24: "gfx702",
    0x25: "gfx703", 0x26: "gfx704", 0x3B: "gfx705", 0x28: "gfx801", 0x29: "gfx802", 0x2A: "gfx803",
    0x3C: "gfx805", 0x2B: "gfx810", 0x2C: "gfx900", 0x2D: "gfx902", 0x2E: "gfx904", 0x2F: "gfx906",
    0x30: "gfx908", 0x31: "gfx909", 0x3F: "gfx90a", 0x32: "gfx90c", 0x4C: "gfx942", 0x4F: "gfx950",
    0x33: "gfx1010", 0x34: "gfx1011", 0x35: "gfx1012", 0x42: "gfx1013", 0x36: "gfx1030", 0x37: "gfx1031",
    0x38: "gfx1032", 0x39: "gfx1033", 0x3E: "gfx1034", 0x3D: "gfx1035", 0x45: "gfx1036", 0x41: "gfx1100",
    0x46: "gfx1101", 0x47: "gfx1102", 0x44: "gfx1103", 0x43: "gfx1150", 0x4A: "gfx1151", 0x55: "gfx1152",
    0x58: "gfx1153", 0x57: "gfx1154", 0x5D: "gfx1170", 0x5E: "gfx1171", 0x5C: "gfx1172", 0x48: "gfx1200",
    0x4E: "gfx1201", 0x49: "gfx1250", 0x5A: "gfx1251", 0x50: "gfx1310",
    0x51: "gfx9-generic", 0x5F: "gfx9-4-generic", 0x52: "gfx10-1-generic", 0x53: "gfx10-3-generic",
    0x54: "gfx11-generic", 0x62: "gfx11-7-generic", 0x59: "gfx12-generic", 0x5B: "gfx12-5-generic",
    0x63: "gfx13-generic",
}  # fmt: skip
_V4_SETTING = {0x1: "", 0x2: "-", 0x3: "+"}  # 0: unsupported, 1: any (no suffix), 2: off, 3: on


def code_object_target(header: bytes) -> str | None:
    """The target id (``gfx90a``, ``gfx942:sramecc+:xnack-``) of an AMDGPU code object from the first 64
    bytes of the file (a little-endian ELF64 header); None for any other ELF file or an unknown processor."""
    if len(header) < 52 or header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
        return None
    machine = struct.unpack_from("<H", header, 18)[0]
    if machine != EM_AMDGPU:
        return None
    flags = struct.unpack_from("<I", header, 48)[0]
    processor = MACH.get(flags & 0xFF)
    if processor is None:
        return None
    abi = header[8]
    features: list[str] = []
    if abi >= 2:  # code object v4 and later: a 2-bit setting each
        sramecc = _V4_SETTING.get((flags >> 10) & 0x3)
        xnack = _V4_SETTING.get((flags >> 8) & 0x3)
        if sramecc:
            features.append(f"sramecc{sramecc}")
        if xnack:
            features.append(f"xnack{xnack}")
    else:  # v3: a bit each, set = on
        if flags & 0x200:
            features.append("sramecc+")
        if flags & 0x100:
            features.append("xnack+")
    return ":".join([processor, *features])


__all__ = ["EM_AMDGPU", "MACH", "code_object_target"]
