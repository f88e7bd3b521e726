"""A device check that the engine refuses at container creation fails at once, with the engine's words:

* no step waits for the per-container --timeout (600 s by default) when `docker run` fails to create or
  start the container (no toolkit for --gpus all, no /dev/kfd for an AMD check);
* docker's pull progress printed before the error (`Unable to find image ... locally`, `...: Pulling
  from ...`, layer lines) is not the step's error; the whole stderr stays in the step's detail;
* the line printed before the checks describes what runs (not a pseudo-command).
Real engine, registry and images (the module-scoped fixture of test_check.py).
"""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from tests.conftest import ROOT, Cli, require_tool
from tests.integration.test_check import images, require_no_toolkit

__all__ = ["images"]  # the module-scoped fixture (real images built and pushed for this module)

ENGINE_ERROR = 'could not select device driver "" with capabilities: [[gpu]]'


def _fresh_copy(src: str) -> str:
    """``src`` copied registry-side to a new repository: this engine has never seen the name, so
    `docker run` prints its pull progress before it fails."""
    require_tool("skopeo")
    repo = src.rsplit("/", 2)[0] + f"/test/failfast-{uuid.uuid4().hex[:10]}"
    dst = f"{repo}:{src.rsplit(':', 1)[1]}"
    subprocess.run(
        [
            "skopeo",
            "copy",
            "-q",
            "--src-tls-verify=false",
            "--dest-tls-verify=false",
            f"docker://{src}",
            f"docker://{dst}",
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return dst


def test_gpus_all_after_a_pull_fails_fast_with_the_engine_error(cli: Cli, images: dict[str, str]) -> None:
    require_no_toolkit()
    ref = _fresh_copy(images["cuda"])
    res = cli("check", ref, "--no-attest", "--json", "--timeout", "600", code=20, cwd=ROOT)
    d = res.json()["error"]["details"]
    step = d["result"]["steps"][0]
    assert step["detail"]["timed_out"] is False  # refused at creation, not waited out
    assert len(d["result"]["steps"]) == 1  # the probe container is not started after the GPU request failed
    assert ENGINE_ERROR in step["error"], step["error"]
    assert "Unable to find image" not in step["error"] and "Pulling from" not in step["error"]
    assert "Unable to find image" in step["detail"]["stderr"] and ENGINE_ERROR in step["detail"]["stderr"]
    assert d["diagnosis"] == "container-toolkit-missing"


def test_human_output_describes_the_run_and_shows_the_error(cli: Cli, images: dict[str, str]) -> None:
    require_no_toolkit()
    ref = _fresh_copy(images["cuda"])
    res = cli("check", ref, "--no-attest", code=20, env={"COLUMNS": "400"}, cwd=ROOT)
    lines = res.stderr.splitlines()
    first = lines[0]
    assert first.startswith("running device checks (mode nvidia, GPUs requested with --gpus all) in fresh containers")
    assert "@sha256:" in first and "linux/amd64" in first and "docker run" not in first, first
    fail = next(i for i, line in enumerate(lines) if "FAIL" in line and "container-start+nvidia-smi" in line)
    assert ENGINE_ERROR in lines[fail + 1], lines[fail : fail + 3]
    assert "Unable to find image" not in res.stderr and "Pulling from" not in res.stderr


def test_amd_request_without_devices_fails_fast(cli: Cli, images: dict[str, str]) -> None:
    if os.path.exists("/dev/kfd"):
        pytest.skip("this machine has /dev/kfd")
    res = cli("check", images["cpu"], "--mode", "amd", "--no-attest", "--json", "--timeout", "600", code=20, cwd=ROOT)
    details = res.json()["error"]["details"]
    step = details["result"]["steps"][0]
    assert step["detail"]["timed_out"] is False  # refused at creation, not waited out
    assert "/dev/kfd" in step["error"] and step["detail"]["exit_code"] != 0
    assert (details["diagnosis"], details["at_fault"]) == ("gpu-device-node-missing", "kernel-driver")
