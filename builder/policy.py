"""Promotion policies: load ``policies/*.yaml``, validate them, evaluate a promotion against evidence.

A policy names key sets and approvers, then stages (``dev -> staging -> prod``); each stage says
where it takes digests from (``from: build`` or another stage), which repository/registry holds
its pointer tag, what must hold for a digest to enter it (``require``: composable rules, all-of /
any-of) and who may roll it back. Reference and examples: ``docs/policies.md``.

Pure evaluation: ``evaluate(policy, stage, evidence, now) -> Decision``. Evidence is a frozen value
gathered from the registry by ``builder.promote.gather_evidence`` (signatures and attestations
already verified against the policy's keys; this module only binds them to who may sign what).
Policies fail closed: missing, unreadable or unverifiable evidence denies, and each
``RuleResult`` names the rule, its location in the policy file and why.

Errors: ``PolicyError`` (exit 30) with ``details['problems']`` listing every problem with its
``file:line:col`` location; ``NotFoundError`` for an unknown stage.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import fnmatch
import glob
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from builder.errors import NotFoundError, PolicyError
from builder.predicates import APPROVAL_V1, DEVICE_CHECK_V1, PROMOTION_V1, SLSA_PROVENANCE_V1

BUILD_STAGE = "build"
"""The pseudo-stage ``from: build``: the variant tag written by ``builder build``."""

_DURATION = re.compile(r"^\s*(?:(\d+)d)?\s*(?:(\d+)h)?\s*(?:(\d+)m)?\s*(?:(\d+)s)?\s*$")
_STAGE_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
_GLOB_CHARS = re.compile(r"[*?\[]")  # a key `file` with one of these is a glob (key sets only)
_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def weekday_index(name: str) -> int | None:
    """0 (Monday) .. 6 for ``mon``..``sun`` or ``monday``..``sunday`` (any case); None otherwise."""
    n = name.strip().lower()
    for names in (_WEEKDAYS, _WEEKDAY_NAMES):
        if n in names:
            return names.index(n)
    return None


def _did_you_mean(word: str, choices: Sequence[str], *, suffix: str = "known") -> str:
    """``"; did you mean 'x'?"`` (difflib) plus, with ``suffix``, the full list of choices."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    out = f"; did you mean {close[0]!r}?" if close else ""
    return out + (f" ({suffix}: {', '.join(choices)})" if suffix else "")


def parse_duration(text: str | int) -> dt.timedelta:
    """``"24h"``, ``"1d12h"``, ``"90m"``, ``"45s"`` or an integer number of seconds -> timedelta.

    Raises ValueError for anything else (no units, negative values)."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ValueError("a duration cannot be negative")
        return dt.timedelta(seconds=text)
    m = _DURATION.match(str(text))
    if not m or not any(m.groups()):
        raise ValueError(f"not a duration: {text!r} (use e.g. 24h, 1d12h, 90m, 45s)")
    d, h, mi, s = (int(g) if g else 0 for g in m.groups())
    return dt.timedelta(days=d, hours=h, minutes=mi, seconds=s)


# ---------------------------------------------------------------------------------------------
# Evidence (gathered by builder.promote; values only)


@dataclasses.dataclass(frozen=True)
class SignatureEvidence:
    """One signature found on the digest. ``signer``: key fingerprint ``sha256:<hex>`` (key mode) or
    ``None``; ``identity``: ``(issuer, subject)`` for keyless; ``verified``: the signature checked
    against a known key and names this digest; ``reason``: why not, when not verified."""

    signer: str | None
    verified: bool
    reason: str = ""
    identity: tuple[str, str] | None = None
    untrusted: bool = False  # well formed, by a key or identity the policy does not list


@dataclasses.dataclass(frozen=True)
class AttestationEvidence:
    """One in-toto attestation found on the digest (already DSSE-verified by ``builder.attest``).

    ``predicate`` is the decoded predicate (a JSON object); ``subject_digests`` the statement's
    subject digests (``sha256:<hex>``); ``signer``/``identity``/``verified``/``reason`` as for
    ``SignatureEvidence``."""

    predicate_type: str
    predicate: Mapping[str, Any]
    signer: str | None
    verified: bool
    reason: str = ""
    identity: tuple[str, str] | None = None
    subject_digests: tuple[str, ...] = ()
    untrusted: bool = False  # well formed, by a key or identity the policy does not list


@dataclasses.dataclass(frozen=True)
class FleetEvidence:
    """Compatibility of the digest with one cluster of a fleet file (computed by ``builder.compat``).

    ``verdict``: ``ok`` | ``minor-version-compat`` | ``forward-compat`` | ``blocked`` | ``error``;
    ``applies``: the cluster's vendor is the one the image is built for (CPU images: every cluster)."""

    fleet: str  # the fleet file as named in the policy (resolved path)
    cluster: str
    verdict: str
    reason: str = ""
    applies: bool = True


@dataclasses.dataclass(frozen=True)
class Evidence:
    """Everything a policy may look at for one promotion of ``digest`` into ``stage``.

    ``problems``: evidence that could not be read (e.g. the ``.att`` manifest was unreadable);
    ``fleet``: per-cluster verdicts for every fleet the stage's rules name (missing = deny)."""

    repository: str  # registry/repository the evidence was read from
    digest: str
    stage: str
    signatures: tuple[SignatureEvidence, ...] = ()
    attestations: tuple[AttestationEvidence, ...] = ()
    fleet: tuple[FleetEvidence, ...] = ()
    ticket: str | None = None
    problems: tuple[str, ...] = ()

    def verified_attestations(self, predicate_type: str) -> Iterator[AttestationEvidence]:
        """Verified attestations of ``predicate_type`` whose subject names this digest."""
        for a in self.attestations:
            if a.predicate_type == predicate_type and a.verified and self.digest in a.subject_digests:
                yield a


# ---------------------------------------------------------------------------------------------
# Results


@dataclasses.dataclass(frozen=True)
class RuleResult:
    """One rule's outcome. ``rule``: its kind and summary; ``location``: ``file:line:col``."""

    rule: str
    passed: bool
    reason: str
    location: str = ""
    children: tuple[RuleResult, ...] = ()
    notes: tuple[str, ...] = ()  # every piece of evidence that did not count and why (JSON only)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.rule,
            "passed": self.passed,
            "reason": self.reason,
            "location": self.location,
        }
        if self.notes:
            out["notes"] = list(self.notes)
        if self.children:
            out["children"] = [c.to_json() for c in self.children]
        return out

    def lines(self, indent: int = 0) -> Iterator[str]:
        mark = "pass" if self.passed else "FAIL"
        yield f"{'  ' * indent}[{mark}] {self.rule}: {self.reason}" + (f"  ({self.location})" if self.location else "")
        for c in self.children:
            yield from c.lines(indent + 1)


@dataclasses.dataclass(frozen=True)
class Decision:
    """The verdict for promoting ``digest`` into ``stage``: ``allowed`` and each rule's result."""

    stage: str
    digest: str
    allowed: bool
    reasons: tuple[RuleResult, ...]

    def failed(self) -> list[RuleResult]:
        """The leaf rules that failed (for error messages)."""
        out: list[RuleResult] = []

        def walk(r: RuleResult) -> None:
            if r.passed:
                return
            leaves = [c for c in r.children if not c.passed]
            if not leaves:
                out.append(r)
            for c in leaves:
                walk(c)

        for r in self.reasons:
            walk(r)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "digest": self.digest,
            "allowed": self.allowed,
            "reasons": [r.to_json() for r in self.reasons],
        }


# ---------------------------------------------------------------------------------------------
# Keys and identities


