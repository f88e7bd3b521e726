"""What this checkout pushed: one record per image digest it built and pushed, the evidence that an
unsigned image found under a content tag is this checkout's own build.

A registry does not keep tags write-once: anyone who may push to the repository can point a
content tag at another image (OCI distribution spec, "Pushing Manifests": a PUT to an existing
tag replaces it, https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pushing-manifests).
So an unsigned image found under a content tag is not, by that alone, an image builder built, and
signing it with the build key would vouch for whatever was pushed there. ``builder build --sign``
signs such an image (``builder.publish.sign_earlier``) only when this checkout recorded pushing that
digest as that content tag: ``<state_dir>/pushed/sha256-<hex>`` holds the content tag (written
atomically and private before the tag's PUT). A digest names its bytes, so the record holds
wherever those bytes are (another registry address for the same registry, a mirror).
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from builder.cachefile import read_private, write_json
from builder.errors import TagConflictError
from builder.registry.reference import is_sha256_digest

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from builder.models import BuiltImage


def pushed_dir(state_dir: Path) -> Path:
    """The directory of the records (``<state_dir>/pushed``)."""
    return state_dir / "pushed"


def record_push(state_dir: Path, digest: str, content_tag: str, reference: str) -> bool:
    """Record that this checkout built ``digest`` (``sha256:<hex>``) as ``content_tag`` and pushes it
    to ``reference`` (``registry/repository``, kept for people reading the file). False when the
    state directory cannot be written (the push goes on; the image is then not signed later without
    ``builder sign``). Raises ValueError for a string that is no sha256 digest."""
    return write_json(_file(state_dir, digest), {"digest": digest, "tag": content_tag, "reference": reference})


def pushed_here(state_dir: Path, digest: str, content_tag: str) -> bool:
    """Whether this checkout recorded building ``digest`` as ``content_tag`` (a record that is
    missing, unreadable, not private, or names another digest or content tag: False). The content
    tag names the variant and its inputs' hash: another variant's build, or an older build of this
    variant, moved under the tag by someone who can push, is not this build."""
    record = _record(state_dir, digest)
    return record is not None and record.get("tag") == content_tag


def pushed_as(state_dir: Path, digest: str, variant: str) -> bool:
    """Whether this checkout recorded building ``digest`` as a build of ``variant`` (any of its
    content tags ``<variant>-<hash12>``: an older build of the variant counts too)."""
    record = _record(state_dir, digest)
    tag = record.get("tag") if record is not None else None
    return isinstance(tag, str) and re.fullmatch(re.escape(variant) + r"-[0-9a-f]{12}", tag) is not None


def refuse_foreign_retag(
    built: BuiltImage, retag: bool, state_dir: Path, progress: Callable[[str, str, str], None]
) -> BuiltImage:
    """``built`` (an up-to-date image) as is, unless its variant tag would move to it (``retag``) and
    this checkout did not push that digest under its content tag (:func:`pushed_here`,
    records under ``state_dir``): then ``failed`` with a ``tag-conflict`` error (exit 15), reported
    through ``progress(variant, 'failed', message)``, and the variant tag stays. Anyone who may push
    can point a content tag at any image (OCI distribution spec, "Pushing Manifests", above); without
    a key to check a signature by, only this checkout's own push is evidence."""
    if built.status != "up-to-date" or not retag or pushed_here(state_dir, built.digest, built.content_tag):
        return built
    error = TagConflictError(
        f"{built.reference}:{built.content_tag} names {built.digest}, which this checkout did not push (no "
        f"record in {pushed_dir(state_dir)}); the variant tag {built.variant_id} was not moved to it. If it is "
        f"your build from another machine, inspect it and sign it (builder sign {built.reference}@{built.digest}), "
        "then run builder build --sign, which moves the tag to an image the key signed; or, when the build is "
        "reproducible, build it here "
        f"(builder build --select {built.variant_id} --rebuild)"
    )
    progress(built.variant_id, "failed", error.message)
    return dataclasses.replace(built, status="failed", error=f"{error.kind}: {error.message}")


def _record(state_dir: Path, digest: str) -> dict[str, object] | None:
    import json

    try:
        data = read_private(_file(state_dir, digest), pushed_dir(state_dir))
        doc = json.loads(data) if data is not None else None
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and doc.get("digest") == digest else None


def _file(state_dir: Path, digest: str) -> Path:
    if not is_sha256_digest(digest):
        raise ValueError(f"not a sha256 digest: {digest!r}")
    return pushed_dir(state_dir) / digest.replace(":", "-")
