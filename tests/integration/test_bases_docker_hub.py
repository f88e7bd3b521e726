"""``builder bases update`` for Docker Hub bases, as the shipped matrices name them
(``nvidia/cuda:...``, ``ubuntu:24.04``): short names are Docker Hub's, reached either

- through a site mirror map (``{"docker.io": "<mirror>/hub"}``): an open registry and a
  password-protected one (credentials only in ``DOCKER_CONFIG``), or
- on ``docker.io`` itself, whose endpoint (``registry-1.docker.io``, tokens from
  ``auth.docker.io``) is overridden by ``registry_endpoints`` to a loopback registry with token
  auth standing in for it (tests/registries.py); the credentials are Docker Hub's
  ``https://index.docker.io/v1/`` entry, as ``docker login`` writes them.

Both write the lock and show the change of a re-pushed tag's ``NVIDIA_REQUIRE_CUDA``, ``CUDA_VERSION``
and cuDNN/NCCL env. The variable names are the ones NVIDIA's base/runtime/cudnn Dockerfiles set
(https://gitlab.com/nvidia/container-images/cuda/-/tree/master/dist); the values are in their format
(``NV_CUDNN_VERSION=9.7.0.66-1`` in dist/12.8.0/ubuntu2404) but stand for any release: the images
here are pushed by the test, since Docker Hub is not reachable from the test machines.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING

import pytest

from builder.registry import Credential, RegistryClient
from tests.integration.test_build_bases import push_base
from tests.registries import auth_registry

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.conftest import Cli
    from tests.registries import AuthRegistry

CUDA = "nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04"
UBUNTU = "ubuntu:24.04"
REQUIRE_OLD = "cuda>=12.8 brand=unknown,driver>=470,driver<471 brand=tesla,driver>=535,driver<536"
REQUIRE_NEW = "cuda>=12.8 brand=unknown,driver>=550,driver<551 brand=tesla,driver>=550,driver<551"
CUDA_ENV_OLD = [
    "CUDA_VERSION=12.8.1",
    f"NVIDIA_REQUIRE_CUDA={REQUIRE_OLD}",
    "NCCL_VERSION=2.25.1-1",
    "NV_CUDNN_VERSION=9.8.0.87-1",
]
CUDA_ENV_NEW = [
    "CUDA_VERSION=12.8.1",
    f"NVIDIA_REQUIRE_CUDA={REQUIRE_NEW}",
    "NCCL_VERSION=2.25.1-1",
    "NV_CUDNN_VERSION=9.10.2.21-1",
]


def write_project(root: Path, toml: str) -> None:
    """A project whose matrix names the two Docker Hub bases by their short names."""
    (root / "matrices").mkdir(parents=True)
    (root / "matrices" / "m.yaml").write_text(
        "family: tiny\nrepository: hub-test/out\n"
        "axes:\n  accelerator:\n    - {kind: cuda, version: '12.8'}\n    - {kind: cpu}\n"
        "  framework:\n    name: none\n    versions: ['0']\n"
        "  python: ['3.12']\n  os: [ubuntu24.04]\n"
        f"base:\n  cuda: '{CUDA}'\n  cpu: '{UBUNTU}'\n"
    )
    (root / "builder.toml").write_text(toml + 'state_dir = "state"\n')


def assert_lock_and_diff(cli: Cli, root: Path, repush: object, pulled_prefix: str, env: dict[str, str]) -> None:
    """``bases update`` pins both bases, then reports the re-pushed CUDA tag's env diff."""
    first = cli("-C", str(root), "bases", "update", "--json", env=env).json()
    by_ref = {b["reference"]: b for b in first["bases"]}
    assert set(by_ref) == {CUDA, UBUNTU} and first["written"] is True
    assert by_ref[CUDA]["pulled_from"] == f"{pulled_prefix}/nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04"
    assert by_ref[UBUNTU]["pulled_from"] == f"{pulled_prefix}/library/ubuntu:24.04"
    lock = json.loads((root / "bases.lock.json").read_text())["bases"]
    assert lock[CUDA]["digest"] == by_ref[CUDA]["new_digest"] and lock[CUDA]["nv_cudnn_version"] == "9.8.0.87-1"
    assert lock[UBUNTU]["digest"] == by_ref[UBUNTU]["new_digest"] and lock[UBUNTU]["cuda_version"] is None

    assert callable(repush)
    repush()
    stale = cli("-C", str(root), "bases", "update", "--check", env=env, code=12)
    assert "NVIDIA_REQUIRE_CUDA" in stale.stderr
    shown = cli("-C", str(root), "bases", "update", env={**env, "COLUMNS": "80"})
    lines = shown.stderr.splitlines()
    assert any(line.startswith("changed") and CUDA in line for line in lines)
    assert any("NVIDIA_REQUIRE_CUDA" in line for line in lines)
    assert any(line.strip() == "NV_CUDNN_VERSION" for line in lines)
    assert "    - 9.8.0.87-1" in lines and "    + 9.10.2.21-1" in lines
    assert f"    + {REQUIRE_NEW}" in shown.stderr.replace("\n", "")  # whole, never cut (soft wrap)
    assert not any("NCCL_VERSION" in line for line in lines)  # unchanged facts are not shown
    assert any(line.startswith("unchanged") and UBUNTU in line for line in lines)
    after = json.loads((root / "bases.lock.json").read_text())["bases"]
    assert after[CUDA]["nvidia_require_cuda"] == REQUIRE_NEW and after[CUDA]["digest"] != lock[CUDA]["digest"]


