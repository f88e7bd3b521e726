"""The installed console script (``[project.scripts] builder = "builder.cli:main"``) works as a
separate process: what a user or CI job runs. Every other CLI test calls ``main([...])`` in-process
through the ``cli`` fixture; this one checks the entry point, the interpreter line and the exit
status a shell sees."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builder import __version__
from tests.conftest import ROOT, check_document


@pytest.fixture(scope="module")
def script() -> str:
    """The ``builder`` script installed next to this interpreter (``.venv/bin/builder``)."""
    bindir = Path(sys.prefix) / "bin"
    path = shutil.which("builder", path=str(bindir))
    assert path is not None, f"no `builder` console script in {bindir}: install the project (scripts/setup)"
    return path


def run(script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [script, *args], capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})}, timeout=120
    )


def test_installed_script_version_help_and_doctor(script: str, docker_engine: str, registry_address: str) -> None:
    version = run(script, "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"builder, version {__version__}"

    helped = run(script, "--help")
    assert helped.returncode == 0, helped.stderr
    assert "Commands:" in helped.stdout and "doctor" in helped.stdout

    doctor = run(script, "doctor", "--json", env={"BUILDER_REGISTRY": registry_address})
    assert doctor.returncode == 0, doctor.stderr
    report = json.loads(doctor.stdout)  # exactly one JSON document: anything else on stdout fails here
    check_document(["doctor", "--json"], report)
    assert report["ok"] is True
