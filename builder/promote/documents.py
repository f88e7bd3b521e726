"""The ``--json`` documents of the promotion commands, each defined once: the ``promotion/v1``
predicate and record (``PromotionPredicate``, ``PromotionRecordDocument``), ``promote``
(``PromoteDocument``: one ``OutcomeDocument`` per target), ``rollback`` (``RollbackDocument``),
``status`` (``StatusDocument``), ``history`` (``HistoryDocument``) and ``resolve``
(``ResolveDocument``); docs/promotion.md describes the fields.

They are ``typing_extensions`` TypedDicts: pydantic builds the commands' JSON Schemas from them
(``python -m builder.cli.documents docs/schemas``) and refuses ``typing.TypedDict`` before
Python 3.12 (https://docs.pydantic.dev/2.8/errors/usage_errors/#typed-dict-version). Creating
twenty TypedDict classes is a start-up cost every promotion command would pay for shapes nothing
checks at run time (issue 19: ``promote --confirm`` spent more importing them than in its own
promotion logic), so the values that produce these documents (``builder.promote.model``,
``builder.promote.batch``, ``builder.promote.queries``, ``builder.promote.resolution``) import
this module only for type checking; ``builder.cli.documents`` imports it to write the schemas.
Nothing here is checked at run time; the shapes are for mypy and the schemas.
"""

from __future__ import annotations

from typing import Literal, NotRequired

from typing_extensions import TypedDict

from builder.error_documents import ErrorBody
from builder.policy.results import DecisionDocument
from builder.promote.changes import ChangesDocument


class PromotionDecision(TypedDict):
    """The decision a ``promotion/v1`` record carries: ``allowed``, each leaf rule as
    ``pass|FAIL rule: reason`` and the ``policy`` file."""

    allowed: bool
    reasons: list[str]
    policy: str


class Promoter(TypedDict):
    """Who wrote a ``promotion/v1`` record: the key ``fingerprint`` and the policy's ``name`` for it."""

    fingerprint: str
    name: str | None


class PromotionPredicate(TypedDict):
    """The ``promotion/v1`` predicate (docs/promotion.md): times RFC 3339 UTC, digests
    ``sha256:<hex>``, ``previous`` None for a stage's first promotion."""

    action: str
    variant: str
    stage: str
    fromStage: str  # the predicate's own (camelCase) field name
    reference: str
    digest: str
    previous: str | None
    decision: PromotionDecision
    promoter: Promoter
    time: str
    ticket: str | None


class PromotionRecordDocument(TypedDict):
    """A ``promotion/v1`` record in ``--json`` (:class:`PromotionRecord`'s fields): ``action``
    (``promote`` | ``rollback`` as written; read back as the record says), ``reference`` (the
    stage pointer), ``digest`` and ``previous`` (``sha256:<hex>``; None: the stage was empty),
    ``reasons`` (``pass|FAIL rule: reason`` lines), ``policy`` (the policy file), ``promoter``
    (fingerprint) and ``promoter_name``, ``time`` (RFC 3339 UTC), ``signer`` (the verified signer)
    and ``layer`` (the ``.att`` layer digest) when read back."""

    action: str
    variant: str
    stage: str
    from_stage: str
    reference: str
    digest: str
    previous: str | None
    allowed: bool
    reasons: list[str]
    policy: str
    promoter: str
    promoter_name: str | None
    time: str
    ticket: str | None
    signer: str | None
    layer: str | None


class PlanDocument(TypedDict):
    """A planned promotion in ``--json``: ``digest`` (None: the source holds nothing) from
    ``source`` (the reference given, when one was; else the previous stage's pointer or the
    build's variant tag) into ``destination`` (the stage pointer, ``registry/repository:tag``), which now
    holds ``previous``; ``already``: the stage names the digest with a trusted record; ``trusted``
    and ``untrusted_signers``: whether a trusted record explains the pointer, and who signed the
    records that do not count; ``allowed`` and the policy's ``decision``."""

    variant: str
    stage: str
    from_stage: str
    source: str
    digest: str | None
    destination: str
    previous: str | None
    already: bool
    trusted: bool
    untrusted_signers: list[str]
    ticket: str | None
    allowed: bool
    decision: DecisionDocument


class CopyCountsDocument(TypedDict):
    """What a promotion's copy did: blobs ``mounted``, ``copied`` (``copied_bytes`` bytes) or
    already ``present``, and ``manifests`` written (all zero when nothing had to move)."""

    mounted: int
    copied: int
    copied_bytes: int
    present: int
    manifests: int


