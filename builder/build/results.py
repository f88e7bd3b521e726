"""The results of ``builder build`` and their reports: :class:`BuildRun` (what a run built, in plan
order) and :class:`BuildPreview` (what ``--dry-run`` would do), their ``--json`` documents
(declared TypedDicts: ``builder.cli.documents`` regenerates docs/schemas from them), a failed
build's log tail, and the one error a run with failures ends in (:func:`raise_for_failures`).

Exit codes (docs/exit-codes.md): 13 (``UnpinnedBaseError``: variants left out as not pinned), 14
(``BuildFailedError``), 15 (``TagConflictError``: a content tag held another digest).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from typing_extensions import TypedDict

from builder.build.plan import BuildPlanDocument, PlannedBuild, unpinned_error
from builder.errors import BuildFailedError, TagConflictError
from builder.models import BuiltImage, RenderedImage, SummaryRow


class BuiltImageDocument(TypedDict):
    """One variant's build in ``--json``: ``status`` (``signed``: built earlier without a valid
    signature and provenance by the key, signed by this run), the ``reference`` (``registry/repository``)
    and ``content_tag``, the ``digest`` and ``pinned`` reference (None when it failed), its
    ``platforms``, wall time in ``seconds``, the build ``log`` file (None: not built) and the
    ``error`` (None unless it failed)."""

    variant: str
    status: Literal["built", "up-to-date", "signed", "failed"]
    reference: str
    content_tag: str
    digest: str | None
    pinned: str | None
    platforms: list[str]
    seconds: float
    log: str | None
    error: str | None


#: How many variants ended in each status.
BuildCountsDocument = TypedDict("BuildCountsDocument", {"built": int, "up-to-date": int, "signed": int, "failed": int})


class UnpinnedVariantDocument(TypedDict):
    """A variant ``builder build`` left out: its id and why it is not pinned (what to run)."""

    variant: str
    reasons: list[str]


class BuildRunDocument(TypedDict):
    """``builder build --json``: ``ok`` when no variant failed and none was left out, wall time in
    ``seconds``, the ``counts`` per status, every image in plan order and the variants left out
    because their base or dependency lock is not pinned (``unpinned``; exit 13)."""

    ok: bool
    seconds: float
    counts: BuildCountsDocument
    images: list[BuiltImageDocument]
    unpinned: list[UnpinnedVariantDocument]


BuildDocument = BuildRunDocument | BuildPlanDocument
"""``builder build --json``: the run, or with ``--dry-run`` the plan."""


@dataclasses.dataclass(frozen=True)
class BuildRun:
    """Everything one ``build_variants`` call produced: ``results`` (same order as the plan),
    ``plan``, wall-clock ``seconds`` and the variants left out because they are not pinned
    (``unpinned``; :func:`raise_for_failures` lists them with exit 13)."""

    results: tuple[BuiltImage, ...]
    plan: tuple[PlannedBuild, ...]
    seconds: float
    unpinned: tuple[RenderedImage, ...] = ()

    @property
    def failed(self) -> tuple[BuiltImage, ...]:
        return tuple(r for r in self.results if r.status == "failed")

    def summary_rows(self) -> tuple[SummaryRow, ...]:
        """One row per image: variant, digest (empty when it failed) and status."""
        return tuple(SummaryRow(r.variant_id, r.digest or "", r.status) for r in self.results)

    def to_json(self) -> BuildRunDocument:
        def count(status: str) -> int:
            return sum(1 for r in self.results if r.status == status)

        return {
            "ok": not self.failed and not self.unpinned,
            "seconds": round(self.seconds, 3),
            "counts": {
                "built": count("built"),
                "up-to-date": count("up-to-date"),
                "signed": count("signed"),
                "failed": count("failed"),
            },
            "images": [built_json(r) for r in self.results],
            "unpinned": [{"variant": r.variant.id, "reasons": list(r.unpinned)} for r in self.unpinned],
        }


def built_json(b: BuiltImage) -> BuiltImageDocument:
    """One build result as its ``--json`` document."""
    return {
        "variant": b.variant_id,
        "status": b.status,
        "reference": b.reference,
        "content_tag": b.content_tag,
        "digest": b.digest or None,
        "pinned": b.pinned if b.digest else None,
        "platforms": list(b.platforms),
        "seconds": round(b.seconds, 3),
        "log": b.log_path,
        "error": b.error,
    }


@dataclasses.dataclass(frozen=True)
class BuildPreview:
    """What ``builder build --dry-run`` would do: one planned build per selected variant."""

    plan: tuple[PlannedBuild, ...]

    def to_json(self) -> BuildPlanDocument:
        return {
            "plan": [p.to_json() for p in self.plan],
            "unpinned": [p.variant_id for p in self.plan if p.action == "unpinned"],
        }

    def summary_rows(self) -> tuple[SummaryRow, ...]:
        """One row per planned build: variant, the digest its content tag already names (empty:
        none) and what would happen (:func:`planned_action`)."""
        return tuple(SummaryRow(p.variant_id, p.existing_digest or "", planned_action(p)) for p in self.plan)


def planned_action(p: PlannedBuild) -> str:
    """What the build would do to ``p``, in words: ``would build``, ``unpinned``, ``up-to-date``, or
    ``would retag`` (up to date, its variant tag names another digest or none: the build moves it
    back to the content tag's digest), ``would retag (foreign)`` when the digest the variant tag
    names now is not this checkout's build of the variant."""
    if p.action == "build":
        return "would build"
    if p.retag:
        return "would retag (foreign)" if p.variant_foreign else "would retag"
    return p.action


def log_tail(built: BuiltImage, lines: int = 8) -> list[str]:
    """The last ``lines`` lines of ``built``'s build log (``[]`` when it has none or it is gone)."""
    if not built.log_path:
        return []
    try:
        return Path(built.log_path).read_text(errors="replace").splitlines()[-lines:]
    except FileNotFoundError:
        return []


def raise_for_failures(run: BuildRun) -> None:
    """Nothing when every variant was built or up to date; else TagConflictError (exit 15) when every
    failure was a content tag holding another digest, BuildFailedError (exit 14) otherwise. Both carry
    ``details['failed']`` (:func:`built_json` of each failure) and ``details['summary']``. With no
    failure but variants left out as not pinned: UnpinnedBaseError (exit 13) listing them, with
    ``details['summary']``."""
    if not run.failed:
        error = unpinned_error(run.unpinned, built=len(run.results), summary=run.to_json())
        if error is not None:
            raise error
        return
    failed = [built_json(b) for b in run.failed]
    if all((b.error or "").startswith(TagConflictError.kind + ":") for b in run.failed):
        raise TagConflictError(
            "; ".join((b.error or "").split(":", 1)[1].strip() for b in run.failed),
            failed=failed,
            summary=run.to_json(),
        )
    raise BuildFailedError(
        f"{len(run.failed)} of {len(run.results)} variant(s) failed: "
        + ", ".join(f"{b.variant_id} ({b.failure_note})" for b in run.failed),
        failed=failed,
        summary=run.to_json(),
    )
