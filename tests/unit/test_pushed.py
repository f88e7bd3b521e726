"""builder.build.pushed: the record of what this checkout built and pushed, the evidence that lets
`build --sign` sign an earlier unsigned digest (builder.publish.sign_earlier)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from builder.build.pushed import pushed_as, pushed_dir, pushed_here, record_push, refuse_foreign_retag

if TYPE_CHECKING:
    from pathlib import Path

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32


def test_a_push_is_recognised_only_for_its_digest_and_content_tag(tmp_path: Path) -> None:
    assert not pushed_here(tmp_path, DIGEST, "v-0123456789ab")  # nothing recorded
    assert record_push(tmp_path, DIGEST, "v-0123456789ab", "reg/repo")
    assert pushed_here(tmp_path, DIGEST, "v-0123456789ab")
    assert not pushed_here(tmp_path, DIGEST, "w-0123456789ab")  # another variant's tag
    assert not pushed_here(tmp_path, DIGEST, "v-ba9876543210")  # the same variant, other inputs
    assert not pushed_here(tmp_path, OTHER, "v-0123456789ab")


def test_a_record_others_could_have_written_does_not_count(tmp_path: Path) -> None:
    assert record_push(tmp_path, DIGEST, "v-0123456789ab", "reg/repo")
    os.chmod(pushed_dir(tmp_path), 0o777)  # a directory anyone can write to: its files are no evidence
    assert not pushed_here(tmp_path, DIGEST, "v-0123456789ab")


def test_a_string_that_is_no_digest_never_names_a_path(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a sha256 digest"):
        record_push(tmp_path, "sha256:../../etc/passwd", "v-0123456789ab", "reg/repo")
    assert not pushed_dir(tmp_path).exists()


def test_a_build_of_a_variant_is_any_of_its_content_tags_never_a_prefix_of_another_id(tmp_path: Path) -> None:
    assert record_push(tmp_path, DIGEST, "jax-cpu-0123456789ab", "reg/repo")
    assert pushed_as(tmp_path, DIGEST, "jax-cpu")
    assert not pushed_as(tmp_path, DIGEST, "jax")  # "jax" + "-cpu-0123…" is no content tag of "jax"
    assert not pushed_as(tmp_path, OTHER, "jax-cpu")


def test_a_variant_tag_moves_back_only_to_a_digest_this_checkout_pushed(tmp_path: Path) -> None:
    """refuse_foreign_retag, the check of `build --no-sign`/`--keyless` before a variant tag moves."""
    from builder.models import BuiltImage

    heard: list[tuple[str, str, str]] = []

    def hear(variant: str, event: str, detail: str) -> None:
        heard.append((variant, event, detail))

    up = BuiltImage(
        variant_id="v", reference="reg/repo", digest=DIGEST, content_tag="v-0123456789ab", status="up-to-date"
    )
    assert refuse_foreign_retag(up, False, tmp_path, hear) is up  # no move: nothing to decide
    refused = refuse_foreign_retag(up, True, tmp_path, hear)
    assert refused.status == "failed" and (refused.error or "").startswith("tag-conflict: ")
    assert DIGEST in (refused.error or "") and f"builder sign reg/repo@{DIGEST}" in (refused.error or "")
    assert "builder build --select v --rebuild" in (refused.error or "")  # the way out without a key
    assert [(v, e) for v, e, _ in heard] == [("v", "failed")]
    assert record_push(tmp_path, DIGEST, "v-0123456789ab", "reg/repo")
    assert refuse_foreign_retag(up, True, tmp_path, hear) is up  # this checkout's push
