"""A newcomer's report (F1), against the real registry: promoting a REFERENCE put the stage pointer
in the reference's repository, not the variant's. ``promote mirror/debian:bookworm --variant-id V
--to dev --confirm`` wrote ``<prefix>/mirror/debian:V-dev`` (status, resolve and history kept
reading ``<prefix>/<repo>``); ``promote <prefix>/prod/<repo>:V-prod --to staging`` read dev at
``<prefix>/prod/<repo>:V-dev``; ``promote <prefix>/prod/<repo>@sha256:... --to prod`` targeted
``<prefix>/prod/prod/<repo>``, and the rollback hint suggested exactly that command.

The model (docs/promotion.md, "Where things live"): a reference names the digest (and, without
--variant-id, the variant); every stage pointer is the variant's, its matrix repository mapped by
the stage's ``repository`` template. Run with a ``repository_prefix`` as the report did."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

import pytest

from builder.registry import RegistryClient
from tests.conftest import unset_builder_settings
from tests.integration.test_promote_cli import VARIANT
from tests.integration.test_promote_support import make_keys, push_build, push_image
from tests.projects import jax_matrix

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli

pytestmark = pytest.mark.integration

PREFIX = "f1"


def _project(root: Path, registry: str, repo: str) -> Path:
    """A checkout with one matrix (``repo``) and dev -> staging -> prod (``prod/{repository}``),
    every stage unconditional: the test is about where pointers go, not about the rules."""
    (root / "matrices").mkdir(parents=True)
    (root / "policies").mkdir()
    keys = make_keys(root / "state")
    (root / "policies" / "default.yaml").write_text(
        textwrap.dedent(
            f"""\
            version: 1
            keys:
              promoters:
                - file: {keys.pub("build")}
            approvers:
              alice: {{file: {keys.pub("alice")}}}
            promoters: [promoters]
            stages:
              dev: {{from: build, require: {{unconditional: x}}}}
              staging: {{from: dev, require: {{unconditional: x}}}}
              prod:
                from: staging
                repository: "prod/{{repository}}"
                require: {{unconditional: x}}
                rollback: {{allowed: [promoters, alice]}}
            """
        )
    )
    (root / "builder.toml").write_text(f'registry = "{registry}"\nstate_dir = "state"\nkey = "{keys.key("build")}"\n')
    (root / "matrices" / "tiny.yaml").write_text(jax_matrix(repo))
    return root


def test_a_reference_moves_the_variants_pointer_wherever_the_image_lives(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    unset_builder_settings(monkeypatch)
    root = _project(tmp_path / "project", registry_address, unique_repo)
    env = {"HOME": str(root), "BUILDER_REPOSITORY_PREFIX": PREFIX}

    def run(*args: str, code: int = 0) -> Any:
        return cli(*args, "--json", code=code, env=env, cwd=root).json()

    reg = registry_address
    repo, prod = f"{PREFIX}/{unique_repo}", f"{PREFIX}/prod/{unique_repo}"
    client = RegistryClient(reg, insecure=True)
    d1 = push_build(client, repo, VARIANT, b"f1 first build")  # labelled and content-tagged as a build
    for stage in ("dev", "staging", "prod"):
        run("promote", VARIANT, "--to", stage, "--confirm")
    assert client.resolve(prod, f"{VARIANT}-prod") == d1

    # the rollback hint of a first promotion: the command it suggests targets prod/<repo>, not prod/prod/<repo>
    alice = str(root / "state" / "keys" / "alice" / "builder.key")
    hint = run("rollback", VARIANT, "--stage", "prod", "--key", alice, code=8)["error"]["hint"]
    suggested = f"builder promote {reg}/{repo}@sha256:… --variant-id {VARIANT} --to prod --confirm"
    assert suggested in hint, hint
    # ... and a digest given by the prod repository itself (the report's command) maps back too
    for ref in (f"{reg}/{repo}@{d1}", f"{reg}/{prod}@{d1}"):
        plan = run("promote", ref, "--variant-id", VARIANT, "--to", "prod")["results"][0]
        assert plan["destination"] == f"{reg}/{prod}:{VARIANT}-prod", plan
        assert plan["source"] == ref and plan["allowed"], plan
    # the variant told by the image's label: its claim holds in the variant's stage repository too
    plan = run("promote", f"{reg}/{prod}@{d1}", "--to", "prod")["results"][0]
    assert plan["variant"] == VARIANT and plan["destination"] == f"{reg}/{prod}:{VARIANT}-prod", plan
    assert client.try_resolve(f"{PREFIX}/prod/{prod}", f"{VARIANT}-prod") is None

    # a prod pointer given to staging reads dev where dev is (it named prod/<repo>:V-dev, "holds nothing")
    d2 = push_image(client, repo, VARIANT, content=b"f1 second build")
    run("promote", VARIANT, "--to", "dev", "--confirm")
    pointer = f"{reg}/{prod}:{VARIANT}-prod"
    err = run("promote", pointer, "--to", "staging", code=31)
    reason = err["error"]["details"]["results"][0]["decision"]["reasons"][0]["reason"]
    assert f"({reg}/{repo}:{VARIANT}-dev holds {d2})" in reason, reason
    done = run("promote", pointer, "--to", "dev", "--confirm")["results"][0]  # d1 back into dev, by reference
    assert done["pinned"] == f"{reg}/{repo}@{d1}" and done["source"] == pointer, done
    plan = run("promote", pointer, "--to", "staging")["results"][0]
    assert plan["allowed"] and plan["destination"] == f"{reg}/{repo}:{VARIANT}-staging", plan
    assert f"is what dev holds ({reg}/{repo}:{VARIANT}-dev)" in plan["decision"]["reasons"][0]["reason"]
    assert client.try_resolve(prod, f"{VARIANT}-dev") is None

    # the docs' own example: a mirrored image promoted as the variant lands in the variant's dev
    mirror = f"{PREFIX}/{unique_repo}-mirror/debian"
    m = push_image(client, mirror, "bookworm", content=b"f1 mirrored bookworm")
    given = f"{reg}/{mirror}:bookworm"
    done = run("promote", given, "--variant-id", VARIANT, "--to", "dev", "--confirm")["results"][0]
    assert done["pinned"] == f"{reg}/{repo}@{m}" and done["source"] == given, done
    assert client.resolve(repo, f"{VARIANT}-dev") == m and client.try_resolve(mirror, f"{VARIANT}-dev") is None
    # status, resolve and history read the same pointer promote moved
    assert cli("resolve", VARIANT, "--stage", "dev", env=env, cwd=root).stdout.strip() == f"{reg}/{repo}@{m}"
    rows = run("status")["rows"]
    assert next(r["digest"] for r in rows if r["stage"] == "dev") == m
    records = run("history", VARIANT, "--stage", "dev")["stages"][0]["records"]
    assert [r["digest"] for r in records[:3]] == [m, d1, d2]
