"""The verdict of a ROCm image on an AMD host (:func:`check_amd`): the GPU's gfx target among the ROCm
release's supported targets and the host's amdgpu driver among the drivers tested with that user space
(``rocm.csv``, from the ROCm compatibility matrix,
https://rocm.docs.amd.com/en/latest/compatibility/compatibility-matrix.html); a CUDA image on an AMD host
is blocked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from builder.compat._data import major_minor, rocm_rows
from builder.compat.frameworks import ArchCoverage, rocm_row
from builder.compat.verdict import Verdict, finish_verdict

if TYPE_CHECKING:
    from builder.compat.gpus import GpuClass


def check_amd(
    *,
    driver: str | None,
    rocm: str | None,
    cuda: str | None,
    info_class: GpuClass,
    arch: ArchCoverage | None,
    common: dict[str, Any],
) -> Verdict:
    reasons: list[str] = []
    base: dict[str, Any] = {**common, "vendor": "amd", "image_rocm": rocm, "gpu_class": info_class}
    if cuda and not rocm:
        reasons.append(f"CUDA {cuda} image on an AMD host: it needs an NVIDIA GPU and driver")
        return finish_verdict("blocked", None, reasons, arch, base)
    assert rocm is not None
    row = rocm_row(rocm)
    target = common.get("target")
    if row is None:
        reasons.append(f"ROCm {rocm} is not in rocm.csv: support of the GPU and driver cannot be checked")
    else:
        if target and target.startswith("gfx"):
            if target in row.gfx_targets:
                reasons.append(f"{target} is supported by ROCm {row.rocm}")
            else:
                reasons.append(
                    f"{target} is not in ROCm {row.rocm}'s supported targets "
                    f"({', '.join(row.gfx_targets)}): unsupported"
                )
        if driver:
            try:
                kmd: str | None = major_minor(Version(driver))
            except InvalidVersion:  # not a ROCm release: say so, do not guess
                kmd = None
            known_lines = {major_minor(Version(r.rocm)) for r in rocm_rows()}
            if kmd is None or kmd not in known_lines:
                # an amdgpu/kernel version (amd-smi "amdgpu version: 6.10.5") is not a ROCm release: never guess
                reasons.append(
                    f"amdgpu driver {driver!r} is not a known ROCm release (pass amd-smi's 'ROCm version'): "
                    "driver compatibility not checked"
                )
            elif kmd in row.kmd_tested:
                reasons.append(f"amdgpu driver of ROCm {kmd} is tested with ROCm {row.rocm} user space")
            else:
                reasons.append(
                    f"amdgpu driver of ROCm {kmd} is not among the tested drivers for ROCm {row.rocm} user space "
                    f"({', '.join(row.kmd_tested)}): upgrade the host driver"
                )
                return finish_verdict("blocked", None, reasons, arch, base)
        else:
            reasons.append("amdgpu driver release unknown: driver compatibility not checked")
    return finish_verdict("ok", None, reasons, arch, base)


__all__ = ["check_amd"]
