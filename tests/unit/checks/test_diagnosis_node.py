"""A fix for the machine a check ran on names the node when the check ran on a known cluster node
(`Diagnosis.on_node`): every real recorded message (tests/data/errors, source URL on line 1 of each
file) whose fix says `on the host` is told `on node NAME` instead, and nothing else of the answer
changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.checks.diagnosis import diagnose
from tests.unit.checks.test_diagnosis import message

DATA = Path(__file__).resolve().parents[2] / "data" / "errors"
HOST_FIXES = sorted(p.name for p in DATA.glob("*.txt") if "on the host" in diagnose(message(p.name)).fix)


def test_the_recordings_hold_host_fixes_of_many_kinds() -> None:
    assert len({diagnose(message(n)).key for n in HOST_FIXES}) >= 15  # the rule is one phrase, many kinds


@pytest.mark.parametrize("name", HOST_FIXES)
def test_a_host_fix_names_the_node(name: str) -> None:
    found = diagnose(message(name))
    placed = found.on_node("gpu-node-07")
    assert "on the host" not in placed.fix and "on node gpu-node-07" in placed.fix, placed.fix
    assert placed.fix == found.fix.replace("on the host", "on node gpu-node-07")
    assert (placed.key, placed.summary, placed.facts, placed.evidence) == (
        found.key,
        found.summary,
        found.facts,
        found.evidence,
    )


@pytest.mark.parametrize("node", [None, ""])
def test_no_node_known_leaves_the_host(node: str | None) -> None:
    found = diagnose(message(HOST_FIXES[0]))
    assert found.on_node(node) == found


@pytest.mark.parametrize("node", [r"rack\1-node", r"gpu\g<0>", "n$1"])
def test_a_node_name_is_taken_as_text(node: str) -> None:
    """A node name as the scheduler printed it, however odd: never read as a regular-expression
    replacement template (a backslash there raised ``re.error``; review)."""
    found = diagnose(message(HOST_FIXES[0]))
    assert found.on_node(node).fix == found.fix.replace("on the host", f"on node {node}")
