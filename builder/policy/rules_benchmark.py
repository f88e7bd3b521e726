"""Policy rules on the evidence of the declared checks (docs/policies.md): ``tests`` (a passing
``test-result/v1``), ``benchmark`` (a regression gate on one metric of ``benchmark/v1`` against the
digest the target stage holds, on the same hardware class, or against a fixed value) and
``collective`` (the all-reduce bus bandwidth recorded in ``benchmark/v1`` against the link bandwidth
of the recorded topology).

Predicate shapes: docs/evidence.md (written by ``builder.checks.evidence``). The stage's incumbent
and its attestations come in as ``Evidence.baseline_digest`` / ``Evidence.baseline`` (read by
``builder.promote``); nothing here reads a registry. Every rule fails closed: no comparable
evidence is a denial that says what is missing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from builder.policy.rules import Notes, Rule, evidence_problems, signed_by
from builder.policy.signers import KeySet, key_problems, sets_match, sets_names
from builder.predicates import BENCHMARK_V1, HARDWARE_KEYS, TEST_RESULT_V1, HardwareKey

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from builder.policy.evidence import AttestationEvidence, Context
    from builder.policy.results import RuleResult
    from builder.yamldoc import FieldPath

#: the key set ``tests: passed`` (the short form) requires: the shipped policies' check runners
CHECK_RUNNERS = "check-runners"
#: the hardware-class keys a ``benchmark`` rule without ``same`` compares (every key but ``vendor``)
DEFAULT_SAME: tuple[HardwareKey, ...] = ("gpu_model", "gpu_count", "driver_branch", "cpu_model")


@dataclasses.dataclass(frozen=True)
class TestsRule(Rule):
    """A verified ``test-result/v1`` by ``signers`` about the digest whose ``result`` is ``passed``."""

    __test__ = False  # not a pytest class
    signers: tuple[KeySet, ...] = ()
    kind: str = dataclasses.field(default="tests", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        summary = f"passed, by {sets_names(self.signers)}"
        notes = Notes(self.signers, "test result")
        unlisted = "test result by {who} is not from a listed signer"
        for a, who in signed_by(ctx, TEST_RESULT_V1, self.signers, "test result", unlisted, notes):
            totals = a.predicate.get("summary")
            counts = ""
            if isinstance(totals, Mapping):
                counts = f" ({totals.get('tests')} tests, {totals.get('failures')} failed)"
            if a.predicate.get("result") == "passed":
                return self.result(True, f"tests passed{counts}, signed by {who}", summary, notes=notes)
            notes.add(f"tests by {who} failed{counts}", a.signer, a.identity)
        found = notes.text() if notes else "no test-result/v1 attestation on the digest (run `builder check`)"
        return self.result(False, found + key_problems(self.signers) + evidence_problems(ctx), summary, notes=notes)


def hardware_of(predicate: Mapping[str, Any]) -> dict[str, Any]:
    """The ``hardware`` of a ``benchmark/v1`` predicate (missing keys: None)."""
    hw = predicate.get("hardware")
    hw = hw if isinstance(hw, Mapping) else {}
    return {k: hw.get(k) for k in HARDWARE_KEYS}


def metric_of(predicate: Mapping[str, Any], name: str) -> tuple[float, str, bool] | None:
    """``(value, unit, higher_is_better)`` of metric ``name`` in a ``benchmark/v1`` predicate, or None."""
    for m in predicate.get("metrics") or []:
        if isinstance(m, Mapping) and m.get("name") == name:
            v, unit, hib = m.get("value"), m.get("unit"), m.get("higher_is_better")
            if isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(hib, bool):
                return float(v), str(unit or ""), hib
    return None


def class_text(hw: Mapping[str, Any], same: tuple[str, ...]) -> str:
    """The hardware class as people read it: ``gpu_model=NVIDIA H100 80GB HBM3, driver_branch=580``
    (``none`` for a missing value: a CPU-only host has no GPU model)."""
    return ", ".join(f"{k}={hw.get(k) if hw.get(k) not in (None, '') else 'none'}" for k in same)


def _latest(items: list[AttestationEvidence]) -> AttestationEvidence:
    """The most recent run (``run.finished_at``, ISO 8601 UTC sorts as text)."""

    def when(a: AttestationEvidence) -> str:
        run = a.predicate.get("run")
        return str(run.get("finished_at") or "") if isinstance(run, Mapping) else ""

    return max(items, key=when)


def _short(digest: str | None) -> str:
    return (digest or "?")[:19]


@dataclasses.dataclass(frozen=True)
class BenchmarkRule(Rule):
    """Metric ``metric`` of the digest's newest passing ``benchmark/v1`` (by ``signers``) may be at most
    ``max_regression`` (a fraction: 0.05 = 5 %) worse than the baseline: ``against="stage"``, the same
    metric attested for the digest the target stage holds, on the same hardware class (the ``same``
    keys of ``hardware`` equal); or ``against`` a number. Worse means lower when the metric is
    higher-is-better, higher otherwise. Fails closed when the stage holds nothing comparable, unless
    ``allow_first`` (the first digest of a stage, or of a hardware class)."""

    signers: tuple[KeySet, ...] = ()
    metric: str = ""
    max_regression: float = 0.05
    against: str | float = "stage"
    same: tuple[HardwareKey, ...] = DEFAULT_SAME
    allow_first: bool = False
    kind: str = dataclasses.field(default="benchmark", init=False)

    def _ours(self, items: tuple[AttestationEvidence, ...], digest: str) -> list[AttestationEvidence]:
        return [
            a
            for a in items
            if a.predicate_type == BENCHMARK_V1
            and a.verified
            and digest in a.subject_digests
            and sets_match(self.signers, a.signer, a.identity)
            and a.predicate.get("result") == "passed"
            and metric_of(a.predicate, self.metric) is not None
        ]

    def evaluate(self, ctx: Context) -> RuleResult:
        pct = f"{self.max_regression * 100:g}%"
        base_name = "the stage" if self.against == "stage" else f"{self.against:g}"
        summary = f"{self.metric} within {pct} of {base_name}"
        notes = Notes(self.signers, "benchmark")
        unlisted = "benchmark by {who} is not from a listed signer"
        for _a, _who in signed_by(ctx, BENCHMARK_V1, self.signers, "benchmark", unlisted, notes):
            pass  # only the notes: why other benchmarks did not count
        mine = self._ours(ctx.evidence.attestations, ctx.evidence.digest)
        if not mine:
            found = f"no passing benchmark/v1 with metric {self.metric!r} by {sets_names(self.signers)} on the digest"
            found += (": " + notes.text()) if notes else " (run `builder check`)"
            return self.result(False, found + key_problems(self.signers) + evidence_problems(ctx), summary, notes=notes)
        cand = _latest(mine)
        value, unit, hib = metric_of(cand.predicate, self.metric)  # type: ignore[misc]
        hw = hardware_of(cand.predicate)
        klass = class_text(hw, self.same)
        if self.against != "stage":
            return self._judge(value, unit, hib, float(self.against), "the policy's value", klass, summary, notes)
        held = ctx.evidence.baseline_digest
        if held is None or held == ctx.evidence.digest:
            if held == ctx.evidence.digest:
                return self.result(True, f"{ctx.stage} already holds this digest", summary, notes=notes)
            if self.allow_first:
                return self.result(
                    True, f"{ctx.stage} holds no digest yet (allow_first): {self.metric} {value:g} {unit}", summary
                )
            return self.result(
                False,
                f"{ctx.stage} holds no digest to compare {self.metric} {value:g} {unit} with, on hardware class "
                f"{klass} (set allow_first: true for a stage's first digest)",
                summary,
                notes=notes,
            )
        base = [
            a
            for a in self._ours(ctx.evidence.baseline, held)
            if all(hardware_of(a.predicate).get(k) == hw.get(k) for k in self.same)
        ]
        if not base:
            if self.allow_first:
                return self.result(
                    True,
                    f"no benchmark of {ctx.stage}'s {_short(held)} on hardware class {klass} (allow_first): "
                    f"{self.metric} {value:g} {unit}",
                    summary,
                )
            return self.result(
                False,
                f"no benchmark/v1 of {ctx.stage}'s {_short(held)} with {self.metric} on hardware class {klass} by "
                f"{sets_names(self.signers)} to compare {value:g} {unit} with (run `builder check` on that digest "
                "on this hardware, or set allow_first: true)",
                summary,
                notes=notes,
            )
        b_value, _, _ = metric_of(_latest(base).predicate, self.metric)  # type: ignore[misc]
        return self._judge(value, unit, hib, b_value, f"{ctx.stage}'s {_short(held)}", klass, summary, notes)

    def _judge(
        self, value: float, unit: str, hib: bool, base: float, what: str, klass: str, summary: str, notes: Notes
    ) -> RuleResult:
        if base == 0:
            return self.result(False, f"{what} has {self.metric} 0 {unit}: no ratio to judge", summary, notes=notes)
        worse = (base - value) / base if hib else (value - base) / base
        direction = ("slower" if hib else "higher") if worse > 0 else ("faster" if hib else "lower")
        text = (
            f"{self.metric} {value:g} {unit} vs {base:g} {unit} of {what}: {abs(worse) * 100:.1f}% {direction} "
            f"(max regression {self.max_regression * 100:g}%) on hardware class {klass}"
        )
        return self.result(worse <= self.max_regression, text, summary, notes=notes)


@dataclasses.dataclass(frozen=True)
class CollectiveRule(Rule):
    """The digest's newest passing ``benchmark/v1`` (by ``signers``) records a collective measurement
    (``collective.busbw_gbps`` against ``collective.expected_gbps``, the link bandwidth of the recorded
    topology) whose ratio is at least ``min_busbw_ratio``. Fails closed without one. A digest whose newest
    benchmark ran on fewer than 2 GPUs has no GPU-GPU link to measure: the reason says the check needs
    >= 2 GPUs; ``single_gpu="not-applicable"`` (policy ``single_gpu: not-applicable``) passes it as not
    applicable instead (the default, ``fail``, keeps it closed)."""

    signers: tuple[KeySet, ...] = ()
    min_busbw_ratio: float = 0.8
    single_gpu: str = "fail"
    kind: str = dataclasses.field(default="collective", init=False)

    def evaluate(self, ctx: Context) -> RuleResult:
        summary = f"busbw >= {self.min_busbw_ratio:g} x link bandwidth"
        if self.single_gpu == "not-applicable":
            summary += " (single GPU: not applicable)"
        notes = Notes(self.signers, "benchmark")
        unlisted = "benchmark by {who} is not from a listed signer"
        found = list(signed_by(ctx, BENCHMARK_V1, self.signers, "benchmark", unlisted, notes))
        measured = [(a, w) for a, w in found if isinstance(a.predicate.get("collective"), Mapping)]
        # a measurement on >= 2 GPUs counts even when a later benchmark ran on one GPU (or on the CPU)
        multi = [(a, w) for a, w in measured if _gpu_count(a.predicate) >= 2]
        if not multi:
            return self._unmeasured(ctx, [a for a, _ in found], summary, notes)
        a = _latest([x for x, _ in multi])
        who = next(w for x, w in multi if x is a)
        c = a.predicate["collective"]
        busbw, expected = c.get("busbw_gbps"), c.get("expected_gbps")
        klass = class_text(hardware_of(a.predicate), DEFAULT_SAME)
        if c.get("passed") is False:
            why = "; ".join(str(p) for p in c.get("problems") or []) or "the collective check failed"
            return self.result(False, f"collective check by {who} failed: {why} (hardware class {klass})", summary)
        if not isinstance(busbw, (int, float)) or not isinstance(expected, (int, float)) or expected <= 0:
            link = c.get("link") or "no link bandwidth"
            return self.result(
                False,
                f"all-reduce busbw {busbw} GB/s by {who}: nothing to compare with ({link}), hardware class {klass}",
                summary,
            )
        ratio = busbw / expected
        text = (
            f"all-reduce busbw {busbw:g} GB/s vs expected {expected:g} GB/s ({c.get('link') or 'link'}): ratio "
            f"{ratio:.2f} (min {self.min_busbw_ratio:g}) on hardware class {klass}"
        )
        return self.result(ratio >= self.min_busbw_ratio, text, summary, notes=notes)

    def _unmeasured(self, ctx: Context, found: list[AttestationEvidence], summary: str, notes: Notes) -> RuleResult:
        """No collective measurement on >= 2 GPUs: not applicable (policy says so) or closed, saying why."""
        newest = _latest(found) if found else None
        if newest is not None and _gpu_count(newest.predicate) < 2:
            klass = class_text(hardware_of(newest.predicate), DEFAULT_SAME)
            why = (
                f"the collective check needs >= 2 GPUs: the digest's newest benchmark ran on "
                f"{_gpu_count(newest.predicate)} GPU(s) of hardware class {klass}"
            )
            if self.single_gpu == "not-applicable":
                return self.result(True, f"not applicable: {why} (single_gpu: not-applicable)", summary, notes=notes)
            hint = "; check on a host with >= 2 GPUs, or set `single_gpu: not-applicable` on this rule"
            return self.result(False, why + hint, summary, notes=notes)
        why = "no benchmark/v1 with a collective measurement on >= 2 GPUs on the digest"
        if newest is not None:
            hw = hardware_of(newest.predicate)
            why += f" (the newest ran on {hw.get('gpu_count')} GPU(s) of hardware class {class_text(hw, DEFAULT_SAME)})"
        return self.result(False, why + key_problems(self.signers) + evidence_problems(ctx), summary, notes=notes)


def _gpu_count(predicate: Mapping[str, Any]) -> int:
    """The GPUs a ``benchmark/v1`` ran on (``hardware.gpu_count``; 0 when missing: a CPU-only run)."""
    n = hardware_of(predicate).get("gpu_count")
    return n if isinstance(n, int) and not isinstance(n, bool) else 0


def evidence_rule_builders(
    model: Callable[[type[Any], object, FieldPath], Any],
    keysets: Callable[[Sequence[str], FieldPath], tuple[KeySet, ...]],
) -> dict[str, Callable[[object, FieldPath, str], Rule | None]]:
    """The loader's builders of ``tests`` (``{signers: [...]}``, or ``passed``: by ``check-runners``),
    ``benchmark`` and ``collective`` from their YAML bodies:
    ``model(cls, body, path)`` validates (None and a located problem when invalid), ``keysets(names,
    path)`` resolves signer names."""
    from builder.policy.schema import BenchmarkModel, CollectiveModel, TestsModel

    def tests(body: object, p: FieldPath, location: str) -> Rule | None:
        if body == "passed":  # the short form: by the policy's `check-runners` key set
            return TestsRule(location, keysets([CHECK_RUNNERS], p))
        m = model(TestsModel, body, p)
        return None if m is None else TestsRule(location, keysets(m.signers, (*p, "signers")))

    def benchmark(body: object, p: FieldPath, location: str) -> Rule | None:
        m = model(BenchmarkModel, body, p)
        if m is None:
            return None
        signers = keysets(m.signers, (*p, "signers"))
        return BenchmarkRule(
            location, signers, m.metric, m.max_regression, m.against, tuple(m.same) or DEFAULT_SAME, m.allow_first
        )

    def collective(body: object, p: FieldPath, location: str) -> Rule | None:
        m = model(CollectiveModel, body, p)
        if m is None:
            return None
        return CollectiveRule(location, keysets(m.signers, (*p, "signers")), m.min_busbw_ratio, m.single_gpu)

    return {"tests": tests, "benchmark": benchmark, "collective": collective}


__all__ = [
    "CHECK_RUNNERS",
    "DEFAULT_SAME",
    "BenchmarkRule",
    "CollectiveRule",
    "TestsRule",
    "class_text",
    "evidence_rule_builders",
    "hardware_of",
    "metric_of",
]
