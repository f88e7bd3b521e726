"""What `builder check` does at once (#19 item 4): the host's facts are read while the containers run
(asked once, after them), and a call started in the background hands back its value or its exception
where it is waited for. Containers are the recorded H200 ones (tests/data/h200/README.md)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder import process
from builder.checks.device import run_device_check
from builder.checks.host.reading import load_hostinfo
from builder.checks.run import in_background
from builder.engine import ContainerResult

if TYPE_CHECKING:
    from builder.checks.host.model import HostInfo

H200 = Path(__file__).resolve().parents[2] / "data" / "h200"


def test_the_host_is_asked_once_after_the_containers_ran() -> None:
    """The mode decides the device request, so a call for the host's facts (builder check's live probe) is
    made once the recorded containers (nvidia-smi, then the probe) have run; the result carries its facts."""
    host = load_hostinfo(H200 / "hostinfo.json")
    events: list[str] = []

    def runner(image: str, argv: list[str], **_: object) -> ContainerResult:
        if argv == ["nvidia-smi"]:
            events.append("container nvidia-smi")
            return ContainerResult(0, (H200 / "nvidia-smi.txt").read_text(), "", 0.1, ("docker", "run", image))
        events.append("container probe")
        out = (H200 / "probe.json").read_text()
        return ContainerResult(0 if json.loads(out)["ok"] else 1, out, "", 1.0, ("docker", "run", image))

    def facts() -> HostInfo:
        events.append("host")
        return host

    r = run_device_check("reg/x@sha256:0", None, facts, mode="nvidia", framework="torch", runner=runner)
    assert events == ["container nvidia-smi", "container probe", "host"]
    assert r.passed and r.host is host and r.predicate()["host"]["gpus"][0]["name"] == "NVIDIA H200"


def test_in_background_runs_while_the_caller_goes_on_and_hands_back_value_or_exception() -> None:
    started, go = threading.Event(), threading.Event()

    def slow() -> int:
        started.set()
        assert go.wait(60), "the caller never let it finish"
        return 42

    wait = in_background(slow, "test-slow")
    assert started.wait(60)  # running in its thread while this one goes on
    go.set()
    assert wait() == 42 and wait() == 42  # waiting twice is the same answer

    def stopped() -> int:
        raise process.Interrupted(15)  # a signal's stop reaches the caller, not the thread's stderr

    with pytest.raises(process.Interrupted):
        in_background(stopped, "test-stopped")()