@dataclasses.dataclass(frozen=True)
class KeyRef:
    """One trusted signer: a key fingerprint (from a file or written inline) or a keyless identity.

    ``problem`` is set when the key file could not be read: rules that need it then deny."""

    fingerprint: str | None = None
    file: str | None = None
    issuer: str | None = None
    subject: str | None = None  # a regular expression (full match)
    problem: str | None = None

    def matches(self, signer: str | None, identity: tuple[str, str] | None) -> bool:
        if self.fingerprint is not None:
            return signer == self.fingerprint
        if self.issuer is not None and identity is not None:
            return identity[0] == self.issuer and re.fullmatch(self.subject or ".*", identity[1]) is not None
        return False

    def describe(self) -> str:
        if self.fingerprint:
            return f"{self.file or 'key'} ({self.fingerprint[:19]}…)"
        if self.issuer:
            return f"keyless {self.issuer} / {self.subject}"
        return f"{self.file} (unusable: {self.problem})"


@dataclasses.dataclass(frozen=True)
class KeySet:
    name: str
    keys: tuple[KeyRef, ...]

    def match(self, signer: str | None, identity: tuple[str, str] | None) -> bool:
        return any(k.matches(signer, identity) for k in self.keys)

    def problems(self) -> list[str]:
        return [f"key set `{self.name}`: {k.problem}" for k in self.keys if k.problem]


def _sets_match(sets: Sequence[KeySet], signer: str | None, identity: tuple[str, str] | None) -> bool:
    return any(s.match(signer, identity) for s in sets)


def _sets_names(sets: Sequence[KeySet]) -> str:
    return ", ".join(s.name for s in sets)


class _Notes:
    """Why evidence did not count, for a rule's reason, people first: notes about evidence signed
    by the rule's own key sets, then by other keys the policy lists, each line once; evidence by
    keys the policy does not list is summarised as a count. ``all()`` keeps every line (JSON)."""

    def __init__(self, signers: Sequence[KeySet], what: str) -> None:
        self.signers, self.what = signers, what
        self.own: list[str] = []
        self.other: list[str] = []
        self.foreign: list[str] = []

    def add(self, text: str, signer: str | None = None, identity: tuple[str, str] | None = None) -> None:
        """A note about evidence by ``signer`` (None: about the rule's own evidence)."""
        mine = (signer is None and identity is None) or _sets_match(self.signers, signer, identity)
        (self.own if mine else self.other).append(text)

    def add_foreign(self, text: str) -> None:
        self.foreign.append(text)

    def __bool__(self) -> bool:
        return bool(self.own or self.other or self.foreign)

    def lines(self) -> list[str]:
        out = list(dict.fromkeys([*self.own, *self.other]))
        n = len(self.foreign)
        if n:
            keys = [k.fingerprint[:19] + "…" for s in self.signers for k in s.keys if k.fingerprint]
            keys += [f"{k.issuer} {k.subject}" for s in self.signers for k in s.keys if k.issuer]
            given = f"{_sets_names(self.signers)}: {', '.join(keys) or 'no usable key'}"
            if out:
                out.append(f"+{n} {self.what}(s) by keys this policy does not list")
            else:
                out.append(f"{n} {self.what}(s) by keys this policy does not list (none of {given} made them)")
        return out

    def text(self) -> str:
        return "; ".join(self.lines())

    def all(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.own, *self.other, *self.foreign]))


def _signed_by(
    ctx: Context, predicate_type: str, signers: Sequence[KeySet], what: str, unlisted: str, notes: _Notes
) -> Iterator[tuple[AttestationEvidence, str]]:
    """Each verified ``predicate_type`` attestation about the digest by one of ``signers``, with its
    signer as text. Why each other one does not count goes to ``notes``: ``what`` names them in the
    note (``provenance``); ``unlisted`` is the note for a valid one by another signer (``{who}``)."""
    for a in ctx.evidence.attestations:
        if a.predicate_type != predicate_type:
            continue
        who = _signer_text(a.signer, a.identity)
        if not a.verified and a.untrusted:
            notes.add_foreign(f"{what} by {who} does not verify ({a.reason or 'unverifiable'})")
        elif not a.verified:
            notes.add(f"{what} by {who} does not verify ({a.reason or 'unverifiable'})", a.signer, a.identity)
        elif ctx.evidence.digest not in a.subject_digests:
            notes.add(f"{what} by {who} is about another digest", a.signer, a.identity)
        elif not _sets_match(signers, a.signer, a.identity):
            notes.add(unlisted.format(who=who), a.signer, a.identity)
        else:
            yield a, who


def _signer_text(signer: str | None, identity: tuple[str, str] | None) -> str:
    if identity is not None:
        return f"{identity[1]} ({identity[0]})"
    return signer[:19] + "…" if signer else "unknown signer"


def _key_problems(sets: Sequence[KeySet]) -> str:
    probs = [p for s in sets for p in s.problems()]
    return ("; " + "; ".join(probs)) if probs else ""


# ---------------------------------------------------------------------------------------------
# Rules


@dataclasses.dataclass(frozen=True)
class Context:
    """What rules see besides evidence: the stage pair and the time of the decision (aware)."""

    stage: str
    from_stage: str
    now: dt.datetime
    evidence: Evidence


