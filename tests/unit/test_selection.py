"""builder.selection (one definition of --select, --shard, --changed-since and targets) and
builder.variants (the project's variants for a command): `matrix list` and `build` choose alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder import matrix
from builder.config import load_config
from builder.errors import ConfigError, NotFoundError
from builder.models import Accelerator, BaseImage, Framework, RenderedImage, Variant
from builder.selection import (
    Selection,
    Shard,
    apply,
    changed,
    looks_like_variant_id,
    parse_shard,
    select,
    shard,
    target_reference,
    variant_reference,
)
from builder.suggest import close_matches, did_you_mean
from builder.variants import select_renders, select_variants

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "matrices").glob("*.yaml"))
TINY = ROOT / "tests" / "data" / "matrices" / "tiny.yaml"


def _variant(vid: str) -> Variant:
    return Variant(
        id=vid,
        matrix="m",
        family="f",
        repository="ml/x",
        accelerator=Accelerator("cpu"),
        framework=Framework("none", "0"),
        python="3.11",
        os="debian12",
        platform="linux/amd64",
        base=BaseImage("debian:12", None, "debian:12"),
    )


def _rendered(vid: str, h: str = "a" * 64) -> RenderedImage:
    return RenderedImage(_variant(vid), "FROM x\n", (), h, ())


def test_select_globs_keep_the_given_order_and_refuse_a_glob_matching_nothing() -> None:
    variants = [v for m in matrix.load_matrices(SHIPPED) for v in m.variants]
    cuda = select(variants, ("torch*-cu12*",))
    assert cuda and all(v.id.startswith("torch") and "-cu12" in v.id for v in cuda)
    assert select(variants, ()) == variants
    rs = [_rendered(f"v{i}") for i in range(7)]
    assert [r.variant.id for r in select(rs, ["v1", "v[56]"])] == ["v1", "v5", "v6"]
    with pytest.raises(NotFoundError, match="nomatch"):
        select(rs, ["nomatch*"])


def test_shard_is_round_robin_over_sorted_ids_whatever_the_input_order() -> None:
    ids = ["b", "e", "a", "g", "c", "f", "d"]  # 7 items, 3 shards: sizes 3, 2, 2
    shards = [[v.id for v in shard([_variant(i) for i in ids], k, 3)] for k in (1, 2, 3)]
    assert shards == [["a", "d", "g"], ["b", "e"], ["c", "f"]]
    reordered = [[r.variant.id for r in shard([_rendered(i) for i in reversed(ids)], k, 3)] for k in (1, 2, 3)]
    assert reordered == shards
    with pytest.raises(ConfigError):
        shard([_variant("a")], 0, 3)


@pytest.mark.parametrize("text", ["0/4", "5/4", "x", "1/0", "1/", "-1/2"])
def test_parse_shard_refuses_bad_text(text: str) -> None:
    with pytest.raises(ConfigError, match="expected I/N"):
        parse_shard(text)


def test_parse_shard() -> None:
    assert parse_shard("2/4") == (2, 4) == Shard(number=2, total=4)
    assert parse_shard(" 1 / 3 ") == (1, 3)
    assert Selection.from_options(("a*",), "2/3", "") == Selection(("a*",), Shard(2, 3), None)


def test_changed_and_apply_order() -> None:
    now = [_rendered("a", "1" * 64), _rendered("b", "2" * 64), _rendered("c", "3" * 64)]
    before = [_rendered("a", "1" * 64), _rendered("b", "9" * 64)]
    assert [r.variant.id for r in changed(now, before)] == ["b", "c"]
    sel = Selection(globs=("[ab]",), shard=Shard(1, 1), changed_since="HEAD")
    assert [r.variant.id for r in apply(now, sel, changed_ids={"b", "c"})] == ["b"]
    with pytest.raises(ValueError, match="changed_ids"):
        apply(now, sel)


def test_targets_and_did_you_mean() -> None:
    ms = matrix.load_matrices([TINY])
    assert target_reference("tiny-cpu-py3.11-debian12", ms, "r:5000") == "r:5000/test/tiny:tiny-cpu-py3.11-debian12"
    assert target_reference("r:5000/x/y:1", ms, "r:5000") == "r:5000/x/y:1"
    assert looks_like_variant_id("tiny") and not looks_like_variant_id("x@sha256:1")
    with pytest.raises(NotFoundError) as info:
        target_reference("tiny-cu126-py3.11-debian12", ms, "r")
    assert info.value.details["close_matches"][0] == "tiny-cu128-py3.11-debian12"
    assert close_matches("torhc", ["torch", "jax"]) == ["torch"]
    assert did_you_mean("torhc", ["torch", "jax"]) == "; did you mean 'torch'?"
    assert did_you_mean("zzz", ["torch"]) == ""


def test_matrix_list_and_build_core_paths_choose_the_same_shards() -> None:
    """The shipped matrices read in file order interleave ids (demo.yaml and jax.yaml both make jax0.7-*)
    and 35 variants do not divide evenly: `matrix list` (select_variants) and `build` (select_renders)
    still choose the same variants for every shard, and the shards partition the variants."""
    cfg = load_config(ROOT, {})
    everything = [v.id for v in select_variants(cfg, (), Selection()).variants]
    assert everything != sorted(everything)  # file order is not id order: sharding must not depend on it
    for n in (2, 3, 4, 6):
        seen: list[str] = []
        for i in range(1, n + 1):
            sel = Selection.from_options((), f"{i}/{n}")
            listed = [v.id for v in select_variants(cfg, (), sel).variants]
            built = [r.variant.id for r in select_renders(cfg, (), sel)]
            assert listed == built, (i, n)
            seen += listed
        assert sorted(seen) == sorted(everything)
    sel = Selection.from_options(("jax*",), "2/3")
    assert [v.id for v in select_variants(cfg, (), sel).variants] == [
        r.variant.id for r in select_renders(cfg, (), sel)
    ]


def test_variant_id_resolves_to_its_moving_tag() -> None:
    """`builder check VARIANT-ID` checks <registry>/<repository>:<variant-id>, the tag a build moves."""
    ms = matrix.load_matrices([TINY])
    ref = variant_reference(ms, "tiny-cu128-py3.11-debian12", "127.0.0.1:5000")
    assert ref == "127.0.0.1:5000/test/tiny:tiny-cu128-py3.11-debian12"


def test_unknown_variant_lists_close_matches() -> None:
    ms = matrix.load_matrices([TINY])
    with pytest.raises(NotFoundError) as info:
        variant_reference(ms, "tiny-cu126-py3.11-debian12", "r")
    assert "tiny-cu128-py3.11-debian12" in info.value.message
    assert info.value.details["close_matches"][0] == "tiny-cu128-py3.11-debian12"
    assert info.value.exit_code == 8
    with pytest.raises(NotFoundError, match="2 variants known"):
        variant_reference(ms, "torch", "r")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("jax0.7-cpu-py3.11-debian12", True),
        ("demo/jax:jax0.7-cpu-py3.11-debian12", False),
        ("127.0.0.1:5000/demo/jax", False),
        ("repo@sha256:abc", False),
        ("", False),
    ],
)
def test_looks_like_variant_id(text: str, expected: bool) -> None:
    assert looks_like_variant_id(text) is expected
