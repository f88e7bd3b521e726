"""What ``builder promote --confirm`` says when its apply fails at the registry (a real registry
behind tests/faultproxy.py answering 503 to a PUT): not the dry run's "would promote", but what
failed, what the stage holds (read after the failure) and what a ``sha256-<hex>.att`` tag in the
registry's error is; and how promote's human output folds in an 80-column terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient
from tests.conftest import ROOT, unset_builder_settings
from tests.faultproxy import Fault, FaultProxy
from tests.integration.test_promote_cli import VARIANT, _build, _project

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli

pytestmark = pytest.mark.integration


def _too_wide(text: str, width: int = 80) -> list[str]:
    """The lines wider than ``width`` that fold could have broken (more than one word)."""
    return [line for line in text.splitlines() if len(line) > width and " " in line.strip()]


def _mine(stderr: str) -> str:
    """promote's own lines: without the command's error and hint, which builder.cli prints."""
    return stderr.split("\nerror: ", maxsplit=1)[0]


@pytest.mark.parametrize(
    ("path", "what"),
    [(rf"/manifests/{VARIANT}-dev$", "stage tag"), (r"/manifests/sha256-[0-9a-f]{64}\.att$", "record")],
)
def test_a_failed_apply_says_what_was_attempted_and_what_the_stage_holds(
    cli: Cli,
    tmp_path: Path,
    registry_address: str,
    unique_repo: str,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    what: str,
) -> None:
    unset_builder_settings(monkeypatch)
    with FaultProxy(registry_address) as proxy:
        project = _project(tmp_path / "project", proxy.address, unique_repo)
        digest = _build(project, proxy.address, unique_repo, f"apply fails at the {what}".encode())
        # no retries: the output is the apply's alone (a retry notice comes after 2 s of retrying)
        env = {"HOME": str(project), "COLUMNS": "80", "BUILDER_REGISTRY_RETRIES": "0"}
        proxy.add(Fault("status", 503, method="PUT", path=path))
        err = cli("promote", VARIANT, "--to", "dev", "--confirm", code=5, env=env, cwd=project).stderr
        assert proxy.injected() >= 1
        doc = cli("promote", VARIANT, "--to", "dev", "--confirm", "--json", code=5, env=env, cwd=project).json()
    result = doc["error"]["details"]["results"][0]
    assert result["applied"] is False and result["digest"] == digest
    assert result["stage_after"] == {"digest": None, "unread": None}  # read after the failure: still empty
    assert "would promote" not in err and "dry run" not in err, err
    assert err.startswith(f"not promoted {VARIANT}:"), err
    flat = " ".join(err.split())
    assert f"(image {digest})" in flat  # the digest named is the image being promoted
    assert "not promoted: the apply failed (the error below); dev is still empty (read after the failure)" in flat
    assert RegistryClient(registry_address, insecure=True).try_resolve(unique_repo, f"{VARIANT}-dev") is None
    if what == "record":  # the registry's error names the record's tag: said what it is
        assert f"sha256-{digest[7:19]}….att is the tag that holds the attestations" in flat, err
        assert "of the image being promoted" in flat
    assert not _too_wide(_mine(err)), err


def test_a_failed_apply_on_a_stage_that_held_a_digest_names_it(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    unset_builder_settings(monkeypatch)
    with FaultProxy(registry_address) as proxy:
        project = _project(tmp_path / "project", proxy.address, unique_repo)
        env = {"HOME": str(project), "COLUMNS": "80"}
        first = _build(project, proxy.address, unique_repo, b"held before")
        cli("promote", VARIANT, "--to", "dev", "--confirm", env=env, cwd=project)
        _build(project, proxy.address, unique_repo, b"held after")
        proxy.add(Fault("status", 503, method="PUT", path=rf"/manifests/{VARIANT}-dev$"))
        err = cli("promote", VARIANT, "--to", "dev", "--confirm", code=5, env=env, cwd=project).stderr
    assert f"dev still points at {first} (read after the failure)" in " ".join(err.split()), err


def test_promote_output_folds_at_80_columns(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    unset_builder_settings(monkeypatch)
    project = _project(tmp_path / "a-rather-long-project-folder-name" / "project", registry_address, unique_repo)
    env = {"HOME": str(project), "COLUMNS": "80"}
    _build(project, registry_address, unique_repo, b"folds")
    outputs = [
        cli("promote", VARIANT, "--to", "dev", env=env, cwd=project).stderr,
        cli("promote", VARIANT, "--to", "dev", "--confirm", env=env, cwd=project).stderr,
        _mine(cli("promote", VARIANT, "--to", "staging", code=31, env=env, cwd=project).stderr),
        _mine(cli("promote", VARIANT, "--to", "staging", "--confirm", code=31, env=env, cwd=project).stderr),
    ]
    _build(project, registry_address, unique_repo, b"folds again")
    cli("promote", VARIANT, "--to", "dev", "--confirm", env=env, cwd=project)
    outputs.append(cli("rollback", VARIANT, "--stage", "dev", env=env, cwd=project).stderr)
    key = str(project / "state" / "keys" / "build" / "builder.key")  # not an approver: warned, recorded
    ref = f"{registry_address}/{unique_repo}:{VARIANT}"
    approve = ("approve", ref, "--stage", "prod", "--key", key, "--unlisted", "--ticket", "no ticket pattern")
    outputs.append(cli(*approve, env=env, cwd=project).stderr)
    outputs.append(cli("history", VARIANT, env=env, cwd=project).stderr)
    bad = project / "policies" / "an-unknown-rule-with-a-long-name.yaml"
    rule = "signature_of_something_that_does_not_exist: {signers: [nobody_in_particular]}"
    bad.write_text(f"stages:\n  dev:\n    from: build\n    require:\n      - {rule}\n")
    outputs.append(_mine(cli("policy", "validate", str(bad), code=30, env=env, cwd=project).stderr))
    for err in outputs:
        assert not _too_wide(err), err
    denied = " ".join(outputs[3].split())
    assert "denied" in denied and "[FAIL] device_check" in denied  # the folded lines still say it
    assert "would roll back" in outputs[4] and "dry run: add --confirm to apply" in outputs[4]
    assert "warning:" in outputs[5] and "approved" in outputs[5], outputs[5]
    assert "unknown rule" in " ".join(outputs[7].split()), outputs[7]


def _in_terminal(project: Path, *args: str) -> tuple[int, str]:
    """``builder ARGS`` as a process whose stdout and stderr are a real pseudo-terminal 80 columns
    wide (``COLUMNS=80``, no colour): its exit code and everything it wrote there."""
    env = {"PATH": os.environ["PATH"], "HOME": str(project), "PYTHONPATH": str(ROOT), "COLUMNS": "80", "NO_COLOR": "1"}
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "builder", *args], cwd=project, env=env, stdout=secondary, stderr=secondary
    )
    os.close(secondary)
    out = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(primary)
    return proc.wait(timeout=120), out.decode().replace("\r\n", "\n")


def test_a_denial_and_its_error_fold_in_an_80_column_terminal(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command's error (every denied target and its failed rules, printed by builder.cli) folds
    too when a person reads it in a terminal; in logs it stays one line per message."""
    unset_builder_settings(monkeypatch)
    project = _project(tmp_path / "a-rather-long-project-folder-name" / "project", registry_address, unique_repo)
    _build(project, registry_address, unique_repo, b"denied in a terminal")
    cli("promote", VARIANT, "--to", "dev", "--confirm", env={"HOME": str(project)}, cwd=project)
    code, out = _in_terminal(project, "promote", VARIANT, "--to", "staging", "--confirm")
    assert code == 31, out
    assert "error:" in out and "hint:" in out and "device_check" in out, out
    assert not _too_wide(out), out
