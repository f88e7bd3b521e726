"""`promote --to dev --confirm` when the stage already holds the digest: newcomer report (F3):
with nothing interrupted it printed "promoted ... (was <same digest>) ... applied in 13 ms
(completed an interrupted promotion)" while the dry run said "already in dev". Now it says
"already in dev" (exit 0, `completed: false` in --json) when nothing was written, and "(completed
an interrupted promotion)" only when something was: here the ledger row a run killed after its tag
move never wrote (the registry holds the tag and the signed record, this checkout's ledger lacks
the row: the same state; the ledger file is chosen with BUILDER_LEDGER)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient
from tests.integration.test_promote_cli import VARIANT, _build, _project

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli

pytestmark = pytest.mark.integration


def test_confirm_of_a_held_digest_says_already_and_completes_only_what_was_interrupted(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    project = _project(tmp_path / "p", registry_address, unique_repo)
    run = functools.partial(cli, cwd=project)
    env = {"HOME": str(project)}
    digest = _build(project, registry_address, unique_repo, b"already held")
    first = run("promote", VARIANT, "--to", "dev", "--confirm", "--json", env=env).json()["results"][0]
    assert first["applied"] and not first["completed"]
    client = RegistryClient(registry_address, insecure=True)
    assert client.resolve(unique_repo, f"{VARIANT}-dev") == digest

    dry = run("promote", VARIANT, "--to", "dev", env=env).stderr
    assert "already in dev" in dry, dry
    again = run("promote", VARIANT, "--to", "dev", "--confirm", env=env)
    said = " ".join(again.stderr.split())
    assert f"already in dev {VARIANT}" in said and "nothing written" in said, said
    assert "completed an interrupted promotion" not in said and "(was " not in said, said
    held = run("promote", VARIANT, "--to", "dev", "--confirm", "--json", env=env).json()["results"][0]
    assert held["already"] and held["completed"] is False and held["ledger_seq"] is None, held

    # the ledger row missing (a run killed after its tag move): the re-run completes it and says so
    fresh = {**env, "BUILDER_LEDGER": str(project / "state" / "other-ledger.sqlite")}
    done = run("promote", VARIANT, "--to", "dev", "--confirm", env=fresh)
    assert "(completed an interrupted promotion)" in done.stderr, done.stderr
    again = run("promote", VARIANT, "--to", "dev", "--confirm", "--json", env=fresh).json()["results"][0]
    assert again["completed"] is False  # completed once: nothing left to complete
