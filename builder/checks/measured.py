"""The device check's architecture step from the GPU code measured in the image's layers (issue 15
item 2): each GPU of the host judged against every GPU library that loads in the image
(:func:`builder.compat.kernels.kernel_verdicts`: ``native``, ``jit`` or ``none``), whatever the framework.
The in-container ``probe/arch-coverage`` step reads only torch's compiled list; this step also covers
JAX, TensorFlow and custom extensions (bitsandbytes, flash-attn, ...), and names the library that has
no code for the GPU ("no kernel image is available for execution on the device" before it happens).

Pure: the measurement is made by the caller (:func:`builder.image.inspection.inspect_image`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from builder.compat.gpus import sm_of
from builder.compat.kernels import kernel_verdicts

if TYPE_CHECKING:
    from builder.checks.host.model import HostInfo
    from builder.compat.kernels import KernelBinary

#: the step's name in the check result and the device-check/v1 predicate
STEP = "arch-measured"


def measured_arch(host: HostInfo, kernels: tuple[KernelBinary, ...]) -> tuple[bool, dict[str, Any], str | None]:
    """(ok, detail, error) of the architecture step: ``detail['devices']`` has one row per GPU of the host
    (``device``, ``target``, ``native``/``jit``/``none``: library paths); ``detail['libraries']`` how many
    were judged. Not ok when a library has no code a GPU can run (``error`` names each, with the GPU);
    ok with ``detail['skipped']`` when nothing can be judged (no GPU of the vendor, no GPU library in the
    image, no GPU target known)."""
    if host.vendor not in ("nvidia", "amd"):
        return True, {"skipped": f"no GPU on the host (vendor {host.vendor})"}, None
    relevant = [b for b in kernels if (b.is_hip if host.vendor == "amd" else b.is_cuda)]
    if not relevant:
        return True, {"skipped": f"the image has no {host.vendor} GPU library (nothing measured)"}, None
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    for i, gpu in enumerate(host.gpus):
        target = sm_of(gpu.compute_capability) if gpu.compute_capability else gpu.gfx_target
        if not target:
            continue
        verdicts = kernel_verdicts(tuple(relevant), target, vendor=host.vendor, driver_cuda=host.cuda_version)
        row: dict[str, Any] = {"device": gpu.index if gpu.index is not None else i, "target": target}
        for name in ("native", "jit", "none"):
            row[name] = [v.path for v in verdicts if v.verdict == name]
        rows.append(row)
        errors.extend(f"GPU {row['device']} ({target}): {v.reason}" for v in verdicts if v.verdict == "none")
    if not rows:
        return True, {"skipped": "no GPU of the host reports a compute capability or gfx target"}, None
    detail = {"libraries": len(relevant), "devices": rows}
    return not errors, detail, "; ".join(errors) or None


__all__ = ["STEP", "measured_arch"]
