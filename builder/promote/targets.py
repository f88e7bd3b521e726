"""What a promotion command names -> ``Target`` s: variant ids of the matrices, ``--select`` globs
over them, or image references (``registry/repository:tag`` or ``@sha256:...``) whose variant id
comes from ``--variant-id``, the tag (a content tag ``<id>-<12 hex>`` or a stage pointer
``<id>-<stage>``) or the image's ``io.builder.variant`` label.

Errors: NotFoundError (8) for a glob or variant id the matrices do not have;
``UnknownVariantError`` (a ValueError: the CLI turns it into a usage error, exit 2) when the
variant of a reference cannot be told; registry errors other than a missing image propagate.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from builder.errors import NotFoundError, RegistryError
from builder.promote.context import ClientFactory
from builder.promote.model import Target
from builder.registry import Reference, image_config, parse_reference

CONTENT_SUFFIX = re.compile(r"-[0-9a-f]{12}$")
"""The content-hash suffix of a build's write-once tag."""

VARIANT_LABEL = "io.builder.variant"


class UnknownVariantError(ValueError):
    """The variant id of an image reference cannot be told: pass ``--variant-id``."""

    def __init__(self, name: str) -> None:
        super().__init__(f"cannot tell the variant of {name}: pass --variant-id ID")
        self.name = name


@dataclasses.dataclass(frozen=True)
class TargetScope:
    """Where names are looked up: ``variants`` (called at most once, when a name needs it) maps
    each variant id of the matrices to its repository; ``matrices_dir`` is named in errors;
    ``registry`` is the default registry; ``stage_names`` the policy's stages (pointer tags);
    ``clients`` reads image labels."""

    variants: Callable[[], Mapping[str, str]]
    matrices_dir: Path
    registry: str
    stage_names: Sequence[str]
    clients: ClientFactory


def matrix_variants(matrices_dir: Path) -> dict[str, str]:
    """variant id -> its matrix repository, for every matrix in ``matrices_dir``. Raises MatrixError."""
    from builder.matrix import load_matrices, matrix_paths  # only when a name needs the matrices

    return {v.id: v.repository for m in load_matrices(matrix_paths(matrices_dir)) for v in m.variants}


def variant_from_tag(tag: str | None, stage_names: Sequence[str]) -> str | None:
    """The variant id a tag names: a content tag without its hash suffix, a stage pointer without
    its ``-<stage>``, else the tag itself (a variant tag). None for no tag."""
    if not tag:
        return None
    if CONTENT_SUFFIX.search(tag):
        return CONTENT_SUFFIX.sub("", tag)
    for s in stage_names:
        if tag.endswith("-" + s):
            return tag[: -len(s) - 1]
    return tag


def variant_from_labels(clients: ClientFactory, ref: Reference) -> str | None:
    """The ``io.builder.variant`` label ``builder render`` writes into every image; None when the
    image or its config is missing or has no label."""
    try:
        config = image_config(clients(ref.registry), ref.repository, ref.ref)
    except (NotFoundError, RegistryError):  # no image to read: the caller asks for --variant-id
        return None
    label = ((config.get("config") or {}).get("Labels") or {}).get(VARIANT_LABEL)
    return str(label) if label else None


def resolve_targets(
    scope: TargetScope, names: Sequence[str], globs: Sequence[str] = (), variant_id: str | None = None
) -> list[Target]:
    """Variant ids, globs or image references -> targets, each once, globs first, in order."""
    targets: list[Target] = []
    cache: list[Mapping[str, str]] = []

    def variants() -> Mapping[str, str]:
        if not cache:
            cache.append(scope.variants())
        return cache[0]

    for pattern in globs:
        hits = sorted(v for v in variants() if fnmatch.fnmatchcase(v, pattern))
        if not hits:
            raise NotFoundError(f"--select {pattern!r} matches no variant of the matrices in {scope.matrices_dir}")
        targets.extend(Target(v, variants()[v], scope.registry) for v in hits)
    for name in names:
        if "/" in name or "@" in name or ":" in name:
            targets.append(_reference_target(scope, name, variant_id))
            continue
        if name not in variants():
            close = [v for v in variants() if name in v][:5]
            raise NotFoundError(
                f"variant {name!r} is not in the matrices ({scope.matrices_dir})",
                hint=("did you mean: " + ", ".join(close)) if close else "`builder matrix list` shows the variants",
            )
        targets.append(Target(name, variants()[name], scope.registry))
    return list(dict.fromkeys(targets))


def _reference_target(scope: TargetScope, name: str, variant_id: str | None) -> Target:
    ref = parse_reference(name, scope.registry)
    vid = variant_id or variant_from_tag(ref.tag, scope.stage_names) or variant_from_labels(scope.clients, ref)
    if vid is None:
        raise UnknownVariantError(name)
    return Target(vid, ref.repository, ref.registry, tag=ref.tag if not ref.digest else None, digest=ref.digest)
