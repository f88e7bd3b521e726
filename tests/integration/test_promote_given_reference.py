"""A newcomer's report, against the real registry: ``builder promote REFERENCE --variant-id ID``
named the source as ``REPOSITORY:ID`` (the variant tag it reads a build as, which a mirrored image
never has) instead of the reference given. Every message, human and ``--json``, shows the
reference the user gave: by tag or by digest, dry run or applied."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient
from tests.conftest import unset_builder_settings
from tests.integration.test_promote_cli import VARIANT, _project
from tests.integration.test_promote_support import push_image

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli

pytestmark = pytest.mark.integration


def test_promote_shows_the_reference_given_not_the_variant_tag(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    unset_builder_settings(monkeypatch)
    root = _project(tmp_path / "project", registry_address, unique_repo)
    client = RegistryClient(registry_address, insecure=True)
    repo = f"{unique_repo}/mirror/debian"
    digest = push_image(client, repo, "bookworm", content=b"mirrored bookworm")
    by_tag = f"{registry_address}/{repo}:bookworm"
    by_digest = f"{registry_address}/{repo}@{digest}"
    wrong = f"{registry_address}/{repo}:{VARIANT}"
    assert client.try_resolve(repo, VARIANT) is None  # the tag the old message named does not exist

    def promote(ref: str, *more: str) -> tuple[str, str]:
        args = ("promote", ref, "--variant-id", VARIANT, "--to", "dev", *more)
        env = {"HOME": str(root)}
        doc = cli(*args, "--json", env=env, cwd=root).json()["results"][0]
        human = " ".join(cli(*args, env=env, cwd=root).stderr.split())
        assert re.search(re.escape(wrong) + r"(?!-)", human) is None, human  # (the stage pointer is `ID-dev`)
        return doc["source"], human

    for ref in (by_tag, by_digest):
        source, human = promote(ref)
        assert source == ref, source
        assert f"{VARIANT}: {ref} (image {digest})" in human, human
    env = {"HOME": str(root)}
    applied = cli("promote", by_tag, "--variant-id", VARIANT, "--to", "dev", "--confirm", env=env, cwd=root).stderr
    human = " ".join(applied.split())
    assert f"{VARIANT}: {by_tag} (image {digest})" in human, human
    assert re.search(re.escape(wrong) + r"(?!-)", human) is None, human
    source, human = promote(by_tag, "--confirm")  # applied again: the stage holds it, nothing written
    assert source == by_tag and f"already in dev {VARIANT}" in human, human