class AppliedDocument(PlanDocument):
    """``builder rollback --json``, and a promotion ``--confirm`` applied: the plan, the signed
    ``record`` written, ``completed`` (a re-run wrote what an interrupted promotion left; false with
    ``already`` when the stage held the digest and nothing was written), wall time in
    ``seconds``, the ``copy`` counts, the audit ledger's sequence number (None: no ledger) and the
    ``pinned`` reference ``registry/repository@sha256:...`` the stage now holds."""

    applied: Literal[True]
    completed: bool
    record: PromotionRecordDocument
    seconds: float
    copy: CopyCountsDocument
    ledger_seq: int | None
    pinned: str


class PlannedDocument(PlanDocument):
    """A target planned and not applied (a dry run: ``allowed`` says whether it would be)."""

    applied: Literal[False]


class DryRunDocument(PlannedDocument):
    """A target of ``builder promote``'s dry run: the plan and ``changes``, the image against the
    digest the stage holds (what an approver must see)."""

    changes: ChangesDocument


class PlanFailedDocument(PlannedDocument):
    """A target planned whose apply failed or was denied (``error``: as every ``--json`` error body)."""

    error: ErrorBody


class StageAfterDocument(TypedDict):
    """What the stage's pointer named when read right after a failed apply: ``digest`` (null: the
    stage is empty, or it could not be read: then ``unread`` says why)."""

    digest: str | None
    unread: str | None


class ApplyFailedDocument(PlanFailedDocument):
    """A target allowed by policy whose apply (``--confirm``) failed: ``stage_after`` says what
    the stage holds now (``previous``: what it held when planned)."""

    stage_after: StageAfterDocument


class FailedDocument(TypedDict):
    """A target that failed before it could be planned."""

    variant: str
    applied: Literal[False]
    error: ErrorBody


OutcomeDocument = (
    AppliedDocument | DryRunDocument | PlannedDocument | ApplyFailedDocument | PlanFailedDocument | FailedDocument
)
"""One target of ``builder promote --json`` (``results``)."""


RollbackDocument = AppliedDocument | PlannedDocument
"""``builder rollback --json``: the rollback applied (``--confirm``) or only planned (dry run)."""


class PromoteDocument(TypedDict):
    """``builder promote --json``: the ``stage``, whether it was applied (``confirm``) and one
    result per target, in the order named."""

    stage: str
    confirm: bool
    results: list[OutcomeDocument]


class StatusRowDocument(TypedDict):
    """One variant x stage of ``builder status --json``: the stage ``pointer``, the ``digest`` it
    names (None: no tag, or unreadable), ``since`` (RFC 3339) and ``age_seconds``, the record's
    ``action`` and ``promoter``, verified ``signatures`` and attestation types, ``note`` (why
    the pointer is untrusted; empty otherwise), ``trusted`` (true: a trusted promotion record
    explains the digest; false: the pointer names a digest none explains, as ``resolve`` refuses
    it with exit 18; null: no pointer, or the row could not be read) and ``error`` (None, or why the
    row could not be read, as every ``--json`` error body: the command then exits with the first
    row's code)."""

    variant: str
    stage: str
    pointer: str
    digest: str | None
    since: str | None
    age_seconds: float | None
    action: str | None
    promoter: str | None
    signatures: int
    attestations: list[str]
    note: str
    trusted: bool | None
    error: ErrorBody | None


class StatusDocument(TypedDict):
    """``builder status --json``: every variant x stage, variants in order, stages in policy order."""

    rows: list[StatusRowDocument]


class HistoryRecordDocument(PromotionRecordDocument):
    """A trusted record of ``history``, with who signed it for people (``by``)."""

    by: str


class StageHistoryDocument(TypedDict):
    """One stage of ``builder history --json``: its ``pointer`` (None: never promoted) and trusted
    records newest first; for a pointer that exists, the ``digest`` it names and, when no trusted
    record explains it (or a newer record moved the stage away from it), why (``note``); ``gap``:
    where the chain breaks before the first promotion; ``error``: why the stage could not be read
    (as every ``--json`` error body; the command then exits with the first stage's code)."""

    stage: str
    pointer: str | None
    records: list[HistoryRecordDocument]
    digest: NotRequired[str | None]
    note: NotRequired[str | None]
    gap: NotRequired[str | None]
    error: NotRequired[ErrorBody]


class HistoryDocument(TypedDict):
    """``builder history --json``: the ``variant`` and each stage asked for, in policy order."""

    variant: str
    stages: list[StageHistoryDocument]


class ResolveDocument(TypedDict):
    """``builder resolve --json``: the validated ``reference`` (``registry/repository@sha256:...``)
    ``stage`` holds for ``variant``, the ``cluster`` it was checked against (None: none), and
    whether the digest was checked to carry a trusted promotion record (``verified``; false with
    ``--no-verify``: the registry's tag taken as is)."""

    variant: str
    stage: str
    cluster: str | None
    reference: str
    verified: bool
