"""A state folder (keys, ledger, locks, caches) that builder may read but not write, as a real
process sees it: commands that only read (dry runs, history, status, resolve, ledger verify) work;
one that must write into it says which folder and what to fix (exit 8), never "ledger broken".
As root the process runs without capabilities (util-linux ``setpriv``), so the folder's mode
binds it as it binds any other user."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient
from tests.conftest import ROOT, unset_builder_settings
from tests.integration.test_promote_cli import VARIANT, _build, _project

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.conftest import Cli

pytestmark = pytest.mark.integration


def _unprivileged() -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root needs util-linux setpriv to drop capabilities")
    return [setpriv, "--bounding-set=-all", "--inh-caps=-all"]


def _read_only(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


@pytest.fixture
def project(registry_address: str, unique_repo: str, monkeypatch: pytest.MonkeyPatch, cli: Cli) -> Iterator[Path]:
    unset_builder_settings(monkeypatch)
    root = Path(tempfile.mkdtemp(prefix="builder-ro-"))
    project = _project(root / "project", registry_address, unique_repo)
    env = {"HOME": str(project)}
    for content in (b"read-only one", b"read-only two"):
        _build(project, registry_address, unique_repo, content)
        cli("promote", VARIANT, "--to", "dev", "--confirm", env=env, cwd=project)
    _read_only(project / "state")
    yield project
    for path in [project / "state", *(project / "state").rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    shutil.rmtree(root)


def _run(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(project), "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [*_unprivileged(), sys.executable, "-m", "builder", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("rollback", VARIANT, "--stage", "dev"),
        ("promote", VARIANT, "--to", "dev"),
        ("history", VARIANT, "--stage", "dev"),
        ("status",),
        ("resolve", VARIANT, "--stage", "dev"),
        ("ledger", "verify"),
    ],
    ids=lambda a: a[0],
)
def test_a_command_that_only_reads_works_in_a_read_only_state_folder(project: Path, args: tuple[str, ...]) -> None:
    done = _run(project, *args)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "ermission denied" not in done.stderr, done.stderr
    assert "warning" not in done.stderr.lower(), done.stderr  # nothing it could not write is worth a word


def test_a_write_into_a_read_only_state_folder_names_the_folder(project: Path) -> None:
    done = _run(project, "rollback", VARIANT, "--stage", "dev", "--confirm")
    assert done.returncode == 8, done.stderr
    assert f"the folder {project / 'state'} is not writable by this user" in " ".join(done.stderr.split()), done.stderr
    assert "make " in done.stderr and "BUILDER_STATE_DIR" in done.stderr
    assert "never edit it" not in done.stderr and "Traceback" not in done.stderr


def test_a_promotion_into_a_read_only_state_folder_stops_before_the_registry(
    project: Path, registry_address: str, unique_repo: str
) -> None:
    client = RegistryClient(registry_address, insecure=True)
    held = client.resolve(unique_repo, f"{VARIANT}-dev")
    new = _build(project, registry_address, unique_repo, b"read-only three")  # as root: may write locks
    done = _run(project, "promote", VARIANT, "--to", "dev", "--confirm")
    assert done.returncode == 8, done.stderr
    assert "cannot write the audit ledger" in done.stderr and "never edit it" not in done.stderr, done.stderr
    assert client.resolve(unique_repo, f"{VARIANT}-dev") == held != new  # nothing moved
