"""The foundation on real parts: BuildKit through the docker CLI, the registry, error exit codes."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from builder.registry import RegistryClient
from tests.conftest import ROOT, Cli

if TYPE_CHECKING:
    from pathlib import Path


def test_build_from_mirrored_base_push_and_read_digest_back(
    docker_engine: str, registry_address: str, mirror_base: str, unique_repo: str, tmp_path: Path
) -> None:
    """BuildKit (builder.engine.build_and_push) builds FROM the mirrored Debian base, pushes, and the digest the
    registry returns for the tag equals the one BuildKit reported."""
    from builder import engine

    (tmp_path / "Dockerfile").write_text(
        f'FROM {mirror_base}\nRUN echo built-by-foundation-test > /marker\nCMD ["cat", "/marker"]\n'
    )
    ref = f"{registry_address}/{unique_repo}:foundation"
    metadata = tmp_path / "metadata.json"
    lines: list[str] = []
    request = engine.BuildRequest(tmp_path, tmp_path / "Dockerfile", ref, provenance=False)
    built = engine.build_and_push(request, log=lines.append, metadata_file=metadata).digest
    assert json.loads(metadata.read_text())["containerimage.digest"] == built
    assert any("DONE" in line for line in lines), "the build log streams through"
    resolved = RegistryClient(registry_address, insecure=True).resolve(unique_repo, "foundation")
    assert resolved == built
    assert resolved.startswith("sha256:") and len(resolved) == 71


def test_doctor_passes_on_this_machine(cli: Cli, docker_engine: str, registry_address: str) -> None:
    report = cli("doctor", "--json", env={"BUILDER_REGISTRY": registry_address}, cwd=ROOT).json()
    assert report["ok"] is True
    assert {i["name"] for i in report["items"]} == {"engine", "buildx", "registry", "cosign"}


def test_engine_unavailable_exit_code_and_hint(cli: Cli, registry_address: str) -> None:
    """A daemon that does not answer: exit 3 and a hint saying how to start it."""
    err = cli("doctor", code=3, env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"}, cwd=ROOT).stderr
    assert "Docker daemon is not reachable" in err
    assert "scripts/setup" in err


def test_registry_unreachable_exit_code_and_hint(cli: Cli, docker_engine: str) -> None:
    """Nothing listens on 127.0.0.1:9 (discard port): exit 5, message names the registry."""
    res = cli("doctor", "--json", code=5, env={"BUILDER_REGISTRY": "127.0.0.1:9"}, cwd=ROOT)
    assert "127.0.0.1:9" in res.stderr
    doc = res.json()  # exactly one JSON document
    assert doc["error"]["kind"] == "registry-unavailable"
    assert doc["error"]["details"]["report"]["ok"] is False
