"""Image label and annotation names: the one owner of every key builder writes into an image or
reads back from one.

- The OCI pre-defined keys (https://github.com/opencontainers/image-spec/blob/v1.1.0/annotations.md):
  ``created`` (RFC 3339), ``source``, ``revision``, ``url``, ``licenses`` (SPDX), ``version``,
  ``title``, ``description``, ``base.name`` (a fully qualified reference) and ``base.digest`` (the
  digest of that name). docker/metadata-action sets the first five on every image it labels
  (https://github.com/docker/metadata-action#outputs); GHCR links a package to its repository by
  ``org.opencontainers.image.source``
  (https://docs.github.com/en/packages/learn-github-packages/connecting-a-repository-to-a-package).
- The project's own keys live under the reverse DNS of a domain the project controls:
  ``io.github.builder-project.`` (its GitHub Pages domain, builder-project.github.io, also its SLSA
  builder id, :data:`builder.signing.provenance.BUILDER_ID`); the OCI spec reserves
  ``org.opencontainers.`` and asks everyone else for reverse-domain keys. Images built before carry
  ``io.builder.*``: :func:`read` accepts both (the new key wins).
- "No GPU code" has one spelling, :data:`NO_GPU_CODE` (``none``), for CPU images and GPU images
  whose framework has no GPU kernels; an unknown list is an absent label.

Pure: no I/O. Errors: none raised.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

#: The project's own key namespace (reverse DNS of builder-project.github.io).
OWN = "io.github.builder-project."
#: The namespace images built before this one carry; still read, never written.
LEGACY = "io.builder."
#: The OCI pre-defined annotation keys' namespace.
OCI = "org.opencontainers.image."

CREATED = OCI + "created"
SOURCE = OCI + "source"
REVISION = OCI + "revision"
URL = OCI + "url"
LICENSES = OCI + "licenses"
VERSION = OCI + "version"
TITLE = OCI + "title"
DESCRIPTION = OCI + "description"
BASE_NAME = OCI + "base.name"
BASE_DIGEST = OCI + "base.digest"

#: The key, in a simple-signing payload's signed ``optional`` map, naming why builder wrote the
#: signature (cosign's ``sign -a key=value`` annotations land in the same map and ``cosign verify
#: -a key=value`` checks them: https://github.com/sigstore/cosign/blob/main/specs/SIGNATURE_SPEC.md).
#: Absent: an image signature (``builder build``/``builder sign``, cosign).
SIGNATURE_ROLE = OWN + "signature.role"
#: :data:`SIGNATURE_ROLE`'s value on the signature a promotion writes for the copy's new identity:
#: such a signature says "promoted here", never "built by us" (a ``signature`` rule never counts it).
PROMOTION_ROLE = "promotion"

#: The value of the ``gpu-archs`` label for an image without GPU code (one spelling; the compat
#: package's ``NO_GPU_KERNELS`` is the same word).
NO_GPU_CODE = "none"


def own(name: str) -> str:
    """The project's key for ``name``: ``variant`` -> ``io.github.builder-project.variant``."""
    return OWN + name


def read(labels: Mapping[str, object], name: str) -> str | None:
    """The value of the project's label ``name`` in ``labels`` (an image config's ``Labels``):
    the ``io.github.builder-project.`` key, else the legacy ``io.builder.`` one; None when
    neither is set or the value is empty."""
    for key in (OWN + name, LEGACY + name):
        value = labels.get(key)
        if value not in (None, ""):
            return str(value)
    return None


def gpu_archs(labels: Mapping[str, object]) -> tuple[str, ...] | None:
    """The compiled GPU architectures the ``gpu-archs`` label lists: ``("none",)`` for an image
    without GPU code (:data:`NO_GPU_CODE`), the list otherwise, None when the label is absent
    (unknown). Separators: ``,``, spaces or ``;``."""
    text = read(labels, "gpu-archs")
    if text is None:
        return None
    archs = tuple(a for a in text.replace(";", ",").replace(" ", ",").split(",") if a)
    return archs or (NO_GPU_CODE,)


@dataclasses.dataclass(frozen=True)
class SourceFacts:
    """Where an image comes from, for the OCI labels every build adds: ``source`` (the repository's
    URL, ``https://github.com/OWNER/REPO``), ``revision`` (the commit), ``created`` (seconds since
    the epoch: ``SOURCE_DATE_EPOCH``), ``licenses`` (SPDX expression). None/empty: not known, no label."""

    source: str | None = None
    revision: str | None = None
    created: int | None = None
    licenses: str = ""

    def labels(self) -> tuple[tuple[str, str], ...]:
        """``created`` (RFC 3339, UTC), ``source`` and ``url`` (the same URL, as
        docker/metadata-action writes them), ``revision``, ``licenses``: the ones known."""
        out: dict[str, str] = {}
        if self.created is not None:
            out[CREATED] = dt.datetime.fromtimestamp(self.created, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if self.source:
            out[SOURCE] = self.source
            out[URL] = self.source
        if self.revision:
            out[REVISION] = self.revision
        if self.licenses:
            out[LICENSES] = self.licenses
        return tuple(sorted(out.items()))


def repository_url(remote: str | None) -> str | None:
    """A git remote (``git@github.com:o/r.git``, ``https://github.com/o/r.git``,
    ``ssh://git@host/o/r``) as the repository's web URL ``https://host/o/r``; None for None, a
    local path or a remote that is not host/path."""
    if not remote:
        return None
    text = remote.strip()
    if "://" in text:
        scheme, _, rest = text.partition("://")
        if scheme == "file":
            return None
        host_path = rest.split("@", 1)[-1]
        host, _, path = host_path.partition("/")
        host = host.split(":", 1)[0] if scheme in ("ssh", "git") else host
    elif "@" in text and ":" in text:
        host, _, path = text.split("@", 1)[1].partition(":")
    else:
        return None
    path = path.strip("/").removesuffix(".git")
    if not host or not path:
        return None
    return f"https://{host}/{path}"


def annotation_items(labels: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The annotations an image carries on its manifest and index: the same keys and values as its
    labels (docker/metadata-action's ``annotations`` output mirrors its ``labels`` the same way)."""
    return tuple(sorted(dict(labels).items()))
