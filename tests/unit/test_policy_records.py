"""Pure parts of promotion: promotion/v1 records, image requirements read from a config, stage
locations and the approval predicate."""

from __future__ import annotations

import datetime as dt
import textwrap
from pathlib import Path

from builder.approvals import approval_predicate
from builder.policy import load_policy
from builder.promote import Environment, PromotionRecord, Target, image_requirements, stage_location

DIGEST = "sha256:" + "c" * 64


def test_promotion_record_round_trips() -> None:
    rec = PromotionRecord(
        action="promote",
        variant="jax0.7-cpu-py3.11-debian12",
        stage="prod",
        from_stage="staging",
        reference="127.0.0.1:5000/prod/demo/jax:jax0.7-cpu-py3.11-debian12-prod",
        digest=DIGEST,
        previous=None,
        allowed=True,
        reasons=("pass approvals: approved by alice, bob",),
        policy="policies/default.yaml",
        promoter="sha256:" + "f" * 64,
        promoter_name="alice",
        time="2026-11-30T17:00:00.000001Z",
        ticket="CHG-1234",
    )
    p = rec.predicate()
    assert p["fromStage"] == "staging" and p["decision"]["allowed"] is True
    back = PromotionRecord.from_predicate(p, signer="sha256:" + "f" * 64, layer="sha256:" + "1" * 64)
    assert back is not None and back.predicate() == p and back.layer == "sha256:" + "1" * 64
    assert back.when == dt.datetime(2026, 11, 30, 17, 0, 0, 1, tzinfo=dt.UTC)
    # anything malformed is not a record (it is then simply not trusted)
    for broken in ({}, {**p, "digest": 7}, {**p, "previous": ["x"]}, {**p, "time": None}):
        assert PromotionRecord.from_predicate(broken) is None


def test_image_requirements_from_labels_and_env() -> None:
    cuda = {
        "config": {
            "Labels": {"io.builder.cuda.version": "12.8", "io.builder.gpu-archs": "sm_80,sm_90"},
            "Env": ["NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=tesla,driver>=470,driver<471", "PATH=/usr/bin"],
        }
    }
    assert image_requirements(cuda) == {
        "cuda": "12.8",
        "require": "cuda>=12.8 brand=tesla,driver>=470,driver<471",
        "rocm": None,
        "image_archs": ("sm_80", "sm_90"),
    }
    # an official CUDA image without builder labels: CUDA_VERSION from the environment
    official = {"config": {"Env": ["CUDA_VERSION=12.4.1"]}}
    assert image_requirements(official)["cuda"] == "12.4"
    assert image_requirements({"config": {"Labels": {"io.builder.rocm.version": "6.4"}}})["rocm"] == "6.4"
    assert image_requirements({}) == {"cuda": None, "require": None, "rocm": None, "image_archs": ()}


def test_stage_locations(tmp_path: Path) -> None:
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
    env = Environment(load_policy(policy_file), "127.0.0.1:5000", lambda r: True, tmp_path / "locks")
    t = Target("jax0.7-cpu", "demo/jax", "127.0.0.1:5000")
    assert str(stage_location(env, t, "build")) == "127.0.0.1:5000/demo/jax:jax0.7-cpu"
    assert str(stage_location(env, t, "dev")) == "127.0.0.1:5000/demo/jax:jax0.7-cpu-dev"
    prod = stage_location(env, t, "prod")
    assert str(prod) == "registry.example:443/prod/demo/jax:jax0.7-cpu-prod"
    assert prod.pinned(DIGEST) == f"registry.example:443/prod/demo/jax@{DIGEST}"


def test_approval_predicate() -> None:
    now = dt.datetime(2026, 11, 30, 18, 30, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    p = approval_predicate(DIGEST, "prod", "sha256:" + "a" * 64, name="alice", ticket="CHG-1", now=now)
    assert p == {
        "approver": {"fingerprint": "sha256:" + "a" * 64, "name": "alice"},
        "stage": "prod",
        "digest": DIGEST,
        "ticket": "CHG-1",
        "comment": None,
        "time": "2026-11-30T17:30:00.000000Z",
    }


def test_cluster_reason_names_each_configuration_once() -> None:
    """A cluster's line: each (driver, GPU) with the cluster's verdict once, its reasons grouped;
    configurations with the same reasons merged; better configurations left out."""
    from builder.promote import cluster_reason

    hosts = [
        ("driver 550.144.03, NVIDIA GeForce RTX 4090", "blocked", ["needs driver >= 570.26", "sm_89 not compiled"]),
        ("driver 550.127.08, NVIDIA H100", "blocked", ["needs driver >= 570.26"]),
        ("driver 550.90.07, NVIDIA H100", "blocked", ["needs driver >= 570.26", "needs driver >= 570.26"]),
        ("driver 580.65.06, NVIDIA H100", "ok", ["fine"]),
    ]
    line = cluster_reason("blocked", hosts)
    assert line == (
        "driver 550.144.03, NVIDIA GeForce RTX 4090 (blocked): needs driver >= 570.26; sm_89 not compiled"
        " | driver 550.127.08, NVIDIA H100 and driver 550.90.07, NVIDIA H100 (blocked): needs driver >= 570.26"
    )
    assert "580.65.06" not in line and line.count("GeForce") == 1
