"""``nvidia-container-cli info`` (libnvidia-container): the driver and GPUs as the NVIDIA container hook sees them.

The tool prints ``NVRM version:`` (the kernel driver), ``CUDA version:`` (the newest CUDA the driver supports)
and one block per GPU (``Device Index``, ``Model``, ``Brand``, ``GPU UUID``, ``Bus Location``, ``Architecture``
= compute capability), between ``I``/``W`` log lines when run with ``-d /dev/tty``. ``(null)`` marks a value it
could not read (Jetson/Tegra boards have no NVML: no driver version, UUID or bus). Source of the format:
libnvidia-container's ``src/cli/info.c`` (https://github.com/NVIDIA/libnvidia-container/blob/main/src/cli/info.c)
and the recorded outputs in tests/data/host-formats/nvidia-container-cli-*.txt.
"""

from __future__ import annotations

import re

from builder.checks.host.accumulator import Accumulator, normalize_bus_id, read_int, read_version, strip_transcript
from builder.checks.host.model import clean

_HEADER = re.compile(r"^\s*NVRM version:\s*(.*)$", re.M)
_KEY = re.compile(r"^\s*(Device Index|Device Minor|Model|Brand|GPU UUID|Bus Location|Architecture):\s*(.*?)\s*$")


def parse_container_cli_info(text: str, acc: Accumulator | None = None) -> Accumulator:
    """Read ``nvidia-container-cli info`` output into ``acc``: driver version, CUDA version, and per GPU its
    index, name (``Model``), brand, UUID, bus id and compute capability. Nothing is read when the text has no
    ``NVRM version:`` line; ``(null)`` values stay unknown."""
    acc = acc or Accumulator()
    if not _HEADER.search(text):
        return acc
    gpu = None
    for line in strip_transcript(text.splitlines()):
        m = re.match(r"^\s*NVRM version:\s*(.*)$", line)
        if m:
            acc.set("driver_version", read_version(m.group(1)))
            continue
        m = re.match(r"^\s*CUDA version:\s*(.*)$", line)
        if m:
            acc.set("cuda_version", read_version(m.group(1)))
            continue
        km = _KEY.match(line)
        if not km:
            continue
        key, value = km.group(1), clean(km.group(2))
        if key == "Device Index":
            idx = read_int(value)
            gpu = acc.gpu_for(index=idx)
            gpu.set("index", idx)
        elif gpu is None:
            continue
        elif key == "Model":
            gpu.set("name", value, override=True)
        elif key == "Brand":
            gpu.set("brand", value)
        elif key == "GPU UUID":
            gpu.set("uuid", value)
        elif key == "Bus Location" and value:
            gpu.set("bus_id", normalize_bus_id(value))
        elif key == "Architecture" and value and re.fullmatch(r"\d+\.\d+", value):
            gpu.set("compute_capability", value)
    acc.vendor_hint.add("nvidia")
    acc.sources.append("nvidia-container-cli info")
    return acc


__all__ = ["parse_container_cli_info"]
