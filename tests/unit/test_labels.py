"""builder.labels: the one owner of label and annotation names, the legacy io.builder.* keys still
read, one spelling for "no GPU code", and the OCI source labels."""

from __future__ import annotations

import dataclasses
import subprocess
from typing import TYPE_CHECKING

from builder import labels
from builder.app import App
from builder.build.plan import BuildOptions, plan_builds
from builder.build.variant import build_request
from builder.config import Config
from builder.engine import build_command
from tests.unit.test_build_plan import rendered

if TYPE_CHECKING:
    from pathlib import Path


def test_own_keys_and_legacy_keys_are_read() -> None:
    assert labels.own("variant") == "io.github.builder-project.variant"
    assert labels.read({"io.builder.variant": "a"}, "variant") == "a"  # images built before
    both = {"io.builder.variant": "old", "io.github.builder-project.variant": "new"}
    assert labels.read(both, "variant") == "new"
    assert labels.read({"io.github.builder-project.variant": ""}, "variant") is None


def test_one_spelling_for_no_gpu_code() -> None:
    assert labels.gpu_archs({"io.github.builder-project.gpu-archs": "none"}) == ("none",)
    assert labels.gpu_archs({"io.builder.gpu-archs": ""}) is None  # the old empty spelling: unknown
    assert labels.gpu_archs({"io.builder.gpu-archs": "sm_80, sm_90;sm_120"}) == ("sm_80", "sm_90", "sm_120")
    assert labels.gpu_archs({}) is None


def test_source_labels_as_docker_metadata_action_writes_them() -> None:
    facts = labels.SourceFacts("https://github.com/acme/images", "a" * 40, 1_700_000_000, "Apache-2.0")
    assert dict(facts.labels()) == {
        "org.opencontainers.image.created": "2023-11-14T22:13:20Z",
        "org.opencontainers.image.source": "https://github.com/acme/images",
        "org.opencontainers.image.url": "https://github.com/acme/images",
        "org.opencontainers.image.revision": "a" * 40,
        "org.opencontainers.image.licenses": "Apache-2.0",
    }
    assert labels.SourceFacts().labels() == ()


def test_repository_url_of_git_remotes() -> None:
    for remote in (
        "git@github.com:acme/images.git",
        "https://github.com/acme/images.git",
        "https://token@github.com/acme/images",
        "ssh://git@github.com/acme/images.git",
    ):
        assert labels.repository_url(remote) == "https://github.com/acme/images", remote
    assert labels.repository_url("/srv/git/images") is None
    assert labels.repository_url("file:///srv/git/images") is None
    assert labels.repository_url(None) is None


def test_source_facts_from_github_actions_and_from_git(tmp_path: Path) -> None:
    env = {"GITHUB_REPOSITORY": "acme/images", "GITHUB_SHA": "b" * 40, "GITHUB_SERVER_URL": "https://ghe.example"}
    app = App(Config(root=tmp_path, image_licenses="MIT"), tmp_path / "docker", environ=env)
    facts = app.source_facts(5)
    assert (facts.source, facts.revision, facts.created, facts.licenses) == (
        "https://ghe.example/acme/images",
        "b" * 40,
        5,
        "MIT",
    )
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(
        ["git", "-C", str(tmp_path), "remote", "add", "origin", "git@github.com:acme/images.git"], check=True
    )
    local = App(Config(root=tmp_path), tmp_path / "docker").source_facts(None)
    assert local.source == "https://github.com/acme/images" and local.revision is None  # no commit yet


def test_build_request_annotates_index_and_manifest(tmp_path: Path) -> None:
    r = rendered("a")
    options = BuildOptions(
        registry="127.0.0.1:5000", state_dir=tmp_path, image_labels=(("org.opencontainers.image.revision", "c" * 40),)
    )
    (plan_entry,) = plan_builds([r], {}, registry="127.0.0.1:5000")
    req = build_request(plan_entry, options, tmp_path, tmp_path / "Dockerfile")
    assert ("org.opencontainers.image.revision", "c" * 40) in req.labels and req.annotations == req.labels
    cmd = build_command(req)
    flags = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--annotation"]
    # one flag per level: buildx 0.13's docker driver writes a combined "index,manifest:" prefix into the key
    assert f"index:org.opencontainers.image.revision={'c' * 40}" in flags
    assert f"manifest:org.opencontainers.image.revision={'c' * 40}" in flags
    assert not any(f.startswith("index,") for f in flags)
    single = build_command(dataclasses.replace(req, provenance=False))
    single_flags = [single[i + 1] for i, a in enumerate(single) if a == "--annotation"]
    assert f"manifest:org.opencontainers.image.revision={'c' * 40}" in single_flags  # no index to annotate
    assert not any(f.startswith("index") for f in single_flags)
