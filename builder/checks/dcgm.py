"""``dcgmi diag`` (NVIDIA DCGM diagnostics) table output: metadata, and each test's result per category.

Format (https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html; real
outputs in tests/data/dcgm/ with their public URLs): ``Successfully ran diagnostic for group.``, a
``| Diagnostic | Result |`` table whose section rows read ``|-----  Deployment  ----+---|`` (or with
``+`` at the edges), then one row per test: ``| NVML Library | Pass |``; results are ``Pass``,
``Fail``, ``Warn`` or ``Skip``, optionally followed by detail (``Fail - GPU: 0``); a row whose first
cell is empty continues the detail of the row above (``Warning:`` / error text). The ``Metadata``
section holds ``DCGM Version``, ``Driver Version Detected``, ``GPU Device IDs Detected``.

Pure parser; never raises: what it cannot read is a note. An output cut short (the table has no
closing line) is said so in ``notes``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from typing_extensions import TypedDict

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

_SECTION = re.compile(r"^[|+]-+\s+(?P<name>[A-Za-z][A-Za-z /]*?)\s+-+[+|]")
_ROW = re.compile(r"^\|(?P<name>[^|]*)\|(?P<value>[^|]*)\|?\s*$")
_RESULT = re.compile(r"^(?P<status>Pass|Fail|Warn|Skip)\b\s*(?:-\s*)?(?P<detail>.*)$", re.IGNORECASE)


class DcgmTestDocument(TypedDict):
    category: str
    test: str
    result: str
    detail: str


class DcgmDiagDocument(TypedDict):
    metadata: dict[str, str]
    tests: list[DcgmTestDocument]
    passed: bool
    complete: bool
    notes: list[str]


@dataclasses.dataclass(frozen=True)
class DcgmTest:
    """One test: its ``category`` (``Deployment``, ``Integration``, ``Hardware``, ``Stress``), name,
    ``result`` (``pass`` | ``fail`` | ``warn`` | ``skip``) and ``detail`` (lines joined with ``; ``)."""

    category: str
    test: str
    result: str
    detail: str = ""

    def to_json(self) -> DcgmTestDocument:
        return {"category": self.category, "test": self.test, "result": self.result, "detail": self.detail}


@dataclasses.dataclass(frozen=True)
class DcgmDiag:
    """A parsed ``dcgmi diag`` run: ``metadata`` (name -> value), ``tests``, whether the table was
    ``complete`` (its closing line seen) and ``notes``."""

    metadata: tuple[tuple[str, str], ...] = ()
    tests: tuple[DcgmTest, ...] = ()
    complete: bool = False
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """Tests were read, none failed, and the table was complete (a cut output proves nothing)."""
        return bool(self.tests) and self.complete and not any(t.result == "fail" for t in self.tests)

    def failed(self) -> tuple[DcgmTest, ...]:
        return tuple(t for t in self.tests if t.result == "fail")

    def to_json(self) -> DcgmDiagDocument:
        return {
            "metadata": dict(self.metadata),
            "tests": [t.to_json() for t in self.tests],
            "passed": self.passed,
            "complete": self.complete,
            "notes": list(self.notes),
        }


def parse_dcgm_diag(text: str) -> DcgmDiag:
    """The metadata and test results of one ``dcgmi diag`` table output."""
    section: str | None = None
    metadata: list[tuple[str, str]] = []
    tests: list[DcgmTest] = []
    notes: list[str] = []
    in_table = False
    complete = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("| Diagnostic") and "Result" in line:
            in_table = True
            continue
        if not in_table:
            continue
        m = _SECTION.match(line)
        if m:
            section = m.group("name").strip()
            continue
        if re.fullmatch(r"\+[-=+]+\+", line):
            complete = section is not None  # the closing border after the last section
            continue
        complete = False
        r = _ROW.match(line)
        if r is None:
            if line:
                notes.append(f"unread line: {line[:80]}")
            continue
        name, value = r.group("name").strip(), r.group("value").strip()
        if section is None:
            notes.append(f"row before any section: {name}")
            continue
        if section.lower() == "metadata":
            metadata.append((name, value))
            continue
        if not name and tests:  # continuation of the row above (warning / error text)
            last = tests[-1]
            tests[-1] = dataclasses.replace(last, detail="; ".join(x for x in (last.detail, value) if x))
            continue
        res = _RESULT.match(value)
        if res is None:
            notes.append(f"{section} / {name}: result {value!r} is not Pass, Fail, Warn or Skip")
            continue
        tests.append(DcgmTest(section, name, res.group("status").lower(), res.group("detail").strip()))
    if not in_table:
        notes.append("no `| Diagnostic | Result |` table")
    elif not complete:
        notes.append("the table has no closing line (output cut short?)")
    return DcgmDiag(tuple(metadata), tuple(tests), complete, tuple(notes))


def probe_dcgm(run: Callable[[Sequence[str]], tuple[int, str]] | None = None) -> DcgmDiag | None:
    """The short DCGM diagnostic on this host (``dcgmi diag -r 1``: deployment and software checks,
    seconds); None when ``dcgmi`` is not installed. A run that fails (no host engine) is a ``DcgmDiag``
    whose note says so. ``run`` (tests) returns (exit code, stdout); default :func:`builder.process.run`."""
    argv = ["dcgmi", "diag", "-r", "1"]
    if run is None:
        from builder import process

        def run(cmd: Sequence[str]) -> tuple[int, str]:
            try:
                p = process.run(list(cmd), timeout=300)
            except FileNotFoundError:
                return 127, ""
            return p.returncode, p.stdout + p.stderr

    code, out = run(argv)
    if code == 127 and not out:
        return None
    diag = parse_dcgm_diag(out)
    if code != 0 and not diag.tests:
        return DcgmDiag(notes=(f"dcgmi diag -r 1 exited with {code}: {out.strip()[:200]}",))
    return diag


__all__ = ["DcgmDiag", "DcgmDiagDocument", "DcgmTest", "DcgmTestDocument", "parse_dcgm_diag", "probe_dcgm"]
