"""Base images: the bases lock, the mirror map, reference normalisation, OS facts, `bases update` offline parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder import bases, matrix
from builder.errors import ConfigError
from builder.models import BaseImage
from builder.registry.reference import qualify

ROOT = Path(__file__).resolve().parents[2]
FAKE_CUDA_DIGEST = "sha256:" + "a" * 64
VARIANTS = {
    v.id: v
    for m in matrix.load_matrices(
        [*sorted((ROOT / "matrices").glob("*.yaml")), ROOT / "tests" / "data" / "matrices" / "tiny.yaml"]
    )
    for v in m.variants
}


def test_bases_lock_roundtrip_and_validation(tmp_path: Path) -> None:
    p = tmp_path / "bases.lock.json"
    bases.write_bases_lock(p, {"ubuntu:24.04": {"digest": None}, "nvidia/cuda:x": {"digest": FAKE_CUDA_DIGEST}})
    assert bases.read_bases_lock(p) == {"nvidia/cuda:x": FAKE_CUDA_DIGEST, "ubuntu:24.04": None}
    text = p.read_text()
    bases.write_bases_lock(p, {"nvidia/cuda:x": {"digest": FAKE_CUDA_DIGEST}, "ubuntu:24.04": {"digest": None}})
    assert p.read_text() == text
    p.write_text(json.dumps({"version": 1, "bases": {"x": {"digest": "md5:1"}}}))
    with pytest.raises(ConfigError):
        bases.read_bases_lock(p)


def test_committed_bases_lock_lists_every_upstream_base() -> None:
    refs = bases.upstream_references(VARIANTS.values())
    assert set(refs) <= set(bases.read_bases_lock(ROOT / "bases.lock.json"))
    assert all(not r.startswith("mirror:") for r in refs)


def test_normalize_and_mirror_map(tmp_path: Path) -> None:
    assert qualify("ubuntu:24.04") == "docker.io/library/ubuntu:24.04"
    assert qualify("rocm/dev-ubuntu-24.04:7.2") == "docker.io/rocm/dev-ubuntu-24.04:7.2"
    assert qualify("nvcr.io/nvidia/pytorch:25.01") == "nvcr.io/nvidia/pytorch:25.01"
    assert qualify("index.docker.io/ubuntu:24.04") == "docker.io/library/ubuntu:24.04"
    assert qualify("registry-1.docker.io/nvidia/cuda:12") == "docker.io/nvidia/cuda:12"
    assert qualify("localhost:5000/x/y:1") == "localhost:5000/x/y:1"
    # without a mirror map a short name is pulled from Docker Hub, never the configured registry
    assert bases.BaseResolution().map_reference("ubuntu:24.04") == "docker.io/library/ubuntu:24.04"
    m = tmp_path / "mirrors.json"
    m.write_text(json.dumps({"docker.io": "hub.corp/dockerhub", "docker.io/nvidia": "hub.corp/nv"}))
    b = bases.BaseResolution(upstream={"ubuntu:24.04": FAKE_CUDA_DIGEST}, mirror_map=bases.read_mirror_map(m))
    assert b.resolve("ubuntu:24.04").pull == f"hub.corp/dockerhub/library/ubuntu:24.04@{FAKE_CUDA_DIGEST}"
    assert b.map_reference("nvidia/cuda:12.8.1-base-ubuntu24.04") == "hub.corp/nv/cuda:12.8.1-base-ubuntu24.04"
    assert b.map_reference("quay.io/x/y:1") == "quay.io/x/y:1"
    # a map keyed by one of Docker Hub's aliases applies to docker.io names
    alias = bases.BaseResolution(mirror_map=(("index.docker.io", "hub.corp/h"),))
    assert alias.map_reference("ubuntu:24.04") == "hub.corp/h/library/ubuntu:24.04"


def test_mirror_bases_resolve_through_the_machine_local_record() -> None:
    digest = "sha256:" + "b" * 64
    b = bases.BaseResolution(mirrors={"debian:bookworm": ("127.0.0.1:5000/mirror/debian:bookworm@sha256:0", digest)})
    assert b.resolve("mirror:debian:bookworm") == BaseImage(
        "mirror:debian:bookworm", digest, f"127.0.0.1:5000/mirror/debian:bookworm@{digest}"
    )
    missing = bases.BaseResolution().resolve("mirror:debian:trixie")
    assert missing == BaseImage("mirror:debian:trixie", None, "debian:trixie")
    assert "scripts/setup" in bases.unpinned_reasons(missing)[0]
    assert "builder bases update" in bases.unpinned_reasons(bases.BaseResolution().resolve("ubuntu:24.04"))[0]
    assert bases.unpinned_reasons(b.resolve("mirror:debian:bookworm")) == ()
    assert bases.symbolic_name("mirror:debian:bookworm") == "debian:bookworm"


def test_bad_mirror_map_is_a_config_error(tmp_path: Path) -> None:
    m = tmp_path / "mirrors.yaml"
    m.write_text("[not, a, mapping")
    with pytest.raises(ConfigError, match="not a valid mirror map"):
        bases.read_mirror_map(m)
    with pytest.raises(ConfigError, match="does not exist"):
        bases.read_mirror_map(tmp_path / "nope.json")
