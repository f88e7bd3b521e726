"""``process.backoff``: the one wait between retries in builder ends at an interruption (the
command line's SIGTERM/SIGINT handler calls ``process.interrupt``), in whichever thread sleeps.
End to end against a real registry: tests/integration/test_registry_backoff_signal.py."""

from __future__ import annotations

import signal
import threading
from typing import TYPE_CHECKING

import pytest

from builder import process

if TYPE_CHECKING:
    from collections.abc import Iterator

HOUR = 3600.0
"""The backoff slept here: a thread that slept it would not end within ``JOIN``."""
JOIN = 60.0
"""How long the test waits for the sleeping thread: a bound against a hang, not a timing."""


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    process.reset_interrupt()
    yield
    process.reset_interrupt()


def test_a_backoff_without_a_signal_returns() -> None:
    process.backoff(0.0)
    process.backoff(-1.0)  # a negative delay (clock arithmetic) is no wait, not a ValueError
    assert process.interrupted() is None


def test_an_interruption_ends_a_backoff_in_another_thread() -> None:
    raised: list[BaseException] = []
    started = threading.Event()

    def sleeper() -> None:
        started.set()
        try:
            process.backoff(HOUR)
        except BaseException as exc:  # the test inspects what the backoff raised
            raised.append(exc)

    worker = threading.Thread(target=sleeper, daemon=True)
    worker.start()
    assert started.wait(JOIN)
    process.interrupt(signal.SIGTERM)
    worker.join(JOIN)
    assert not worker.is_alive(), "the backoff went on after the interruption"
    assert len(raised) == 1 and isinstance(raised[0], process.Interrupted), raised
    assert raised[0].exit_code == 143


def test_a_backoff_after_the_interruption_does_not_start() -> None:
    process.interrupt(signal.SIGINT)
    with pytest.raises(process.Interrupted) as caught:
        process.backoff(HOUR)
    assert caught.value.exit_code == 130
