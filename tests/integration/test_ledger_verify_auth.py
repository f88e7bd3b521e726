"""`builder ledger verify` of promotions into a password-protected registry (a real CNCF distribution
with htpasswd, tests/registries.py), newcomer report (F3): without credentials it exited 33 with
the "ledger is append-only: never edit it" hint, calling HTTP 401 a ledger break. A registry
that cannot be asked confirms nothing and breaks nothing: the registry's auth error (exit 6, its
login hint) ends the command; with the credentials (DOCKER_CONFIG) the ledger verifies."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient
from builder.registry.auth import Credential
from builder.signing.keys import load_signer
from builder.signing.sign import sign_image
from tests.integration.test_promote_cli import VARIANT, _project
from tests.integration.test_promote_support import push_image
from tests.registries import AuthRegistry, auth_registry

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.conftest import Cli

pytestmark = pytest.mark.integration


@pytest.fixture
def protected(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthRegistry]:
    with auth_registry(tmp_path_factory.mktemp("ledger-registry"), "basic") as reg:
        yield reg


def test_ledger_verify_without_credentials_is_the_registry_auth_error(
    cli: Cli, tmp_path: Path, protected: AuthRegistry, unique_repo: str
) -> None:
    project = _project(tmp_path / "p", protected.address, unique_repo)
    run = functools.partial(cli, cwd=project)
    home = {"HOME": str(project)}
    logged_in = {**home, "DOCKER_CONFIG": str(protected.docker_config(tmp_path / "docker"))}
    client = RegistryClient(protected.address, insecure=True, auth=Credential(protected.user, protected.password))
    digest = push_image(client, unique_repo, VARIANT, content=b"ledger behind a password")
    signer = load_signer(project / "state" / "keys" / "build" / "builder.key", None)
    sign_image(client, unique_repo, digest, signer, lock_dir=project / "state" / "locks")
    run("promote", VARIANT, "--to", "dev", "--confirm", env=logged_in)

    (tmp_path / "no-login").mkdir()  # a Docker config directory without credentials (no config.json)
    nothing = {**home, "DOCKER_CONFIG": str(tmp_path / "no-login")}  # (the cli fixture keeps earlier variables)
    wrong = {**home, "DOCKER_CONFIG": str(protected.docker_config(tmp_path / "bad", password="nope"))}
    for env in (nothing, wrong):
        err = run("ledger", "verify", "--json", code=6, env=env).json()["error"]
        assert err["kind"] == "registry-auth", err
        assert "append-only" not in (err.get("hint") or ""), err
        human = run("ledger", "verify", code=6, env=env).stderr
        assert "docker login" in human and "append-only" not in human and "Traceback" not in human, human

    ok = run("ledger", "verify", "--json", env=logged_in).json()
    assert ok["checked"] == 1 and ok["registry"] == [] and ok["chain"] == [], ok
