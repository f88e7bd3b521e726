"""How long the registry transport waits before a retry: exponential backoff with jitter, at least
what a ``Retry-After`` asks (RFC 9110 section 10.2.3,
https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3), at most a cap.

Shapes: seconds as ``float``; ``attempt`` 1-based (the first retry is 1). Pure but for the jitter
(``random``) and :func:`retry_delay` reading the clock (``time.time``) for an HTTP-date.
"""

from __future__ import annotations

import logging
import random
import time

#: Where a request still retried after :data:`builder.lockfile.NOTICE_AFTER_S` seconds says each
#: retry (one WARNING record each; the command line prints them on stderr).
LOG = logging.getLogger("builder.registry.backoff")


def say_retry(registry: str, attempt: int, delay: float, started: float, retries: int, why: str) -> None:
    """Once a request to ``registry`` has taken :data:`builder.lockfile.NOTICE_AFTER_S` seconds
    since ``started`` (``time.monotonic``), say retry ``attempt`` of ``retries`` in one WARNING
    record on :data:`LOG`: ``why`` (what failed, in words), the ``delay`` (seconds) about to be
    waited and the seconds so far, so a registry that keeps failing is not a silent wait."""
    from builder.lockfile import NOTICE_AFTER_S

    so_far = time.monotonic() - started
    if so_far >= NOTICE_AFTER_S:
        LOG.warning(
            "registry %s: %s; retry %d of %d in %.1f s (%.0f s so far; registry_retries sets how many)",
            *(registry, why, attempt, retries, delay, so_far),
        )


def retry_delay(attempt: int, retry_after: str | None, backoff: float, max_delay: float) -> float:
    """Seconds to wait before retry number ``attempt``: ``backoff * 2**(attempt-1)`` plus up to
    25 % random jitter (so parallel clients spread out), at least what the ``Retry-After`` value
    ``retry_after`` asks (:func:`retry_after_seconds`), at most ``max_delay``."""
    delay = backoff * (2.0 ** (attempt - 1)) * (1 + random.random() / 4)
    asked = retry_after_seconds(retry_after, time.time())
    if asked is not None:
        delay = max(delay, asked)
    return min(delay, max_delay)


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """Seconds a ``Retry-After`` header value asks to wait (RFC 9110 section 10.2.3): a number of
    seconds, or an HTTP date (``Fri, 31 Dec 1999 23:59:59 GMT``) less ``now`` (Unix seconds; a
    date in the past: 0). None when absent or neither form. Pure."""
    text = (value or "").strip()
    if not text:
        return None
    if text.isdigit():
        return float(text)
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; a zone-less one (-0000) is read as such
        import datetime as dt

        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, when.timestamp() - now)
