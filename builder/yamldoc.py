"""Validation problems of the project's YAML documents (matrices, policies, fleets), defined once.

Every loader collects all problems of a document before it fails (promo-tools style), each with
its place: the file, the 1-based line and column (0 when unknown), and the path of the field in
the document (``stages.prod.approvals.count``). Commands print them as ``file:line:col: path:
message`` and ``--json`` as :meth:`Problem.to_json`, the same shape for every kind of document.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from typing_extensions import TypedDict

Severity = Literal["error", "warning"]


class ProblemDocument(TypedDict):
    """One validation problem in JSON (every ``--json`` document that reports problems): the
    ``file`` as named, 1-based ``line`` and ``col`` (0: unknown), the dotted field ``path``
    (empty: the whole document), the ``message`` and its ``severity``."""

    file: str
    line: int
    col: int
    path: str
    message: str
    severity: Severity


@dataclasses.dataclass(frozen=True)
class Problem:
    """One validation problem.

    ``file``: the document as the user named it; ``line``/``col``: 1-based, 0 when unknown;
    ``path``: dotted field path in the document (empty for the document itself); ``message``:
    what is wrong and what to do; ``severity``: ``error`` fails the load, ``warning`` does not.
    """

    file: str
    line: int
    col: int
    path: str
    message: str
    severity: Severity = "error"

    @property
    def location(self) -> str:
        """``file:line:col`` (``file:line`` without a column, ``file`` without a line)."""
        if not self.line:
            return self.file
        return f"{self.file}:{self.line}:{self.col}" if self.col else f"{self.file}:{self.line}"

    def to_json(self) -> ProblemDocument:
        """The one JSON shape of a problem (``docs/schemas/problem.json``)."""
        return {
            "file": self.file,
            "line": self.line,
            "col": self.col,
            "path": self.path,
            "message": self.message,
            "severity": self.severity,
        }

    def __str__(self) -> str:
        where = f"{self.location}: {self.path}" if self.path else self.location
        return f"{where}: {self.message}" + (" (warning)" if self.severity == "warning" else "")


def errors(problems: list[Problem] | tuple[Problem, ...]) -> list[Problem]:
    """Only the problems that fail a load (severity ``error``)."""
    return [p for p in problems if p.severity == "error"]
