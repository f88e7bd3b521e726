"""Names on the promotion command line -> targets: variant ids, --select globs and image
references (variant id from --variant-id or the tag), each once; unknown names say what exists."""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

import pytest

from builder.errors import ConfigError, NotFoundError
from builder.models import Accelerator, BaseImage, Framework, Variant
from builder.policy import load_policy
from builder.promote import Target, TargetScope, UnknownVariantError, resolve_targets
from builder.promote.location import Location
from builder.promote.targets import variant_from_tag

if TYPE_CHECKING:
    from pathlib import Path

    from builder.policy import Stage
    from builder.registry import RegistryClient


def _variant(vid: str, repository: str) -> Variant:
    return Variant(
        id=vid,
        matrix="m",
        family="f",
        repository=repository,
        accelerator=Accelerator("cpu"),
        framework=Framework("none", "0"),
        python="3.11",
        os="debian12",
        platform="linux/amd64",
        base=BaseImage("debian:12", None, "debian:12"),
    )


VARIANTS = [
    _variant("torch2.8-cpu", "demo/torch"),
    _variant("jax0.7-cuda12.8", "demo/jax"),
    _variant("jax0.7-cpu", "demo/jax"),
]


def _no_registry(registry: str) -> RegistryClient:
    raise AssertionError(f"no registry read expected ({registry})")


def _local_registry(registry: str) -> RegistryClient:
    """The running registry (127.0.0.1:5000): a digest reference's manifest is read to check it is an
    image; the digests these tests name are not there, so nothing else is read."""
    from builder.registry import RegistryClient

    assert registry == "127.0.0.1:5000", f"no read of {registry} expected"
    return RegistryClient(registry, insecure=True)


def _scope(loads: list[int]) -> TargetScope:
    def variants() -> list[Variant]:
        loads.append(1)
        return VARIANTS

    return TargetScope(variants, "127.0.0.1:5000", ("dev", "prod"), _no_registry)


def test_ids_globs_and_references_each_once() -> None:
    loads: list[int] = []
    got = resolve_targets(
        _scope(loads),
        ["torch2.8-cpu", "jax0.7-cpu", "r.example/demo/jax:jax0.7-cpu-dev"],
        ["jax*"],
    )
    assert got == [
        Target("jax0.7-cpu", "demo/jax", "127.0.0.1:5000"),
        Target("jax0.7-cuda12.8", "demo/jax", "127.0.0.1:5000"),
        Target("torch2.8-cpu", "demo/torch", "127.0.0.1:5000"),
        # a reference whose tag names the variant: its own repository (--variant-id: the matrix's)
        Target("jax0.7-cpu", "demo/jax", "r.example", tag="jax0.7-cpu-dev"),
    ]
    assert loads == [1]  # the matrices are read once


def test_references_need_no_matrices() -> None:
    digest = "sha256:" + "d" * 64
    scope = TargetScope(list, "127.0.0.1:5000", ("dev", "prod"), _local_registry)
    got = resolve_targets(scope, [f"127.0.0.1:5000/demo/jax@{digest}"], variant_id="jax0.7-cpu")
    assert got == [Target("jax0.7-cpu", "demo/jax", "127.0.0.1:5000", digest=digest)]


def _stages(tmp_path: Path, prod: str = "prod/{repository}", extra: str = "") -> tuple[Stage, ...]:
    policy_file = tmp_path / "p.yaml"
    policy_file.write_text(
        "stages:\n  dev: {from: build, require: {unconditional: x}}\n"
        f'  prod: {{from: dev, repository: "{prod}", require: {{unconditional: x}}}}\n{extra}'
    )
    return load_policy(policy_file).stages


def test_a_reference_names_the_digest_and_the_variant_keeps_its_repository(tmp_path: Path) -> None:
    """Newcomer report (F1): promoting mirror/debian:bookworm --variant-id V put V's dev pointer in
    mirror/debian, and prod/demo/jax@sha256:... targeted prod/prod/demo/jax. The stage pointers are
    the variant's (its matrix repository, mapped by each stage's template), the reference only
    names the image the digest is read and copied from."""
    digest = "sha256:" + "d" * 64
    scope = TargetScope(lambda: VARIANTS, "127.0.0.1:5000", ("dev", "prod"), _local_registry, "f1", _stages(tmp_path))
    mirror = resolve_targets(scope, ["127.0.0.1:5000/mirror/debian:bookworm"], variant_id="jax0.7-cpu")
    assert mirror == [
        Target(
            "jax0.7-cpu",
            "f1/demo/jax",
            "127.0.0.1:5000",
            tag="bookworm",
            source=Location("127.0.0.1:5000", "mirror/debian"),
        )
    ]
    assert mirror[0].given == "127.0.0.1:5000/mirror/debian:bookworm"
    assert mirror[0].reference_location == Location("127.0.0.1:5000", "mirror/debian", "bookworm")
    for name, vid in (
        (f"127.0.0.1:5000/f1/prod/demo/jax@{digest}", "jax0.7-cpu"),
        ("127.0.0.1:5000/f1/prod/demo/jax:jax0.7-cpu-prod", None),
    ):
        [t] = resolve_targets(scope, [name], variant_id=vid)
        assert (t.variant, t.registry, t.repository) == ("jax0.7-cpu", "127.0.0.1:5000", "f1/demo/jax"), name
        assert t.given == name
    # without matrices the stage's template maps its repository back to the build's
    bare = dataclasses.replace(scope, variants=list)
    [t] = resolve_targets(bare, [f"127.0.0.1:5000/f1/prod/demo/jax@{digest}"], variant_id="jax0.7-cpu")
    assert t.repository == "f1/demo/jax" and t.source == Location("127.0.0.1:5000", "f1/prod/demo/jax")
    [t] = resolve_targets(bare, [f"127.0.0.1:5000/f1/demo/jax@{digest}"], variant_id="jax0.7-cpu")
    assert t == Target("jax0.7-cpu", "f1/demo/jax", "127.0.0.1:5000", digest=digest)


