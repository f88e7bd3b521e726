"""The build plan and provenance are pure: tested without docker or a registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.build.plan import (
    BuildOptions,
    PlannedBuild,
    build_secrets,
    check_tags,
    content_key,
    default_secrets,
    plan_builds,
    split_pinned,
    unpinned_error,
)
from builder.build.results import BuildRun, raise_for_failures
from builder.build.variant import build_request, materialize
from builder.errors import BuildFailedError, ConfigError, TagConflictError
from builder.models import Accelerator, BaseImage, BuiltImage, Framework, RenderedImage, Variant
from builder.predicates import SLSA_PROVENANCE_V1
from builder.signing.provenance import BUILD_TYPE, provenance_predicate, redact_build_args

REG = "127.0.0.1:5000"
BASE_DIGEST = "sha256:" + "1" * 64


def rendered(vid: str, h: str = "a" * 64, *, unpinned: tuple[str, ...] = (), repo: str = "ml/x") -> RenderedImage:
    v = Variant(
        id=vid,
        matrix="m",
        family="f",
        repository=repo,
        accelerator=Accelerator("cuda", "12.8"),
        framework=Framework("jax", "0.7.2"),
        python="3.12",
        os="ubuntu24.04",
        platform="linux/amd64",
        base=BaseImage("nvidia/cuda:12.8.1-base-ubuntu24.04", BASE_DIGEST, f"nvidia/cuda:12.8.1@{BASE_DIGEST}"),
        packages=("jax==0.7.2",),
        gpu_archs=("sm_80", "sm_90"),
    )
    return RenderedImage(
        variant=v,
        dockerfile="ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nRUN true\n",
        context=(("requirements.lock", b"jax==0.7.2 --hash=sha256:00\n"), ("x/y.sh", b"echo\n")),
        content_hash=h,
        labels=(("io.builder.variant", vid),),
        build_args=(("BASE_IMAGE", f"nvidia/cuda:12.8.1@{BASE_DIGEST}"), ("HF_TOKEN", "hunter2")),
        unpinned=unpinned,
    )


def test_plan_skips_existing_content_tags() -> None:
    a, b = rendered("a", "1" * 64), rendered("b", "2" * 64)
    existing = {content_key("ml/x", a.content_tag): "sha256:" + "f" * 64, content_key("ml/x", b.content_tag): None}
    plan = plan_builds([a, b], existing, registry=REG)
    assert [(p.variant_id, p.action) for p in plan] == [("a", "up-to-date"), ("b", "build")]
    assert plan[0].existing_digest == "sha256:" + "f" * 64
    assert plan[1].reference == f"{REG}/ml/x"
    assert plan[1].content_tag == "b-222222222222"
    assert plan[1].pending_tag == "pending-b" and plan[1].cache_tag == "buildcache-b"
    rebuilt = plan_builds([a, b], existing, registry=REG, rebuild=True)
    assert [p.action for p in rebuilt] == ["build", "build"]


def test_unpinned_variants_are_listed_not_refused() -> None:
    rs = [rendered("a", unpinned=("base nvidia/cuda:x is not pinned",)), rendered("b", unpinned=("lock missing",))]
    err = unpinned_error(rs, built=3)
    assert err is not None and err.exit_code == 13
    assert "a: base nvidia/cuda:x is not pinned" in err.message and "b: lock missing" in err.message
    assert "3 pinned variant(s) were built" in err.message
    assert err.details["variants"] == ["a", "b"]
    assert unpinned_error([rendered("c")]) is None
    mixed = [rendered("c"), *rs]
    assert [[r.variant.id for r in part] for part in split_pinned(mixed)] == [["c"], ["a", "b"]]
    assert split_pinned(mixed, allow_unpinned=True) == (mixed, [])
    plan = plan_builds(mixed, {}, registry=REG)
    assert [p.action for p in plan] == ["build", "unpinned", "unpinned"]
    assert plan[1].to_json()["unpinned"] == ["base nvidia/cuda:x is not pinned"] and plan[0].to_json()["unpinned"] == []
    assert [p.action for p in plan_builds(mixed, {}, registry=REG, allow_unpinned=True)] == ["build"] * 3


def test_repository_prefix_names_the_pushed_repository() -> None:
    r = rendered("a")
    existing = {content_key("team-a/ml/x", r.content_tag): "sha256:" + "f" * 64}
    (p,) = plan_builds([r], existing, registry=REG, repository_prefix="team-a")
    assert p.repository == "team-a/ml/x" and p.reference == f"{REG}/team-a/ml/x" and p.action == "up-to-date"
    (other,) = plan_builds([r], existing, registry=REG)  # another checkout's repository is not ours
    assert other.repository == "ml/x" and other.action == "build"


def test_check_tags() -> None:
    check_tags([rendered("ok-id")])
    with pytest.raises(ConfigError, match="128"):
        check_tags([rendered("x" * 120)])
    with pytest.raises(ConfigError):
        check_tags([rendered("sha256-abc")])


def test_build_request_and_materialize(tmp_path: Path) -> None:
    r = rendered("a")
    p = PlannedBuild(rendered=r, registry=REG, action="build")
    opts = BuildOptions(
        registry=REG,
        state_dir=tmp_path,
        cache=True,
        source_date_epoch=1700000000,
        secrets=(("ca_bundle", Path("/ca.crt")),),
        builder="remote",
    )
    ctx, dockerfile = materialize(r, tmp_path / "b")
    assert (ctx / "x" / "y.sh").read_bytes() == b"echo\n" and dockerfile.read_text() == r.dockerfile
    assert not (ctx / "Dockerfile").exists()  # the Dockerfile is not part of the context
    req = build_request(p, opts, ctx, dockerfile)
    assert req.push_ref == f"{REG}/ml/x:pending-a"
    assert dict(req.build_args)["SOURCE_DATE_EPOCH"] == "1700000000"
    assert req.cache_ref == f"{REG}/ml/x:buildcache-a"
    assert req.platforms == ("linux/amd64",) and req.builder == "remote"
    from builder.engine import build_command

    cmd = build_command(req)
    assert "--secret" in cmd and "id=ca_bundle,src=/ca.crt" in cmd
    assert "type=image,name=127.0.0.1:5000/ml/x:pending-a,push=true" in cmd
    escape = RenderedImage(r.variant, r.dockerfile, (("../evil", b""),), r.content_hash, ())
    with pytest.raises(ConfigError, match="escapes"):
        materialize(escape, tmp_path / "c")


def test_default_secrets(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    assert default_secrets(ca) == ()
    ca.write_text("x")
    assert default_secrets(ca) == (("ca_bundle", ca),)


def test_build_secrets(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("x")
    assert build_secrets(ca, extra=["id=netrc,src=/n"]) == (("ca_bundle", ca), ("netrc", Path("/n")))
    assert build_secrets(ca, no_ca_bundle=True) == ()
    with pytest.raises(ConfigError, match="does not exist"):
        build_secrets(tmp_path / "missing.crt")
    with pytest.raises(ConfigError, match="id=ID,src=PATH"):
        build_secrets(None, no_ca_bundle=True, extra=["src=/n"])


def test_raise_for_failures_picks_the_exit_code() -> None:
    ok = BuiltImage("a", f"{REG}/ml/x", "sha256:" + "e" * 64, "a-1", "built")
    conflict = BuiltImage("b", f"{REG}/ml/x", "", "b-2", "failed", error="tag-conflict: content tag b-2 holds x")
    broken = BuiltImage("c", f"{REG}/ml/x", "", "c-3", "failed", log_path="/l/c.log", error="engine: boom")
    raise_for_failures(BuildRun((ok,), (), 1.0))
    with pytest.raises(TagConflictError) as tag:
        raise_for_failures(BuildRun((ok, conflict), (), 1.0))
    assert tag.value.exit_code == 15 and tag.value.message == "content tag b-2 holds x"
    with pytest.raises(BuildFailedError) as failed:
        raise_for_failures(BuildRun((ok, conflict, broken), (), 1.0))
    assert failed.value.exit_code == 14 and "2 of 3 variant(s) failed" in failed.value.message
    assert [f["variant"] for f in failed.value.details["failed"]] == ["b", "c"]


def test_provenance_predicate() -> None:
    r = rendered("a")
    built = BuiltImage("a", f"{REG}/ml/x", "sha256:" + "e" * 64, r.content_tag, "built", log_path="/l/a.log")
    pred = provenance_predicate(r, built, git_commit="c0ffee", secret_ids=["ca_bundle"], source_date_epoch=5)
    bd = pred["buildDefinition"]
    assert bd["buildType"] == BUILD_TYPE
    assert bd["externalParameters"]["buildArgs"]["HF_TOKEN"] == "<redacted>"
    assert "hunter2" not in str(pred)
    assert bd["externalParameters"]["cell"]["accelerator"] == {"kind": "cuda", "version": "12.8"}
    internal = bd["internalParameters"]
    assert internal["contentHash"] == r.content_hash and internal["baseDigest"] == BASE_DIGEST
    assert internal["dependencyLockHash"] and internal["secrets"] == ["ca_bundle"]
    deps = {d.get("name"): d for d in bd["resolvedDependencies"]}
    assert deps["source"]["digest"] == {"gitCommit": "c0ffee"}
    assert deps["base-image"]["digest"] == {"sha256": "1" * 64}
    assert "context/requirements.lock" in deps and "Dockerfile" in deps
    assert pred["runDetails"]["builder"]["version"]["builder"]
    assert SLSA_PROVENANCE_V1 == "https://slsa.dev/provenance/v1"


def test_redact_build_args() -> None:
    assert redact_build_args({"PIP_INDEX_URL": "https://u:p@host/simple", "API_KEY": "k", "X": "1"}) == {
        "PIP_INDEX_URL": "https://<redacted>@host/simple",
        "API_KEY": "<redacted>",
        "X": "1",
    }
