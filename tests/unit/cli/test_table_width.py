"""Every fitted table fits its width with whole borders, header and body rows the same width.

A newcomer's first command, ``BUILDER_REPOSITORY_PREFIX=fresh builder status`` at 80 columns (a
prefix with nothing promoted: every "attestations" cell empty), drew an 82-cell table that the
terminal cut at 80: the header lost its right border mid-column and the body rows, their empty
last cell cut and trimmed, were 67 characters. The plan counted a wrappable column at FLEX_MIN
(10) cells while the table kept it at its header's longest word (12 for "attestations")."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from builder.cli.promote import status_columns
from builder.cli.tables import Column, fitted_table

STATUS = status_columns()  # the table `builder status` draws
FRESH = [["jax0.7-cpu-py3.11-debian12", stage, "-", "-", "-", "0", ""] for stage in ("dev", "staging", "prod")]
PROMOTED = [
    ["jax0.7-cpu-py3.11-debian12", "dev", "sha256:0123456789ab", "3m", "alice", "1", "slsa-provenance, sbom"],
    ["jax0.7-cpu-py3.11-debian12", "prod", "-", "-", "-", "0", ""],
]


def _lines(columns: list[Column], rows: list[list[str]], width: int, **options: object) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width).print(fitted_table(columns, rows, width, **options))  # type: ignore[arg-type]
    return out.getvalue().splitlines()


def _assert_whole(lines: list[str], width: int) -> None:
    body = [line for line in lines if line[:1] in "┏┃┡│└"]
    assert body, lines
    assert len({len(line) for line in body}) == 1, "\n".join(lines)  # header and body rows the same width
    assert len(body[0]) <= width, "\n".join(lines)
    assert all(line[-1] in "┓┃┩│┘" for line in body), "\n".join(lines)  # the right border drawn on every line


@pytest.mark.parametrize("width", [60, 70, 80, 100, 200])
@pytest.mark.parametrize("rows", [FRESH, PROMOTED], ids=["fresh", "promoted"])
def test_status_table_fits_with_whole_borders(width: int, rows: list[list[str]]) -> None:
    lines = _lines(STATUS, rows, width)
    _assert_whole(lines, width)
    assert "jax0.7-cpu-py3.11-debian12" in "\n".join(lines)  # the id whole


@pytest.mark.parametrize("width", [40, 60, 80])
def test_long_headers_of_any_column_keep_the_table_inside_its_width(width: int) -> None:
    columns = [Column("name", whole=True)] + [
        Column(f"{word}-{i}", i)
        for i, word in enumerate(["verification", "reproducibility", "acknowledgement", "configuration"], 1)
    ]
    rows = [["a", "", "x", "", "a longer value that wraps at spaces"], ["bb", "y", "", "z", ""]]
    _assert_whole(_lines(columns, rows, width), width)
