"""Mutable collection of host facts while tool output is parsed, and the value readers the parsers share.

The parsers (:mod:`~builder.checks.host.nvidia`, :mod:`~builder.checks.host.amd`,
:mod:`~builder.checks.host.dockerinfo`) add what they read to one :class:`Accumulator`;
:func:`builder.checks.host.assemble.assemble` turns it into frozen :class:`~builder.checks.host.model.HostInfo`.
Missing fields and ``N/A``-style markers are None (``model.clean``).
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

from builder.checks.host.model import MigDevice, clean

if TYPE_CHECKING:
    from collections.abc import Iterable

BUS_RE = re.compile(r"\b([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\b")
MEM_RE = re.compile(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB", re.I)
_TRANSCRIPT_PREFIX = re.compile(r"^(?:<[^>]+>|[\w.-]+)\s+(?:out|err):\s?")


def normalize_bus_id(bus: str | None) -> str | None:
    """``00000000:17:00.0`` / ``0000:17:00.0`` -> ``0000:17:00.0`` (lower case, 4-digit domain)."""
    b = clean(bus)
    if b is None:
        return None
    m = BUS_RE.search(b)
    if not m:
        return b.lower()
    dom, rest = m.group(1).split(":", 1)
    return f"{int(dom, 16):04x}:{rest}".lower()


def read_int(value: str | None) -> int | None:
    """The first integer in a tool value (``"2 GPUs"`` -> 2), None when unknown."""
    v = clean(value)
    if v is None:
        return None
    m = re.search(r"-?\d+", v)
    return int(m.group(0)) if m else None


def read_mib(value: str | None) -> int | None:
    """ "81559 MiB" -> 81559; "80 GiB" -> 81920; bytes (large bare numbers) -> MiB."""
    v = clean(value)
    if v is None:
        return None
    m = re.search(r"([\d.]+)\s*([KMGT]i?B|B)?", v, re.I)
    if not m:
        return None
    num = float(m.group(1))
    unit = (m.group(2) or "").upper().replace("I", "")
    factor = {"B": 1 / 2**20, "KB": 1 / 1024, "MB": 1, "GB": 1024, "TB": 1024 * 1024}.get(unit)
    if factor is None:  # bare number: bytes when huge, else MiB
        factor = 1 / 2**20 if num > 10**7 else 1
    return round(num * factor)


def strip_transcript(lines: Iterable[str]) -> list[str]:
    """Remove a per-line prefix added by a log collector (``<node> out: ``) when most lines have it."""
    raw = [line.rstrip("\r\n") for line in lines]
    prefixed = sum(1 for line in raw if _TRANSCRIPT_PREFIX.match(line))
    if prefixed < 3:
        return raw
    return [line[m.end() :] if (m := _TRANSCRIPT_PREFIX.match(line)) else line for line in raw]


_VERSION = re.compile(r"\d+(?:\.\d+)*(?:[-+~._][0-9A-Za-z]+)*")


def read_version(v: str | None) -> str | None:
    """A version as a tool prints it (``550.144.03``, ``6.10.5``, the kernel release ``4.18.0-348.el8.x86_64``
    some rocm-smi versions print as the driver's); None when unknown or not a version: a value that does not
    start with a digit or carries other text (``Linuxver``, amd-smi's cut-off kernel banner
    ``Linuxversion6.8.0-79-generic(buildd@...)``, https://github.com/ROCm/k8s-device-plugin/issues/157) is never
    a driver version."""
    c = clean(v)
    if c is None:
        return None
    c = c.rstrip(".,")
    return c if _VERSION.fullmatch(c) else None


@dataclasses.dataclass
class GpuAccumulator:
    """Fields of one GPU read so far (the first value read wins unless ``override``) and its MIG devices."""

    fields: dict[str, Any] = dataclasses.field(default_factory=dict)
    mig: list[MigDevice] = dataclasses.field(default_factory=list)

    def set(self, key: str, value: object, *, override: bool = False) -> None:
        if value is None:
            return
        if override or self.fields.get(key) is None:
            self.fields[key] = value


@dataclasses.dataclass
class Accumulator:
    """Everything read so far: vendor hints, host-level fields (``top``), GPUs, sources, notes, engine facts."""

    vendor_hint: set[str] = dataclasses.field(default_factory=set)
    top: dict[str, Any] = dataclasses.field(default_factory=dict)
    gpus: list[GpuAccumulator] = dataclasses.field(default_factory=list)
    sources: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    engine: dict[str, Any] = dataclasses.field(default_factory=dict)

    def set(self, key: str, value: object, *, override: bool = False) -> None:
        if value is None:
            return
        if override or self.top.get(key) is None:
            self.top[key] = value

    def gpu_for(
        self, *, index: int | None = None, bus: str | None = None, position: int | None = None
    ) -> GpuAccumulator:
        """Find or create the GPU matching bus id, else index, else position."""
        nb = normalize_bus_id(bus) if bus else None
        if nb:
            for g in self.gpus:
                if g.fields.get("bus_id") == nb:
                    return g
            # an index match whose bus is unknown
            if index is not None:
                for g in self.gpus:
                    if g.fields.get("index") == index and g.fields.get("bus_id") is None:
                        g.set("bus_id", nb)
                        return g
        elif index is not None:
            for g in self.gpus:
                if g.fields.get("index") == index:
                    return g
        elif position is not None and position < len(self.gpus):
            return self.gpus[position]
        g = GpuAccumulator()
        if nb:
            g.set("bus_id", nb)
        if index is not None:
            g.set("index", index)
        self.gpus.append(g)
        return g
