"""Bearer-token authentication against a real distribution registry configured with
``auth.token`` (tests/registries.py: the token service stands in for Docker Hub's/Harbor's; the
registry and the client are the real things under test)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from builder.errors import RegistryAuthError
from builder.registry import Credential, RegistryClient, copy_image, sha256_digest
from tests.registries import TokenIssuer, auth_registry

if TYPE_CHECKING:
    from collections.abc import Iterator

USER, PASSWORD = "token-user", "token-pass"


@pytest.fixture(scope="module")
def token_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, TokenIssuer]]:
    """``(127.0.0.1:<port>, issuer)``: a real distribution registry with ``auth.token``."""
    with auth_registry(tmp_path_factory.mktemp("tokenreg"), "token", USER, PASSWORD) as reg:
        assert reg.issuer is not None
        yield reg.address, reg.issuer


def test_bearer_token_flow_push_pull_mount(token_registry: tuple[str, TokenIssuer], unique_repo: str) -> None:
    address, issuer = token_registry
    client = RegistryClient(address, insecure=True, auth=Credential(USER, PASSWORD))
    data = b"bearer blob"
    digest = client.put_blob(unique_repo, data)
    assert client.get_blob(unique_repo, digest) == data
    scopes = [s for r in issuer.requests for s in r["query"].get("scope", [])]
    # distribution words the challenge's actions in either order
    granted = {(s.rpartition(":")[0], frozenset(s.rpartition(":")[2].split(","))) for s in scopes}
    assert (f"repository:{unique_repo}", frozenset({"pull", "push"})) in granted
    assert all(r["auth"] == "Basic" for r in issuer.requests)
    # a cross-repository mount asks for pull on the source repository too, and mounts
    other = unique_repo + "-b"
    assert client.mount_blob(other, digest, unique_repo) is True
    assert any(f"repository:{unique_repo}:pull" in r["query"].get("scope", []) for r in issuer.requests)
    # the token is cached per repository: more requests on it fetch no new token
    before = len(issuer.requests)
    assert client.blob_exists(unique_repo, digest) and client.blob_exists(unique_repo, sha256_digest(b"x")) is False
    assert len(issuer.requests) == before


def test_bearer_without_credentials_fails_clearly(token_registry: tuple[str, TokenIssuer], unique_repo: str) -> None:
    address, _ = token_registry
    with pytest.raises(RegistryAuthError) as err:
        RegistryClient(address, insecure=True).resolve(unique_repo, "v1")
    assert "refused anonymous access" in err.value.message and address in err.value.hint
    with pytest.raises(RegistryAuthError, match="token-user"):
        RegistryClient(address, insecure=True, auth=Credential(USER, "wrong")).resolve(unique_repo, "v1")


def test_copy_into_token_registry(
    token_registry: tuple[str, TokenIssuer], registry_address: str, unique_repo: str
) -> None:
    from tests.integration.test_registry import push_image

    src = RegistryClient(registry_address, insecure=True)
    digest = push_image(src, unique_repo, layers=2)
    dst = RegistryClient(token_registry[0], insecure=True, auth=Credential(USER, PASSWORD))
    assert copy_image(src, unique_repo, digest, dst, unique_repo, tag="copied") == digest
    assert dst.resolve(unique_repo, "copied") == digest
