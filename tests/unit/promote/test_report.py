"""The report's sparkline and SVG chart (pure functions of a series)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from builder.promote.report import BLOCKS, sparkline, svg_chart

SVG = "{http://www.w3.org/2000/svg}"


def test_sparkline_scales_between_min_and_max() -> None:
    assert sparkline([1.0, 2.0, 3.0]) == BLOCKS[0] + BLOCKS[4] + BLOCKS[7]
    assert sparkline([39.7, 3.8]) == "█▁"
    assert sparkline([5.0, None, 5.0]) == BLOCKS[4] + "·" + BLOCKS[4]
    assert sparkline([None, None]) == "··" and sparkline([]) == ""


def test_svg_has_a_line_per_stage_broken_at_missing_values() -> None:
    text = svg_chart(
        {
            "dev": [("2026-11-01", 40.0), ("2026-11-02", 4.0), ("2026-11-03", None), ("2026-11-04", 41.0)],
            "staging": [("2026-11-01", 40.0)],
        },
        title="jax <cpu> & co",
        unit="GFLOP/s",
    )
    root = ET.fromstring(text)
    lines = root.findall(f"{SVG}polyline")
    assert len(lines) == 1  # dev's first two points; the lone points after the gap and of staging are dots
    assert len(root.findall(f"{SVG}circle")) == 4
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "jax <cpu> & co" in texts and "GFLOP/s" in texts and "dev" in texts and "staging" in texts
    assert "2026-11-01" in texts and "2026-11-04" in texts