@dataclasses.dataclass(frozen=True)
class Rule:
    """Base class: ``location`` is ``file:line:col`` of the rule in its policy file."""

    location: str

    kind: str = dataclasses.field(default="rule", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:  # pragma: no cover - abstract
        raise NotImplementedError

    def result(
        self,
        passed: bool,
        reason: str,
        summary: str = "",
        children: Iterable[RuleResult] = (),
        notes: _Notes | None = None,
    ) -> RuleResult:
        rule = f"{self.kind}" + (f" {summary}" if summary else "")
        return RuleResult(rule, passed, reason, self.location, tuple(children), notes.all() if notes else ())

    def walk(self) -> Iterator[Rule]:
        yield self


@dataclasses.dataclass(frozen=True)
class AllOf(Rule):
    rules: tuple[Rule, ...] = ()
    kind: str = dataclasses.field(default="all_of", init=False)

    def __post_init__(self) -> None:
        if not self.rules:
            raise ValueError("an empty all_of would allow everything; list at least one rule")

    def evaluate(self, ctx: Context) -> RuleResult:
        results = [r.evaluate(ctx) for r in self.rules]
        failed = [r for r in results if not r.passed]
        reason = f"all {len(results)} rules pass" if not failed else f"{len(failed)} of {len(results)} rules fail"
        return self.result(not failed, reason, children=results)

    def walk(self) -> Iterator[Rule]:
        yield self
        for r in self.rules:
            yield from r.walk()


@dataclasses.dataclass(frozen=True)
class AnyOf(Rule):
    rules: tuple[Rule, ...] = ()
    kind: str = dataclasses.field(default="any_of", init=False)

    def __post_init__(self) -> None:
        if not self.rules:
            raise ValueError("an empty any_of can never pass; list at least one rule")

    def evaluate(self, ctx: Context) -> RuleResult:
        results = [r.evaluate(ctx) for r in self.rules]
        passed = [r for r in results if r.passed]
        reason = f"{len(passed)} of {len(results)} alternatives pass" if passed else "no alternative passes"
        return self.result(bool(passed), reason, children=results)

    def walk(self) -> Iterator[Rule]:
        yield self
        for r in self.rules:
            yield from r.walk()


@dataclasses.dataclass(frozen=True)
class Unconditional(Rule):
    """Explicitly lets every digest in (e.g. ``dev`` takes every build); ``why`` is shown."""

    why: str = ""
    kind: str = dataclasses.field(default="unconditional", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        return self.result(True, self.why or "unconditional")


def _evidence_problems(ctx: Context) -> str:
    return ("; evidence unreadable: " + "; ".join(ctx.evidence.problems)) if ctx.evidence.problems else ""


@dataclasses.dataclass(frozen=True)
class SignatureRule(Rule):
    """At least ``count`` verified signatures on the digest by keys of ``signers``."""

    signers: tuple[KeySet, ...] = ()
    count: int = 1
    kind: str = dataclasses.field(default="signature", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        summary = f"by {_sets_names(self.signers)}"
        good: set[str] = set()
        notes = _Notes(self.signers, "signature")
        for s in ctx.evidence.signatures:
            who = _signer_text(s.signer, s.identity)
            if not s.verified and s.untrusted:
                notes.add_foreign(f"signature by {who} does not verify ({s.reason or 'unverifiable'})")
            elif not s.verified:
                notes.add(f"signature by {who} does not verify ({s.reason or 'unverifiable'})", s.signer, s.identity)
            elif not _sets_match(self.signers, s.signer, s.identity):
                notes.add(f"signature by {who} is not from a listed key", s.signer, s.identity)
            else:
                good.add(s.signer or repr(s.identity))
        if len(good) >= self.count:
            return self.result(
                True, f"{len(good)} verified signature(s) by {_sets_names(self.signers)}", summary, notes=notes
            )
        found = notes.text() if notes else "no signature found on the digest"
        return self.result(
            False,
            f"needs {self.count} verified signature(s) by {_sets_names(self.signers)}, has {len(good)}: {found}"
            + _key_problems(self.signers)
            + _evidence_problems(ctx),
            summary,
            notes=notes,
        )


def _get_path(obj: Any, path: str) -> list[Any]:
    """Values at dotted ``path`` in a JSON value; lists fan out (any element may match)."""
    values = [obj]
    for part in path.split("."):
        nxt: list[Any] = []
        for v in values:
            items = v if isinstance(v, list) else [v]
            for item in items:
                if isinstance(item, Mapping) and part in item:
                    nxt.append(item[part])
        values = nxt
    flat: list[Any] = []
    for v in values:
        flat.extend(v if isinstance(v, list) else [v])
    return flat


def _value_matches(actual: Any, expected: Any) -> bool:
    if isinstance(expected, list):
        return any(_value_matches(actual, e) for e in expected)
    if isinstance(expected, str) and isinstance(actual, str):
        return fnmatch.fnmatchcase(actual, expected)
    return bool(actual == expected)


@dataclasses.dataclass(frozen=True)
class AttestationRule(Rule):
    """A verified attestation of ``predicate_type`` by ``signers`` whose predicate satisfies ``where``
    (dotted path -> expected value, glob, or list of alternatives)."""

    predicate_type: str = ""
    signers: tuple[KeySet, ...] = ()
    where: tuple[tuple[str, Any], ...] = ()
    kind: str = dataclasses.field(default="attestation", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        summary = f"{self.predicate_type} by {_sets_names(self.signers)}"
        notes = _Notes(self.signers, "attestation")
        unlisted = "attestation by {who} is not from a listed signer"
        for a, who in _signed_by(ctx, self.predicate_type, self.signers, "attestation", unlisted, notes):
            misses = [
                p for p, want in self.where if not any(_value_matches(v, want) for v in _get_path(a.predicate, p))
            ]
            if misses:
                notes.add(f"attestation by {who}: {', '.join(f'{p} != {dict(self.where)[p]!r}' for p in misses)}")
                continue
            return self.result(True, f"verified attestation by {who}", summary, notes=notes)
        found = notes.text() if notes else f"no {self.predicate_type} attestation on the digest"
        return self.result(False, found + _key_problems(self.signers) + _evidence_problems(ctx), summary, notes=notes)


@dataclasses.dataclass(frozen=True)
class ProvenanceRule(Rule):
    """A verified SLSA provenance v1 attestation by ``signers`` whose source dependency
    (``buildDefinition.resolvedDependencies[]`` entry named ``source``, URI
    ``<repository>@<commit>``, as ``builder build`` writes it) matches the ``source`` glob.
    The branch is bound through the signer: a keyless GitHub workflow identity ends in
    ``@refs/heads/<branch>``."""

    signers: tuple[KeySet, ...] = ()
    source: str | None = None
    builder_id: str | None = None
    kind: str = dataclasses.field(default="provenance", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        summary = f"by {_sets_names(self.signers)}" + (f" from {self.source}" if self.source else "")
        notes = _Notes(self.signers, "provenance attestation")
        unlisted = "provenance signed by {who}, not a listed signer"
        for a, who in _signed_by(ctx, SLSA_PROVENANCE_V1, self.signers, "provenance", unlisted, notes):
            bd = a.predicate.get("buildDefinition")
            deps = bd.get("resolvedDependencies") if isinstance(bd, Mapping) else None
            sources = [
                str(d.get("uri", ""))
                for d in (deps if isinstance(deps, list) else [])
                if isinstance(d, Mapping) and d.get("name") == "source"
            ]
            if self.source and not any(fnmatch.fnmatchcase(u, self.source) for u in sources):
                notes.add(f"provenance by {who}: source {', '.join(sources) or 'not recorded'} is not {self.source}")
                continue
            if self.builder_id:
                rd = a.predicate.get("runDetails")
                builder = rd.get("builder") if isinstance(rd, Mapping) else None
                bid = builder.get("id") if isinstance(builder, Mapping) else None
                if bid != self.builder_id:
                    notes.add(f"provenance by {who}: builder {bid!r} is not {self.builder_id!r}")
                    continue
            return self.result(
                True, f"built from {', '.join(sources) or 'an unrecorded source'}, signed by {who}", summary
            )
        found = notes.text() if notes else "no SLSA provenance attestation on the digest"
        return self.result(False, found + _key_problems(self.signers) + _evidence_problems(ctx), summary, notes=notes)


def driver_branch(version: str) -> str:
    """NVIDIA driver branch: the major number (``580.65.06`` -> ``580``); AMD/other: same rule."""
    return version.strip().split(".", 1)[0]


def device_check_facts(predicate: Mapping[str, Any]) -> tuple[bool, str, str, tuple[str, ...]]:
    """(passed, vendor, driver_version, gpu names) of a ``device-check/v1`` predicate.

    Shape (docs/checks.md, helper F): ``result`` (``"passed"``/``"failed"``, or a boolean
    ``passed``), ``host.vendor`` (``nvidia``/``amd``/``none``), ``host.driver_version``,
    ``host.gpus[].name``. Anything missing reads as failed/unknown (fail closed)."""
    result = predicate.get("result")
    if isinstance(result, Mapping):
        result = result.get("status", result.get("outcome"))
    passed = result == "passed" if result is not None else predicate.get("passed") is True
    host = predicate.get("host")
    host = host if isinstance(host, Mapping) else {}
    vendor = str(host.get("vendor") or "unknown")
    driver = str(host.get("driver_version") or "")
    gpus_raw = host.get("gpus")
    names: list[str] = []
    if isinstance(gpus_raw, list):
        for g in gpus_raw:
            if isinstance(g, Mapping) and isinstance(g.get("name"), str):
                names.append(g["name"])
            elif isinstance(g, str):
                names.append(g)
    return passed, vendor, driver, tuple(names)


@dataclasses.dataclass(frozen=True)
class DeviceCheckRule(Rule):
    """Passing ``device-check/v1`` attestations signed by ``signers`` (check runners, never the
    build key unless listed). ``vendors``: host vendor of at least one passing check; ``gpu_models``:
    each pattern (glob, case-insensitive) needs a passing check on a host with such a GPU;
    ``driver_branches``: those checks' driver branch must be listed."""

    signers: tuple[KeySet, ...] = ()
    vendors: tuple[str, ...] = ()
    gpu_models: tuple[str, ...] = ()
    driver_branches: tuple[str, ...] = ()
    kind: str = dataclasses.field(default="device_check", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        parts = []
        if self.vendors:
            parts.append("on " + "/".join(self.vendors))
        if self.gpu_models:
            parts.append("GPUs " + ", ".join(self.gpu_models))
        if self.driver_branches:
            parts.append("driver branch " + "/".join(self.driver_branches))
        summary = " ".join([*parts, f"by {_sets_names(self.signers)}"])
        notes = _Notes(self.signers, "device check")
        good: list[tuple[str, str, tuple[str, ...], str]] = []
        unlisted = "device check signed by {who}, which is not a listed check runner"
        for a, who in _signed_by(ctx, DEVICE_CHECK_V1, self.signers, "device check", unlisted, notes):
            passed, vendor, driver, gpus = device_check_facts(a.predicate)
            if not passed:
                notes.add(f"device check by {who} on {vendor} did not pass")
                continue
            if self.vendors and vendor not in self.vendors:
                notes.add(f"device check by {who} ran on vendor {vendor}, not {'/'.join(self.vendors)}")
                continue
            good.append((vendor, driver, gpus, who))
        if not good:
            found = notes.text() if notes else "no device-check attestation on the digest"
            return self.result(
                False, found + _key_problems(self.signers) + _evidence_problems(ctx), summary, notes=notes
            )
        missing: list[str] = []
        for pattern in self.gpu_models:
            hits = [g for g in good if any(fnmatch.fnmatch(n.lower(), pattern.lower()) for n in g[2])]
            if not hits:
                seen = sorted({n for g in good for n in g[2]}) or ["no GPU"]
                missing.append(f"no passing check on a GPU matching {pattern!r} (checked: {', '.join(seen)})")
                continue
            if self.driver_branches and not any(driver_branch(g[1]) in self.driver_branches for g in hits):
                drivers = ", ".join(sorted({g[1] or "unknown" for g in hits}))
                missing.append(f"{pattern}: driver {drivers} not on branch {'/'.join(self.driver_branches)}")
        if (
            not self.gpu_models
            and self.driver_branches
            and not any(driver_branch(g[1]) in self.driver_branches for g in good)
        ):
            missing.append(f"no passing check on driver branch {'/'.join(self.driver_branches)}")
        if missing:
            return self.result(False, "; ".join(list(dict.fromkeys(missing)) + notes.lines()), summary, notes=notes)
        hosts = "; ".join(
            dict.fromkeys(f"{g[0]} {', '.join(g[2]) or 'no GPU'} driver {g[1] or '-'} by {g[3]}" for g in good)
        )
        return self.result(True, f"passing device check(s): {hosts}", summary, notes=notes)


@dataclasses.dataclass(frozen=True)
class Approver:
    name: str
    key: KeyRef


@dataclasses.dataclass(frozen=True)
class ApprovalRule(Rule):
    """``count`` distinct approvers from ``approvers`` signed an ``approval/v1`` attestation for
    this digest and this stage (the predicate names both; a replay onto another digest or stage
    does not count). ``same_ticket``: the approval names the promotion's change ticket."""

    count: int = 1
    approvers: tuple[Approver, ...] = ()
    same_ticket: bool = False
    kind: str = dataclasses.field(default="approvals", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        summary = f"{self.count} of {', '.join(a.name for a in self.approvers)}"
        names: set[str] = set()
        notes: list[str] = []
        ev = ctx.evidence
        for a in ev.attestations:
            if a.predicate_type != APPROVAL_V1:
                continue
            who = _signer_text(a.signer, a.identity)
            if not a.verified:
                notes.append(f"approval by {who} does not verify ({a.reason or 'unverifiable'})")
                continue
            if ev.digest not in a.subject_digests:
                notes.append(f"approval by {who} is for another digest")
                continue
            p = a.predicate
            approver = next((x for x in self.approvers if x.key.matches(a.signer, a.identity)), None)
            if approver is None:
                notes.append(f"approval signed by {who}, who is not a listed approver")
                continue
            if p.get("digest") != ev.digest:
                notes.append(f"approval by {approver.name} names digest {p.get('digest')}, not this one (replayed)")
                continue
            if p.get("stage") != ctx.stage:
                notes.append(f"approval by {approver.name} is for stage {p.get('stage')!r}, not {ctx.stage!r}")
                continue
            claimed = p.get("approver")
            if isinstance(claimed, Mapping) and claimed.get("fingerprint") not in (None, a.signer):
                notes.append(f"approval by {approver.name} claims another approver key")
                continue
            if self.same_ticket and (not ev.ticket or p.get("ticket") != ev.ticket):
                notes.append(f"approval by {approver.name} names ticket {p.get('ticket')!r}, not {ev.ticket!r}")
                continue
            names.add(approver.name)
        if len(names) >= self.count:
            return self.result(True, f"approved by {', '.join(sorted(names))}", summary)
        have = f"{len(names)} ({', '.join(sorted(names))})" if names else "0"
        extra = ("; " + "; ".join(notes)) if notes else ""
        key_probs = "".join(f"; approver {a.name}: {a.key.problem}" for a in self.approvers if a.key.problem)
        return self.result(
            False,
            f"needs {self.count} distinct approvals for stage {ctx.stage}, has {have}{extra}{key_probs}"
            + _evidence_problems(ctx),
            summary,
        )


@dataclasses.dataclass(frozen=True)
class ChangeTicketRule(Rule):
    pattern: str = ""
    kind: str = dataclasses.field(default="change_ticket", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        t = ctx.evidence.ticket
        if not t:
            return self.result(False, f"no change ticket given (--change TICKET matching {self.pattern})")
        if re.fullmatch(self.pattern, t) is None:
            return self.result(False, f"ticket {t!r} does not match {self.pattern}")
        return self.result(True, f"ticket {t} matches {self.pattern}")


@dataclasses.dataclass(frozen=True)
class FreezeWindow:
    """Absolute (``start``..``end`` local times) or weekly (``days`` + optional ``from``/``to``)."""

    reason: str
    start: dt.datetime | None = None  # naive local time
    end: dt.datetime | None = None
    days: tuple[int, ...] = ()  # 0 = Monday
    time_from: dt.time | None = None
    time_to: dt.time | None = None

    def contains(self, local: dt.datetime) -> bool:
        naive = local.replace(tzinfo=None)
        if self.start is not None and self.end is not None:
            return self.start <= naive < self.end
        t = naive.time()
        start, end = self.time_from or dt.time(0, 0), self.time_to
        if end is None or end <= start:  # to end of day, or overnight
            if naive.weekday() in self.days and t >= start:
                return True
            # overnight window spilling into the next day
            return end is not None and end <= start and (naive.weekday() - 1) % 7 in self.days and t < end
        return naive.weekday() in self.days and start <= t < end

    def ends(self, local: dt.datetime) -> dt.datetime:
        """When this window, which contains ``local``, ends (naive local time)."""
        naive = local.replace(tzinfo=None)
        if self.start is not None and self.end is not None:
            return self.end
        day = dt.datetime.combine(naive.date(), dt.time(0, 0))
        start, end = self.time_from or dt.time(0, 0), self.time_to
        if end is None:  # until midnight
            return day + dt.timedelta(days=1)
        if end <= start and naive.weekday() in self.days and naive.time() >= start:  # overnight, first day
            return dt.datetime.combine(naive.date() + dt.timedelta(days=1), end)
        return dt.datetime.combine(naive.date(), end)


def freeze_ends(windows: Sequence[FreezeWindow], local: dt.datetime) -> dt.datetime | None:
    """When the freeze that holds at ``local`` (naive local time) lifts: the end of the window that
    contains it, followed through windows that continue it (Friday evening, then the weekend);
    None when no window contains ``local`` or the windows chain for over a year."""
    t = local.replace(tzinfo=None)
    if not any(w.contains(t) for w in windows):
        return None
    for _ in range(400):
        holding = [w for w in windows if w.contains(t)]
        if not holding:
            return t
        t = max(w.ends(t) for w in holding)
    return None


@dataclasses.dataclass(frozen=True)
class FreezeRule(Rule):
    """Denies while ``now`` (in ``timezone``) is inside a window."""

    timezone: str = "UTC"
    windows: tuple[FreezeWindow, ...] = ()
    kind: str = dataclasses.field(default="freeze", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        from zoneinfo import ZoneInfo

        zone = ZoneInfo(self.timezone)
        local = ctx.now.astimezone(zone)
        for w in self.windows:
            if w.contains(local):
                until = freeze_ends(self.windows, local)
                if until is None:
                    when = "for over a year"
                else:
                    aware = until.replace(tzinfo=zone)
                    left = aware.astimezone(dt.UTC) - ctx.now.astimezone(dt.UTC)
                    when = f"until {aware:%Y-%m-%d %H:%M %Z} ({self.timezone}, {_fmt_td(left)} to go)"
                return self.result(False, f"frozen {when}: {w.reason}; now {local:%Y-%m-%d %H:%M %Z}", notes=None)
        return self.result(True, f"no freeze window at {local:%Y-%m-%d %H:%M %Z} ({self.timezone})")


@dataclasses.dataclass(frozen=True)
class SoakRule(Rule):
    """The digest has been in the ``from`` stage for at least ``minimum``, per verified
    ``promotion/v1`` records signed by ``signers``."""

    minimum: dt.timedelta = dt.timedelta(0)
    signers: tuple[KeySet, ...] = ()
    kind: str = dataclasses.field(default="soak", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        summary = f"{_fmt_td(self.minimum)} in {ctx.from_stage}"
        if ctx.from_stage == BUILD_STAGE:
            return self.result(False, "soak needs a previous stage; this stage takes builds", summary)
        entered: list[dt.datetime] = []
        notes: list[str] = []
        for a in ctx.evidence.attestations:
            if a.predicate_type != PROMOTION_V1:
                continue
            p = a.predicate
            if p.get("stage") != ctx.from_stage or p.get("digest") != ctx.evidence.digest:
                continue
            if not a.verified or ctx.evidence.digest not in a.subject_digests:
                notes.append(f"promotion record does not verify ({a.reason or 'unverifiable'})")
                continue
            if not _sets_match(self.signers, a.signer, a.identity):
                notes.append(f"promotion record signed by {_signer_text(a.signer, a.identity)}, not a listed promoter")
                continue
            if p.get("action", "promote") != "promote" or p.get("decision", {}).get("allowed") is False:
                continue
            when = parse_time(p.get("time"))
            if when is not None:
                entered.append(when)
        if not entered:
            found = ("; ".join(notes)) if notes else f"no promotion record shows this digest entering {ctx.from_stage}"
            return self.result(False, found + _evidence_problems(ctx), summary)
        since = max(entered)
        age = ctx.now - since
        if age < self.minimum:
            left = self.minimum - age
            return self.result(
                False,
                f"in {ctx.from_stage} since {since:%Y-%m-%dT%H:%M:%SZ} ({_fmt_td(age)}); {_fmt_td(left)} to go",
                summary,
            )
        return self.result(True, f"in {ctx.from_stage} since {since:%Y-%m-%dT%H:%M:%SZ} ({_fmt_td(age)})", summary)


@dataclasses.dataclass(frozen=True)
class FleetRule(Rule):
    """The digest can run on every named cluster of a fleet file; when none are named, on every
    cluster of the image's vendor (``match_vendor``; CUDA images are not expected to run on AMD
    clusters) or on every cluster (``match_vendor: false``)."""

    fleet: str = ""
    clusters: tuple[str, ...] = ()
    allow: tuple[str, ...] = ("ok", "minor-version-compat")
    match_vendor: bool = True
    kind: str = dataclasses.field(default="fleet", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        summary = Path(self.fleet).name + (f" ({', '.join(self.clusters)})" if self.clusters else "")
        rows = [f for f in ctx.evidence.fleet if f.fleet == self.fleet]
        if not rows:
            return self.result(
                False, f"no compatibility verdicts for fleet {self.fleet}" + _evidence_problems(ctx), summary
            )
        if self.clusters:
            named = {r.cluster for r in rows}
            missing = [c for c in self.clusters if c not in named]
            if missing:
                return self.result(False, f"cluster(s) {', '.join(missing)} not in fleet {self.fleet}", summary)
            rows = [r for r in rows if r.cluster in self.clusters]
        elif self.match_vendor:
            skipped = [r.cluster for r in rows if not r.applies]
            rows = [r for r in rows if r.applies]
            if not rows:
                return self.result(
                    False,
                    f"no cluster of fleet {self.fleet} has the image's GPU vendor ({', '.join(skipped)})",
                    summary,
                )
        bad = [r for r in rows if r.verdict not in self.allow]
        if bad:
            text = "; ".join(f"cluster {r.cluster}: {r.verdict}" + (f" ({r.reason})" if r.reason else "") for r in bad)
            return self.result(False, f"cannot run on {text}", summary)
        return self.result(True, "runs on " + ", ".join(f"{r.cluster} ({r.verdict})" for r in rows), summary)


def _fmt_td(td: dt.timedelta) -> str:
    secs = int(td.total_seconds())
    sign = "-" if secs < 0 else ""
    secs = abs(secs)
    d, rem = divmod(secs, 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    parts = [f"{d}d" if d else "", f"{h}h" if h else "", f"{m}m" if m else "", f"{s}s" if s and not d else ""]
    return sign + ("".join(parts) or "0s")


def parse_time(value: Any) -> dt.datetime | None:
    """RFC 3339 text -> aware datetime (UTC when no offset); None when absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


# ---------------------------------------------------------------------------------------------
# Policy


@dataclasses.dataclass(frozen=True)
class RollbackRule:
    """Who may roll a stage back: approvers by name and/or key sets."""

    approvers: tuple[Approver, ...] = ()
    keysets: tuple[KeySet, ...] = ()
    location: str = ""

    def allows(self, signer: str) -> str | None:
        """The name of the matching approver/key set, or None."""
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
    (``{repository}`` = the matrix repository); ``registry``: None = the configured registry."""

    name: str
    source: str
    repository: str
    registry: str | None
    require: Rule
    rollback: RollbackRule | None
    location: str

    def repository_for(self, matrix_repository: str) -> str:
        return self.repository.replace("{repository}", matrix_repository)

    def tag_for(self, variant_id: str) -> str:
        """Stage pointer tag ``<variant-id>-<stage>`` (DESIGN.md: Tags)."""
        return f"{variant_id}-{self.name}"


@dataclasses.dataclass(frozen=True)
class Policy:
    path: Path
    stages: tuple[Stage, ...]
    keysets: tuple[KeySet, ...]
    approvers: tuple[Approver, ...]
    promoters: tuple[KeySet, ...]

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise NotFoundError(
            f"stage {name!r} is not defined in {self.path}",
            hint=f"stages: {', '.join(s.name for s in self.stages)}",
        )

    @property
    def stage_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.stages)

    def all_keys(self) -> tuple[KeyRef, ...]:
        """Every usable key the policy trusts for anything (for verification)."""
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
        return tuple(dict.fromkeys(r.fleet for r in self.stage(stage).require.walk() if isinstance(r, FleetRule)))


def evaluate(policy: Policy, stage: str, evidence: Evidence, now: dt.datetime) -> Decision:
    """Evaluate the promotion of ``evidence.digest`` into ``stage`` at ``now`` (aware datetime).

    Returns a Decision whose ``reasons`` hold the stage's rule tree with each result. Never
    raises for missing evidence: it denies (fail closed). Raises NotFoundError for an unknown stage."""
    st = policy.stage(stage)
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    ctx = Context(stage=stage, from_stage=st.source, now=now, evidence=evidence)
    try:
        top = st.require.evaluate(ctx)
    except Exception as exc:  # a rule crashing on odd evidence must deny, not allow
        top = RuleResult(
            st.require.kind, False, f"rule failed on the evidence: {type(exc).__name__}: {exc}", st.require.location
        )
    return Decision(stage=stage, digest=evidence.digest, allowed=top.passed, reasons=(top,))


# ---------------------------------------------------------------------------------------------
# Loading and validation


@dataclasses.dataclass(frozen=True)
class Problem:
    """One validation problem: ``location`` ``file:line:col``, ``path`` in the document."""

    location: str
    path: str
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        return f"{self.location}: {self.path}: {self.message}" + (" (warning)" if self.severity == "warning" else "")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _KeyModel(_Strict):
    file: str | None = None
    fingerprint: str | None = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")
    issuer: str | None = None
    subject: str | None = None


class _ApproverModel(_KeyModel):
    pass


class _SignatureModel(_Strict):
    signers: list[str] = Field(min_length=1)
    count: int = Field(default=1, ge=1)


class _AttestationModel(_Strict):
    type: str
    signers: list[str] = Field(min_length=1)
    where: dict[str, Any] = Field(default_factory=dict)


class _ProvenanceModel(_Strict):
    signers: list[str] = Field(min_length=1)
    source: str | None = None
    builder_id: str | None = None


class _DeviceCheckModel(_Strict):
    signers: list[str] = Field(min_length=1)
    vendors: list[Literal["nvidia", "amd", "none"]] = Field(default_factory=list)
    gpu_models: list[str] = Field(default_factory=list)
    driver_branches: list[str] = Field(default_factory=list)

    @field_validator("driver_branches", mode="before")
    @classmethod
    def _str_branches(cls, v: Any) -> Any:
        return [str(x) for x in v] if isinstance(v, list) else v


class _ApprovalsModel(_Strict):
    count: int = Field(ge=1)
    approvers: list[str] = Field(min_length=1)
    same_ticket: bool = False


class _TicketModel(_Strict):
    pattern: str


class _WindowModel(_Strict):
    reason: str = "freeze"
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    days: list[str] = Field(default_factory=list)
    from_: str | None = Field(default=None, alias="from")
    to: str | None = None


class _FreezeModel(_Strict):
    timezone: str = "UTC"
    windows: list[_WindowModel] = Field(min_length=1)


class _SoakModel(_Strict):
    min: str | int
    signers: list[str] = Field(min_length=1)


class _FleetModel(_Strict):
    file: str
    clusters: list[str] = Field(default_factory=list)
    allow: list[Literal["ok", "minor-version-compat", "forward-compat"]] = ["ok", "minor-version-compat"]
    match_vendor: bool = True


class _RollbackModel(_Strict):
    allowed: list[str] = Field(min_length=1)


class _StageModel(_Strict):
    from_: str = Field(alias="from")
    repository: str = "{repository}"
    registry: str | None = None
    require: Any = None
    rollback: Any = None


class _PolicyModel(_Strict):
    version: Literal[1] = 1
    description: str = ""
    keys: dict[str, list[Any]] = Field(default_factory=dict)
    approvers: dict[str, Any] = Field(default_factory=dict)
    promoters: list[str] = Field(default_factory=list)
    stages: dict[str, Any] = Field(min_length=1)


_RULE_MODELS: dict[str, type[_Strict]] = {
    "signature": _SignatureModel,
    "attestation": _AttestationModel,
    "provenance": _ProvenanceModel,
    "device_check": _DeviceCheckModel,
    "approvals": _ApprovalsModel,
    "change_ticket": _TicketModel,
    "freeze": _FreezeModel,
    "soak": _SoakModel,
    "fleet": _FleetModel,
}
RULE_KINDS = ("all_of", "any_of", "unconditional", *_RULE_MODELS)


class _Loader:
    """Builds a Policy from YAML, collecting every problem with its location."""

    def __init__(self, path: Path, variables: Mapping[str, str]) -> None:
        self.path = path
        self.variables = dict(variables)
        self.problems: list[Problem] = []
        self.lines: dict[tuple[Any, ...], tuple[int, int]] = {}
        self.keysets: dict[str, KeySet] = {}
        self.approvers: dict[str, Approver] = {}

    # locations -------------------------------------------------------------------------
    def index(self, node: Any, path: tuple[Any, ...] = ()) -> Any:
        """Record line/col of every key and item; return plain Python data."""
        from ruamel.yaml.comments import CommentedMap, CommentedSeq

        if isinstance(node, CommentedMap):
            out: dict[Any, Any] = {}
            for k in node:
                try:
                    line, col = node.lc.key(k)
                    self.lines[(*path, k)] = (line + 1, col + 1)
                except (KeyError, TypeError, AttributeError):
                    self.lines[(*path, k)] = self.lines.get(path, (0, 0))
                out[str(k)] = self.index(node[k], (*path, str(k)))
            return out
        if isinstance(node, CommentedSeq):
            items: list[Any] = []
            for i, v in enumerate(node):
                try:
                    line, col = node.lc.item(i)
                    self.lines[(*path, i)] = (line + 1, col + 1)
                except (KeyError, TypeError, AttributeError, IndexError):
                    self.lines[(*path, i)] = self.lines.get(path, (0, 0))
                items.append(self.index(v, (*path, i)))
            return items
        if isinstance(node, str):
            return str(node)
        return node

    def loc(self, path: Sequence[Any]) -> str:
        p = tuple(path)
        while p and p not in self.lines:
            p = p[:-1]
        line, col = self.lines.get(p, (1, 1))
        return f"{self.path}:{line}:{col}"

    @staticmethod
    def dotted(path: Sequence[Any]) -> str:
        out = ""
        for part in path:
            out += f"[{part}]" if isinstance(part, int) else (("." if out else "") + str(part))
        return out or "(document)"

    def problem(self, path: Sequence[Any], message: str, severity: Literal["error", "warning"] = "error") -> None:
        self.problems.append(Problem(self.loc(path), self.dotted(path), message, severity))

    def model(self, cls: type[BaseModel], data: Any, path: tuple[Any, ...]) -> Any:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            for err in exc.errors():
                loc = tuple("from" if p == "from_" else p for p in err["loc"])
                self.problem((*path, *loc), err["msg"])
            return None

    # keys ------------------------------------------------------------------------------
    def key(self, data: Any, path: tuple[Any, ...]) -> KeyRef | None:
        m = self.model(_KeyModel, data, path)
        if m is None:
            return None
        if m.issuer:
            if m.file or m.fingerprint:
                self.problem(path, "a keyless identity (`issuer` + `subject`) takes no `file`/`fingerprint`")
                return None
            if not m.subject:
                self.problem(path, "a keyless identity needs `subject` (a regular expression)")
                return None
            try:
                re.compile(m.subject)
            except re.error as exc:
                self.problem((*path, "subject"), f"not a regular expression: {exc}")
                return None
            return KeyRef(issuer=m.issuer, subject=m.subject)
        if not m.file:
            why = "a fingerprint alone cannot verify a signature" if m.fingerprint else "no key given"
            self.problem(
                path,
                f"{why}: give the public key `file` (and `fingerprint` to pin it), or `issuer` + `subject` for keyless",
            )
            return None
        assert m.file is not None
        try:
            text = m.file.format(**self.variables)
        except (KeyError, IndexError) as exc:
            self.problem((*path, "file"), f"unknown variable {exc} (known: {', '.join(sorted(self.variables))})")
            return None
        file = Path(text)
        if not file.is_absolute():
            file = self.path.parent / file
        from builder.errors import SigningKeyError
        from builder.keys import load_public_keys

        try:
            (pub,) = load_public_keys([file])
        except SigningKeyError as exc:
            why = "file not found" if not file.exists() else exc.message
            self.problem((*path, "file"), f"{file}: {why}; rules that need this key will deny", "warning")
            return KeyRef(file=str(file), problem=f"{file}: {why}")
        if m.fingerprint and m.fingerprint != pub.fingerprint:
            self.problem(
                (*path, "fingerprint"),
                f"{file} has fingerprint {pub.fingerprint}, not the pinned {m.fingerprint}: wrong or replaced key file",
            )
            return None
        return KeyRef(fingerprint=pub.fingerprint, file=str(file))

    def key_entries(self, data: Any, path: tuple[Any, ...]) -> list[KeyRef | None]:
        """One key-set entry: a key (``key``), or a ``file`` glob (``*``, ``?``, ``[...]``) naming
        every public key file it matches, sorted (e.g. ``{root}/keys/check-runners/*.pub``). A glob
        matching nothing is a warning and an unusable entry: rules needing the set deny."""
        file = data.get("file") if isinstance(data, Mapping) else None
        if not isinstance(file, str) or not _GLOB_CHARS.search(file.replace("{", "").replace("}", "")):
            return [self.key(data, path)]
        if data.get("fingerprint"):
            self.problem((*path, "fingerprint"), "a `file` glob names many keys: pin each key file separately instead")
            return []
        try:  # variables are literal text in the pattern, not glob syntax
            pattern = file.format(**{k: glob.escape(v) for k, v in self.variables.items()})
            shown = file.format(**self.variables)
        except (KeyError, IndexError) as exc:
            self.problem((*path, "file"), f"unknown variable {exc} (known: {', '.join(sorted(self.variables))})")
            return []
        if not Path(shown).is_absolute():
            pattern = str(Path(glob.escape(str(self.path.parent))) / pattern)
            shown = str(self.path.parent / shown)
        matches = sorted(m for m in glob.glob(pattern) if Path(m).is_file())
        if not matches:
            self.problem(
                (*path, "file"),
                f"no file matches {shown}: this entry adds no key (rules deny while their key sets have no usable key)",
                "warning",
            )
            return [KeyRef(file=shown, problem=f"no public key file matches {shown}")]
        literal = {k: v for k, v in data.items() if k != "file"}
        return [self.key({**literal, "file": m.replace("{", "{{").replace("}", "}}")}, path) for m in matches]

    def keysets_of(self, names: Sequence[str], path: tuple[Any, ...]) -> tuple[KeySet, ...]:
        out: list[KeySet] = []
        for i, n in enumerate(names):
            if n in self.keysets:
                out.append(self.keysets[n])
            elif n in self.approvers:
                out.append(KeySet(n, (self.approvers[n].key,)))
            else:
                known = ", ".join(sorted([*self.keysets, *self.approvers])) or "none defined"
                self.problem((*path, i), f"unknown key set {n!r} (known: {known})")
        return tuple(out)

    # rules -----------------------------------------------------------------------------
    def rule(self, data: Any, path: tuple[Any, ...]) -> Rule | None:
        location = self.loc(path)
        if isinstance(data, list):  # a bare list means all_of
            return self.group(AllOf, data, path, location)
        if isinstance(data, dict) and len(data) > 1:
            names = ", ".join(str(k) for k in data)
            empty = [k for k, v in data.items() if k in ("all_of", "any_of") and v in ([], None)]
            self.problem(
                path,
                f"a rule is a mapping with exactly one key, this one has {len(data)} ({names}); to require several "
                "rules, list each one under a single `all_of:` (e.g. `all_of: [{signature: ...}, {device_check: "
                "...}]`)" + (f"; its `{empty[0]}` is empty besides" if empty else ""),
            )
            for k in data:
                if k not in RULE_KINDS:
                    self.problem((*path, k), f"unknown rule {k!r}{_did_you_mean(str(k), RULE_KINDS)}")
            return None
        if not isinstance(data, dict) or len(data) != 1:
            self.problem(path, f"a rule is a mapping with exactly one key, one of: {', '.join(RULE_KINDS)}")
            return None
        ((kind, body),) = data.items()
        p = (*path, kind)
        location = self.loc(p)
        if kind == "all_of":
            return self.group(AllOf, body, p, location)
        if kind == "any_of":
            return self.group(AnyOf, body, p, location)
        if kind == "unconditional":
            if not isinstance(body, str) or not body.strip():
                self.problem(p, "`unconditional` takes the reason as text (why every digest may enter)")
                return None
            return Unconditional(location, why=body)
        cls = _RULE_MODELS.get(kind)
        if cls is None:
            self.problem(p, f"unknown rule {kind!r}{_did_you_mean(str(kind), RULE_KINDS)}")
            return None
        m = self.model(cls, body, p)
        if m is None:
            return None
        if isinstance(m, _SignatureModel):
            return SignatureRule(location, self.keysets_of(m.signers, (*p, "signers")), m.count)
        if isinstance(m, _AttestationModel):
            return AttestationRule(
                location, m.type, self.keysets_of(m.signers, (*p, "signers")), tuple(sorted(m.where.items()))
            )
        if isinstance(m, _ProvenanceModel):
            return ProvenanceRule(location, self.keysets_of(m.signers, (*p, "signers")), m.source, m.builder_id)
        if isinstance(m, _DeviceCheckModel):
            return DeviceCheckRule(
                location,
                self.keysets_of(m.signers, (*p, "signers")),
                tuple(m.vendors),
                tuple(m.gpu_models),
                tuple(m.driver_branches),
            )
        if isinstance(m, _ApprovalsModel):
            approvers: list[Approver] = []
            for i, n in enumerate(m.approvers):
                if n in self.approvers:
                    approvers.append(self.approvers[n])
                else:
                    self.problem((*p, "approvers", i), f"unknown approver {n!r} (define it under `approvers:`)")
            if len(set(m.approvers)) < m.count:
                self.problem(
                    (*p, "count"),
                    f"needs {m.count} distinct approvers but lists only {len(set(m.approvers))}: it could never pass",
                )
            return ApprovalRule(location, m.count, tuple(approvers), m.same_ticket)
        if isinstance(m, _TicketModel):
            try:
                re.compile(m.pattern)
            except re.error as exc:
                self.problem((*p, "pattern"), f"not a regular expression: {exc}")
                return None
            return ChangeTicketRule(location, m.pattern)
        if isinstance(m, _FreezeModel):
            return self.freeze(m, p, location)
        if isinstance(m, _SoakModel):
            try:
                minimum = parse_duration(m.min)
            except ValueError as exc:
                self.problem((*p, "min"), str(exc))
                return None
            return SoakRule(location, minimum, self.keysets_of(m.signers, (*p, "signers")))
        if isinstance(m, _FleetModel):
            text = m.file.format(**self.variables) if "{" in m.file else m.file
            fleet = Path(text)
            if not fleet.is_absolute():
                fleet = (self.path.parent / fleet).resolve()
            if not fleet.exists():
                self.problem((*p, "file"), f"fleet file {fleet} does not exist")
            return FleetRule(location, str(fleet), tuple(m.clusters), tuple(m.allow), m.match_vendor)
        raise AssertionError(kind)  # pragma: no cover

    def group(self, cls: type[AllOf] | type[AnyOf], body: Any, path: tuple[Any, ...], location: str) -> Rule | None:
        if not isinstance(body, list):
            self.problem(path, f"`{'all_of' if cls is AllOf else 'any_of'}` takes a list of rules")
            return None
        if not body:
            what = "an empty all_of would allow everything" if cls is AllOf else "an empty any_of can never pass"
            self.problem(path, f"{what}; list at least one rule")
            return None
        rules = [self.rule(item, (*path, i)) for i, item in enumerate(body)]
        good = tuple(r for r in rules if r is not None)
        if len(good) != len(rules):
            return None
        return cls(location, rules=good)

    def freeze(self, m: _FreezeModel, p: tuple[Any, ...], location: str) -> Rule | None:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        ok = True
        try:
            ZoneInfo(m.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            self.problem((*p, "timezone"), f"unknown time zone {m.timezone!r} (IANA name, e.g. Europe/Berlin)")
            ok = False
        windows: list[FreezeWindow] = []
        for i, w in enumerate(m.windows):
            wp = (*p, "windows", i)
            if w.start or w.end:
                if not (w.start and w.end) or w.days or w.from_ or w.to:
                    self.problem(wp, "an absolute window has both `start` and `end` and nothing else")
                    ok = False
                    continue
                start, end = w.start.replace(tzinfo=None), w.end.replace(tzinfo=None)
                if end <= start:
                    self.problem((*wp, "end"), "`end` must be after `start`")
                    ok = False
                    continue
                windows.append(FreezeWindow(w.reason, start=start, end=end))
                continue
            if not w.days:
                self.problem(wp, "a window needs `start`/`end` (dates) or `days` (weekly: mon..sun)")
                ok = False
                continue
            days: list[int] = []
            for j, d in enumerate(w.days):
                day = weekday_index(d)
                if day is None:
                    self.problem(
                        (*wp, "days", j),
                        f"unknown weekday {d!r}: mon, tue, wed, thu, fri, sat, sun (or monday..sunday)"
                        + _did_you_mean(d.lower(), (*_WEEKDAYS, *_WEEKDAY_NAMES), suffix=""),
                    )
                    ok = False
                else:
                    days.append(day)
            times: list[dt.time | None] = []
            for key, val in (("from", w.from_), ("to", w.to)):
                if val is None:
                    times.append(None)
                    continue
                try:
                    times.append(dt.time.fromisoformat(val))
                except ValueError:
                    self.problem((*wp, key), f"not a time of day: {val!r} (HH:MM)")
                    ok = False
                    times.append(None)
            windows.append(FreezeWindow(w.reason, days=tuple(days), time_from=times[0], time_to=times[1]))
        return FreezeRule(location, m.timezone, tuple(windows)) if ok else None

    # document --------------------------------------------------------------------------
    def load(self, text: str) -> Policy | None:
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError

        yaml = YAML(typ="rt")
        try:
            raw = yaml.load(text)
        except YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{self.path}:{mark.line + 1}:{mark.column + 1}" if mark else str(self.path)
            self.problems.append(Problem(where, "(document)", f"not valid YAML: {getattr(exc, 'problem', exc)}"))
            return None
        data = self.index(raw)
        if not isinstance(data, dict):
            self.problem((), "a policy is a mapping with `stages:`")
            return None
        top = self.model(_PolicyModel, data, ())
        if top is None:
            return None
        for name, entries in top.keys.items():
            refs = [r for i, e in enumerate(entries) for r in self.key_entries(e, ("keys", name, i))]
            if not entries:
                self.problem(("keys", name), "an empty key set trusts nobody; list at least one key")
            self.keysets[name] = KeySet(name, tuple(r for r in refs if r is not None))
        for name, entry in top.approvers.items():
            file = entry.get("file") if isinstance(entry, Mapping) else None
            if isinstance(file, str) and _GLOB_CHARS.search(file.replace("{", "").replace("}", "")):
                self.problem(("approvers", name, "file"), "an approver is one key: name its file, not a glob")
                continue
            ref = self.key(entry, ("approvers", name))
            if ref is not None:
                self.approvers[name] = Approver(name, ref)
        promoters = self.keysets_of(top.promoters, ("promoters",))
        stages: list[Stage] = []
        for name, body in top.stages.items():
            sp = ("stages", name)
            if not _STAGE_NAME.match(name) or name == BUILD_STAGE:
                self.problem(sp, f"stage name {name!r}: lower-case letters, digits, '-' (and not `build`)")
            sm = self.model(_StageModel, body, sp)
            if sm is None:
                continue
            if sm.require is None:
                self.problem(sp, "missing `require:` (use `unconditional: <why>` to let every digest in)")
                continue
            rule = self.rule(sm.require, (*sp, "require"))
            rollback = None
            if sm.rollback is not None:
                rm = self.model(_RollbackModel, sm.rollback, (*sp, "rollback"))
                if rm is not None:
                    appr = tuple(self.approvers[n] for n in rm.allowed if n in self.approvers)
                    sets = self.keysets_of(
                        [n for n in rm.allowed if n not in self.approvers], (*sp, "rollback", "allowed")
                    )
                    rollback = RollbackRule(appr, sets, self.loc((*sp, "rollback")))
            else:
                self.problem(sp, "no `rollback:` rule: nobody may roll this stage back", "warning")
            if "{repository}" not in sm.repository and "/" not in sm.repository:
                self.problem((*sp, "repository"), "a repository path like `prod/{repository}` or `ml/pytorch`")
            if rule is not None:
                stages.append(Stage(name, sm.from_, sm.repository, sm.registry, rule, rollback, self.loc(sp)))
        names = [s.name for s in stages]
        sources = {
            n: b.get("from") for n, b in top.stages.items() if isinstance(b, dict) and isinstance(b.get("from"), str)
        }
        for n, src in sources.items():
            if src == n:
                self.problem(("stages", n, "from"), "a stage cannot take images from itself")
            elif src != BUILD_STAGE and src not in top.stages:
                self.problem(("stages", n, "from"), f"unknown stage {src!r} (known: build, {', '.join(top.stages)})")
        for s in stages:
            has_soak = any(isinstance(r, SoakRule) for r in s.require.walk())
            if has_soak and s.source == BUILD_STAGE:
                self.problem(("stages", s.name, "require"), "soak needs a previous stage (`from:` is build)")
        # cycles in from-chains
        for n in sources:
            seen = {n}
            cur = sources[n]
            while cur in sources and cur != n:
                if cur in seen:
                    break
                seen.add(cur)
                cur = sources[cur]
            if cur == n and sources[n] != n:
                self.problem(("stages", n, "from"), "stages take images from each other in a cycle")
        if len(names) != len(top.stages):
            return None
        if not top.promoters:
            self.problem(
                ("promoters",),
                "no `promoters:`: promotion records cannot be trusted for history, rollback and resolve",
                "warning",
            )
        return Policy(self.path, tuple(stages), tuple(self.keysets.values()), tuple(self.approvers.values()), promoters)


def check_policy(path: Path, variables: Mapping[str, str] | None = None) -> tuple[Policy | None, list[Problem]]:
    """Load ``path`` and return (policy or None, every problem found, with locations).

    ``variables``: values for ``{name}`` in key and fleet file paths (the CLI passes
    ``state_dir`` and ``root``). Never raises for problems in the file; NotFoundError if absent."""
    try:
        text = path.read_text()
    except FileNotFoundError as exc:
        raise NotFoundError(
            f"policy file {path} does not exist",
            hint="run builder inside your checkout or pass `builder -C DIR`; or create it (docs/policies.md) "
            "or pass --policy FILE",
        ) from exc
    except OSError as exc:
        raise PolicyError(f"policy file {path} cannot be read: {exc.strerror}") from exc
    loader = _Loader(path, variables or {})
    policy = loader.load(text)
    errors = [p for p in loader.problems if p.severity == "error"]
    return (policy if not errors else None), loader.problems


def load_policy(path: Path, variables: Mapping[str, str] | None = None) -> Policy:
    """Load and validate a policy; raises PolicyError listing every problem with its location.

    Warnings (e.g. a key file missing on this machine) do not raise: rules needing it deny."""
    policy, problems = check_policy(path, variables)
    errors = [p for p in problems if p.severity == "error"]
    if policy is None or errors:
        raise PolicyError(
            f"{path}: {len(errors)} problem(s):\n" + "\n".join(f"  {p}" for p in errors),
            problems=[dataclasses.asdict(p) for p in problems],
        )
    return policy
