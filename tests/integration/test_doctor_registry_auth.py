"""``builder doctor`` against password-protected registries (Basic and token, real ``registry``
binaries): credentials configured for the registry must be accepted, a wrong password fails with
exit 6 naming where the credentials came from; with none configured a 401 still means "answers"."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.registries import AuthRegistry, auth_registry

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.conftest import Cli


@pytest.fixture(params=["basic", "token"])
def registry(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthRegistry]:
    with auth_registry(tmp_path_factory.mktemp(f"{request.param}-registry"), request.param) as reg:
        yield reg


def test_a_wrong_password_fails_naming_the_docker_config(
    cli: Cli, docker_engine: str, registry: AuthRegistry, tmp_path: Path
) -> None:
    config = registry.docker_config(tmp_path / "docker", password="not-the-password")
    env = {"BUILDER_REGISTRY": registry.address, "DOCKER_CONFIG": str(config)}
    res = cli("doctor", "--json", code=6, env=env, cwd=tmp_path)
    error = res.json()["error"]
    assert error["kind"] == "registry-auth"
    assert str(config / "config.json") in error["hint"], error
    item = next(i for i in error["details"]["report"]["items"] if i["name"] == "registry")
    assert item["ok"] is False
    human = cli("doctor", code=6, env=env, cwd=tmp_path).stderr
    assert "FAIL  registry" in human and str(config / "config.json") in human


def test_the_right_password_passes(cli: Cli, docker_engine: str, registry: AuthRegistry, tmp_path: Path) -> None:
    env = {"BUILDER_REGISTRY": registry.address, "DOCKER_CONFIG": str(registry.docker_config(tmp_path / "docker"))}
    item = next(i for i in cli("doctor", "--json", env=env, cwd=tmp_path).json()["items"] if i["name"] == "registry")
    assert item["ok"] is True and "credentials are accepted" in item["detail"]


def test_without_credentials_a_login_wall_still_answers(
    cli: Cli, docker_engine: str, registry: AuthRegistry, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    env = {"BUILDER_REGISTRY": registry.address, "DOCKER_CONFIG": str(tmp_path / "empty")}
    item = next(i for i in cli("doctor", "--json", env=env, cwd=tmp_path).json()["items"] if i["name"] == "registry")
    assert item["ok"] is True and "no credentials" in item["detail"]
