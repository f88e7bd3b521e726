"""``builder build --builder NAME`` (#18 item 4): the build goes to the named buildx builder; a name buildx
does not know, or a builder buildx would refuse from here, is refused before anything is built (real
buildx, engine and registry).

A Docker context is a buildx builder of its own (driver ``docker``,
https://docs.docker.com/build/builders/drivers/docker/), usable only from that context: buildx answers
``ERROR: use `docker --context=NAME buildx` to switch to context "NAME"`` once the build has started. No
BuildKit image can be pulled here, so a remote/kubernetes/docker-container builder is not exercised; the
named builder that builds is this context's own (``default``).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient
from tests.integration import test_build_cli
from tests.integration.test_build_cli import A, B, BuilderCli

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.integration

project = test_build_cli.project  # the throwaway project with two one-variant matrices (a fixture)
builder = test_build_cli.builder  # builder -C PROJECT ... in-process (a fixture)


@pytest.fixture
def context_builder(docker_host: str) -> Iterator[str]:
    """A Docker context (and so a buildx builder) on this machine's engine."""
    name = f"builder-test-{uuid.uuid4().hex[:8]}"
    subprocess.run(["docker", "context", "create", name, "--docker", f"host={docker_host}"], check=True, timeout=60)
    try:
        yield name
    finally:
        subprocess.run(["docker", "context", "rm", "-f", name], capture_output=True, timeout=60)


def test_unknown_builder_is_refused_before_any_build(
    builder: BuilderCli, project: Path, registry_address: str, unique_repo: str
) -> None:
    res = builder(project, "build", "--builder", "no-such-builder", "--json")
    assert res.code == 2, res.stderr
    error = json.loads(res.stdout)["error"]
    assert "--builder no-such-builder: buildx has no such builder" in error["message"]
    assert "docker buildx ls" in error["hint"] and "Traceback" not in res.stderr
    client = RegistryClient(registry_address, insecure=True)
    assert client.try_resolve(unique_repo, A) is None and client.try_resolve(unique_repo, B) is None
    assert not (project / "state" / "logs").exists()  # nothing started


def test_another_contexts_docker_builder_is_refused_before_any_build(
    builder: BuilderCli, project: Path, context_builder: str
) -> None:
    res = builder(project, "build", "--builder", context_builder, "--json")
    assert res.code == 2, res.stderr[-3000:]
    error = json.loads(res.stdout)["error"]
    assert f"the `docker` driver of Docker context {context_builder}" in error["message"]
    assert f"DOCKER_CONTEXT={context_builder}" in error["hint"]
    assert not (project / "state" / "logs").exists()


def test_build_uses_the_named_builder(builder: BuilderCli, project: Path, docker_engine: str) -> None:
    here = subprocess.run(["docker", "buildx", "inspect"], capture_output=True, text=True, timeout=60, check=True)
    name = here.stdout.split("Name:", 1)[1].split()[0]
    res = builder(project, "build", "--builder", name, "--select", A, "--json")
    assert res.code == 0, res.stderr[-3000:]
    [image] = json.loads(res.stdout)["images"]
    assert image["status"] == "built"
    log = Path(image["log"]).read_text()
    assert "buildx build --progress plain --file" in log and f"--builder {name} " in log


def test_run_takes_the_same_builder_option(
    builder: BuilderCli, project: Path, registry_address: str, unique_repo: str, docker_engine: str
) -> None:
    """`builder run --builder NAME` (one option definition with build's): an unknown name is refused before
    anything is built; a known one builds there (its name is in the build's buildx command)."""
    policy = project / "run-policy.yaml"  # promotes into dev whatever was built (run needs a policy)
    policy.write_text("version: 1\nstages:\n  dev:\n    from: build\n    require: {unconditional: a test}\n")
    res = builder(project, "run", "--policy", str(policy), "--builder", "no-such-builder", "--no-check", "--json")
    assert res.code == 2, res.stderr[-3000:]
    assert "--builder no-such-builder: buildx has no such builder" in json.loads(res.stdout)["error"]["message"]
    client = RegistryClient(registry_address, insecure=True)
    assert client.try_resolve(unique_repo, A) is None
    here = subprocess.run(["docker", "buildx", "inspect"], capture_output=True, text=True, timeout=60, check=True)
    name = here.stdout.split("Name:", 1)[1].split()[0]
    res = builder(project, "run", "--policy", str(policy), "--builder", name, "--select", A, "--no-check", "--json")
    assert res.code == 0, res.stderr[-3000:]
    [variant] = json.loads(res.stdout)["variants"]
    log = Path(variant["build"]["log"]).read_text()
    assert f"--builder {name} " in log
