"""`builder diagnose --host FILE` takes its context from real host facts: the engine recorded by this machine's
real `docker info` decides between kinds that share a message (issue 16: alternatives and context)."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

from tests.conftest import ROOT

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli

pytestmark = pytest.mark.integration

NCCL = ROOT / "tests" / "data" / "errors" / "nccl-system-error-02.txt"


def test_engine_from_the_hosts_docker_info_decides(tmp_path: Path, cli: Cli) -> None:
    info = subprocess.run(["docker", "info", "--format", "{{json .}}"], capture_output=True, text=True, check=True)
    host = tmp_path / "docker-info.json"
    host.write_text(info.stdout)
    assert cli("--json", "hostinfo", "--from", str(host)).json()["engine"]["name"] == "docker"
    with_host = cli("--json", "diagnose", str(NCCL), "--host", str(host)).json()
    assert with_host["diagnosis"] == "nccl-shm-too-small"
    assert with_host["facts"]["decided_by"].startswith("--engine docker")
    # the command line wins over the host facts
    assert cli("--json", "diagnose", str(NCCL), "--host", str(host), "--engine", "slurm").json()["diagnosis"] == (
        "nccl-network-failure"
    )
    # without context the text stays ambiguous and says what would decide it
    plain = cli("--json", "diagnose", str(NCCL)).json()
    assert plain["diagnosis"] == "nccl-system-error"
    assert {a["diagnosis"] for a in plain["facts"]["alternatives"]} >= {"nccl-shm-too-small", "nccl-network-failure"}
