"""What a promotion changes for an approver: the image to be promoted compared with the digest the
stage holds now (``builder promote`` dry run, issue 15 item 5). The comparison is the one
``builder diff`` makes (:func:`builder.image.diff.diff_inspections`: GPU stack, minimum driver, GPU
targets gained/lost, libraries, package counts), and the stage's fleet clusters (the fleet files
its policy rules name) whose verdict changes.

Computed only for the dry run a person reads (never for ``--confirm`` or ``builder run``): both
images' layers are read once through the layer cache (an incumbent sharing its base with the new
image reads only the new layers). A comparison that cannot be made does not change the plan: the
reason is kept in :attr:`PlanChanges.note`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from typing_extensions import TypedDict

from builder.errors import BuilderError
from builder.image.diff import DiffDocument, ImageDiff

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from builder.image.layers import LayerCache
    from builder.policy import FleetEvidence
    from builder.registry import RegistryClient


class ChangesDocument(TypedDict):
    """``changes`` of a planned promotion in ``builder promote --json`` (dry run): ``against``, the
    digest the stage holds (None: the stage is empty); ``diff``: the promoted image against it, as
    ``builder diff --json`` (None when there is nothing to compare or it could not be read);
    ``note``: why there is no diff (empty when there is one)."""

    against: str | None
    diff: DiffDocument | None
    note: str


@dataclasses.dataclass(frozen=True)
class ImageAt:
    """An image by digest in a repository of the registry ``client`` talks to."""

    client: RegistryClient
    repository: str
    digest: str


@dataclasses.dataclass(frozen=True)
class PlanChanges:
    """The promoted image against the stage's digest ``against``; ``diff`` None with a ``note``
    saying why (an empty stage, the same digest, an image that could not be read)."""

    against: str | None
    diff: ImageDiff | None = None
    note: str = ""

    def to_json(self) -> ChangesDocument:
        return {"against": self.against, "diff": self.diff.to_json() if self.diff else None, "note": self.note}


def _verdicts(
    image: ImageAt, fleets: Sequence[str], checker: Callable[[RegistryClient, str, str, str], list[FleetEvidence]]
) -> dict[str, str]:
    prefix = len(fleets) > 1  # clusters named by their fleet file only when several are judged
    out: dict[str, str] = {}
    for fleet in fleets:
        for e in checker(image.client, image.repository, image.digest, fleet):
            out[f"{fleet}:{e.cluster}" if prefix else e.cluster] = e.verdict if e.applies else "not-applicable"
    return out


def stage_changes(
    new: ImageAt,
    held: ImageAt | None,
    *,
    cache: LayerCache | None,
    fleets: Sequence[str] = (),
    fleet_checker: Callable[[RegistryClient, str, str, str], list[FleetEvidence]] | None = None,
) -> PlanChanges:
    """``new`` (the digest to be promoted) against ``held`` (what the stage holds; None: empty), layers
    cached in ``cache``; with ``fleets`` (fleet files) and a ``fleet_checker``, the clusters whose
    verdict differs. Never raises a BuilderError: a registry or fleet error becomes the ``note``
    (``could not compare with sha256:…: <message>``); an interrupt (signal) propagates."""
    from builder.image.diff import diff_inspections, with_fleet
    from builder.image.inspection import inspect_image

    if held is None:
        return PlanChanges(None, note="the stage holds nothing yet: no image to compare with")
    if held.digest == new.digest:
        return PlanChanges(held.digest, note="the stage already holds this digest")
    try:
        old = inspect_image(held.client, held.repository, held.digest, cache=cache)
        now = inspect_image(new.client, new.repository, new.digest, cache=cache)
        diff = diff_inspections(old, now)
        if fleets and fleet_checker is not None:
            diff = with_fleet(diff, _verdicts(held, fleets, fleet_checker), _verdicts(new, fleets, fleet_checker))
    except BuilderError as exc:  # the plan stands without its comparison; say why
        return PlanChanges(held.digest, note=f"could not compare with {held.digest}: {exc.message}")
    return PlanChanges(held.digest, diff)


__all__ = ["ChangesDocument", "ImageAt", "PlanChanges", "stage_changes"]
