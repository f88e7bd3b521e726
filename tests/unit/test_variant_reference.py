"""builder.selection.variant_reference: `builder check VARIANT-ID` resolves through the matrices to the moving
variant tag; an unknown id is a NotFoundError listing close ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.errors import NotFoundError
from builder.matrix import load_matrices
from builder.selection import looks_like_variant_id, variant_reference

TINY = Path(__file__).resolve().parent.parent / "data" / "matrices" / "tiny.yaml"


def test_variant_id_resolves_to_its_moving_tag() -> None:
    ms = load_matrices([TINY])
    ref = variant_reference(ms, "tiny-cu128-py3.11-debian12", "127.0.0.1:5000")
    assert ref == "127.0.0.1:5000/test/tiny:tiny-cu128-py3.11-debian12"


def test_unknown_variant_lists_close_matches() -> None:
    ms = load_matrices([TINY])
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
