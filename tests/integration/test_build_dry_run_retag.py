"""`builder build --dry-run` shows what the build would do to a moved variant tag. A newcomer's
report: after someone pointed `<repo>:<variant>` at another image, the dry run said "up-to-date"
and the real build then printed "retagged ... -> sha256:...". The plan now looks up the variant
tags the build looks up (one function, `builder.build.run.planned`), and says the retag and
whether the digest the tag names now is foreign (not this checkout's build of the variant). Real
registry, real BuildKit build of the tiny image, the attacker's push a real OCI image."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient
from tests.integration import test_build_cli

if TYPE_CHECKING:
    from pathlib import Path

    from tests.integration.test_build_cli import BuilderCli

pytestmark = pytest.mark.integration

project = test_build_cli.project  # the shared fixtures of the build CLI tests
builder = test_build_cli.builder
B = test_build_cli.B


def test_dry_run_shows_the_retag_of_a_moved_variant_tag_and_that_its_digest_is_foreign(
    builder: BuilderCli, docker_engine: str, registry_address: str, unique_repo: str, project: Path
) -> None:
    from tests.integration.test_promote_support import push_image

    first = builder(project, "build", "--json", "--select", "tiny2*", "--no-sign")
    assert first.code == 0, first.stderr[-3000:]
    [image] = json.loads(first.stdout)["images"]
    client = RegistryClient(registry_address, insecure=True)
    clean = json.loads(builder(project, "build", "--dry-run", "--json", "--select", "tiny2*").stdout)["plan"]
    assert [(p["action"], p["retag"], p["variant_digest"], p["variant_digest_foreign"]) for p in clean] == [
        ("up-to-date", False, image["digest"], False)
    ]

    evil = push_image(client, unique_repo, B, content=b"the attacker's image")  # the variant tag moved
    dry = builder(project, "build", "--dry-run", "--json", "--select", "tiny2*")
    assert dry.code == 0, dry.stderr[-3000:]
    [plan] = json.loads(dry.stdout)["plan"]
    assert plan["action"] == "up-to-date" and plan["existing_digest"] == image["digest"]
    assert plan["retag"] is True and plan["variant_digest"] == evil and plan["variant_digest_foreign"] is True
    human = builder(project, "build", "--dry-run", "--select", "tiny2*", env={"COLUMNS": "80"})
    said = " ".join(human.stderr.split())
    assert human.code == 0 and "would retag (foreign)" in said, human.stderr
    assert f"from {evil}" in said and f"to {image['digest']}" in said and "not pushed by this checkout" in said
    assert "[/]" not in human.stderr and max(len(line) for line in human.stderr.splitlines()) <= 80, human.stderr
    assert client.resolve(unique_repo, B) == evil  # a dry run moves nothing

    # the real build does what the plan said, and says what the tag named before
    real = builder(project, "build", "--select", "tiny2*", "--no-sign")
    assert real.code == 0, real.stderr[-3000:]
    said = " ".join(real.stderr.split())
    assert "retagged" in said and evil in said and "not pushed by this checkout" in said
    assert client.resolve(unique_repo, B) == image["digest"]
    after = json.loads(builder(project, "build", "--dry-run", "--json", "--select", "tiny2*").stdout)["plan"]
    assert [(p["retag"], p["variant_digest_foreign"]) for p in after] == [(False, False)]


def test_dry_run_shows_a_retag_to_an_older_build_of_this_checkout_as_not_foreign(
    builder: BuilderCli, docker_engine: str, registry_address: str, unique_repo: str, project: Path
) -> None:
    """The variant tag pointing at an older build of this checkout (a template change reverted) is
    a retag, not foreign."""
    from tests.integration.test_promote_support import push_image

    first = builder(project, "build", "--json", "--select", "tiny2*", "--no-sign")
    assert first.code == 0, first.stderr[-3000:]
    [image] = json.loads(first.stdout)["images"]
    client = RegistryClient(registry_address, insecure=True)
    assert client.resolve(unique_repo, B) == image["digest"]
    # the variant tag on another image this checkout pushed as this variant: record it as such
    from builder.build.pushed import record_push

    other = push_image(client, unique_repo, B, content=b"an older build of the variant")
    assert record_push(project / "state", other, f"{B}-{'0' * 12}", f"{registry_address}/{unique_repo}")
    [plan] = json.loads(builder(project, "build", "--dry-run", "--json", "--select", "tiny2*").stdout)["plan"]
    assert (plan["retag"], plan["variant_digest"], plan["variant_digest_foreign"]) == (True, other, False)
    human = builder(project, "build", "--dry-run", "--select", "tiny2*", env={"COLUMNS": "80"}).stderr
    assert "would retag" in human and "(foreign)" not in human and "not pushed" not in human
    assert f"from {other}" in human, human
