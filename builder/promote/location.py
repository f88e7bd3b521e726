"""Where a stage keeps a variant (``Location``), what is promoted (``Target``) and the promotion
clock (``utcnow``): the values a query of one stage (``builder resolve``) needs, apart from
``builder.promote.model``'s records, plans and documents (which name them too) so that such a
query does not build those.

All frozen.
"""

from __future__ import annotations

import dataclasses
import datetime as dt


def utcnow() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.UTC)


@dataclasses.dataclass(frozen=True)
class Location:
    """``registry/repository[:tag]``."""

    registry: str
    repository: str
    tag: str | None = None

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.repository}"

    def __str__(self) -> str:
        return self.name + (f":{self.tag}" if self.tag else "")

    def pinned(self, digest: str) -> str:
        return f"{self.name}@{digest}"

    @property
    def pointer_tag(self) -> str:
        """The tag of a stage pointer or variant tag. Raises ValueError for a location without one."""
        if self.tag is None:
            raise ValueError(f"{self} names no tag")
        return self.tag


@dataclasses.dataclass(frozen=True)
class Target:
    """What to promote: a variant id and its matrix repository (relative to ``registry``; every
    stage pointer of the variant is mapped from it, ``PromotionContext.stage_location``), or an
    explicit reference (``digest`` pinned, or ``tag`` to resolve) of the image to promote.

    ``source``: the registry/repository the explicit reference names when that is not the
    variant's repository (``mirror/debian:bookworm --variant-id ID``, or a stage's own repository
    such as ``prod/demo/jax@sha256:...``); None: the reference is in ``registry/repository``. The
    reference only names the digest (docs/promotion.md, "Where things live")."""

    variant: str
    repository: str
    registry: str
    tag: str | None = None
    digest: str | None = None
    source: Location | None = None

    @property
    def explicit(self) -> bool:
        return self.tag is not None or self.digest is not None

    @property
    def reference_location(self) -> Location:
        """Where the explicit reference's image is read and copied from: ``source``, else the
        variant's repository; its ``tag`` is the reference's tag (None for a digest)."""
        at = self.source or Location(self.registry, self.repository)
        return Location(at.registry, at.repository, None if self.digest is not None else self.tag)

    @property
    def given(self) -> str | None:
        """The reference as the user gave it, for messages: ``registry/repository@digest`` or
        ``registry/repository:tag`` for an explicit target (never the variant tag the plan reads
        it as: the build may never have written that tag); None for a variant id."""
        at = self.source or Location(self.registry, self.repository)
        if self.digest is not None:
            return f"{at.name}@{self.digest}"
        return f"{at.name}:{self.tag}" if self.tag is not None else None
