"""Image references: parsing, round trips, tag/digest syntax, fallback tags, digests."""

from __future__ import annotations

import pytest

from builder.errors import ConfigError
from builder.registry.reference import (
    Reference,
    fallback_tag,
    is_sha256_digest,
    is_tag,
    join_reference,
    parse_reference,
    sha256_digest,
)

D = "sha256:" + "ab" * 32
REG = "127.0.0.1:5000"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ml/jax:tag1", Reference(REG, "ml/jax", "tag1", None)),
        ("jax", Reference(REG, "jax", None, None)),
        (f"ghcr.io/org/img@{D}", Reference("ghcr.io", "org/img", None, D)),
        (f"ml/jax:t@{D}", Reference(REG, "ml/jax", "t", D)),
        ("localhost:5001/a/b:c", Reference("localhost:5001", "a/b", "c", None)),
        ("localhost/a", Reference("localhost", "a", None, None)),
        ("docker.io/ubuntu:24.04", Reference("docker.io", "library/ubuntu", "24.04", None)),
        (
            "nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04",
            Reference(REG, "nvidia/cuda", "12.8.1-cudnn-runtime-ubuntu24.04"),
        ),
        ("[::1]:5000/x:y", Reference("[::1]:5000", "x", "y", None)),
    ],
)
def test_parse_reference(text: str, expected: Reference) -> None:
    ref = parse_reference(text, REG)
    assert ref == expected
    assert parse_reference(str(ref), "other.example") == ref  # str() round-trips


@pytest.mark.parametrize(
    "text",
    # a tag is ASCII (Python's \w would let "täg" by)
    ["", "UPPER/case:t", "a:b:c@sha256:12", f"x@{D[:-1]}", "x:-tag", "a//b:t", "x:" + "t" * 129, "x:täg"],
)
def test_parse_reference_rejects(text: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_reference(text, REG)
    assert "invalid image reference" in err.value.message


def test_reference_ref_needs_tag_or_digest() -> None:
    assert parse_reference(f"a:t@{D}", REG).ref == D
    assert parse_reference("a:t", REG).ref == "t"
    with pytest.raises(ConfigError, match="neither a tag nor a digest"):
        _ = parse_reference("a", REG).ref


def test_with_tag_and_digest_keep_the_other() -> None:
    ref = parse_reference("ml/jax:t", REG)
    assert str(ref.with_digest(D)) == f"{REG}/ml/jax:t@{D}"
    assert str(ref.with_digest(D).with_tag(None)) == f"{REG}/ml/jax@{D}"
    assert ref.name == f"{REG}/ml/jax"


def test_fallback_tag() -> None:
    assert fallback_tag(D) == "sha256-" + "ab" * 32


def test_sha256_digest_and_join_reference() -> None:
    assert sha256_digest(b"") == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert join_reference("ml/jax", "t") == "ml/jax:t"
    assert join_reference("ml/jax", D) == f"ml/jax@{D}"


def test_a_digest_and_a_tag_are_whole_strings() -> None:
    """No trailing newline slips through a ``$``-anchored pattern (lock files, registry settings)."""
    assert is_sha256_digest(D) and not is_sha256_digest(D + "\n")
    assert is_tag("v1.0_rc-2") and not is_tag("v1\n") and not is_tag("täg")


def test_a_short_digest_is_named_as_such() -> None:
    """A digest copied short (as `docker images` and tables show it) says what a full one looks like."""
    with pytest.raises(ConfigError, match=r"is not sha256:<64 hex digits> \(copy the whole digest"):
        parse_reference(f"ml/jax@{D[:19]}", default_registry=REG)
