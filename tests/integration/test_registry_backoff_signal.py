"""A signal ends a registry retry's backoff (issue 19, round 8): a request answered 503 waits
before its next attempt (:meth:`builder.registry.transport.Transport.request`), and a CI job
cancelled with SIGTERM during that wait must not sit it out.

End to end: ``python -m builder build --dry-run`` runs as a real subprocess against a real
registry behind :class:`tests.faultproxy.FaultProxy`, which answers every manifest ``HEAD`` with
503. The content-tag look-ups run in a thread pool (``builder.build.tags.resolve_many``), so the
backoff is slept in a worker thread, the case the main thread's signal handler cannot cut short.
``builder.toml`` sets an hour's backoff: only a wait that ends at the signal lets builder exit
within the test's bound (``PATIENCE``, a guard against a hang, not a timing); the exit status and
message are the documented ones (docs/exit-codes.md, "Interruption").

In process: :func:`builder.registry.copy.put_manifest_repairing` waits the client's backoff
before repeating a manifest ``PUT`` that the real registry refused with ``MANIFEST_BLOB_UNKNOWN``;
``process.interrupt`` (what the command line's handler calls) ends that wait too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING

import pytest

from builder import process
from builder.registry import RegistryClient, put_manifest_repairing
from tests.conftest import ROOT
from tests.faultproxy import Fault, FaultProxy
from tests.integration.test_registry import push_image
from tests.projects import cpu_matrix

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

pytestmark = pytest.mark.integration

HOUR_MS = 3_600_000
"""The backoff builder.toml sets (milliseconds): a process that slept it would outlive ``PATIENCE``."""
PATIENCE = 120.0
"""How long the test waits for a condition or for builder to exit: a bound against a hang."""


@pytest.fixture
def proxy(registry_address: str) -> Iterator[FaultProxy]:
    with FaultProxy(registry_address) as p:
        yield p


@pytest.fixture
def project(tmp_path: Path, proxy: FaultProxy, unique_repo: str) -> Path:
    """One CPU variant whose registry is the proxy; every retry waits an hour."""
    p = tmp_path / "proj"
    (p / "matrices").mkdir(parents=True)
    (p / "images").mkdir()
    shutil.copytree(ROOT / "images" / "_common", p / "images" / "_common")
    (p / "images" / "slow").mkdir()
    (p / "images" / "slow" / "Dockerfile.j2").write_text('{% extends "_common/Dockerfile.base.j2" %}\n')
    (p / "matrices" / "slow.yaml").write_text(cpu_matrix("slow", unique_repo))
    (p / "builder.toml").write_text(
        f'registry = "{proxy.address}"\nstate_dir = "state"\n'
        f"registry_retries = 4\nregistry_backoff_ms = {HOUR_MS}\nregistry_max_delay_ms = {HOUR_MS}\n"
    )
    (p / "state").mkdir()
    shutil.copy(ROOT / ".builder" / "mirror.json", p / "state" / "mirror.json")
    return p


def _wait_for(condition: Callable[[], bool], proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"builder exited {proc.returncode} before {what}:\n{out[-2000:]}\n{err[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {PATIENCE:.0f} s")
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("sig", "expected"),
    [pytest.param(signal.SIGTERM, 143, id="SIGTERM"), pytest.param(signal.SIGINT, 130, id="SIGINT")],
)
def test_a_signal_ends_a_retry_backoff_in_a_worker_thread(
    project: Path, proxy: FaultProxy, sig: signal.Signals, expected: int
) -> None:
    """The content-tag ``HEAD`` is answered 503; its worker waits an hour before the next attempt.
    The signal ends the wait: builder exits 128 + signum with ``interrupted by SIG...`` and sends
    no further attempt."""
    fault = proxy.add(Fault("status", status=503, method="HEAD", path=r"/manifests/"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "builder", "build", "--dry-run"],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _wait_for(lambda: fault.hits >= 1, proc, "503 answered to the content-tag look-up")
        time.sleep(0.5)  # the worker is now in its backoff (an hour long)
        hits = fault.hits
        proc.send_signal(sig)
        try:
            out, err = proc.communicate(timeout=PATIENCE)
        except subprocess.TimeoutExpired:
            pytest.fail(f"builder still waits its backoff {PATIENCE:.0f} s after {sig.name}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == expected, f"exit {proc.returncode}\n{out[-2000:]}\n{err[-3000:]}"
    assert f"interrupted by {sig.name}" in err, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert fault.hits == hits, "an attempt was sent after the signal"


def test_a_signal_ends_the_manifest_repair_backoff(registry_address: str, unique_repo: str) -> None:
    """The real registry refuses the manifest ``PUT`` (its blobs are not in the destination
    repository: MANIFEST_BLOB_UNKNOWN); the repair copies them and waits an hour's backoff before
    the next ``PUT``. SIGTERM ends the wait with ``Interrupted``; the tag is never written."""
    src = RegistryClient(registry_address, insecure=True)
    digest = push_image(src, unique_repo, layers=1, size=64 * 1024)
    manifest = src.get_manifest(unique_repo, digest)
    dst_repo = unique_repo + "-repair"
    dst = RegistryClient(registry_address, insecure=True, backoff=HOUR_MS / 1000, max_delay=HOUR_MS / 1000)
    raised: list[BaseException] = []

    def repair() -> None:
        try:
            put_manifest_repairing(src, unique_repo, dst, dst_repo, "v1", manifest)
        except BaseException as exc:  # the test inspects what it raised, Interrupted included
            raised.append(exc)

    worker = threading.Thread(target=repair, daemon=True)
    watcher = RegistryClient(registry_address, insecure=True)
    try:
        worker.start()
        deadline = time.monotonic() + PATIENCE
        # the blobs arrive by the repair's copy; right after it the repair sleeps its backoff
        while not all(watcher.blob_exists(dst_repo, b.digest) for b in manifest.blobs):
            assert worker.is_alive(), f"the repair ended before copying the blobs: {raised}"
            assert time.monotonic() < deadline, "the repair copied no blobs"
            worker.join(0.05)
        process.interrupt(signal.SIGTERM)
        worker.join(PATIENCE)
    finally:
        process.reset_interrupt()
    assert not worker.is_alive(), "the repair still sleeps its backoff after SIGTERM"
    assert len(raised) == 1 and isinstance(raised[0], process.Interrupted), raised
    assert raised[0].exit_code == 143
    assert watcher.try_resolve(dst_repo, "v1") is None, "the manifest PUT was repeated after the signal"
