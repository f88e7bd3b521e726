"""Which variants a command works on, defined once for every command that selects.

- ``--select GLOB`` (repeatable): variants whose id matches any shell glob (:func:`select`);
- ``--changed-since REF``: variants whose content hash differs from their render at a git ref, or
  that are new (:func:`changed`; ``builder.variants`` renders the matrices at the ref);
- ``--shard I/N``: shard ``I`` of ``N`` (1-based), round-robin over the variants **sorted by id**
  (:func:`parse_shard`, :func:`shard`): shards are disjoint, cover everything, differ in size by at
  most one, and do not depend on the order the matrices were read in;
- a target given as a variant id or as an image reference (:func:`looks_like_variant_id`,
  :func:`variant_reference`).

The steps apply in that order (:func:`apply`): globs, then changed, then shard, so
``builder matrix list --shard I/N`` and ``builder build --shard I/N`` name the same variants.
Works on :class:`~builder.models.Variant` and :class:`~builder.models.RenderedImage` alike.
Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar

from builder.config import repository_path
from builder.errors import ConfigError, NotFoundError
from builder.suggest import close_matches

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Sequence

    from builder.models import RenderedImage, Variant

#: a variant or its rendered image (names: ``RenderedImage`` is imported where an item is one)
Item = TypeVar("Item", "Variant", "RenderedImage")


class HasVariants(Protocol):
    """Anything with variants, e.g. a loaded :class:`builder.matrix.Matrix`."""

    @property
    def variants(self) -> Sequence[Variant]: ...


class VariantName(Protocol):
    """What a variant id's image reference needs of a variant: its ``id`` and ``repository`` (a
    :class:`builder.models.Variant`, or the matrix index's names, read without decoding variants:
    :func:`builder.matrix.index.variant_names`)."""

    @property
    def id(self) -> str: ...

    @property
    def repository(self) -> str: ...


class HasVariantNames(Protocol):
    """Anything with variant names (:class:`VariantName`): every :class:`HasVariants` is one."""

    @property
    def variants(self) -> Sequence[VariantName]: ...


_SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


class Shard(NamedTuple):
    """Shard ``number`` (1-based) of ``total``; compares equal to the tuple ``(number, total)``."""

    number: int
    total: int


@dataclasses.dataclass(frozen=True)
class Selection:
    """What the user asked for: ``globs`` (``--select``; empty: all), ``shard`` (``--shard``; None:
    all) and ``changed_since`` (``--changed-since``: a git ref; None: no filter)."""

    globs: tuple[str, ...] = ()
    shard: Shard | None = None
    changed_since: str | None = None

    @classmethod
    def from_options(
        cls, globs: Iterable[str] = (), shard: str | None = None, changed_since: str | None = None
    ) -> Selection:
        """From the command-line values (``--shard`` as text). Raises ConfigError for a bad shard."""
        return cls(tuple(globs), parse_shard(shard) if shard else None, changed_since or None)


def variant_of(item: Variant | RenderedImage) -> Variant:
    """The variant of a Variant or RenderedImage."""
    from builder.models import RenderedImage  # not at import: resolve never renders (start-up, issue 19)

    return item.variant if isinstance(item, RenderedImage) else item


def select(items: Sequence[Item], globs: Sequence[str]) -> list[Item]:
    """Items whose variant id matches any of the shell globs (``fnmatch``, case-sensitive), in the
    given order; all when ``globs`` is empty. Raises NotFoundError when a glob matches nothing (a
    typo must not silently select nothing)."""
    if not globs:
        return list(items)
    for g in globs:
        if not any(fnmatch.fnmatchcase(variant_of(i).id, g) for i in items):
            raise NotFoundError(
                f"--select {g!r} matches no variant", hint="`builder matrix list` shows the variant ids"
            )
    return [i for i in items if any(fnmatch.fnmatchcase(variant_of(i).id, g) for g in globs)]


def parse_shard(text: str) -> Shard:
    """``"2/4"`` -> ``Shard(2, 4)`` (spaces around the numbers allowed). Raises ConfigError unless
    ``1 <= I <= N``."""
    m = _SHARD_RE.match(text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ConfigError(f"--shard {text!r}: expected I/N with 1 <= I <= N, e.g. 1/4")
    return Shard(int(m.group(1)), int(m.group(2)))


def shard(items: Sequence[Item], i: int, n: int) -> list[Item]:
    """Shard ``i`` of ``n`` (1-based): every ``n``-th item of the items sorted by variant id, starting
    at the ``i``-th, in id order. Raises ConfigError unless ``1 <= i <= n``."""
    if n < 1 or not 1 <= i <= n:
        raise ConfigError(f"--shard {i}/{n}: expected I/N with 1 <= I <= N, e.g. 1/4")
    ordered = sorted(items, key=lambda it: variant_of(it).id)
    return ordered[i - 1 :: n]


def changed(now: Sequence[RenderedImage], before: Iterable[RenderedImage]) -> list[RenderedImage]:
    """The renders of ``now`` whose content hash differs from the same variant's in ``before``, or
    whose variant is not in ``before`` (new), in the given order."""
    old = {r.variant.id: r.content_hash for r in before}
    return [r for r in now if old.get(r.variant.id) != r.content_hash]


def apply(items: Sequence[Item], selection: Selection, *, changed_ids: Collection[str] | None = None) -> list[Item]:
    """``selection`` applied in order: globs, then (with ``changed_since``) only the ids in
    ``changed_ids`` (the caller computes them with :func:`changed`), then the shard. Raises
    NotFoundError (a glob matches nothing), ValueError when ``changed_since`` is set but
    ``changed_ids`` is None (a programming error)."""
    chosen = select(items, selection.globs)
    if selection.changed_since is not None:
        if changed_ids is None:
            raise ValueError("selection.changed_since needs changed_ids")
        chosen = [i for i in chosen if variant_of(i).id in changed_ids]
    if selection.shard is not None:
        chosen = shard(chosen, *selection.shard)
    return chosen


# --------------------------------------------------------------------------------------------
# targets: a variant id or an image reference
# --------------------------------------------------------------------------------------------


#: The one grammar of a variant id, wherever it comes from (matrix, ``--variant-id``, an image's
#: ``io.builder.variant`` label): it becomes part of tags (``<id>-<stage>``, ``<id>-<hash12>``,
#: at most 128 characters: https://github.com/opencontainers/distribution-spec/blob/main/spec.md#pulling-manifests),
#: so it is a tag component that cannot start a signature tag and leaves room for the suffixes.
VARIANT_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,95}$")


def check_variant_id(text: str, source: str) -> str:
    """``text`` when it is a valid variant id; ConfigError (exit 2) naming ``source`` (``--variant-id``,
    ``the io.builder.variant label of REF``) otherwise, so that untrusted data never chooses where a
    tag is written (``../`` or ``/`` would reach another repository's path)."""
    if VARIANT_ID_RE.fullmatch(text) and not text.startswith("sha256-"):
        return text
    raise ConfigError(
        f"{source}: {text!r} is not a variant id (lowercase letters, digits, '.', '_', '-'; at most 96)",
        hint="variant ids come from the matrices (`builder matrix list`); pass the right one with --variant-id",
    )


def looks_like_variant_id(text: str) -> bool:
    """True for a bare variant id (``jax0.7-cpu-py3.11-debian12``): no ``/``, ``:`` or ``@``, which every
    image reference the CLIs take has (``registry/repo:tag``, ``repo@sha256:...``)."""
    return bool(text) and not any(c in text for c in "/:@")


def variant_reference(matrices: Iterable[HasVariantNames], variant_id: str, registry: str, prefix: str = "") -> str:
    """``<registry>/<repository>:<variant-id>``: the moving variant tag ``builder build`` points at the
    variant's latest image (docs/build.md), the repository under the checkout's repository
    ``prefix`` (:func:`builder.config.repository_path`). Raises NotFoundError (``details['close_matches']``: up to
    five close ids, :func:`builder.suggest.close_matches`) when no variant has ``variant_id``."""
    ids: dict[str, VariantName] = {v.id: v for m in matrices for v in m.variants}
    v = ids.get(variant_id)
    if v is None:
        close = close_matches(variant_id, ids, n=5)
        raise NotFoundError(
            f"no variant {variant_id!r} in the matrices"
            + (f"; close matches: {', '.join(close)}" if close else f" ({len(ids)} variants known)"),
            hint="give a variant id from `builder matrix list`, or an image reference (registry/repo:tag)",
            variant=variant_id,
            close_matches=close,
        )
    return f"{registry}/{repository_path(prefix, v.repository)}:{v.id}"


def unbuilt_variant(variant_id: str, reference: str) -> NotFoundError:
    """The error for a variant id whose moving tag ``reference`` (:func:`variant_reference`) names no
    image: the variant is in the matrices but no build pushed it yet. NotFoundError (exit 8) with
    the command that builds and pushes it (``builder build --select <variant-id>``) as the hint;
    ``details``: ``variant``, ``reference``."""
    return NotFoundError(
        f"variant {variant_id} has no image: {reference} does not exist (no build pushed it)",
        hint=f"build and push it first: `builder build --select {variant_id}`; or give an image reference",
        variant=variant_id,
        reference=reference,
    )


def target_reference(text: str, matrices: Iterable[HasVariantNames], registry: str, prefix: str = "") -> str:
    """A command's target as an image reference: a variant id becomes its moving variant tag
    (:func:`variant_reference` under the repository ``prefix``, NotFoundError when unknown);
    anything else is returned as given."""
    return variant_reference(matrices, text, registry, prefix) if looks_like_variant_id(text) else text
