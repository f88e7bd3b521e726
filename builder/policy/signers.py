"""Who a policy trusts: key references (a key fingerprint or a keyless identity), named key sets
and approvers, and how evidence's signer is matched against them and shown to people.

A signer is ``sha256:<hex>`` (the key's fingerprint, ``builder.signing.keys``) or, for keyless Sigstore
signatures, an ``(issuer, subject)`` identity (https://docs.sigstore.dev/certificate_authority/oidc-in-fulcio/).
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from builder.signing.fingerprints import short_fingerprint

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


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
            return f"{self.file or 'key'} ({short_fingerprint(self.fingerprint)})"
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


def signer_text(signer: str | None, identity: tuple[str, str] | None, names: Mapping[str, str] | None = None) -> str:
    """A signer for people: ``subject (issuer)`` for keyless; for a key its name from the policy
    (``names``: fingerprint -> approver or key set name, :func:`key_names`) and short fingerprint
    (``check-runner (SHA256:748c…)``), the short fingerprint alone for a key the policy does not name."""
    if identity is not None:
        return f"{identity[1]} ({identity[0]})"
    if not signer:
        return "unknown signer"
    name = (names or {}).get(signer)
    return f"{name} ({short_fingerprint(signer)})" if name else short_fingerprint(signer)


def key_names(sets: Sequence[KeySet], approvers: Sequence[Approver] = ()) -> dict[str, str]:
    """Fingerprint -> the name people know a key by: the approver's name, else the first key set
    (``keys:`` of the policy) that lists it."""
    names: dict[str, str] = {}
    for a in approvers:
        if a.key.fingerprint:
            names.setdefault(a.key.fingerprint, a.name)
    for s in sets:
        for k in s.keys:
            if k.fingerprint:
                names.setdefault(k.fingerprint, s.name)
    return names


def key_problems(sets: Sequence[KeySet]) -> str:
    """``"; <problem>; ..."`` for every unusable key of those ``sets`` that have no usable key
    (empty otherwise). A set with one usable key verifies signatures, so its other, unusable
    entries (e.g. a ``keys/check-runners/*.pub`` glob matching nothing next to the machine's own
    runner key) are not why a rule denied: naming them in the reason read as if the set were
    unusable while the next rule passed "signed by" the same set. The policy's load warnings
    (``builder policy check``) still list every unusable entry."""
    probs = [p for s in sets if not any(k.problem is None for k in s.keys) for p in s.problems()]
    return ("; " + "; ".join(probs)) if probs else ""
