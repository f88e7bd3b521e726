"""What a new user reads from ``builder promote`` and ``builder resolve`` against a real registry:
an error printed once (not once per target and again as the command's error), a dry run into a
stage that already holds the digest says so (not "would promote ... (now <the same digest>)"),
a promoter key file the policy names that does not exist is named in the hint of the command it
makes fail (not only "key set build, not a promoter"), and a dry run with a key that is not a
promoter says so as --confirm does."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from tests.conftest import unset_builder_settings
from tests.integration.test_promote_cli import VARIANT, _build, _project

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli, CliResult

pytestmark = pytest.mark.integration


@pytest.fixture
def project(tmp_path: Path, registry_address: str, unique_repo: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    unset_builder_settings(monkeypatch)
    return _project(tmp_path / "project", registry_address, unique_repo)


def _in(cli: Cli, project: Path, *args: str, code: int = 0) -> CliResult:
    return cli(*args, code=code, env={"HOME": str(project), "COLUMNS": "400"}, cwd=project)


def test_an_error_every_target_shares_is_printed_once(
    cli: Cli, project: Path, registry_address: str, unique_repo: str
) -> None:
    _build(project, registry_address, unique_repo, b"printed once")
    err = _in(cli, project, "promote", VARIANT, "--to", "qa", code=8).stderr
    assert err.count("stage 'qa' is not defined") == 1, err
    assert "error:" in err and "hint: stages: dev, staging, prod" in err


def test_a_dry_run_into_a_stage_that_holds_the_digest_says_so(
    cli: Cli, project: Path, registry_address: str, unique_repo: str
) -> None:
    digest = _build(project, registry_address, unique_repo, b"already held")
    first = _in(cli, project, "promote", VARIANT, "--to", "dev").stderr
    assert "would promote" in first and "dry run: add --confirm to apply" in first and "(now empty)" in first
    applied = _in(cli, project, "promote", VARIANT, "--to", "dev", "--confirm").stderr
    assert "(was empty)" in applied and "(now " not in applied, applied  # what it held before, not now
    again = _in(cli, project, "promote", VARIANT, "--to", "dev").stderr
    assert f"already in dev {VARIANT}:" in again and digest in again, again
    assert "--confirm would move nothing" in again
    assert "would promote" not in again and "add --confirm to apply" not in again
    # --confirm indeed moves nothing and says it applied nothing new
    assert _in(cli, project, "promote", VARIANT, "--to", "dev", "--confirm", "--json").json()["results"][0]["applied"]


def test_a_missing_promoter_key_file_is_named_where_it_makes_resolve_fail(
    cli: Cli, project: Path, registry_address: str, unique_repo: str
) -> None:
    _build(project, registry_address, unique_repo, b"missing promoter key")
    _in(cli, project, "promote", VARIANT, "--to", "dev", "--confirm")
    assert _in(cli, project, "resolve", VARIANT, "--stage", "dev").stdout.strip()
    policy = project / "policies" / "default.yaml"
    missing = project / "keys" / "ci" / "promoter.pub"
    text, n = re.subn(r"(?m)^(\s*promoters:\n\s*- file: ).*$", rf"\g<1>{missing}", policy.read_text())
    assert n == 1
    policy.write_text(text)
    error = _in(cli, project, "resolve", VARIANT, "--stage", "dev", "--json", code=18).json()["error"]
    assert "not a promoter" in error["message"]
    assert f"{missing}: file not found" in error["hint"], error["hint"]
    human = _in(cli, project, "resolve", VARIANT, "--stage", "dev", code=18).stderr
    assert str(missing) in human


def test_records_by_another_key_point_to_the_prefix_not_to_an_empty_promoter_glob(
    cli: Cli, project: Path, registry_address: str, unique_repo: str
) -> None:
    """A pointer whose records another checkout's key signed (the registry shared without a
    repository_prefix): the hint names the prefix; a promoter glob matching nothing next to a usable
    promoter key (as the shipped policy's keys/promoters/*.pub) is not called unreadable."""
    from builder.signing.keys import generate_key_pair

    _build(project, registry_address, unique_repo, b"records by another key")
    _in(cli, project, "promote", VARIANT, "--to", "dev", "--confirm")
    policy = project / "policies" / "default.yaml"
    text, n = re.subn(
        r"(?m)^(\s*)(promoters:\n)(\s*)(- file: .*)$",
        lambda m: f"{m[1]}{m[2]}{m[3]}{m[4]}\n{m[3]}- file: {project}/keys/promoters/*.pub",
        policy.read_text(),
    )
    assert n == 1
    other = project / "other-checkout"
    other.mkdir()
    _, other_pub, _ = generate_key_pair(other, None)
    promoter_pub = re.search(r"(?m)^\s*promoters:\n\s*- file: (.*)$", text)
    assert promoter_pub is not None
    (project / promoter_pub[1].strip()).write_bytes(other_pub.read_bytes())  # this checkout's key is now another
    policy.write_text(text)
    error = _in(cli, project, "resolve", VARIANT, "--stage", "dev", "--json", code=18).json()["error"]
    assert "repository_prefix" in error["hint"] and "BUILDER_REPOSITORY_PREFIX" in error["hint"], error["hint"]
    assert "cannot be read" not in error["hint"], error["hint"]
    # the same state after a local key swap: the hint says that first (it led with another checkout)
    assert error["hint"].startswith("if this checkout's promoter key was replaced"), error["hint"]


# A dry run checks the key `--confirm` would sign with (`builder promote REF --to dev --key other.key`
# planned "would promote" with no warning, then `--confirm` failed with exit 16 "not a promoter"): a
# key that is not one of the policy's promoters is a failing `promoter` row of the plan.
def test_a_dry_run_with_a_key_that_is_not_a_promoter_says_so_as_confirm_does(
    cli: Cli, project: Path, registry_address: str, unique_repo: str, tmp_path: Path
) -> None:
    from builder.signing.keys import generate_key_pair

    _build(project, registry_address, unique_repo, b"dry run signer")
    other, _pub, _fp = generate_key_pair(tmp_path / "other", None)
    promoter = project / "state" / "keys" / "build" / "builder.key"
    # the project's own promoter key: the dry run is as before
    assert "would promote" in _in(cli, project, "promote", VARIANT, "--to", "dev", "--key", str(promoter)).stderr
    dry = _in(cli, project, "promote", VARIANT, "--to", "dev", "--key", str(other), "--json", code=31).json()
    rows = {r["rule"]: r for r in dry["error"]["details"]["results"][0]["decision"]["reasons"]}
    assert rows["promoter"]["passed"] is False and "is not a promoter" in rows["promoter"]["reason"], rows
    assert "is not a promoter" in dry["error"]["message"]
    human = _in(cli, project, "promote", VARIANT, "--to", "dev", "--key", str(other), code=31).stderr
    assert "would promote" not in human and "is not a promoter" in human, human
    confirm = _in(cli, project, "promote", VARIANT, "--to", "dev", "--key", str(other), "--confirm", "--json", code=16)
    message = confirm.json()["error"]["message"]
    assert "is not a promoter" in message and rows["promoter"]["reason"].startswith(message.split(";")[0])
    # the refused --confirm is in the audit trail as a denial (the plan's promoter row failed)
    from builder.ledger import open_ledger

    actions = [r.action for r in open_ledger(project / "state" / "ledger.sqlite").records()]
    assert actions == ["denied"], actions
