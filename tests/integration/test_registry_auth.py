"""An authenticated registry (a second real distribution process with htpasswd, on loopback):
credentials from a Docker config file work; without them the error is clear (RegistryAuthError)."""

from __future__ import annotations

import json
import os
import stat
from typing import TYPE_CHECKING

import pytest

from builder.errors import RegistryAuthError
from builder.registry import Credential, DockerCredentials, RegistryClient, copy_image, sha256_digest
from tests import registries

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

USER, PASSWORD = "builder-user", "s3cret-pass"


@pytest.fixture(scope="module")
def auth_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``127.0.0.1:<port>``: a real CNCF distribution registry with htpasswd (bcrypt) auth."""
    with registries.auth_registry(tmp_path_factory.mktemp("authreg"), "basic", USER, PASSWORD) as reg:
        yield reg.address


def _docker_config(tmp_path: Path, registry: str, user: str, password: str) -> Path:
    return registries.AuthRegistry(registry, user, password, "basic").docker_config(tmp_path / "docker-config")


def test_credentials_from_docker_config_push_and_pull(auth_registry: str, tmp_path: Path, unique_repo: str) -> None:
    creds = DockerCredentials.from_file(_docker_config(tmp_path, auth_registry, USER, PASSWORD))
    client = RegistryClient(auth_registry, insecure=True, auth=creds)
    client.check_auth()
    data = b"authenticated blob"
    digest = client.put_blob(unique_repo, data)
    assert client.get_blob(unique_repo, digest) == data
    assert client.list_tags(unique_repo) == []


def test_without_credentials_fails_clearly(auth_registry: str, unique_repo: str) -> None:
    client = RegistryClient(auth_registry, insecure=True, auth=DockerCredentials.anonymous())
    with pytest.raises(RegistryAuthError) as err:
        client.resolve(unique_repo, "v1")
    msg = err.value.message
    assert auth_registry in msg and "401" in msg and "user name and password" in msg
    assert f"docker login {auth_registry}" in err.value.hint
    assert err.value.exit_code == 6


def test_wrong_password_fails_clearly(auth_registry: str, tmp_path: Path, unique_repo: str) -> None:
    creds = DockerCredentials.from_file(_docker_config(tmp_path, auth_registry, USER, "wrong"))
    client = RegistryClient(auth_registry, insecure=True, auth=creds)
    with pytest.raises(RegistryAuthError) as err:
        client.blob_exists(unique_repo, sha256_digest(b"x"))
    assert f"as user {USER!r}" in err.value.message and "401" in err.value.message


def test_credential_helper_is_run(
    auth_registry: str, tmp_path: Path, unique_repo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``credHelpers`` runs ``docker-credential-<name> get`` (a real executable on PATH)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    helper = bindir / "docker-credential-buildertest"
    helper.write_text(
        "#!/bin/sh\nread server\n"
        f'[ "$server" = "{auth_registry}" ] || {{ echo "credentials not found in native keychain"; exit 1; }}\n'
        f'printf \'{{"ServerURL":"%s","Username":"{USER}","Secret":"{PASSWORD}"}}\' "$server"\n'
    )
    helper.chmod(helper.stat().st_mode | stat.S_IEXEC)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"credHelpers": {auth_registry: "buildertest"}}))
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    creds = DockerCredentials.from_file(cfg)
    cred = creds.get(auth_registry)
    assert cred is not None and cred.username == USER
    assert creds.get("127.0.0.1:1") is None  # helper only configured for the auth registry
    RegistryClient(auth_registry, insecure=True, auth=creds).put_blob(unique_repo, b"via helper")


def test_copy_from_open_to_authenticated_registry(
    auth_registry: str, registry_address: str, tmp_path: Path, unique_repo: str
) -> None:
    from tests.integration.test_registry import push_image

    src = RegistryClient(registry_address, insecure=True)
    digest = push_image(src, unique_repo, layers=2)
    dst = RegistryClient(auth_registry, insecure=True, auth=Credential(USER, PASSWORD))
    assert copy_image(src, unique_repo, digest, dst, unique_repo, tag="copied") == digest
    assert dst.resolve(unique_repo, "copied") == digest
