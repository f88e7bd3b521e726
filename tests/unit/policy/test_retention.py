"""``retention:`` of a policy (``builder gc``): defaults, durations, located problems."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from builder.policy import Retention
from builder.policy.loader import check_policy

if TYPE_CHECKING:
    from pathlib import Path

STAGES = "stages:\n  dev:\n    from: build\n    require: {unconditional: every build}\n"


def load(tmp_path: Path, extra: str) -> tuple[Retention | None, list[str]]:
    path = tmp_path / "p.yaml"
    path.write_text(STAGES + extra)
    policy, problems = check_policy(path)
    errors = [f"{p.path}@{p.line}: {p.message}" for p in problems if p.severity == "error"]
    return (policy.retention if policy else None), errors


def test_defaults_without_retention(tmp_path: Path) -> None:
    assert load(tmp_path, "") == (Retention(dt.timedelta(days=30), dt.timedelta(hours=1)), [])


def test_durations_and_a_field_left_out(tmp_path: Path) -> None:
    retention, errors = load(tmp_path, "retention:\n  content_tags: 7d12h\n")
    assert errors == [] and retention == Retention(dt.timedelta(days=7, hours=12), dt.timedelta(hours=1))
    retention, _ = load(tmp_path, "retention: {pending_tags: 600}\n")
    assert retention == Retention(dt.timedelta(days=30), dt.timedelta(minutes=10))


def test_problems_are_located(tmp_path: Path) -> None:
    retention, errors = load(tmp_path, "retention:\n  content_tags: soon\n")
    assert retention is None
    assert errors == ["retention.content_tags@6: not a duration: 'soon' (use e.g. 24h, 1d12h, 90m, 45s)"]
    retention, errors = load(tmp_path, "retention:\n  pending: 1h\n")
    assert retention is None
    assert errors == ["retention.pending@6: Extra inputs are not permitted"]
