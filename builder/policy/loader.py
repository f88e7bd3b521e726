"""Loading a policy file: parse the YAML, validate it and build a ``Policy``, collecting every
problem with its location (``builder.yamldoc.Problem``) instead of stopping at the first.

``check_policy(path)`` returns the policy (None when invalid) and every problem, for
``builder policy validate``; ``load_policy(path)`` raises ``PolicyError`` (exit 30) listing them.
Key files named in the policy are read here (``builder.signing.keys``); a missing one is a warning and
the rules that need it deny. Reference: ``docs/policies.md``.
"""

from __future__ import annotations

import datetime as dt
import functools
import glob
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ValidationError

from builder.config import registry_problem, repository_problem
from builder.errors import ConfigError, PolicyError, SigningKeyError
from builder.policy.durations import WEEKDAY_NAMES, WEEKDAYS, parse_duration, weekday_index
from builder.policy.inputs import PolicyInputs, read_policy_text
from builder.policy.model import BUILD_STAGE, Policy, Retention, RollbackRule, Stage
from builder.policy.rules import Rule
from builder.policy.rules_benchmark import evidence_rule_builders
from builder.policy.rules_change import ApprovalRule, ChangeTicketRule, FreezeRule, FreezeWindow, SoakRule
from builder.policy.rules_evidence import (
    AttestationRule,
    DeviceCheckRule,
    FleetRule,
    ProvenanceRule,
)
from builder.policy.rules_groups import AllOf, AnyOf, Unconditional
from builder.policy.rules_signature import SignatureRule
from builder.policy.rules_vulnerabilities import vulnerability_rule_builders
from builder.policy.schema import (
    RULE_KINDS,
    ApprovalsModel,
    AttestationModel,
    DeviceCheckModel,
    FleetModel,
    FreezeModel,
    KeyModel,
    PolicyModel,
    ProvenanceModel,
    RetentionModel,
    RollbackModel,
    SignatureModel,
    SoakModel,
    StageModel,
    TicketModel,
)
from builder.policy.signers import Approver, KeyRef, KeySet
from builder.signing.keys import parse_public_key
from builder.suggest import did_you_mean
from builder.yamldoc import Document, FieldPath, InvalidYaml, Problem, errors, parse

if TYPE_CHECKING:
    from builder.error_documents import Severity

M = TypeVar("M", bound=BaseModel)
"""Where a value is in the document: mapping keys and list indexes (``("stages", "dev", "require")``)."""
RuleBuilder = Callable[[object, FieldPath, str], Rule | None]
"""Builds one kind of rule from its body, its path and its location (``file:line:col``)."""

_STAGE_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
_GLOB_CHARS = re.compile(r"[*?\[]")  # a key `file` with one of these is a glob (key sets only)


def _is_glob(file: str) -> bool:
    """Whether a key ``file`` is a glob (``*``, ``?``, ``[``; ``{variables}`` do not count)."""
    return _GLOB_CHARS.search(file.replace("{", "").replace("}", "")) is not None


def _unknown_rule(kind: str) -> str:
    """``unknown rule 'x'; did you mean 'y'? (known: ...)``."""
    return f"unknown rule {kind!r}{did_you_mean(kind, RULE_KINDS)} (known: {', '.join(RULE_KINDS)})"


