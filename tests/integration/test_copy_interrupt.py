"""A streamed blob copy (``RegistryClient.copy_blob_from``) whose upload failed stops at a signal
instead of going on with its retry: no ``HEAD`` of the blob, no ``DELETE`` of the session, no
backoff sleep, no new ``POST`` after SIGTERM (the command line's handler calls
``process.interrupt``, as ``tests/integration/test_signals.py`` shows end to end). Against the real
registry, with :class:`tests.faultproxy.FaultProxy` in front of it as the destination (a second
registry to builder) failing the upload's ``PUT``."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from builder import process
from builder.registry import RegistryClient
from tests.faultproxy import Fault, FaultProxy
from tests.integration.test_registry import push_image

pytestmark = pytest.mark.integration

HOUR = 3600.0
"""The backoff between upload sessions in these tests: a copy that slept it would not end within
the test's run (``JOIN``), so only an interruptible sleep lets it end."""
JOIN = 120.0
"""How long a test waits for the copying thread to end: a bound against a hang, not a measurement."""


def _copy_in_thread(
    dst: RegistryClient, src: RegistryClient, repo: str, digest: str
) -> tuple[threading.Thread, list[BaseException]]:
    layer = src.get_manifest(repo, digest).layers[0]
    raised: list[BaseException] = []

    def copy() -> None:
        try:
            dst.copy_blob_from(src, repo, repo + "-int", layer)
        except BaseException as exc:  # the test inspects what the copy raised, Interrupted included
            raised.append(exc)

    worker = threading.Thread(target=copy, daemon=True)
    worker.start()
    return worker, raised


def _after(seen: list[str], first: str) -> list[str]:
    return seen[seen.index(first) + 1 :]


def test_a_signal_during_a_failed_upload_sends_nothing_more(registry_address: str, unique_repo: str) -> None:
    """SIGTERM arrives while the upload's ``PUT`` is in flight; the ``PUT`` then fails (the
    connection dropped, a failure the copy retries): the copy raises ``Interrupted`` and sends no
    further request (it sent the ``HEAD``, the ``DELETE``, slept and ``POST`` ed again)."""
    src = RegistryClient(registry_address, insecure=True)
    digest = push_image(src, unique_repo, layers=1, size=256 * 1024)
    with FaultProxy(registry_address) as proxy:
        hold = proxy.add(Fault("hold", method="PUT", path=r"/blobs/uploads/", count=1))
        dst = RegistryClient(proxy.address, insecure=True, retries=2, backoff=0.05)
        worker, raised = _copy_in_thread(dst, src, unique_repo, digest)
        try:
            assert hold.held.wait(JOIN)
            process.interrupt(signal.SIGTERM)
            hold.release.set()
            worker.join(JOIN)
        finally:
            process.reset_interrupt()
        assert not worker.is_alive()
        assert len(raised) == 1 and isinstance(raised[0], process.Interrupted), raised
        seen = [f"{s.method} {s.outcome}" for s in proxy.seen]
        assert _after(seen, "PUT hold") == [], seen


def test_a_signal_during_the_backoff_ends_it(registry_address: str, unique_repo: str) -> None:
    """The upload's ``PUT`` answered 500; the copy asked whether the blob arrived (``HEAD``),
    cancelled the session (``DELETE``) and waits an hour's backoff before a new session: SIGTERM
    ends the wait at once, with ``Interrupted`` and no new ``POST``."""
    src = RegistryClient(registry_address, insecure=True)
    digest = push_image(src, unique_repo, layers=1, size=256 * 1024)
    with FaultProxy(registry_address) as proxy:
        proxy.add(Fault("status", status=500, method="PUT", path=r"/blobs/uploads/", count=1))
        dst = RegistryClient(proxy.address, insecure=True, retries=2, backoff=HOUR, max_delay=HOUR)
        worker, raised = _copy_in_thread(dst, src, unique_repo, digest)
        try:
            deadline = time.monotonic() + JOIN
            while not any(s.method == "DELETE" for s in proxy.seen) and time.monotonic() < deadline:
                worker.join(0.05)  # until the copy cancelled its session: it then backs off
            process.interrupt(signal.SIGTERM)
            worker.join(JOIN)
        finally:
            process.reset_interrupt()
        assert not worker.is_alive(), "the copy still sleeps its backoff after SIGTERM"
        assert len(raised) == 1 and isinstance(raised[0], process.Interrupted), raised
        seen = [f"{s.method} {s.outcome}" for s in proxy.seen]
        assert [s for s in seen if s.startswith("POST")] == ["POST forwarded"], seen
        assert "DELETE forwarded" in seen, seen
