"""Table lines end at their last character: no trailing spaces (rich pads every cell to its column
and `Padding` pads every line to the terminal's width, so `builder history` rows ended in up to 60
spaces at 80 columns, which diff, copy and review tools all show). `fitted_table`'s lines are cut
at their end whatever the table (boxed or not, a title, moved columns, an indent)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from builder.cli.tables import Column, fitted_table

COLUMNS = [
    Column("time", whole=True),
    Column("action"),
    Column("digest", whole=True),
    Column("previous", 1, whole=True),
    Column("by", 1),
    Column("ticket", 2),
]
ROWS = [
    ["2026-12-02T11:00:00Z", "promote", "sha256:0123456789ab", "-", "build", "-"],
    ["2026-12-02T11:00:01Z", "rollback", "sha256:0123456789ab", "sha256:ba9876543210", "alice", "CHG-9"],
]


def _lines(width: int, **options: object) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width).print(fitted_table(COLUMNS, ROWS, width - 2, **options))  # type: ignore[arg-type]
    return out.getvalue().splitlines()


@pytest.mark.parametrize("width", [60, 80, 200])
@pytest.mark.parametrize(
    "options", [{"boxed": False}, {"boxed": False, "indent": 2}, {"title": "history"}, {"show_lines": True}]
)
def test_no_table_line_ends_in_spaces(width: int, options: dict[str, object]) -> None:
    lines = _lines(width, **options)
    assert lines and all(line == line.rstrip() for line in lines), [line for line in lines if line != line.rstrip()]
    assert all(len(line) <= width for line in lines)
    assert "CHG-9" in "\n".join(lines) and "sha256:ba9876543210" in "\n".join(lines)  # nothing lost


def test_an_indent_is_kept_on_every_line() -> None:
    lines = _lines(80, boxed=False, indent=2)
    assert all(line.startswith("  ") and not line.startswith("   ") for line in lines if line), lines