def test_a_stage_repository_two_templates_map_back_differently_is_refused(tmp_path: Path) -> None:
    extra = '  qa: {from: dev, repository: "{repository}/prod", require: {unconditional: x}}\n'
    stages = _stages(tmp_path, "prod/{repository}", extra)
    scope = TargetScope(list, "127.0.0.1:5000", ("dev", "prod", "qa"), _local_registry, stages=stages)
    digest = "sha256:" + "d" * 64
    with pytest.raises(NotFoundError, match="prod/x/prod back to prod/x or x/prod") as exc:
        resolve_targets(scope, [f"127.0.0.1:5000/prod/x/prod@{digest}"], variant_id="jax0.7-cpu")
    assert "--matrices" in (exc.value.hint or "")


def test_unknown_names_say_what_exists() -> None:
    """The did-you-mean of every command that takes a variant id (builder.selection.variant_reference)."""
    with pytest.raises(NotFoundError, match=re.escape("no variant 'jax0.7-cp' in the matrices")) as exc:
        resolve_targets(_scope([]), ["jax0.7-cp"])
    assert exc.value.details["close_matches"][0] == "jax0.7-cpu"
    with pytest.raises(NotFoundError, match="--select 'tf\\*' matches no variant"):
        resolve_targets(_scope([]), [], ["tf*"])


def test_a_reference_whose_variant_cannot_be_told_is_a_usage_error() -> None:
    def no_image(registry: str) -> RegistryClient:
        raise NotFoundError(f"no image in {registry}")

    scope = TargetScope(lambda: VARIANTS, "127.0.0.1:5000", ("dev",), no_image)
    digest = "sha256:" + "d" * 64
    with pytest.raises(UnknownVariantError, match="pass --variant-id") as exc:
        resolve_targets(scope, [f"127.0.0.1:5000/demo/jax@{digest}"])
    assert isinstance(exc.value, ConfigError) and exc.value.exit_code == 2


def test_variant_from_tag() -> None:
    stages = ("dev", "prod")
    assert variant_from_tag("jax0.7-cpu-0123456789ab", stages) == "jax0.7-cpu"
    assert variant_from_tag("jax0.7-cpu-prod", stages) == "jax0.7-cpu"
    assert variant_from_tag("jax0.7-cpu", stages) == "jax0.7-cpu"
    assert variant_from_tag(None, stages) is None


def test_a_reference_outside_the_repository_prefix_is_refused_naming_both() -> None:
    """Newcomer report: with repository_prefix nu4q, a reference to demo/jax (another checkout's
    images) was read there yet reported and promoted as nu4q/demo/jax (its stage pointers), a
    prefixed name next to another name's digest. Every reference must be under the prefix."""
    scope = TargetScope(lambda: VARIANTS, "127.0.0.1:5000", ("dev", "prod"), _no_registry, repository_prefix="nu4q")
    with pytest.raises(NotFoundError, match="stage pointer outside this checkout's repository_prefix 'nu4q'") as exc:
        resolve_targets(scope, ["127.0.0.1:5000/demo/jax:jax0.7-cpu-dev"])
    assert "127.0.0.1:5000/nu4q/demo/jax:jax0.7-cpu-dev" in (exc.value.hint or "")
    assert resolve_targets(scope, ["127.0.0.1:5000/nu4q/demo/jax:jax0.7-cpu-dev"]) == [
        Target("jax0.7-cpu", "nu4q/demo/jax", "127.0.0.1:5000", tag="jax0.7-cpu-dev")
    ]
    assert resolve_targets(scope, ["jax0.7-cpu"]) == [Target("jax0.7-cpu", "nu4q/demo/jax", "127.0.0.1:5000")]
    # a build's image from outside the prefix is a source named as given (a variant tag, a digest)
    # (its stages are this checkout's: the variant's repository under the prefix)
    built = resolve_targets(scope, ["127.0.0.1:5000/demo/jax:jax0.7-cpu"], variant_id="jax0.7-cpu")
    assert built == [
        Target(
            "jax0.7-cpu",
            "nu4q/demo/jax",
            "127.0.0.1:5000",
            tag="jax0.7-cpu",
            source=Location("127.0.0.1:5000", "demo/jax"),
        )
    ]


def test_a_tag_named_variant_keeps_its_home_repository_and_another_repository_keeps_its_own(tmp_path: Path) -> None:
    """Without --variant-id: a reference in the variant's build repository (even one whose name
    looks like a stage's, ``prod/tools`` under ``prod/{repository}``) is that variant's; a reference
    in an unrelated repository keeps its own pointers (a tag naming a variant does not move the
    matrix repository's)."""
    variants = [*VARIANTS, _variant("tools1", "prod/tools")]
    scope = TargetScope(lambda: variants, "127.0.0.1:5000", ("dev", "prod"), _no_registry, stages=_stages(tmp_path))
    [t] = resolve_targets(scope, ["127.0.0.1:5000/prod/tools:tools1-0123456789ab"])
    assert (t.repository, t.source) == ("prod/tools", None)
    [t] = resolve_targets(scope, ["127.0.0.1:5000/test/x:jax0.7-cpu"])
    assert (t.variant, t.repository, t.source) == ("jax0.7-cpu", "test/x", None)
