"""The promotion context: stage locations from the policy, registry clients only from the
injected factory (never a client with default, empty credentials), per-pointer lock files."""

from __future__ import annotations

import dataclasses
import textwrap
from typing import TYPE_CHECKING

import pytest

from builder.errors import NotFoundError, PromotionConflictError
from builder.policy import load_policy
from builder.promote import PromotionContext, Target
from builder.promote.location import Location
from builder.registry import RegistryClient

if TYPE_CHECKING:
    from pathlib import Path

DIGEST = "sha256:" + "c" * 64


def _context(tmp_path: Path, asked: list[str]) -> PromotionContext:
    policy_file = tmp_path / "p.yaml"
    policy_file.write_text(
        textwrap.dedent(
            """\
            stages:
              dev: {from: build, require: {unconditional: x}}
              prod: {from: dev, repository: "prod/{repository}", registry: "registry.example:443",
                     require: {unconditional: x}}
            """
        )
    )

    def clients(registry: str) -> RegistryClient:
        asked.append(registry)
        return RegistryClient(registry, insecure=True)

    return PromotionContext(load_policy(policy_file), "127.0.0.1:5000", clients, tmp_path / "locks")


def test_stage_locations(tmp_path: Path) -> None:
    ctx = _context(tmp_path, [])
    t = Target("jax0.7-cpu", "demo/jax", "127.0.0.1:5000")
    assert str(ctx.stage_location(t, "build")) == "127.0.0.1:5000/demo/jax:jax0.7-cpu"
    assert str(ctx.stage_location(t, "dev")) == "127.0.0.1:5000/demo/jax:jax0.7-cpu-dev"
    prod = ctx.stage_location(t, "prod")
    assert str(prod) == "registry.example:443/prod/demo/jax:jax0.7-cpu-prod"
    assert prod.pinned(DIGEST) == f"registry.example:443/prod/demo/jax@{DIGEST}"
    with pytest.raises(NotFoundError):
        ctx.stage_location(t, "qa")
    # an explicit reference: the build's image is the one it names; the stages stay the variant's
    mirror = dataclasses.replace(t, tag="bookworm", source=Location("127.0.0.1:5000", "mirror/debian"))
    assert str(ctx.stage_location(mirror, "build")) == "127.0.0.1:5000/mirror/debian:bookworm"
    assert str(ctx.stage_location(mirror, "dev")) == "127.0.0.1:5000/demo/jax:jax0.7-cpu-dev"
    pinned = dataclasses.replace(t, digest=DIGEST)
    assert str(ctx.stage_location(pinned, "build")) == "127.0.0.1:5000/demo/jax"


def test_clients_come_from_the_injected_factory(tmp_path: Path) -> None:
    asked: list[str] = []
    ctx = _context(tmp_path, asked)
    client = ctx.client("registry.example:443")
    assert asked == ["registry.example:443"] and client.registry == "registry.example:443"


def test_one_lock_file_per_pointer(tmp_path: Path) -> None:
    ctx = _context(tmp_path, [])
    t = Target("jax0.7-cpu", "demo/jax", "127.0.0.1:5000")
    dev, prod = ctx.stage_location(t, "dev"), ctx.stage_location(t, "prod")
    assert ctx.lock_path(dev) != ctx.lock_path(prod)
    assert ctx.lock_path(dev) == ctx.lock_path(dev)
    assert ctx.lock_path(dev).parent == tmp_path / "locks"


def test_a_lock_held_too_long_is_a_conflict_naming_the_pointer(tmp_path: Path) -> None:
    """Another writer (a lock of its own on the same file, as another process takes it) holds the
    stage lock past ``lock_timeout``: PromotionConflictError (32), never filelock's Timeout (a
    traceback); the lock is free again once that writer lets go."""
    from filelock import FileLock

    ctx = dataclasses.replace(_context(tmp_path, []), lock_timeout=0.05)
    dev = ctx.stage_location(Target("jax0.7-cpu", "demo/jax", "127.0.0.1:5000"), "dev")
    other = FileLock(str(ctx.lock_path(dev)))
    with other, pytest.raises(PromotionConflictError) as info, ctx.lock(dev):
        pass
    assert str(dev) in info.value.message and str(ctx.lock_path(dev)) in info.value.message
    assert info.value.details["pointer"] == str(dev) and info.value.exit_code == 32
    with ctx.lock(dev):  # free again
        pass
