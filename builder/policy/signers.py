"""Who a policy trusts: key references (a key fingerprint or a keyless identity), named key sets
and approvers, and how evidence's signer is matched against them and shown to people.

A signer is ``sha256:<hex>`` (the key's fingerprint, ``builder.signing.keys``) or, for keyless Sigstore
signatures, an ``(issuer, subject)`` identity (https://docs.sigstore.dev/certificate_authority/oidc-in-fulcio/).
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class KeyRef:
    """One trusted signer: a key fingerprint (from a file or written inline) or a keyless identity
    (``issuer`` plus ``subject``, a regular expression that must match in full).

    ``problem`` is set when the key file could not be read: rules that need it then deny."""

    fingerprint: str | None = None
    file: str | None = None
    issuer: str | None = None
    subject: str | None = None
    problem: str | None = None

    def matches(self, signer: str | None, identity: tuple[str, str] | None) -> bool:
        """Whether a signature by ``signer`` (fingerprint) or ``identity`` is by this key."""
        if self.fingerprint is not None:
            return signer == self.fingerprint
        if self.issuer is not None and identity is not None:
            return identity[0] == self.issuer and re.fullmatch(self.subject or ".*", identity[1]) is not None
        return False

    def describe(self) -> str:
        """The key for people: file and short fingerprint, the keyless identity, or why it is unusable."""
        if self.fingerprint:
            return f"{self.file or 'key'} ({self.fingerprint[:19]}…)"
        if self.issuer:
            return f"keyless {self.issuer} / {self.subject}"
        return f"{self.file} (unusable: {self.problem})"


@dataclasses.dataclass(frozen=True)
class KeySet:
    """A named set of keys (``keys:`` in a policy); a signature by any of them counts."""

    name: str
    keys: tuple[KeyRef, ...]

    def match(self, signer: str | None, identity: tuple[str, str] | None) -> bool:
        """Whether one of the set's keys made a signature by ``signer``/``identity``."""
        return any(k.matches(signer, identity) for k in self.keys)

    def problems(self) -> list[str]:
        """Why keys of the set are unusable (``key set `name`: <problem>``), one per such key."""
        return [f"key set `{self.name}`: {k.problem}" for k in self.keys if k.problem]


@dataclasses.dataclass(frozen=True)
class Approver:
    """A person who may approve promotions (``approvers:`` in a policy): a name and one key."""

    name: str
    key: KeyRef


def sets_match(sets: Sequence[KeySet], signer: str | None, identity: tuple[str, str] | None) -> bool:
    """Whether any of ``sets`` matches ``signer``/``identity``."""
    return any(s.match(signer, identity) for s in sets)


def sets_names(sets: Sequence[KeySet]) -> str:
    """The sets' names, comma-separated."""
    return ", ".join(s.name for s in sets)


def signer_text(signer: str | None, identity: tuple[str, str] | None) -> str:
    """A signer for people: ``subject (issuer)`` for keyless, a short fingerprint for a key."""
    if identity is not None:
        return f"{identity[1]} ({identity[0]})"
    return signer[:19] + "…" if signer else "unknown signer"


def key_problems(sets: Sequence[KeySet]) -> str:
    """``"; <problem>; ..."`` for every unusable key of ``sets`` (empty when all are usable)."""
    probs = [p for s in sets for p in s.problems()]
    return ("; " + "; ".join(probs)) if probs else ""
