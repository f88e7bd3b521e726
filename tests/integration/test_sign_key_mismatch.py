"""A private key whose public half is not the checkout's ``.pub`` (one of the pair replaced between
runs) signs nothing: ``builder sign`` / ``attest`` refuse before any write, exit 16 naming both
files and both fingerprints (docs/exit-codes.md: a signing key problem). Real registry, real keys
made by ``builder keys generate``; the refusal is ``builder.signing.keys.load_signer``, the one way
every command (``sign``, ``attest``, ``build --sign``, ``run``, ``promote``) loads a signing key."""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient
from builder.signing.fingerprints import short_fingerprint
from tests.integration import test_build_cli
from tests.integration.test_sign import PTYPE, SignCli, push_tiny_image

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli
    from tests.integration.test_build_cli import BuilderCli

pytestmark = pytest.mark.integration

project = test_build_cli.project  # the shared fixtures of the build CLI tests
builder = test_build_cli.builder


@pytest.fixture
def run_cli(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> SignCli:
    return SignCli(cli, monkeypatch)


def _generate(run_cli: SignCli, tmp_path: Path, reg: str, out: str, pw: dict[str, str]) -> str:
    gen = run_cli(["keys", "generate", "--output-dir", out, "--json"], tmp_path, reg, **pw)
    assert gen.code == 0, gen.stderr
    return str(json.loads(gen.stdout)["fingerprint"])


def test_sign_refuses_a_key_that_does_not_match_its_pub(
    run_cli: SignCli, registry_address: str, unique_repo: str, tmp_path: Path
) -> None:
    client = RegistryClient(registry_address, insecure=True)
    digest = push_tiny_image(client, unique_repo, "v1")
    reg, pw = client.registry, {"BUILDER_KEY_PASSWORD": "pw"}
    old = _generate(run_cli, tmp_path, reg, "k", pw)
    new = _generate(run_cli, tmp_path, reg, "replacement", pw)
    shutil.copy2(tmp_path / "replacement" / "builder.key", tmp_path / "k" / "builder.key")  # keys replaced
    ref = f"{unique_repo}@{digest}"
    (tmp_path / "pred.json").write_text("{}")
    for args in (
        ["sign", ref, "--key", "k/builder.key"],
        ["attest", ref, "--key", "k/builder.key", "--predicate-type", PTYPE, "--predicate", "pred.json"],
    ):
        r = run_cli(args, tmp_path, reg, **pw)
        said = " ".join(r.stderr.split())
        assert r.code == 16 and "Traceback" not in r.stderr, r.stderr
        assert short_fingerprint(new) in said and short_fingerprint(old) in said, said
        assert "k/builder.key" in said and "k/builder.pub" in said and "hint:" in said
        doc = json.loads(run_cli(["--json", *args], tmp_path, reg, **pw).stdout)["error"]
        assert doc["exit_code"] == 16 and doc["kind"] == "key"
        assert doc["details"]["signing_key"] == new and doc["details"]["public_key"] == old
    assert not [t for t in client.list_tags(unique_repo) if t.startswith("sha256-")]  # nothing was written
    # the matching pair again: signs
    shutil.copy2(tmp_path / "replacement" / "builder.pub", tmp_path / "k" / "builder.pub")
    ok = run_cli(["sign", ref, "--key", "k/builder.key", "--json"], tmp_path, reg, **pw)
    assert ok.code == 0, ok.stderr
    assert json.loads(ok.stdout)["signer"] == new


def test_the_checkouts_default_key_is_checked_against_its_builder_pub(
    run_cli: SignCli, registry_address: str, unique_repo: str, tmp_path: Path
) -> None:
    """No --key: builder.toml's ``key`` (default <state_dir>/keys/builder.key) against the
    builder.pub beside it, the file policies/default.yaml names as the build key."""
    client = RegistryClient(registry_address, insecure=True)
    digest = push_tiny_image(client, unique_repo, "v1")
    reg, pw = client.registry, {"BUILDER_KEY_PASSWORD": "pw"}
    _generate(run_cli, tmp_path, reg, "state/keys", pw)
    other = _generate(run_cli, tmp_path, reg, "elsewhere", pw)
    shutil.copy2(tmp_path / "elsewhere" / "builder.pub", tmp_path / "state" / "keys" / "builder.pub")
    r = run_cli(["sign", f"{unique_repo}@{digest}"], tmp_path, reg, **pw)
    assert r.code == 16 and short_fingerprint(other) in " ".join(r.stderr.split()), r.stderr
    assert not [t for t in client.list_tags(unique_repo) if t.startswith("sha256-")]


def test_build_sign_refuses_the_mismatched_pair_before_building(
    builder: BuilderCli, registry_address: str, unique_repo: str, project: Path
) -> None:
    """`build --sign` loads its key the same way, before anything is built or pushed."""
    env = {"BUILDER_KEY_PASSWORD": "pw"}
    assert builder(project, "keys", "generate", env=env).code == 0  # state/keys/builder.key + .pub
    other = builder(project, "keys", "generate", "--output-dir", "other", "--json", env=env)
    other_fp = json.loads(other.stdout)["fingerprint"]
    shutil.copy2(project / "other" / "builder.pub", project / "state" / "keys" / "builder.pub")
    r = builder(project, "build", "--sign", "--select", "tiny2*", env=env)
    assert r.code == 16 and short_fingerprint(other_fp) in " ".join(r.stderr.split()), r.stderr[-2000:]
    assert RegistryClient(registry_address, insecure=True).list_tags(unique_repo) == []  # nothing pushed
