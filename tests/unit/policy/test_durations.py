"""Durations, RFC 3339 times and weekday names as policies write them."""

from __future__ import annotations

import datetime as dt

import pytest

from builder.policy.durations import format_duration, parse_duration, parse_time, weekday_index


def test_parse_duration() -> None:
    assert parse_duration("1d12h") == dt.timedelta(days=1, hours=12)
    assert parse_duration("90m") == dt.timedelta(minutes=90)
    assert parse_duration(30) == dt.timedelta(seconds=30)
    for bad in ("", "12", "forever", "-1h"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    with pytest.raises(ValueError, match="negative"):
        parse_duration(-5)


def test_format_duration() -> None:
    assert format_duration(dt.timedelta(hours=14)) == "14h"
    assert format_duration(dt.timedelta(days=2, hours=8, seconds=5)) == "2d8h"  # seconds only below a day
    assert format_duration(dt.timedelta(minutes=2, seconds=30)) == "2m30s"
    assert format_duration(dt.timedelta(0)) == "0s"
    assert format_duration(dt.timedelta(hours=-3)) == "-3h"


def test_parse_time() -> None:
    assert parse_time("2026-11-28T12:00:00Z") == dt.datetime(2026, 11, 28, 12, tzinfo=dt.UTC)
    assert parse_time("2026-11-28T12:00:00") == dt.datetime(2026, 11, 28, 12, tzinfo=dt.UTC)  # no offset: UTC
    assert parse_time("2026-11-28T14:00:00+02:00") == dt.datetime(2026, 11, 28, 12, tzinfo=dt.UTC)
    assert parse_time("yesterday") is None and parse_time(None) is None and parse_time(1700000000) is None


def test_weekday_index() -> None:
    assert weekday_index("mon") == 0 and weekday_index("SUNDAY") == 6 and weekday_index(" Fri ") == 4
    assert weekday_index("tues") is None and weekday_index("frisbee") is None
