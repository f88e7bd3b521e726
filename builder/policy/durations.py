"""Durations, times of day and weekdays as policy files write them.

Pure parsing and formatting, no policy knowledge: ``24h``/``1d12h`` durations (soak), RFC 3339
timestamps in promotion records (https://www.rfc-editor.org/rfc/rfc3339) and weekday names of
freeze windows (``mon``..``sun`` or ``monday``..``sunday``).
"""

from __future__ import annotations

import datetime as dt
import re

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
"""Short weekday names, Monday first (index = ``datetime.weekday()``)."""
WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
"""Full weekday names, Monday first."""

_DURATION = re.compile(r"^\s*(?:(\d+)d)?\s*(?:(\d+)h)?\s*(?:(\d+)m)?\s*(?:(\d+)s)?\s*$")


def weekday_index(name: str) -> int | None:
    """0 (Monday) .. 6 for ``mon``..``sun`` or ``monday``..``sunday`` (any case); None otherwise."""
    n = name.strip().lower()
    for names in (WEEKDAYS, WEEKDAY_NAMES):
        if n in names:
            return names.index(n)
    return None


def parse_duration(text: str | int) -> dt.timedelta:
    """``"24h"``, ``"1d12h"``, ``"90m"``, ``"45s"`` or an integer number of seconds -> timedelta.

    Raises ValueError for anything else (no units, negative values)."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ValueError("a duration cannot be negative")
        return dt.timedelta(seconds=text)
    m = _DURATION.match(str(text))
    if not m or not any(m.groups()):
        raise ValueError(f"not a duration: {text!r} (use e.g. 24h, 1d12h, 90m, 45s)")
    d, h, mi, s = (int(g) if g else 0 for g in m.groups())
    return dt.timedelta(days=d, hours=h, minutes=mi, seconds=s)


def format_duration(td: dt.timedelta) -> str:
    """A timedelta as ``1d2h3m`` (seconds only below a day; ``0s`` for zero; ``-`` when negative)."""
    secs = int(td.total_seconds())
    sign = "-" if secs < 0 else ""
    secs = abs(secs)
    d, rem = divmod(secs, 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    parts = [f"{d}d" if d else "", f"{h}h" if h else "", f"{m}m" if m else "", f"{s}s" if s and not d else ""]
    return sign + ("".join(parts) or "0s")


def parse_time(value: object) -> dt.datetime | None:
    """RFC 3339 text -> aware datetime (UTC when no offset); None when absent, not text or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)
