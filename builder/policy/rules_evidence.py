"""Policy rules about signed evidence on the digest: ``attestation``, ``provenance``,
``device_check`` and ``fleet`` (``signature``, the rule most stages have, is
``builder.policy.rules_signature``'s).

Predicate shapes: SLSA provenance v1 (https://slsa.dev/spec/v1.0/provenance), ``device-check/v1``
(``docs/checks.md``, ``docs/evidence.md``). Fleet verdicts come in as ``FleetEvidence`` computed
outside the policy: GPU and driver knowledge stays with ``builder.compat``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.compat.branches import driver_branch
from builder.policy.rules import Notes, Rule, evidence_problems, signed_by
from builder.policy.signers import KeySet, key_problems, sets_names
from builder.predicates import DEVICE_CHECK_V1, SLSA_PROVENANCE_V1

if TYPE_CHECKING:
    from builder.policy.evidence import Context
    from builder.policy.results import RuleResult


def _get_path(obj: object, path: str) -> list[object]:
    """Values at dotted ``path`` in a JSON value; lists fan out (any element may match)."""
    values = [obj]
    for part in path.split("."):
        nxt: list[object] = []
        for v in values:
            items = v if isinstance(v, list) else [v]
            for item in items:
                if isinstance(item, Mapping) and part in item:
                    nxt.append(item[part])
        values = nxt
    flat: list[object] = []
    for v in values:
        flat.extend(v if isinstance(v, list) else [v])
    return flat


def _value_matches(actual: object, expected: object) -> bool:
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
        summary = f"{self.predicate_type} by {sets_names(self.signers)}"
        notes = Notes(self.signers, "attestation")
        unlisted = "attestation by {who} is not from a listed signer"
        for a, who in signed_by(ctx, self.predicate_type, self.signers, "attestation", unlisted, notes):
            misses = [
                p for p, want in self.where if not any(_value_matches(v, want) for v in _get_path(a.predicate, p))
            ]
            if misses:
                notes.add(f"attestation by {who}: {', '.join(f'{p} != {dict(self.where)[p]!r}' for p in misses)}")
                continue
            return self.result(True, f"verified attestation by {who}", summary, notes=notes)
        found = notes.text() if notes else f"no {self.predicate_type} attestation on the digest"
        return self.result(False, found + key_problems(self.signers) + evidence_problems(ctx), summary, notes=notes)


@dataclasses.dataclass(frozen=True)
class ProvenanceRule(Rule):
    """A verified SLSA provenance v1 attestation by ``signers`` whose source dependency
    (``buildDefinition.resolvedDependencies[]`` entry named ``source``, URI
    ``<repository>@<commit>``, as ``builder build`` writes it) matches the ``source`` glob, and
    whose ``runDetails.builder.id`` is ``builder_id`` when given.
    The branch is bound through the signer: a keyless GitHub workflow identity ends in
    ``@refs/heads/<branch>``."""

    signers: tuple[KeySet, ...] = ()
    source: str | None = None
    builder_id: str | None = None
    kind: str = dataclasses.field(default="provenance", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        summary = f"by {sets_names(self.signers)}" + (f" from {self.source}" if self.source else "")
        notes = Notes(self.signers, "provenance attestation")
        unlisted = "provenance signed by {who}, not a listed signer"
        for a, who in signed_by(ctx, SLSA_PROVENANCE_V1, self.signers, "provenance", unlisted, notes):
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
        return self.result(False, found + key_problems(self.signers) + evidence_problems(ctx), summary, notes=notes)


@dataclasses.dataclass(frozen=True)
class DeviceCheckFacts:
    """What a ``device-check/v1`` predicate says: ``passed``, the host ``vendor`` (``nvidia`` |
    ``amd`` | ``none`` | ``unknown``), its ``driver_version`` (empty when unknown), ``gpus``
    (GPU names) and the fleet ``cluster`` it ran on (``placement.cluster``; empty: none named)."""

    passed: bool
    vendor: str
    driver_version: str
    gpus: tuple[str, ...]
    cluster: str = ""


def device_check_facts(predicate: Mapping[str, Any]) -> DeviceCheckFacts:
    """The facts of a ``device-check/v1`` predicate (``docs/checks.md``).

    Shape: ``result`` (``"passed"``/``"failed"``, or a boolean ``passed``), ``host.vendor``
    (``nvidia``/``amd``/``none``), ``host.driver_version``, ``host.gpus[].name``,
    ``placement.cluster``. Anything missing reads as failed/unknown (fail closed)."""
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
    placement = predicate.get("placement")
    cluster = placement.get("cluster") if isinstance(placement, Mapping) else None
    return DeviceCheckFacts(passed, vendor, driver, tuple(names), cluster if isinstance(cluster, str) else "")


@dataclasses.dataclass(frozen=True)
class _PassedCheck:
    vendor: str
    driver: str
    gpus: tuple[str, ...]
    who: str
    cluster: str = ""


@dataclasses.dataclass(frozen=True)
class DeviceCheckRule(Rule):
    """Passing ``device-check/v1`` attestations signed by ``signers`` (check runners, never the
    build key unless listed). ``vendors``: host vendor of at least one passing check; ``gpu_models``:
    each pattern (glob, case-insensitive) needs a passing check on a host with such a GPU;
    ``driver_branches``: those checks' driver branch must be listed; ``clusters``: each fleet cluster
    needs a passing check that ran there (``placement.cluster`` of the signed predicate, written by
    ``builder check --cluster`` / ``--fleet``)."""

    signers: tuple[KeySet, ...] = ()
    vendors: tuple[str, ...] = ()
    gpu_models: tuple[str, ...] = ()
    driver_branches: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    kind: str = dataclasses.field(default="device_check", init=False)

    def _summary(self) -> str:
        parts = []
        if self.vendors:
            parts.append("on " + "/".join(self.vendors))
        if self.gpu_models:
            parts.append("GPUs " + ", ".join(self.gpu_models))
        if self.driver_branches:
            parts.append("driver branch " + "/".join(self.driver_branches))
        if self.clusters:
            parts.append("on clusters " + ", ".join(self.clusters))
        return " ".join([*parts, f"by {sets_names(self.signers)}"])

    def evaluate(self, ctx: Context) -> RuleResult:
        summary = self._summary()
        notes = Notes(self.signers, "device check")
        good: list[_PassedCheck] = []
        unlisted = "device check signed by {who}, which is not a listed check runner"
        for a, who in signed_by(ctx, DEVICE_CHECK_V1, self.signers, "device check", unlisted, notes):
            facts = device_check_facts(a.predicate)
            if not facts.passed:
                notes.add(f"device check by {who} on {facts.vendor} did not pass")
                continue
            if self.vendors and facts.vendor not in self.vendors:
                notes.add(f"device check by {who} ran on vendor {facts.vendor}, not {'/'.join(self.vendors)}")
                continue
            good.append(_PassedCheck(facts.vendor, facts.driver_version, facts.gpus, who, facts.cluster))
        if not good:
            found = notes.text() if notes else "no device-check attestation on the digest"
            return self.result(False, found + key_problems(self.signers) + evidence_problems(ctx), summary, notes=notes)
        missing = self._missing(good)
        if missing:
            return self.result(False, "; ".join(list(dict.fromkeys(missing)) + notes.lines()), summary, notes=notes)
        hosts = "; ".join(
            dict.fromkeys(
                f"{g.vendor} {', '.join(g.gpus) or 'no GPU'} driver {g.driver or '-'}"
                + (f" on cluster {g.cluster}" if g.cluster else "")
                + f" by {g.who}"
                for g in good
            )
        )
        return self.result(True, f"passing device check(s): {hosts}", summary, notes=notes)

    def _missing(self, good: list[_PassedCheck]) -> list[str]:
        """What the passing checks ``good`` leave unmet: GPU patterns without a check, driver branches,
        clusters without a check that ran there."""
        missing: list[str] = []
        ran_on = sorted({g.cluster or "no cluster named" for g in good})
        for name in self.clusters:
            if not any(g.cluster == name for g in good):
                missing.append(f"no passing check from cluster {name!r} (passing checks ran on: {', '.join(ran_on)})")
        for pattern in self.gpu_models:
            hits = [g for g in good if any(fnmatch.fnmatch(n.lower(), pattern.lower()) for n in g.gpus)]
            if not hits:
                seen = sorted({n for g in good for n in g.gpus}) or ["no GPU"]
                missing.append(f"no passing check on a GPU matching {pattern!r} (checked: {', '.join(seen)})")
                continue
            if self.driver_branches and not any(driver_branch(g.driver) in self.driver_branches for g in hits):
                drivers = ", ".join(sorted({g.driver or "unknown" for g in hits}))
                missing.append(f"{pattern}: driver {drivers} not on branch {'/'.join(self.driver_branches)}")
        if (
            not self.gpu_models
            and self.driver_branches
            and not any(driver_branch(g.driver) in self.driver_branches for g in good)
        ):
            missing.append(f"no passing check on driver branch {'/'.join(self.driver_branches)}")
        return missing


@dataclasses.dataclass(frozen=True)
class FleetRule(Rule):
    """The digest can run on every named cluster of a fleet file; when none are named, on every
    cluster of the image's vendor (``match_vendor``; CUDA images are not expected to run on AMD
    clusters) or on every cluster (``match_vendor: false``). ``fleet``: the fleet file (resolved
    path); ``allow``: the verdicts that count as runnable. Reads ``Evidence.fleet`` only."""

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
                False, f"no compatibility verdicts for fleet {self.fleet}" + evidence_problems(ctx), summary
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


__all__ = [
    "AttestationRule",
    "DeviceCheckFacts",
    "DeviceCheckRule",
    "FleetRule",
    "ProvenanceRule",
    "device_check_facts",
    "driver_branch",  # defined once in builder.compat.drivers; builder.policy exports it from here
]
