"""The CPU model of a host, from its ``/proc/cpuinfo`` (this host's, or the text of a cluster node's).

Format: the Linux kernel's ``/proc/cpuinfo`` (https://www.kernel.org/doc/html/latest/filesystems/proc.html),
``key\t: value`` lines; the CPU is named by ``model name`` (x86), else by ``Model``.
"""

from __future__ import annotations

from pathlib import Path


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The first ``model name`` of ``/proc/cpuinfo`` (Linux, x86), else ``Model`` (arm64), else None."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return None
    return cpu_model_of(text)


def cpu_model_of(text: str) -> str | None:
    """:func:`cpu_model` of a ``/proc/cpuinfo`` text read elsewhere (a cluster node); None when it names none."""
    for key in ("model name", "Model"):
        for line in text.splitlines():
            k, sep, v = line.partition(":")
            if sep and k.strip() == key and v.strip():
                return " ".join(v.split())
    return None


__all__ = ["cpu_model", "cpu_model_of"]
