"""A loaded policy: its stages (each with the rule that guards it and who may roll it back), key
sets, approvers and promoters. Built by ``builder.policy.loader``; read by evaluation and
``builder.promote``. Stages and tags: ``docs/promotion.md``, ``docs/concepts.md``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import TYPE_CHECKING

from builder.errors import NotFoundError

BUILD_STAGE = "build"
"""The pseudo-stage ``from: build``: the variant tag written by ``builder build``. Defined with the
stages (not with the evidence values) so that a command reading a stage's source needs no evidence classes."""

if TYPE_CHECKING:
    from pathlib import Path

    from builder.policy.rules import Rule
    from builder.policy.signers import Approver, KeyRef, KeySet


@dataclasses.dataclass(frozen=True)
class RollbackRule:
    """Who may roll a stage back: ``approvers`` by name and/or ``keysets``; ``location`` is
    ``file:line:col`` of the ``rollback:`` entry."""

    approvers: tuple[Approver, ...] = ()
    keysets: tuple[KeySet, ...] = ()
    location: str = ""

    def allows(self, signer: str) -> str | None:
        """The name of the approver/key set whose key is ``signer`` (a fingerprint), or None."""
        for a in self.approvers:
            if a.key.matches(signer, None):
                return a.name
        for s in self.keysets:
            if s.match(signer, None):
                return s.name
        return None


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage. ``source``: ``build`` or the previous stage's name. ``repository``: a template
    (``{repository}`` = the matrix repository); ``registry``: None = the configured registry;
    ``require``: the rule a digest must pass to enter; ``location``: ``file:line:col``."""

    name: str
    source: str
    repository: str
    registry: str | None
    require: Rule
    rollback: RollbackRule | None
    location: str

    def repository_for(self, matrix_repository: str) -> str:
        """The stage's repository for a matrix whose repository is ``matrix_repository``."""
        return self.repository.replace("{repository}", matrix_repository)

    def tag_for(self, variant_id: str) -> str:
        """Stage pointer tag ``<variant-id>-<stage>`` (``docs/concepts.md``: Tags)."""
        return f"{variant_id}-{self.name}"


DEFAULT_CONTENT_RETENTION = dt.timedelta(days=30)
"""``retention.content_tags`` when the policy does not say: content tags younger than this are kept."""
DEFAULT_PENDING_RETENTION = dt.timedelta(hours=1)
"""``retention.pending_tags`` when the policy does not say: a build may still be pushing younger ones."""


@dataclasses.dataclass(frozen=True)
class Retention:
    """``retention:`` of a policy, for ``builder gc`` (docs/promotion.md, Retention):
    ``content_tags``: minimum age of a content tag in no stage or history before it may be
    deleted; ``pending_tags``: minimum age of a ``pending-*`` tag (a younger one may belong to a
    running build). Ages are read from the image config's ``created`` time."""

    content_tags: dt.timedelta = DEFAULT_CONTENT_RETENTION
    pending_tags: dt.timedelta = DEFAULT_PENDING_RETENTION


@dataclasses.dataclass(frozen=True)
class Policy:
    """One policy file: ``path`` as loaded, ``stages`` in file order, ``keysets``, ``approvers``
    and ``promoters`` (the key sets whose promotion records are trusted); ``retention``: what
    ``builder gc`` keeps (defaults when the file has no ``retention:``)."""

    path: Path
    stages: tuple[Stage, ...]
    keysets: tuple[KeySet, ...]
    approvers: tuple[Approver, ...]
    promoters: tuple[KeySet, ...]
    retention: Retention = Retention()

    def stage(self, name: str) -> Stage:
        """The stage called ``name``; raises NotFoundError (hint: the known stages) otherwise."""
        for s in self.stages:
            if s.name == name:
                return s
        raise NotFoundError(
            f"stage {name!r} is not defined in {self.path}",
            hint=f"stages: {', '.join(s.name for s in self.stages)}",
        )

    @property
    def stage_names(self) -> tuple[str, ...]:
        """The stages' names in file order."""
        return tuple(s.name for s in self.stages)

    def all_keys(self) -> tuple[KeyRef, ...]:
        """Every usable key the policy trusts for anything (for verification), once per fingerprint."""
        seen: dict[str, KeyRef] = {}
        for ks in self.keysets:
            for k in ks.keys:
                if k.fingerprint and k.file:
                    seen.setdefault(k.fingerprint, k)
        for a in self.approvers:
            if a.key.fingerprint and a.key.file:
                seen.setdefault(a.key.fingerprint, a.key)
        return tuple(seen.values())

    def fleets(self, stage: str) -> tuple[str, ...]:
        """The fleet files (resolved paths) the rules of ``stage`` name, each once, in rule order.
        Raises NotFoundError for an unknown stage."""
        rules = [r for r in self.stage(stage).require.walk() if r.kind == "fleet"]  # kinds: one per rule class
        if not rules:  # no fleet rule: its module (and the other evidence rules) need not be imported
            return ()
        from builder.policy.rules_evidence import FleetRule

        return tuple(dict.fromkeys(r.fleet for r in rules if isinstance(r, FleetRule)))
