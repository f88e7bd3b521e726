"""An authenticated registry (a second real distribution process with htpasswd, on loopback):
credentials from a Docker config file work; without them the error is clear (RegistryAuthError)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.errors import RegistryAuthError
from builder.registry import Credential, DockerCredentials, RegistryClient, copy_image, sha256_digest

USER, PASSWORD = "builder-user", "s3cret-pass"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def auth_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``127.0.0.1:<port>``: a real CNCF distribution registry with htpasswd (bcrypt) auth."""
    registry_bin = shutil.which("docker-registry") or shutil.which("registry")
    htpasswd = shutil.which("htpasswd")
    if registry_bin is None or htpasswd is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("docker-registry and htpasswd are needed (CI=true: must not skip)")
        pytest.skip("docker-registry / htpasswd (apache2-utils) not installed")
    d = tmp_path_factory.mktemp("authreg")
    subprocess.run([htpasswd, "-Bbc", str(d / "htpasswd"), USER, PASSWORD], check=True, capture_output=True)
    port = _free_port()
    (d / "config.yml").write_text(
        "version: 0.1\n"
        "log:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {d / 'data'}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
        f"auth:\n  htpasswd:\n    realm: builder-test\n    path: {d / 'htpasswd'}\n"
    )
    log = (d / "registry.log").open("w")
    proc = subprocess.Popen([registry_bin, "serve", str(d / "config.yml")], stdout=log, stderr=subprocess.STDOUT)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"auth registry did not start: {(d / 'registry.log').read_text()}") from None
                time.sleep(0.1)
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def _docker_config(tmp_path: Path, registry: str, user: str, password: str) -> Path:
    cfg = tmp_path / "docker-config"
    cfg.mkdir()
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    (cfg / "config.json").write_text(json.dumps({"auths": {registry: {"auth": auth}}}))
    return cfg


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


def test_credential_helper_is_run(auth_registry: str, tmp_path: Path, unique_repo: str) -> None:
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
    old_path = os.environ["PATH"]
    os.environ["PATH"] = f"{bindir}:{old_path}"
    try:
        creds = DockerCredentials.from_file(cfg)
        cred = creds.get(auth_registry)
        assert cred is not None and cred.username == USER
        assert creds.get("127.0.0.1:1") is None  # helper only configured for the auth registry
        RegistryClient(auth_registry, insecure=True, auth=creds).put_blob(unique_repo, b"via helper")
    finally:
        os.environ["PATH"] = old_path


def test_copy_from_open_to_authenticated_registry(
    auth_registry: str, registry_address: str, tmp_path: Path, unique_repo: str
) -> None:
    from tests.integration.test_registry import push_image

    src = RegistryClient(registry_address, insecure=True)
    digest = push_image(src, unique_repo, layers=2)
    dst = RegistryClient(auth_registry, insecure=True, auth=Credential(USER, PASSWORD))
    assert copy_image(src, unique_repo, digest, dst, unique_repo, tag="copied") == digest
    assert dst.resolve(unique_repo, "copied") == digest