def test_docker_hub_bases_through_a_mirror_map(
    cli: Cli, registry_address: str, unique_repo: str, tmp_path: Path
) -> None:
    mirror = f"{registry_address}/{unique_repo}/hub"
    client = RegistryClient(registry_address, insecure=True)
    push_base(client, f"{unique_repo}/hub/nvidia/cuda", CUDA.split(":")[1], CUDA_ENV_OLD)
    push_base(client, f"{unique_repo}/hub/library/ubuntu", "24.04", ["PATH=/usr/bin"])
    (tmp_path / "mirrors.yaml").write_text(f'docker.io: "{mirror}"\n')
    write_project(tmp_path, f'registry = "{registry_address}"\nmirror_map = "mirrors.yaml"\n')

    def repush() -> None:
        push_base(client, f"{unique_repo}/hub/nvidia/cuda", CUDA.split(":")[1], CUDA_ENV_NEW)

    assert_lock_and_diff(cli, tmp_path, repush, mirror, {})


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthRegistry]:
    """A registry with Docker token auth standing in for registry-1.docker.io."""
    with auth_registry(tmp_path_factory.mktemp("hub"), "token", "hub-user", "hub-pass") as reg:
        yield reg


def test_docker_hub_bases_on_docker_io_with_token_auth(cli: Cli, hub: AuthRegistry, tmp_path: Path) -> None:
    client = RegistryClient(hub.address, insecure=True, auth=Credential(hub.user, hub.password))
    tag = CUDA.split(":")[1]
    push_base(client, "nvidia/cuda", tag, CUDA_ENV_OLD)
    push_base(client, "library/ubuntu", "24.04", ["PATH=/usr/bin"])
    # the configured registry is somewhere else: short names must not be looked up there
    write_project(tmp_path, f'registry = "127.0.0.1:1"\nregistry_endpoints = ["docker.io={hub.address}"]\n')
    docker = tmp_path / "docker"
    docker.mkdir()
    auth = base64.b64encode(f"{hub.user}:{hub.password}".encode()).decode()
    (docker / "config.json").write_text(json.dumps({"auths": {"https://index.docker.io/v1/": {"auth": auth}}}))
    assert hub.issuer is not None
    before = len(hub.issuer.requests)

    def repush() -> None:
        push_base(client, "nvidia/cuda", tag, CUDA_ENV_NEW)

    assert_lock_and_diff(cli, tmp_path, repush, "docker.io", {"DOCKER_CONFIG": str(docker)})
    scopes = {s for r in hub.issuer.requests[before:] for s in r["query"].get("scope", [])}
    assert {"repository:nvidia/cuda:pull", "repository:library/ubuntu:pull"} <= scopes
    assert all(r["auth"] == "Basic" for r in hub.issuer.requests[before:])  # Docker Hub's credentials were used

    # without credentials for docker.io the token service refuses: a clear error naming docker.io
    (docker / "config.json").write_text("{}")
    denied = cli("-C", str(tmp_path), "bases", "update", env={"DOCKER_CONFIG": str(docker)}, code=6)
    assert "docker.io" in denied.stderr and "Traceback" not in denied.stderr


def test_unreachable_docker_hub_says_how_to_use_a_mirror(cli: Cli, tmp_path: Path) -> None:
    write_project(
        tmp_path, 'registry = "127.0.0.1:1"\nregistry_endpoints = ["docker.io=127.0.0.1:1"]\nregistry_retries = 0\n'
    )
    err = cli("-C", str(tmp_path), "bases", "update", "--json", code=5).json()["error"]
    assert err["message"].startswith("base ") and "127.0.0.1:1" in err["message"]
    assert "mirror_map" in err["hint"] and "registry_endpoints" in err["hint"] and "docker.io" in err["hint"]
    assert err["message"].endswith(": connection refused (1 attempt)")  # why, in words
    assert "127.0.0.1:1 stands in for docker.io" in err["hint"]  # the stand-in is what to start or fix


