"""Evidence beyond the device probe: the ``tests`` and ``benchmark`` a matrix declares with its image
(:class:`builder.models.CheckCommand`), run in fresh containers of the checked image, and their
signed ``test-result/v1`` and ``benchmark/v1`` predicates (docs/evidence.md).

Metrics format (docs/matrices.md "Metrics"): the benchmark prints one line per metric on stdout,
``builder.metric {"name": "matmul", "value": 812.5, "unit": "GFLOP/s", "higher_is_better": true}``
(a JSON object after the marker; ``dataset`` / ``model`` keys may name what it used). Tests pass
when the command exits 0 and, when ``junit`` names a JUnit XML report, it counts no failure or
error (JUnit XML as pytest writes it: https://docs.pytest.org/en/stable/how-to/output.html
#creating-junitxml-format-files, ``<testsuites>`` / ``<testsuite tests= failures= errors= skipped=>``).

Each predicate carries the metrics or test summary, the host's facts (driver, GPU model, VBIOS,
fabric manager: the ``host`` of ``device-check/v1``), the hardware class a regression gate compares
on, the topology (:mod:`builder.checks.topology`), the image digest, the code commit and the
program that ran (its sha256), and the dataset/model versions the benchmark declares.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import math
import shlex
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from builder import __version__
from builder.checks.device import PYTHON_SHIM, Step, container_step
from builder.checks.host.cpu import cpu_model, cpu_model_of
from builder.checks.script_bundle import bundle_script
from builder.compat.branches import driver_branch
from builder.predicates import BENCHMARK_V1, TEST_RESULT_V1, HardwareKey

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from builder.checks.dcgm import DcgmDiag
    from builder.checks.device import CheckResult, Mode, Runner
    from builder.checks.topology import Topology
    from builder.models import CheckCommand
    from builder.registry import RegistryClient
    from builder.signing.signer import Signer

METRIC_MARKER = "builder.metric "
#: the one line a ``collective`` program prints: ``builder.collective {json}`` (evidence/jax/collective.py)
COLLECTIVE_MARKER = "builder.collective "
#: printed by the container's shell between the program's output and the JUnit XML report
JUNIT_MARKER = "----- builder: junit xml -----"
#: the largest JUnit report read (bytes); a bigger one is a problem, not parsed
JUNIT_LIMIT = 4_000_000
#: how much of a program's output a predicate keeps (the tail, characters)
KEEP_TAIL = 4000

#: ``sh -c`` wrapper: run the program ("$@" after the junit path), then print the marker and the report
_JUNIT_WRAP = (
    'J="$1"; shift; "$@"; rc=$?; '
    'if [ -n "$J" ] && [ -f "$J" ]; then printf "\\n%s\\n" "' + JUNIT_MARKER + '"; cat "$J"; fi; exit $rc'
)


@dataclasses.dataclass(frozen=True)
class Metric:
    """One benchmark metric: ``name``, ``value`` (finite), ``unit`` and ``higher_is_better``."""

    name: str
    value: float
    unit: str
    higher_is_better: bool

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "unit": self.unit, "higher_is_better": self.higher_is_better}


def parse_metrics(text: str) -> tuple[tuple[Metric, ...], dict[str, str], tuple[str, ...]]:
    """The ``builder.metric`` lines of ``text``: the metrics, the ``dataset``/``model`` they declare,
    and a problem per malformed line (bad JSON, missing field, a value that is not a finite number,
    a name given twice)."""
    metrics: dict[str, Metric] = {}
    declared: dict[str, str] = {}
    problems: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.startswith(METRIC_MARKER):
            continue
        try:
            doc = json.loads(line[len(METRIC_MARKER) :])
        except ValueError as exc:
            problems.append(f"metric line {n}: not JSON ({exc})")
            continue
        if not isinstance(doc, dict):
            problems.append(f"metric line {n}: not a JSON object")
            continue
        name, value, unit, hib = doc.get("name"), doc.get("value"), doc.get("unit"), doc.get("higher_is_better")
        if not isinstance(name, str) or not name or not isinstance(unit, str) or not isinstance(hib, bool):
            problems.append(f"metric line {n}: needs name (text), value, unit (text), higher_is_better (true/false)")
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            problems.append(f"metric line {n}: {name}: value {value!r} is not a finite number")
            continue
        if name in metrics:
            problems.append(f"metric line {n}: {name} given twice (the first counts)")
            continue
        metrics[name] = Metric(name, float(value), unit, hib)
        for key in ("dataset", "model"):
            if isinstance(doc.get(key), str):
                declared[key] = doc[key]
    return tuple(metrics.values()), declared, tuple(problems)


@dataclasses.dataclass(frozen=True)
class JunitSummary:
    """Totals of a JUnit XML report: ``tests``, ``failures``, ``errors``, ``skipped``."""

    tests: int
    failures: int
    errors: int
    skipped: int

    def to_json(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def parse_junit(text: str) -> JunitSummary:
    """Totals over every ``<testsuite>`` of a JUnit XML report (a lone ``<testsuite>`` root too).
    Raises ValueError for text that is not such a report (or over ``JUNIT_LIMIT``)."""
    if len(text) > JUNIT_LIMIT:
        raise ValueError(f"JUnit report over {JUNIT_LIMIT} bytes")
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise ValueError("JUnit report with a DTD or entities is refused")
    from xml.etree import ElementTree  # only where a declared test writes a report

    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        raise ValueError(f"JUnit report is not XML: {exc}") from exc
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    if root.tag not in ("testsuite", "testsuites"):
        raise ValueError(f"JUnit report root is <{root.tag}>, not <testsuites> or <testsuite>")

    def total(attr: str) -> int:
        out = 0
        for s in suites:
            v = s.get(attr, "0")
            out += int(v) if v.isdigit() else 0
        return out

    return JunitSummary(total("tests"), total("failures"), total("errors"), total("skipped"))


@dataclasses.dataclass(frozen=True)
class DeclaredRun:
    """One declared check that ran: the container ``step``, the program's ``output`` (stdout without the
    JUnit report), the ``metrics`` / ``declared`` versions (benchmark), the ``junit`` totals (tests),
    ``problems`` (malformed metrics, an unreadable report, a benchmark without metrics) and the sha256
    of the script sent (None for a command)."""

    check: CheckCommand
    step: Step
    output: str
    metrics: tuple[Metric, ...] = ()
    declared: Mapping[str, str] = dataclasses.field(default_factory=dict)
    junit: JunitSummary | None = None
    problems: tuple[str, ...] = ()
    script_sha256: str | None = None
    collective: Mapping[str, Any] | None = None

    @property
    def passed(self) -> bool:
        if not self.step.ok or self.problems:
            return False
        if self.check.kind == "benchmark":
            return bool(self.metrics)
        if self.check.kind == "collective":
            return self.collective is not None and self.collective.get("ok") is True
        return self.junit is None or (self.junit.failures == 0 and self.junit.errors == 0)


def _gpus(check: CheckCommand, mode: Mode, cdi: bool) -> dict[str, Any]:
    """``docker run`` device options for ``check.gpus`` in ``mode`` (none for ``cpu`` or ``gpus: none``)."""
    if mode == "cpu" or check.gpus in ("none", "0"):
        return {"gpus": None, "devices": []}
    if mode == "nvidia":
        want = "all" if check.gpus == "all" else check.gpus
        if cdi:
            return {"gpus": None, "devices": ["nvidia.com/gpu=all"]}
        return {"gpus": want, "devices": []}
    return {"gpus": None, "devices": ["/dev/kfd", "/dev/dri"]}


def run_declared(
    image_ref: str,
    check: CheckCommand,
    *,
    mode: Mode,
    runner: Runner,
    root: Path,
    cdi: bool = False,
    group_add: Sequence[str] = (),
) -> DeclaredRun:
    """Run ``check`` in a fresh container of ``image_ref`` (pin it by digest) with its timeout, devices
    and shm size (a ``script`` is read from the project ``root``); never raises for a failing program.
    Engine unavailability raises."""
    stdin: bytes | None = None
    sha: str | None = None
    if check.script is not None:
        try:
            stdin = bundle_script(root, check.script)
        except (OSError, ValueError) as exc:
            missing = Step(
                check.kind, False, 0.0, {"script": check.script}, f"cannot read {root / check.script}: {exc}"
            )
            why = f"the matrix names {check.script}, which cannot be read in {root}"
            return DeclaredRun(check, missing, "", problems=(why,))
        sha = hashlib.sha256(stdin).hexdigest()
        program = ["sh", "-c", PYTHON_SHIM, "sh", *check.args]
    else:
        program = list(check.command)
    if check.junit:
        argv, entry = ["-c", _JUNIT_WRAP, "sh", check.junit, *program], "sh"
    elif check.script is not None:
        argv, entry = program[1:], "sh"
    else:
        argv, entry = program, ""
    r = runner(
        image_ref,
        argv,
        entrypoint=entry,
        stdin=stdin,
        env=dict(check.env) or None,
        shm_size=check.shm_size,
        timeout=check.timeout,
        group_add=tuple(group_add) if mode == "amd" else (),
        user=None,
        **_gpus(check, mode, cdi),
    )
    step = container_step(check.kind, r)
    output, _, report = r.stdout.partition("\n" + JUNIT_MARKER + "\n")
    problems: list[str] = []
    junit = None
    if check.junit:
        if report:
            try:
                junit = parse_junit(report)
            except ValueError as exc:
                problems.append(f"{check.junit}: {exc}")
        elif step.ok:
            problems.append(f"the tests wrote no JUnit report at {check.junit}")
    metrics: tuple[Metric, ...] = ()
    declared: dict[str, str] = {}
    if check.kind == "benchmark":
        metrics, declared, bad = parse_metrics(output)
        problems.extend(bad)
        if step.ok and not metrics:
            what = "no valid metric line" if bad else "no metric line"  # after bad ones: not "none at all"
            problems.append(f"the benchmark printed {what} (`{METRIC_MARKER}{{...}}`, docs/matrices.md)")
    collective = None
    if check.kind == "collective":
        collective, bad_c = parse_collective(output)
        problems.extend(bad_c)
    return DeclaredRun(check, step, output, metrics, declared, junit, tuple(problems), sha, collective)


def parse_collective(text: str) -> tuple[dict[str, Any] | None, tuple[str, ...]]:
    """The ``builder.collective`` document of a collective program's output and what is wrong with it:
    no such line, bad JSON, failed ranks, two ranks on one device, a wrong all-reduce result."""
    line = next((ln for ln in text.splitlines() if ln.startswith(COLLECTIVE_MARKER)), None)
    if line is None:
        return None, (f"the collective check printed no `{COLLECTIVE_MARKER}{{...}}` line",)
    try:
        doc = json.loads(line[len(COLLECTIVE_MARKER) :])
    except ValueError as exc:
        return None, (f"collective line is not JSON ({exc})",)
    if not isinstance(doc, dict):
        return None, ("collective line is not a JSON object",)
    problems = [str(e) for e in doc.get("errors") or []]
    if doc.get("error"):
        problems.append(str(doc["error"]))
    if doc.get("oversubscribed"):
        problems.append(f"oversubscribed: more than one rank on {', '.join(map(str, doc['oversubscribed']))}")
    if doc.get("allreduce_correct") is False:
        problems.append("the all-reduce returned a wrong sum")
    return doc, tuple(problems)


# --------------------------------------------------------------------------------------------
# host facts beyond hostinfo, the hardware class, the predicates
# --------------------------------------------------------------------------------------------


def hardware_class(result: CheckResult, cpu: str | None) -> dict[HardwareKey, Any]:
    """What a benchmark is comparable on (policy ``benchmark.same``): ``vendor``, ``gpu_model`` (the
    first GPU's name; None without GPUs), ``gpu_count``, ``driver_branch`` (the driver's major, e.g.
    ``580``), ``cpu_model``."""
    h = result.host
    driver = driver_branch(h.driver_version) if h.driver_version else None
    return {
        "vendor": h.vendor,
        "gpu_model": h.gpus[0].name if h.gpus and result.mode != "cpu" else None,
        "gpu_count": len(h.gpus) if result.mode != "cpu" else 0,
        "driver_branch": driver if result.mode != "cpu" else None,
        "cpu_model": cpu,
    }


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclasses.dataclass(frozen=True)
class SkippedCheck:
    """A declared check that did not run: its ``kind`` (``tests``, ``benchmark``, ``collective``) and the
    ``reason`` (e.g. the device check failed; fewer GPUs than its ``min_devices``)."""

    kind: str
    reason: str

    def to_json(self) -> SkippedDocument:
        return {"kind": self.kind, "reason": self.reason}


class SkippedDocument(TypedDict):
    """A declared check that did not run (``builder check --json`` ``evidence_skipped[]``): its kind and why."""

    kind: str
    reason: str


@dataclasses.dataclass(frozen=True)
class EvidenceRun:
    """The declared checks of one image run after its device check: ``device`` (the device-check
    result whose host facts they share), the ``runs``, the ``topology``, ``cpu`` model, the ``commit``
    of the project that declared them."""

    device: CheckResult
    runs: tuple[DeclaredRun, ...]
    topology: Topology
    cpu: str | None
    commit: str | None
    finished_at: str = dataclasses.field(default_factory=_now)
    health: DcgmDiag | None = None  # the host's short DCGM diagnostic (None: dcgmi not installed)
    skipped: tuple[SkippedCheck, ...] = ()  # declared checks that did not run, each with its reason

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.runs)

    def predicates(self) -> tuple[tuple[str, dict[str, Any]], ...]:
        """``(predicate type, predicate)``: ``test-result/v1`` for the tests, ``benchmark/v1`` for the
        benchmark with the collective run's ``collective`` section in it (a collective run without a
        benchmark makes a ``benchmark/v1`` of its own, metric ``allreduce_busbw``)."""
        coll = next((r for r in self.runs if r.check.kind == "collective"), None)
        out = []
        for r in self.runs:
            if r.check.kind == "collective":
                continue
            ptype, pred = self._predicate(r)
            if ptype == BENCHMARK_V1 and coll is not None:
                pred["collective"] = self.collective_section(coll)
            out.append((ptype, pred))
        if coll is not None and not any(r.check.kind == "benchmark" for r in self.runs):
            ptype, pred = self._predicate(coll)
            section = self.collective_section(coll)
            busbw = section.get("busbw_gbps")
            pred["metrics"] = (
                [{"name": "allreduce_busbw", "value": busbw, "unit": "GB/s", "higher_is_better": True}]
                if isinstance(busbw, (int, float))
                else []
            )
            pred["collective"] = section
            out.append((ptype, pred))
        return tuple(out)

    def collective_section(self, run: DeclaredRun) -> dict[str, Any]:
        """The ``collective`` section of ``benchmark/v1``: what the program measured (backend, ranks, their
        binding, oversubscription, device order, all-reduce rows, peak busbw in GB/s), the link
        bandwidth it is compared with (:func:`builder.compat.links.expected_allreduce_gbps` from the
        recorded topology and GPU model) and the ratio (None when no expected bandwidth is known)."""
        from builder.compat.links import expected_allreduce_gbps

        doc = dict(run.collective or {})
        gpus = self.device.host.gpus if self.device.mode != "cpu" else ()
        mine = [x for x in self.topology.links if 0 in (x.a, x.b)] if gpus else []
        expected = expected_allreduce_gbps(
            gpus[0].name if gpus else None,
            [x.links or 0 for x in mine],
            [(p.gen_max or p.gen_current, p.width_max or p.width_current) for p in self.topology.pcie],
            [x.code for x in mine if x.kind != "nvlink"],
        )
        busbw = doc.get("busbw_gbps")
        ratio = busbw / expected.gbps if expected.gbps and isinstance(busbw, (int, float)) else None
        nccl = None
        if isinstance(doc.get("nccl_tests_output"), str):
            from builder.checks.nccl_tests import parse_nccl_tests

            parsed = parse_nccl_tests(doc["nccl_tests_output"])
            nccl = {
                "avg_busbw_gbps": parsed.avg_busbw_gbps,
                "peak_busbw_gbps": parsed.peak_busbw_gbps,
                "ok": parsed.ok,
                "rows": len(parsed.rows),
                "notes": list(parsed.notes),
            }
        return {
            "passed": run.passed,
            "nccl_tests": nccl,
            "backend": doc.get("backend"),
            "ranks": doc.get("ranks"),
            "ranks_detail": doc.get("ranks_detail") or [],
            "oversubscribed": doc.get("oversubscribed") or [],
            "device_order": doc.get("device_order"),
            "warnings": [str(w) for w in doc.get("warnings") or []],
            "allreduce_correct": doc.get("allreduce_correct"),
            "rows": doc.get("rows") or [],
            "busbw_gbps": busbw,
            "expected_gbps": expected.gbps,
            "link": expected.link,
            "ratio": round(ratio, 4) if ratio is not None else None,
            "problems": list(run.problems),
        }

    def _predicate(self, run: DeclaredRun) -> tuple[str, dict[str, Any]]:
        dev = self.device.predicate()
        c = run.check
        program = (
            {"script": c.script, "args": list(c.args), "sha256": run.script_sha256}
            if c.script
            else {"command": shlex.join(c.command)}
        )
        pred: dict[str, Any] = {
            "checker": {"tool": "builder", "version": __version__},
            "result": "passed" if run.passed else "failed",
            "image": {
                "reference": dev["image"]["reference"],
                "digest": dev["image"]["digest"],
                "platform_digest": dev["image"]["platform_digest"],
                "variant": dev["image"]["variant"],
            },
            "code": {"commit": self.commit, **program},
            "run": {
                "exit_code": run.step.detail.get("exit_code"),
                "timed_out": run.step.detail.get("timed_out"),
                "seconds": run.step.seconds,
                "timeout": c.timeout,
                "gpus": c.gpus,
                "shm_size": c.shm_size,
                "mode": self.device.mode,
                "finished_at": self.finished_at,
            },
            "host": dev["host"],
            "placement": dev["placement"],  # cluster, runner, node, job id (the device check's, same session)
            "hardware": hardware_class(self.device, self.cpu),
            "topology": self.topology.to_json(),
            "health": {"dcgm_diag": self.health.to_json() if self.health is not None else None},
            "problems": list(run.problems),
            "output_tail": run.output[-KEEP_TAIL:],
        }
        if c.kind == "tests":
            pred["summary"] = run.junit.to_json() if run.junit else None
            return TEST_RESULT_V1, pred
        pred["metrics"] = [m.to_json() for m in run.metrics]
        pred["dataset"] = c.dataset or run.declared.get("dataset")
        pred["model"] = c.model or run.declared.get("model")
        return BENCHMARK_V1, pred


def run_evidence(
    image_ref: str,
    device: CheckResult,
    checks: Sequence[CheckCommand],
    *,
    topology: Topology,
    commit: str | None,
    root: Path,
    cdi: bool = False,
    runner: Runner | None = None,
    cpu: str | None = None,
    health: DcgmDiag | None = None,
) -> EvidenceRun:
    """Run each of ``checks`` (tests, the benchmark, then the collective check when the device check saw
    at least its ``min_devices`` GPUs; scripts read from the project ``root``) in its own fresh container
    after a passing device check (``device``); nothing runs after a failed one. A check that does not run
    is in the answer's ``skipped`` with its reason (never left out silently). ``cpu``: the CPU model
    (default: this host's :func:`cpu_model`)."""
    if runner is None:
        from builder.engine import run_container

        runner = run_container
    from builder.checks.device import amd_group_ids

    runs: list[DeclaredRun] = []
    skipped: list[SkippedCheck] = []
    order = {"tests": 0, "benchmark": 1, "collective": 2}
    if not device.passed:
        skipped = [SkippedCheck(c.kind, "the device check failed") for c in sorted(checks, key=lambda c: order[c.kind])]
    else:
        groups = amd_group_ids() if device.mode == "amd" else ()
        gpus = len(device.host.gpus) if device.mode != "cpu" else 0
        for check in sorted(checks, key=lambda c: order[c.kind]):
            if check.kind == "collective" and gpus < check.min_devices:
                # a multi-GPU check on a host with fewer GPUs (min_devices: 0 runs it on the CPU)
                seen = f"{gpus} GPU(s)" if device.mode != "cpu" else "no GPUs (mode cpu)"
                skipped.append(
                    SkippedCheck(check.kind, f"needs at least {check.min_devices} GPUs; the check saw {seen}")
                )
                continue
            runs.append(
                run_declared(image_ref, check, mode=device.mode, runner=runner, root=root, cdi=cdi, group_add=groups)
            )
    cpu = cpu if cpu is not None else cpu_model()
    return EvidenceRun(device, tuple(runs), topology, cpu, commit, health=health, skipped=tuple(skipped))


def attest_evidence(
    ev: EvidenceRun,
    client: RegistryClient,
    repository: str,
    digest: str,
    signer: Signer,
    *,
    lock_dir: Path,
    bundle: bool = False,
) -> tuple[str, ...]:
    """Attach each predicate of ``ev`` as a signed attestation to ``repository@digest`` (with
    ``bundle`` also as a Sigstore bundle referrer: ``builder.signing.bundles.attest_both``); returns
    the predicate types written. Raises SigningError / registry errors."""
    from builder.signing.bundles import attest_both

    written = []
    for ptype, pred in ev.predicates():
        attest_both(client, repository, digest, ptype, pred, signer, lock_dir=lock_dir, bundle=bundle)
        written.append(ptype)
    return tuple(written)


class EvidenceDocument(TypedDict):
    """One declared check (matrix ``tests`` / ``benchmark``) in ``builder check --json`` (``evidence[]``):
    its predicate type, ``passed``, the metrics (benchmark) or JUnit totals (tests), what was wrong,
    its wall time in seconds and whether its signed attestation was ``written``."""

    predicate_type: str
    passed: bool
    metrics: list[dict[str, Any]]
    summary: dict[str, int] | None
    problems: list[str]
    seconds: float
    written: bool


def evidence_documents(ev: EvidenceRun, written: Sequence[str]) -> list[EvidenceDocument]:
    """``ev`` as the ``evidence`` list of ``builder check --json`` (``written``: predicate types attached)."""
    kinds = {"tests": TEST_RESULT_V1, "benchmark": BENCHMARK_V1, "collective": BENCHMARK_V1}
    return [
        {
            "predicate_type": kinds[run.check.kind],
            "passed": run.passed,
            "metrics": [m.to_json() for m in run.metrics],
            "summary": run.junit.to_json() if run.junit else None,
            "problems": list(run.problems),
            "seconds": run.step.seconds,
            "written": kinds[run.check.kind] in written,
        }
        for run in ev.runs
    ]


def evidence_lines(ev: EvidenceRun) -> tuple[str, ...]:
    """One line per declared check that ran, for people (``builder run``'s summary): its kind, passed or
    failed, what it measured (JUnit totals; each metric ``name value unit``) and its wall time, e.g.
    ``tests passed: 3 tests, 0 failures (4.1 s)`` / ``benchmark passed: matmul_f32_throughput 41.2 GFLOP/s
    (9.8 s)``. Empty when nothing ran (a failed device check runs none)."""
    out = []
    for r in ev.runs:
        what = []
        if r.junit is not None:
            what.append(f"{r.junit.tests} tests, {r.junit.failures + r.junit.errors} failed")
        what += [f"{m.name} {m.value:.4g} {m.unit}".rstrip() for m in r.metrics]
        if r.collective is not None and r.check.kind == "collective":
            what.append("collective " + ("ok" if r.collective.get("ok") is True else "not ok"))
        if not r.passed and r.problems:
            what.append("; ".join(r.problems)[:200])
        said = ": " + ", ".join(what) if what else ""
        out.append(f"{r.check.kind} {'passed' if r.passed else 'failed'}{said} ({r.step.seconds:.1f} s)")
    return tuple(out)


def evidence_failure(ev: EvidenceRun) -> str | None:
    """What failed among ``ev``'s runs, one line per run (None when every one passed)."""
    bad = [r for r in ev.runs if not r.passed]
    if not bad:
        return None
    return "; ".join(
        f"{r.check.kind} failed: " + (", ".join(r.problems) or r.step.error or "see its output")[:300] for r in bad
    )


__all__ = [
    "COLLECTIVE_MARKER",
    "JUNIT_MARKER",
    "METRIC_MARKER",
    "DeclaredRun",
    "EvidenceDocument",
    "EvidenceRun",
    "JunitSummary",
    "Metric",
    "SkippedCheck",
    "SkippedDocument",
    "attest_evidence",
    "cpu_model",
    "cpu_model_of",
    "evidence_documents",
    "evidence_failure",
    "evidence_lines",
    "hardware_class",
    "parse_collective",
    "parse_junit",
    "parse_metrics",
    "run_declared",
    "run_evidence",
]
