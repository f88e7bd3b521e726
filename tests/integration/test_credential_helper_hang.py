"""A credential helper that never answers (a keychain waiting for an unlock prompt nobody sees, a
cloud helper on a dead network) does not hang builder: after ~2 s one notice on stderr names the
helper; after ``HELPER_TIMEOUT_S`` builder exits 6 naming the helper and the Docker config file; a
SIGTERM while it waits still ends builder (143) and the helper with it. Real parts: a
password-protected CNCF distribution registry (its 401 challenge is what asks for credentials), a
real ``docker-credential-hang`` executable on PATH, builder as a real process for the signal."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests import registries
from tests.conftest import ROOT

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.conftest import Cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def auth_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with registries.auth_registry(tmp_path_factory.mktemp("authreg"), "basic") as reg:
        yield reg.address


def _hanging_helper(tmp_path: Path, registry: str) -> tuple[Path, Path, Path]:
    """(bin dir with docker-credential-hang, its config.json, the file the helper writes its pid to)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    pidfile = tmp_path / "helper.pid"
    helper = bindir / "docker-credential-hang"
    helper.write_text(f'#!/bin/sh\nread server\necho $$ > "{pidfile}"\nexec sleep 600\n')
    helper.chmod(helper.stat().st_mode | stat.S_IEXEC)
    config = tmp_path / "docker-config" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps({"credHelpers": {registry: "hang"}}))
    return bindir, config, pidfile


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_hanging_helper_times_out_with_exit_6_naming_helper_and_file(
    cli: Cli, auth_registry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from builder import lockfile
    from builder.registry import auth

    bindir, config, pidfile = _hanging_helper(tmp_path, auth_registry)
    monkeypatch.setattr(auth, "HELPER_TIMEOUT_S", 3.0)  # the real 30 s, shortened for the test
    monkeypatch.setattr(lockfile, "NOTICE_AFTER_S", 0.5)
    env = {"DOCKER_CONFIG": str(config.parent), "PATH": f"{bindir}:{os.environ['PATH']}"}
    ref = f"{auth_registry}/test/hang:v1"
    res = cli("inspect", ref, code=6, env=env)
    assert "docker-credential-hang" in res.stderr and str(config) in res.stderr
    assert "within 3 s" in res.stderr
    assert "waiting for docker-credential-hang" in res.stderr  # the notice, one line
    assert sum("waiting for docker-credential-hang" in line for line in res.stderr.splitlines()) == 1
    assert "Traceback" not in res.stderr
    assert not _alive(int(pidfile.read_text()))  # the helper was killed, not left sleeping
    doc = cli("--json", "inspect", ref, code=6, env=env).json()
    assert doc["error"]["exit_code"] == 6 and "docker-credential-hang" in doc["error"]["message"]


def test_sigterm_ends_builder_waiting_for_a_helper(auth_registry: str, tmp_path: Path) -> None:
    bindir, config, pidfile = _hanging_helper(tmp_path, auth_registry)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("BUILDER_")},
        "DOCKER_CONFIG": str(config.parent),
        "PATH": f"{bindir}:{os.environ['PATH']}",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "builder", "inspect", f"{auth_registry}/test/hang:v1"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # the notice comes while builder waits on the helper
        seen.append(line)
        if "waiting for docker-credential-hang (credentials of" in line:
            break
    else:
        pytest.fail(f"no notice before builder ended: {''.join(seen)}")
    helper_pid = int(pidfile.read_text())
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 143, "".join(seen) + rest
    assert "Traceback" not in rest
    assert not _alive(helper_pid)