def test_docker_hub_itself_unreachable_names_the_mirror_settings(cli: Cli, tmp_path: Path) -> None:
    """Docker Hub's own endpoint (registry-1.docker.io) out of reach, as on a machine without
    network: here through a proxy that refuses every connection, so the test never depends on the
    network."""
    write_project(tmp_path, 'registry = "127.0.0.1:1"\nregistry_retries = 0\n')
    proxy = {"HTTPS_PROXY": "http://127.0.0.1:1", "https_proxy": "http://127.0.0.1:1", "NO_PROXY": "", "no_proxy": ""}
    err = cli("-C", str(tmp_path), "bases", "update", "--json", env=proxy, code=5).json()["error"]
    assert "registry-1.docker.io is not reachable" in err["message"] and "through the proxy" in err["message"]
    assert "docker.io must be reachable from here" in err["hint"]
    assert 'mirror_map ({"docker.io": "MIRROR/PATH"})' in err["hint"] and '["docker.io=HOST:PORT"]' in err["hint"]
    human = cli("-C", str(tmp_path), "bases", "update", env={**proxy, "COLUMNS": "80"}, code=5).stderr
    assert human.startswith("error: base ") and "Traceback" not in human


@pytest.fixture(scope="module")
def basic_mirror(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthRegistry]:
    """A password-protected (htpasswd) registry: a site's mirror of Docker Hub."""
    with auth_registry(tmp_path_factory.mktemp("mirror"), "basic", "mirror-user", "mirror-pass") as reg:
        yield reg


def test_docker_hub_bases_through_an_authenticated_mirror(cli: Cli, basic_mirror: AuthRegistry, tmp_path: Path) -> None:
    client = RegistryClient(
        basic_mirror.address, insecure=True, auth=Credential(basic_mirror.user, basic_mirror.password)
    )
    tag = CUDA.split(":")[1]
    push_base(client, "hub/nvidia/cuda", tag, CUDA_ENV_OLD)
    push_base(client, "hub/library/ubuntu", "24.04", ["PATH=/usr/bin"])
    (tmp_path / "mirrors.json").write_text(json.dumps({"docker.io": f"{basic_mirror.address}/hub"}))
    write_project(tmp_path, 'registry = "127.0.0.1:1"\nmirror_map = "mirrors.json"\n')
    env = {"DOCKER_CONFIG": str(basic_mirror.docker_config(tmp_path / "docker"))}

    def repush() -> None:
        push_base(client, "hub/nvidia/cuda", tag, CUDA_ENV_NEW)

    assert_lock_and_diff(cli, tmp_path, repush, f"{basic_mirror.address}/hub", env)
    # the wrong password: the auth exit code, naming the mirror and the Docker config
    bad = {"DOCKER_CONFIG": str(basic_mirror.docker_config(tmp_path / "bad", password="wrong"))}
    denied = cli("-C", str(tmp_path), "bases", "update", env=bad, code=6)
    assert basic_mirror.address in denied.stderr and "config.json" in denied.stderr


def test_a_base_missing_at_the_stand_in_or_the_mirror_says_where_and_what_to_do(
    cli: Cli, registry_address: str, unique_repo: str, tmp_path: Path
) -> None:
    # docker.io answered by a registry that does not hold the base: exit 8 naming the base, the
    # stand-in and how to fill it (never "builder status lists what exists")
    write_project(tmp_path / "a", f'registry = "127.0.0.1:1"\nregistry_endpoints = ["docker.io={registry_address}"]\n')
    err = cli("-C", str(tmp_path / "a"), "bases", "update", "--json", code=8).json()["error"]
    assert err["message"].startswith("base ") and f"not found at {registry_address}" in err["message"]
    assert "registry_endpoints" in err["hint"] and "skopeo copy docker://docker.io/" in err["hint"]
    assert err["details"]["pulled_from"].startswith("docker.io/")
    # a mirror map sending docker.io to a path that lacks the base: the mirrored name is named
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "mirrors.yaml").write_text(f'docker.io: "{registry_address}/{unique_repo}/empty"\n')
    write_project(tmp_path / "b", f'registry = "{registry_address}"\nmirror_map = "mirrors.yaml"\n')
    human = cli("-C", str(tmp_path / "b"), "bases", "update", code=8).stderr
    assert f"{registry_address}/{unique_repo}/empty/" in human and "builder status" not in human
    assert "mirror_map sends docker.io/nvidia/cuda:" in human and "Traceback" not in human
