"""One spelling per registry and per base-image name (builder.registry.reference), and the App's
endpoint for Docker Hub."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from builder.app import App
from builder.config import Config
from builder.errors import ConfigError
from builder.registry.reference import canonical_reference, canonical_registry, parse_reference, qualify

if TYPE_CHECKING:
    from pathlib import Path


def test_registry_aliases_are_one_registry() -> None:
    assert canonical_registry("index.docker.io") == canonical_registry("registry-1.docker.io") == "docker.io"
    assert canonical_registry("localhost:5000") == "127.0.0.1:5000" == canonical_registry("127.0.0.1:5000")
    assert canonical_registry("LOCALHOST") == "127.0.0.1"
    assert canonical_registry("ghcr.io") == "ghcr.io"
    assert canonical_reference("localhost:5000/p/demo/jax:v-prod") == "127.0.0.1:5000/p/demo/jax:v-prod"
    assert canonical_reference("ml/jax") == "ml/jax"


def test_docker_hub_names_parse_to_docker_io() -> None:
    for text in ("index.docker.io/ubuntu:24.04", "registry-1.docker.io/library/ubuntu:24.04", "docker.io/ubuntu:24.04"):
        ref = parse_reference(text, "127.0.0.1:5000")
        assert (ref.registry, ref.repository, ref.tag) == ("docker.io", "library/ubuntu", "24.04")
    assert (
        qualify("nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04")
        == "docker.io/nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04"
    )
    with pytest.raises(ConfigError, match="Ubuntu"):
        parse_reference("docker.io/Ubuntu:1", "x")


def test_docker_hub_endpoint_and_override(tmp_path: Path) -> None:
    app = App(Config(root=tmp_path), tmp_path / "docker")
    assert app.endpoint("docker.io") == app.endpoint("index.docker.io") == "registry-1.docker.io"
    assert app.endpoint("ghcr.io") == "ghcr.io"
    client = app.client("index.docker.io")
    assert client is app.client("docker.io") and client.base == "https://registry-1.docker.io"
    stand_in = App(Config(root=tmp_path, registry_endpoints=("docker.io=127.0.0.1:5999",)), tmp_path / "docker")
    assert stand_in.client("docker.io").base == "http://127.0.0.1:5999"
    assert stand_in.client("docker.io").transport.auth.registry == "docker.io"  # credentials: Docker Hub's
