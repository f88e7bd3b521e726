"""Every command that reaches a registry works against a password-protected registry (HTTP
basic and bearer-token auth) with the credentials only in ``DOCKER_CONFIG``, as on Harbor, GHCR,
ECR or Artifactory; with a wrong password the first registry read fails with the auth exit code
and a hint that names the Docker config."""

from __future__ import annotations

import json
import shutil
import textwrap
from typing import TYPE_CHECKING

import pytest

from builder.errors import RegistryAuthError
from builder.registry import Credential, RegistryClient, copy_image
from tests.conftest import ROOT, Cli
from tests.integration.test_promote_support import make_keys, push_image, write_policy
from tests.projects import cpu_matrix
from tests.registries import AuthRegistry, auth_registry

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

VARIANT = "tiny-cpu-py3.11-debian12"


@pytest.fixture(params=["basic", "token"])
def registry(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthRegistry]:
    with auth_registry(tmp_path_factory.mktemp(f"{request.param}-registry"), request.param) as reg:
        yield reg


@pytest.fixture
def project(tmp_path: Path, registry: AuthRegistry, registry_address: str, mirror_base: str, unique_repo: str) -> Path:
    """A project whose registry is the password-protected one, holding a copy of the mirrored
    Debian base; keys and a dev -> staging -> prod policy."""
    root = tmp_path / "project"
    (root / "matrices").mkdir(parents=True)
    (root / "policies").mkdir()
    (root / "images").mkdir()
    shutil.copytree(ROOT / "images" / "_common", root / "images" / "_common")
    shutil.copytree(ROOT / "images" / "tiny", root / "images" / "tiny")
    (root / "matrices" / "tiny.yaml").write_text(cpu_matrix("tiny", unique_repo))
    keys = make_keys(root / "state")
    write_policy(root / "policies" / "default.yaml", keys)
    (root / "builder.toml").write_text(
        textwrap.dedent(
            f"""\
            registry = "{registry.address}"
            state_dir = "state"
            key = "{keys.key("build")}"
            check_key = "{keys.key("check-runner")}"
            """
        )
    )
    base_digest = mirror_base.rpartition("@")[2]
    open_registry = RegistryClient(registry_address, insecure=True)
    protected = RegistryClient(registry.address, insecure=True, auth=Credential(registry.user, registry.password))
    copy_image(open_registry, "mirror/debian", base_digest, protected, "mirror/debian", tag="bookworm")
    mirror = {"debian:bookworm": {"reference": f"{registry.address}/mirror/debian:bookworm", "digest": base_digest}}
    (root / "state" / "mirror.json").write_text(json.dumps(mirror))
    return root


def test_every_registry_command_with_credentials_only_in_docker_config(
    cli: Cli, project: Path, registry: AuthRegistry, unique_repo: str, tmp_path: Path, docker_engine: str
) -> None:
    env = {"DOCKER_CONFIG": str(registry.docker_config(tmp_path / "docker")), "HOME": str(tmp_path / "home")}
    keys = project / "state" / "keys"

    def builder(*args: str, code: int = 0) -> dict[str, object]:
        out = cli(*args, "--json", code=code, env=env, cwd=project)
        assert "HTTP 401" not in out.stderr, out.stderr  # exit 0 already asserted; no refused request either
        doc: dict[str, object] = out.json()
        return doc

    builder("bases", "update")
    built = builder("build", "--no-sign")
    ref = f"{registry.address}/{unique_repo}@{_digest_of(built)}"
    builder("sign", ref, "--key", str(keys / "build" / "builder.key"))
    builder("verify", ref, "--key", str(keys / "build" / "builder.pub"))
    predicate = tmp_path / "predicate.json"
    predicate.write_text(json.dumps({"note": "credentials test"}))
    builder("attest", ref, "--predicate-type", "https://example.com/test/v1", "--predicate", str(predicate))
    builder("check", ref)
    builder("check", ref, "--static", "--fleet", str(ROOT / "fleets" / "demo.yaml"))
    builder("promote", VARIANT, "--to", "dev", "--confirm")
    builder("approve", ref, "--stage", "prod", "--key", str(keys / "alice" / "builder.key"), "--ticket", "CHG-1234")
    builder("run", "--to", "dev")

    # a second digest in dev, so that rollback has somewhere to go back to
    protected = RegistryClient(registry.address, insecure=True, auth=Credential(registry.user, registry.password))
    second = push_image(protected, unique_repo, None, labels={"io.builder.variant": VARIANT})
    second_ref = f"{registry.address}/{unique_repo}@{second}"
    builder("sign", second_ref)
    builder("promote", second_ref, "--variant-id", VARIANT, "--to", "dev", "--confirm")
    status = builder("status")
    assert second in json.dumps(status)
    assert len(json.dumps(builder("history", VARIANT))) > 2
    assert builder("resolve", VARIANT, "--stage", "dev")
    builder("rollback", "dev", VARIANT, "--confirm")
    assert _digest_of(built) in json.dumps(builder("resolve", VARIANT, "--stage", "dev"))


def test_wrong_password_fails_with_the_auth_code_and_names_the_docker_config(
    cli: Cli, project: Path, registry: AuthRegistry, tmp_path: Path
) -> None:
    config = registry.docker_config(tmp_path / "docker", password="wrong")
    for args in (("promote", VARIANT, "--to", "dev"), ("resolve", VARIANT, "--stage", "dev"), ("history", VARIANT)):
        out = cli(*args, "--json", code=RegistryAuthError.exit_code, env={"DOCKER_CONFIG": str(config)}, cwd=project)
        error = out.json()["error"]
        assert error["kind"] == "registry-auth", error
        assert "DOCKER_CONFIG" in error["hint"] or "--docker-config" in error["hint"], error


def _digest_of(doc: object) -> str:
    """The one image digest a ``build --json`` document reports."""
    text = json.dumps(doc)
    start = text.index('"digest": "sha256:') + len('"digest": "')
    return text[start : start + 71]
