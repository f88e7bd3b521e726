"""One grammar for variant ids (builder.selection.VARIANT_ID_RE): every id the shipped matrices
expand to satisfies it, and what could reach another repository's path does not."""

from __future__ import annotations

import pytest

from builder.errors import ConfigError
from builder.matrix import load_matrices, matrix_paths
from builder.selection import VARIANT_ID_RE, check_variant_id
from tests.conftest import ROOT


def test_every_shipped_variant_id_is_valid() -> None:
    ids = [v.id for m in load_matrices(matrix_paths(ROOT / "matrices")) for v in m.variants]
    assert len(ids) > 30
    assert [i for i in ids if not VARIANT_ID_RE.match(i)] == []


@pytest.mark.parametrize(
    "bad", ["../x", "a/b", "", "A-upper", "x y", "x\nFROM evil", "sha256-" + "a" * 64, "x" * 97, "-lead"]
)
def test_what_is_not_a_variant_id_is_refused_naming_its_source(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"the io\.builder\.variant label of r"):
        check_variant_id(bad, "the io.builder.variant label of r")


def test_a_variant_id_passes_unchanged() -> None:
    assert check_variant_id("torch2.11-cu128-py3.12-ubuntu24.04-arm64", "--variant-id").endswith("arm64")
