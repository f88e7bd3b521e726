"""nccl-tests / rccl-tests ``*_perf`` output (e.g. ``all_reduce_perf``): the result table and the
``# Avg bus bandwidth`` summary.

Format (https://github.com/NVIDIA/nccl-tests, ``src/common.cu``; the meaning of algbw and busbw:
https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md): a ``#`` header naming the
columns ``size count type redop root time algbw busbw #wrong`` for out-of-place then in-place
(older releases: no ``root`` column and ``error`` instead of ``#wrong``), a units line, one row per
message size, then ``# Out of bounds values : N OK`` and ``# Avg bus bandwidth    : X``. Lines may
carry an ``mpirun --tag-output`` prefix (``[1,0]<stdout>:``) and NCCL INFO lines may be interleaved.
Sizes are bytes, times microseconds, bandwidths GB/s. Real outputs: tests/data/nccl-tests/.
"""

from __future__ import annotations

import dataclasses
import re

from typing_extensions import TypedDict

_PREFIX = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(\w+)")
_NUM = re.compile(r"^-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$")


class NcclRowDocument(TypedDict):
    size_bytes: int
    count: int
    type: str
    redop: str
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None
    in_place_busbw_gbps: float | None


class NcclResultDocument(TypedDict):
    """A parsed run: every row, the tool's own average bus bandwidth (GB/s; None when the output has
    no summary), the peak busbw over the rows, the out-of-bounds count and the notes."""

    rows: list[NcclRowDocument]
    avg_busbw_gbps: float | None
    peak_busbw_gbps: float | None
    out_of_bounds: int | None
    notes: list[str]


@dataclasses.dataclass(frozen=True)
class NcclRow:
    """One message size: out-of-place time (us), algbw and busbw (GB/s), wrong values; the in-place
    busbw when the row has it."""

    size_bytes: int
    count: int
    type: str
    redop: str
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None = None
    in_place_busbw_gbps: float | None = None

    def to_json(self) -> NcclRowDocument:
        return {
            "size_bytes": self.size_bytes,
            "count": self.count,
            "type": self.type,
            "redop": self.redop,
            "time_us": self.time_us,
            "algbw_gbps": self.algbw_gbps,
            "busbw_gbps": self.busbw_gbps,
            "wrong": self.wrong,
            "in_place_busbw_gbps": self.in_place_busbw_gbps,
        }


@dataclasses.dataclass(frozen=True)
class NcclResult:
    rows: tuple[NcclRow, ...] = ()
    avg_busbw_gbps: float | None = None
    out_of_bounds: int | None = None
    notes: tuple[str, ...] = ()

    @property
    def peak_busbw_gbps(self) -> float | None:
        """The highest out-of-place busbw over the rows (the number to compare with the link speed
        for large messages), None without rows."""
        return max((r.busbw_gbps for r in self.rows), default=None)

    @property
    def ok(self) -> bool:
        """Rows were read, and no row or summary reports wrong values."""
        wrong = any((r.wrong or 0) > 0 for r in self.rows) or (self.out_of_bounds or 0) > 0
        return bool(self.rows) and not wrong

    def to_json(self) -> NcclResultDocument:
        return {
            "rows": [r.to_json() for r in self.rows],
            "avg_busbw_gbps": self.avg_busbw_gbps,
            "peak_busbw_gbps": self.peak_busbw_gbps,
            "out_of_bounds": self.out_of_bounds,
            "notes": list(self.notes),
        }


def _row(tokens: list[str], has_root: bool) -> NcclRow | None:
    """A table row; None when it is not one (a log line). Columns: size count type redop [root] then
    time algbw busbw wrong (out-of-place) and the same in place (may be missing in a cut output)."""
    head = 5 if has_root else 4
    if len(tokens) < head + 3 or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    nums = tokens[head:]
    if not all(_NUM.match(t) or t == "N/A" for t in nums[:3]) or "N/A" in nums[:3]:
        return None
    wrong = int(nums[3]) if len(nums) > 3 and nums[3].isdigit() else None
    in_place = float(nums[6]) if len(nums) > 6 and _NUM.match(nums[6]) else None
    return NcclRow(
        int(tokens[0]),
        int(tokens[1]),
        tokens[2],
        tokens[3],
        float(nums[0]),
        float(nums[1]),
        float(nums[2]),
        wrong,
        in_place,
    )


def parse_nccl_tests(text: str) -> NcclResult:
    """The rows and summary of one ``*_perf`` run; never raises (a row it cannot read is a note)."""
    rows: list[NcclRow] = []
    avg: float | None = None
    oob: int | None = None
    notes: list[str] = []
    has_root = True
    header_seen = False
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw).strip()
        if not line:
            continue
        if line.startswith("#"):
            body = line.lstrip("#").split()
            if body[:2] == ["size", "count"]:
                header_seen = True
                has_root = "root" in body[: body.index("time")] if "time" in body else True
            if (m := _AVG.match(line)) is not None:
                avg = float(m.group(1))
            if (m := _OOB.match(line)) is not None:
                oob = int(m.group(1))
            continue
        tokens = line.split()
        row = _row(tokens, has_root)
        if row is None and tokens and tokens[0].isdigit() and not header_seen:
            row = _row(tokens, not has_root)  # a table without its header: try the other layout
        if row is not None:
            rows.append(row)
    if not rows:
        notes.append("no result rows")
    return NcclResult(tuple(rows), avg, oob, tuple(notes))


__all__ = ["NcclResult", "NcclResultDocument", "NcclRow", "NcclRowDocument", "parse_nccl_tests"]
