"""What this checkout pushed: one record per image digest it built and pushed, the evidence that an
unsigned image found under a content tag is this checkout's own build.

A registry does not keep tags write-once: anyone who may push to the repository can point a
content tag at another image (OCI distribution spec, "Pushing Manifests": a PUT to an existing
tag replaces it, https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pushing-manifests).
So an unsigned image found under a content tag is not, by that alone, an image builder built, and
signing it with the build key would vouch for whatever was pushed there. ``builder build --sign``
signs such an image (``builder.publish.sign_earlier``) only when this checkout recorded pushing that
digest: ``<state_dir>/pushed/sha256-<hex>`` (written atomically and private before the content
tag's PUT). A digest names its bytes, so the record holds wherever those bytes are (another
registry address for the same registry, a mirror).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.cachefile import read_private, write_json
from builder.registry.reference import is_sha256_digest

if TYPE_CHECKING:
    from pathlib import Path


def pushed_dir(state_dir: Path) -> Path:
    """The directory of the records (``<state_dir>/pushed``)."""
    return state_dir / "pushed"


def record_push(state_dir: Path, digest: str, reference: str) -> bool:
    """Record that this checkout built and pushes ``digest`` (``sha256:<hex>``) to ``reference``
    (``registry/repository:tag``, kept for people reading the file). False when the state directory
    cannot be written (the push goes on; the image is then not signed later without ``builder sign``).
    Raises ValueError for a string that is no sha256 digest."""
    return write_json(_file(state_dir, digest), {"digest": digest, "reference": reference})


def pushed_here(state_dir: Path, digest: str) -> bool:
    """Whether this checkout recorded pushing ``digest`` (a record that is missing, unreadable, not
    private or names another digest: False)."""
    import json

    try:
        data = read_private(_file(state_dir, digest), pushed_dir(state_dir))
        doc = json.loads(data) if data is not None else None
    except ValueError:
        return False
    return isinstance(doc, dict) and doc.get("digest") == digest


def _file(state_dir: Path, digest: str) -> Path:
    if not is_sha256_digest(digest):
        raise ValueError(f"not a sha256 digest: {digest!r}")
    return pushed_dir(state_dir) / digest.replace(":", "-")
