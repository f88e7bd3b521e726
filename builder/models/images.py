"""A variant's image as the steps make it: rendered (:class:`RenderedImage`, ``builder.render``) and
built into the registry (:class:`BuiltImage`, ``builder.build``). Frozen values, no I/O; imported
on first use through :mod:`builder.models`."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from builder.models import Variant


@dataclasses.dataclass(frozen=True)
class RenderedImage:
    """A variant rendered: Dockerfile text, context files (relative path -> bytes) and the
    content hash over everything that determines the image. ``content_tag`` is
    ``<variant-id>-<hash12>``."""

    variant: Variant
    dockerfile: str
    context: tuple[tuple[str, bytes], ...]
    content_hash: str  # sha256 hex
    labels: tuple[tuple[str, str], ...]
    # build arguments the build must pass (e.g. BASE_IMAGE=<pull reference>@<digest>, arch lists)
    build_args: tuple[tuple[str, str], ...] = ()
    # why this image is not reproducible yet (unpinned base, missing/stale lock); empty = pinned
    unpinned: tuple[str, ...] = ()

    @property
    def content_tag(self) -> str:
        return f"{self.variant.id}-{self.content_hash[:12]}"


@dataclasses.dataclass(frozen=True)
class BuiltImage:
    """A variant in the registry. ``reference`` = ``registry/repository``; ``digest`` is the one the
    registry returns for the pushed content tag (an index digest when buildx pushed an index)."""

    variant_id: str
    reference: str
    digest: str
    content_tag: str
    status: Literal["built", "up-to-date", "signed", "failed"]  # signed: built earlier, signed by this run
    seconds: float = 0.0
    log_path: str | None = None
    platforms: tuple[str, ...] = ()
    error: str | None = None

    @property
    def failure_note(self) -> str:
        """Where a failed variant's cause is told: ``log <path>`` when a build ran, else its error
        (signing refused before any build, for instance)."""
        return f"log {self.log_path}" if self.log_path else (self.error or "no log")

    @property
    def pinned(self) -> str:
        return f"{self.reference}@{self.digest}"