class _Loader:
    """Builds a Policy from YAML, collecting every problem with its location."""

    def __init__(self, path: Path, variables: Mapping[str, str]) -> None:
        self.path = path
        self.variables = dict(variables)
        self.problems: list[Problem] = []
        self.doc = Document(str(path), None)
        self.keysets: dict[str, KeySet] = {}
        self.approvers: dict[str, Approver] = {}
        #: every key file, key glob and fleet file read (``builder.policy.cache`` keys on them)
        self.inputs = PolicyInputs()

    # locations -------------------------------------------------------------------------
    def where(self, path: Sequence[str | int]) -> tuple[int, int]:
        """(line, col) of ``path`` or of its closest parent in the file; (1, 1) for the document."""
        return self.doc.position(path, (1, 1))

    def loc(self, path: Sequence[str | int]) -> str:
        """``file:line:col`` of ``path`` (a rule's ``location``)."""
        line, col = self.where(path)
        return f"{self.path}:{line}:{col}"

    def problem(self, path: Sequence[str | int], message: str, severity: Severity = "error") -> None:
        self.problems.append(self.doc.problem(path, message, severity, default=(1, 1)))

    def model(self, cls: type[M], data: object, path: FieldPath) -> M | None:
        """``data`` validated as ``cls``; None (and a problem per error, at its place) when invalid."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            for err in exc.errors():
                loc = tuple("from" if p == "from_" else p for p in err["loc"])
                self.problem((*path, *loc), err["msg"])
            return None

    # keys ------------------------------------------------------------------------------
    def key(self, data: object, path: FieldPath) -> KeyRef | None:
        """A key (``file``, optionally pinned by ``fingerprint``) or a keyless identity; None (and a
        problem) when invalid; a key file that cannot be read is a warning and an unusable key."""
        m = self.model(KeyModel, data, path)
        if m is None:
            return None
        if m.issuer:
            return self.keyless_key(m, m.issuer, path)
        if not m.file:
            why = "a fingerprint alone cannot verify a signature" if m.fingerprint else "no key given"
            self.problem(
                path,
                f"{why}: give the public key `file` (and `fingerprint` to pin it), or `issuer` + `subject` for keyless",
            )
            return None
        return self.file_key(m.file, m.fingerprint, path)

    def keyless_key(self, m: KeyModel, issuer: str, path: FieldPath) -> KeyRef | None:
        """A keyless identity: ``issuer`` and a ``subject`` regular expression, nothing else."""
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
        return KeyRef(issuer=issuer, subject=m.subject)

    def file_key(self, name: str, fingerprint: str | None, path: FieldPath) -> KeyRef | None:
        """The public key file ``name`` (``{variables}`` expanded, relative to the policy file),
        checked against the pinned ``fingerprint`` when given."""
        try:
            text = name.format(**self.variables)
        except (KeyError, IndexError) as exc:
            self.problem((*path, "file"), f"unknown variable {exc} (known: {', '.join(sorted(self.variables))})")
            return None
        file = Path(text)
        if not file.is_absolute():
            file = self.path.parent / file
        try:
            pub = parse_public_key(self.inputs.read(file), file)
        except (OSError, SigningKeyError) as exc:
            if isinstance(exc, SigningKeyError):
                why = exc.message
            else:
                why = "file not found" if not file.exists() else f"public key {file} cannot be read: {exc.strerror}"
            self.problem((*path, "file"), f"{file}: {why}; rules that need this key will deny", "warning")
            return KeyRef(file=str(file), problem=f"{file}: {why}")
        if fingerprint and fingerprint != pub.fingerprint:
            self.problem(
                (*path, "fingerprint"),
                f"{file} has fingerprint {pub.fingerprint}, not the pinned {fingerprint}: wrong or replaced key file",
            )
            return None
        return KeyRef(fingerprint=pub.fingerprint, file=str(file))

    def key_entries(self, data: object, path: FieldPath) -> list[KeyRef | None]:
        """One key-set entry: a key (``key``), or a ``file`` glob (``*``, ``?``, ``[...]``) naming
        every public key file it matches, sorted (e.g. ``{root}/keys/check-runners/*.pub``). A glob
        matching nothing is a warning and an unusable entry: rules needing the set deny."""
        file = data.get("file") if isinstance(data, Mapping) else None
        if not isinstance(data, Mapping) or not isinstance(file, str) or not _is_glob(file):
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
        matches = self.inputs.expand(pattern)
        if not matches:
            self.problem(
                (*path, "file"),
                f"no file matches {shown}: this entry adds no key (rules deny while their key sets have no usable key)",
                "warning",
            )
            return [KeyRef(file=shown, problem=f"no public key file matches {shown}")]
        literal = {k: v for k, v in data.items() if k != "file"}
        return [self.key({**literal, "file": m.replace("{", "{{").replace("}", "}}")}, path) for m in matches]

    def keysets_of(self, names: Sequence[str], path: FieldPath) -> tuple[KeySet, ...]:
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
    def rule(self, data: object, path: FieldPath) -> Rule | None:
        """The rule in ``data``: a mapping with one key (the rule's kind), or a bare list meaning
        ``all_of``; None (and problems at their places) when it cannot be built."""
        if isinstance(data, list):  # a bare list means all_of
            return self.group(AllOf, data, path, self.loc(path))
        if not isinstance(data, dict) or len(data) != 1:
            self.rule_shape(data, path)
            return None
        ((kind, body),) = data.items()
        p = (*path, kind)
        build = self.rule_builders.get(kind)
        if build is None:
            self.problem(p, _unknown_rule(str(kind)))
            return None
        return build(body, p, self.loc(p))

    def rule_shape(self, data: object, path: FieldPath) -> None:
        """Problems of a rule that is not a mapping with exactly one key."""
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
                    self.problem((*path, k), _unknown_rule(str(k)))
            return
        self.problem(path, f"a rule is a mapping with exactly one key, one of: {', '.join(RULE_KINDS)}")

    @functools.cached_property
    def rule_builders(self) -> dict[str, RuleBuilder]:
        """Rule kind (``RULE_KINDS``) -> the method building it from its body, path and location."""
        return {
            "all_of": lambda body, p, location: self.group(AllOf, body, p, location),
            "any_of": lambda body, p, location: self.group(AnyOf, body, p, location),
            "unconditional": self.unconditional,
            "signature": self.signature,
            "attestation": self.attestation,
            "provenance": self.provenance,
            "device_check": self.device_check,
            "approvals": self.approvals,
            "change_ticket": self.change_ticket,
            "freeze": self.freeze,
            "soak": self.soak,
            "fleet": self.fleet,
            **evidence_rule_builders(self.model, self.keysets_of),
            **vulnerability_rule_builders(self.model, self.keysets_of, self.problem),
        }

    def unconditional(self, body: object, p: FieldPath, location: str) -> Rule | None:
        if not isinstance(body, str) or not body.strip():
            self.problem(p, "`unconditional` takes the reason as text (why every digest may enter)")
            return None
        return Unconditional(location, why=body)

    def signature(self, body: object, p: FieldPath, location: str) -> Rule | None:
        m = self.model(SignatureModel, body, p)
        return None if m is None else SignatureRule(location, self.keysets_of(m.signers, (*p, "signers")), m.count)

    def attestation(self, body: object, p: FieldPath, location: str) -> Rule | None:
        m = self.model(AttestationModel, body, p)
        if m is None:
            return None
        return AttestationRule(
            location, m.type, self.keysets_of(m.signers, (*p, "signers")), tuple(sorted(m.where.items()))
        )

    def provenance(self, body: object, p: FieldPath, location: str) -> Rule | None:
        m = self.model(ProvenanceModel, body, p)
        if m is None:
            return None
        return ProvenanceRule(location, self.keysets_of(m.signers, (*p, "signers")), m.source, m.builder_id)

    def device_check(self, body: object, p: FieldPath, location: str) -> Rule | None:
        m = self.model(DeviceCheckModel, body, p)
        if m is None:
            return None
        return DeviceCheckRule(
            location,
            self.keysets_of(m.signers, (*p, "signers")),
            tuple(m.vendors),
            tuple(m.gpu_models),
            tuple(m.driver_branches),
            tuple(m.clusters),
        )

    def approvals(self, body: object, p: FieldPath, location: str) -> Rule | None:
        m = self.model(ApprovalsModel, body, p)
        if m is None:
            return None
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

    def change_ticket(self, body: object, p: FieldPath, location: str) -> Rule | None:
        m = self.model(TicketModel, body, p)
        if m is None:
            return None
        try:
            re.compile(m.pattern)
        except re.error as exc:
            self.problem((*p, "pattern"), f"not a regular expression: {exc}")
            return None
        return ChangeTicketRule(location, m.pattern)

    def soak(self, body: object, p: FieldPath, location: str) -> Rule | None:
        m = self.model(SoakModel, body, p)
        if m is None:
            return None
        try:
            minimum = parse_duration(m.min)
        except ValueError as exc:
            self.problem((*p, "min"), str(exc))
            return None
        return SoakRule(location, minimum, self.keysets_of(m.signers, (*p, "signers")))

    def fleet(self, body: object, p: FieldPath, location: str) -> Rule | None:
        m = self.model(FleetModel, body, p)
        if m is None:
            return None
        text = m.file.format(**self.variables) if "{" in m.file else m.file
        fleet = Path(text)
        if not fleet.is_absolute():
            fleet = (self.path.parent / fleet).resolve()
        data: bytes | None = None
        try:
            data = self.inputs.read(fleet)  # recorded, and the very bytes validated: a later change is a change
        except OSError:
            if not fleet.exists():
                self.problem((*p, "file"), f"fleet file {fleet} does not exist")
                return FleetRule(location, str(fleet), tuple(m.clusters), tuple(m.allow), m.match_vendor)
        self.fleet_problems(fleet, (*p, "file"), data)
        return FleetRule(location, str(fleet), tuple(m.clusters), tuple(m.allow), m.match_vendor)

    def fleet_problems(self, fleet: Path, p: FieldPath, data: bytes | None = None) -> None:
        """An invalid fleet file is a problem of the rule naming it (at ``p``), quoting the fleet's
        own problems with their locations; ``data``: the bytes recorded for it (validated as they
        are; None: read here). Promotion reads the file without host loader
        (``builder.promote.fleets.check_fleet``), so ``hostinfo:`` clusters are problems here too."""
        from builder.compat.fleets import load_fleet  # fleet files (pydantic models): only for a fleet rule

        try:
            load_fleet(fleet, data=data)
        except ConfigError as exc:
            found = exc.details.get("problems")
            where = (
                [f"{q['file']}:{q['line']}: {q['message']}" for q in found if isinstance(q, dict)]
                if isinstance(found, list)
                else []
            )
            self.problem(p, f"fleet file {fleet} is invalid: " + ("; ".join(where) or exc.message))

    def group(self, cls: type[AllOf] | type[AnyOf], body: object, path: FieldPath, location: str) -> Rule | None:
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

    def freeze(self, body: object, p: FieldPath, location: str) -> Rule | None:
        m = self.model(FreezeModel, body, p)
        if m is None:
            return None
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
                        + did_you_mean(d.lower(), (*WEEKDAYS, *WEEKDAY_NAMES)),
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
        """The policy in ``text``, or None when it cannot be built; problems go to ``self.problems``."""
        try:
            self.doc = parse(text, str(self.path))
        except InvalidYaml as exc:
            self.problems.append(exc.problem)
            return None
        data = self.doc.plain()
        if not isinstance(data, dict):
            self.problem((), "a policy is a mapping with `stages:`")
            return None
        top = self.model(PolicyModel, data, ())
        if top is None:
            return None
        self.signers(top)
        promoters = self.keysets_of(top.promoters, ("promoters",))
        stages = [s for name, body in top.stages.items() if (s := self.stage(name, body)) is not None]
        self.chains(top, stages)
        if len(stages) != len(top.stages):
            return None
        if not top.promoters:
            self.problem(
                ("promoters",),
                "no `promoters:`: promotion records cannot be trusted for history, rollback and resolve",
                "warning",
            )
        retention = self.retention(top.retention)
        if retention is None:
            return None
        return Policy(
            self.path,
            tuple(stages),
            tuple(self.keysets.values()),
            tuple(self.approvers.values()),
            promoters,
            retention,
        )

    def retention(self, body: object) -> Retention | None:
        """``retention:`` (defaults when absent); None (with the problems recorded) when invalid."""
        if body is None:
            return Retention()
        m = self.model(RetentionModel, body, ("retention",))
        if m is None:
            return None
        default = Retention()
        ages = {"content_tags": default.content_tags, "pending_tags": default.pending_tags}
        ok = True
        for name, value in (("content_tags", m.content_tags), ("pending_tags", m.pending_tags)):
            if value is None:
                continue
            try:
                ages[name] = parse_duration(value)
            except ValueError as exc:
                self.problem(("retention", name), str(exc))
                ok = False
        return Retention(ages["content_tags"], ages["pending_tags"]) if ok else None

    def signers(self, top: PolicyModel) -> None:
        """Key sets (``keys:``) and approvers (``approvers:``), into ``self.keysets``/``self.approvers``."""
        for name, entries in top.keys.items():
            refs = [r for i, e in enumerate(entries) for r in self.key_entries(e, ("keys", name, i))]
            if not entries:
                self.problem(("keys", name), "an empty key set trusts nobody; list at least one key")
            self.keysets[name] = KeySet(name, tuple(r for r in refs if r is not None))
        for name, entry in top.approvers.items():
            file = entry.get("file") if isinstance(entry, Mapping) else None
            if isinstance(file, str) and _is_glob(file):
                self.problem(("approvers", name, "file"), "an approver is one key: name its file, not a glob")
                continue
            ref = self.key(entry, ("approvers", name))
            if ref is not None:
                self.approvers[name] = Approver(name, ref)

    def stage(self, name: str, body: object) -> Stage | None:
        """One entry of ``stages:``; None when it cannot be built."""
        sp = ("stages", name)
        if not _STAGE_NAME.match(name) or name == BUILD_STAGE:
            self.problem(sp, f"stage name {name!r}: lower-case letters, digits, '-' (and not `build`)")
        sm = self.model(StageModel, body, sp)
        if sm is None:
            return None
        if sm.require is None:
            self.problem(sp, "missing `require:` (use `unconditional: <why>` to let every digest in)")
            return None
        rule = self.rule(sm.require, (*sp, "require"))
        rollback = None
        if sm.rollback is not None:
            rm = self.model(RollbackModel, sm.rollback, (*sp, "rollback"))
            if rm is not None:
                appr = tuple(self.approvers[n] for n in rm.allowed if n in self.approvers)
                sets = self.keysets_of([n for n in rm.allowed if n not in self.approvers], (*sp, "rollback", "allowed"))
                rollback = RollbackRule(appr, sets, self.loc((*sp, "rollback")))
        else:
            self.problem(sp, "no `rollback:` rule: nobody may roll this stage back", "warning")
        if "{repository}" not in sm.repository and "/" not in sm.repository:
            self.problem((*sp, "repository"), "a repository path like `prod/{repository}` or `ml/pytorch`")
        elif (why := repository_problem(sm.repository.replace("{repository}", "repo"))) is not None:
            self.problem((*sp, "repository"), f"not a repository path ({why}): e.g. `prod/{{repository}}`")
        if sm.registry is not None and (why := registry_problem(sm.registry)) is not None:
            self.problem((*sp, "registry"), f"not a registry: {why}; e.g. `registry.example.com:5000`")
        if rule is None:
            return None
        return Stage(name, sm.from_, sm.repository, sm.registry, rule, rollback, self.loc(sp))

    def chains(self, top: PolicyModel, stages: Sequence[Stage]) -> None:
        """``from:`` chains: unknown or own stage, soak on a stage that takes builds, cycles."""
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
        for n, src in sources.items():
            seen = {n}
            cur = src
            while cur in sources and cur != n:
                if cur in seen:
                    break
                seen.add(cur)
                cur = sources[cur]
            if cur == n and src != n:
                self.problem(("stages", n, "from"), "stages take images from each other in a cycle")


def check_policy(path: Path, variables: Mapping[str, str] | None = None) -> tuple[Policy | None, list[Problem]]:
    """Load ``path`` and return (policy or None, every problem found, with locations, warnings included).

    ``variables``: values for ``{name}`` in key and fleet file paths (the CLI passes
    ``state_dir`` and ``root``). Never raises for problems in the file; NotFoundError if absent,
    PolicyError when it cannot be read (``read_policy_text``)."""
    loader = _Loader(path, variables or {})
    policy = loader.load(read_policy_text(path))
    return (policy if not errors(loader.problems) else None), loader.problems


def load_policy(path: Path, variables: Mapping[str, str] | None = None) -> Policy:
    """Load and validate a policy; raises PolicyError listing every problem with its location
    (``details['problems']``: ``Problem.to_json()`` of each, warnings included), NotFoundError
    when the file does not exist.

    Warnings (e.g. a key file missing on this machine) do not raise: rules needing it deny."""
    return load_policy_text(path, read_policy_text(path), variables)[0]


def load_policy_text(
    path: Path, text: str, variables: Mapping[str, str] | None = None
) -> tuple[Policy, PolicyInputs]:
    """:func:`load_policy` of ``text`` (the content of ``path``, already read), with every key
    file, key glob and fleet file it read (:class:`~builder.policy.inputs.PolicyInputs`, for
    ``builder.policy.cache``). Raises PolicyError as :func:`load_policy` does."""
    loader = _Loader(path, variables or {})
    policy = loader.load(text)
    failing = errors(loader.problems)
    if policy is None or failing:
        raise PolicyError(
            f"{path}: {len(failing)} problem(s):\n" + "\n".join(f"  {p}" for p in failing),
            problems=[p.to_json() for p in loader.problems],
        )
    return policy, loader.inputs
