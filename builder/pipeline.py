"""``builder run``: render -> build -> sign -> check -> promote, for selected variants.

The steps are the other modules' own functions; this module only sequences them and collects one
:class:`VariantRun` per variant. Nothing here talks to the engine or the registry directly.

Order and rules:
1. build every selected variant (``builder.build.build_variants``; existing content tags are not
   rebuilt), signing each pushed digest and attaching its SLSA provenance (``on_built`` hook);
2. check each built digest on this host (``builder.checks.device``): a passing ``device-check/v1``
   attestation already signed by this check runner's key is reused (so a re-run is a no-op);
   otherwise the checks run in fresh containers and the result, pass or fail, is attached, signed
   by the check-runner key; plus the static verdict against a fleet when one is given;
3. promote into the policy's stages in order, up to ``to_stage`` (default: the first stage only),
   stopping at the first stage the policy denies (the reasons are kept); a stage that already
   names the digest is left as it is.
A variant whose build failed goes no further; other variants go on. Errors that mean the
infrastructure is gone (engine, registry) propagate.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from typing_extensions import TypedDict

from builder.build.results import BuiltImageDocument, built_json
from builder.errors import BuilderError, BuildFailedError, CheckFailedError, PromotionConflictError, TagConflictError
from builder.models import SummaryRow
from builder.publish import sign_earlier
from builder.selection import Selection

if TYPE_CHECKING:
    from pathlib import Path

    from builder.build.plan import BuildOptions
    from builder.checks.host.model import HostInfo
    from builder.models import BuiltImage, CheckCommand, RenderedImage
    from builder.promote.context import PromotionContext
    from builder.registry import RegistryClient
    from builder.signing.keys import PublicKey
    from builder.signing.signer import Signer

#: (variant id, step, detail) progress events: step is build|check|promote|...
ProgressFn = Callable[[str, str, str], None]


CheckStatus = Literal["passed", "failed", "reused", "skipped"]
StageStatus = Literal["promoted", "already", "denied", "error"]


class StaticDocument(TypedDict):
    """The static verdict against a fleet: the worst ``verdict`` over its clusters and each
    cluster's (``not-applicable`` for a cluster the image is not meant for)."""

    verdict: str
    clusters: dict[str, str]


class CheckOutcomeDocument(TypedDict):
    """A variant's device check in ``builder run --json``: ``status``, the diagnosis of a failure
    (``diagnosis`` key, who is ``at_fault``, ``summary``, ``fix``; None when passed), wall time in
    ``seconds``, the ``static`` verdict (None without ``--fleet``) and one line per declared check
    (the matrix's ``tests`` / ``benchmark``) that ran after the device check (``evidence``; empty when
    none ran: none declared, a failed device check, or a passing result reused)."""

    status: CheckStatus
    diagnosis: str | None
    at_fault: str | None
    summary: str | None
    fix: str | None
    seconds: float
    static: StaticDocument | None
    evidence: list[str]


class StageOutcomeDocument(TypedDict):
    """One stage for one variant: ``status``, the failed rules or the error (``reasons``) and the
    ``destination`` the stage holds (``registry/repository@sha256:...``; None unless promoted
    or already there)."""

    stage: str
    status: StageStatus
    reasons: list[str]
    destination: str | None


class VariantRunDocument(TypedDict):
    """One variant of ``builder run --json``: its ``build``, ``check`` (None when the build
    failed), the stages tried in order and the last stage that holds it (``reached``)."""

    variant: str
    build: BuiltImageDocument
    check: CheckOutcomeDocument | None
    stages: list[StageOutcomeDocument]
    reached: str | None


class RunDocument(TypedDict):
    """``builder run --json``: ``ok`` when every build succeeded and no stage promotion ended in
    an error (denials are reported, not failures), wall time in ``seconds`` and every variant."""

    ok: bool
    seconds: float
    variants: list[VariantRunDocument]


@dataclasses.dataclass(frozen=True)
class CheckOutcome:
    """``status``: passed | failed | reused (a passing signed result already attached) | skipped."""

    status: CheckStatus
    diagnosis: str | None = None
    at_fault: str | None = None
    summary: str | None = None
    fix: str | None = None
    seconds: float = 0.0
    static_verdict: str | None = None  # worst verdict over the fleet's clusters
    static_clusters: tuple[tuple[str, str], ...] = ()  # (cluster, verdict)
    # one line per declared check (tests, benchmark) that ran: ``builder.checks.evidence.evidence_lines``
    evidence: tuple[str, ...] = ()

    def to_json(self) -> CheckOutcomeDocument:
        return {
            "status": self.status,
            "diagnosis": self.diagnosis,
            "at_fault": self.at_fault,
            "summary": self.summary,
            "fix": self.fix,
            "seconds": round(self.seconds, 3),
            "static": {"verdict": self.static_verdict, "clusters": dict(self.static_clusters)}
            if self.static_verdict
            else None,
            "evidence": list(self.evidence),
        }


@dataclasses.dataclass(frozen=True)
class StageOutcome:
    """One stage for one variant: ``status`` promoted | already | denied | error; ``error``: what
    made it ``error`` (the command then ends with it, after the summary)."""

    stage: str
    status: StageStatus
    reasons: tuple[str, ...] = ()
    destination: str | None = None
    error: BuilderError | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def short_reasons(self) -> tuple[str, ...]:
        """Each reason's first clause (for the summary; ``--json`` has the full text)."""
        return tuple(short_reason(r) for r in self.reasons)

    def to_json(self) -> StageOutcomeDocument:
        return {
            "stage": self.stage,
            "status": self.status,
            "reasons": list(self.reasons),
            "destination": self.destination,
        }


@dataclasses.dataclass(frozen=True)
class VariantRun:
    variant_id: str
    built: BuiltImage
    check: CheckOutcome | None
    stages: tuple[StageOutcome, ...]

    @property
    def blocked(self) -> tuple[StageOutcome, ...]:
        """The stages that denied it or failed (at most one: promotion stops there)."""
        return tuple(s for s in self.stages if s.status in ("denied", "error"))

    @property
    def reached(self) -> str | None:
        """The last stage that holds this digest after the run."""
        ok = [s.stage for s in self.stages if s.status in ("promoted", "already")]
        return ok[-1] if ok else None

    def to_json(self) -> VariantRunDocument:
        return {
            "variant": self.variant_id,
            "build": built_json(self.built),
            "check": self.check.to_json() if self.check else None,
            "stages": [s.to_json() for s in self.stages],
            "reached": self.reached,
        }


@dataclasses.dataclass(frozen=True)
class RunReport:
    variants: tuple[VariantRun, ...]
    seconds: float

    @property
    def failed_builds(self) -> tuple[VariantRun, ...]:
        return tuple(v for v in self.variants if v.built.status == "failed")

    def summary_rows(self) -> tuple[SummaryRow, ...]:
        """One row per variant: its digest (empty when the build failed), the build status, then
        the check's and a blocking stage's (``built, check passed, denied at prod``), and the last
        stage that holds the digest (empty: none)."""
        rows = []
        for v in self.variants:
            status: list[str] = [v.built.status]
            if v.check is not None:
                status.append(f"check {v.check.status}")
            status.extend(f"{s.status} at {s.stage}" for s in v.blocked)
            rows.append(SummaryRow(v.variant_id, v.built.digest or "", ", ".join(status), v.reached or ""))
        return tuple(rows)

    @property
    def ok(self) -> bool:
        """Every build succeeded and no stage promotion ended in an error (denials are not errors)."""
        return not self.failed_builds and not any(s.status == "error" for v in self.variants for s in v.stages)

    def raise_for_failures(self) -> None:
        """BuildFailedError (14) naming each variant that failed to build and its log, with the
        whole report under ``details['summary']`` (its hint: read the logs; where no build ran, the
        tag-conflict hint or that the causes are named); else the first stage promotion that ended in an
        error (its own error and exit code: 32 for a tag moved meanwhile, 5 for a registry gone,
        ...), the report added under ``details['summary']``; nothing when every build and stage
        succeeded or was denied (denials are reported, not errors)."""
        failed = self.failed_builds
        if failed:
            hint = None  # with a log: read it (the default); refused before any build: the refusal's own
            if not any(v.built.log_path for v in failed):
                conflicts = all((v.built.error or "").startswith(TagConflictError.kind + ":") for v in failed)
                refused = "no build ran (no log): each variant's cause is named above"
                hint = TagConflictError.default_hint if conflicts else refused
            raise BuildFailedError(
                f"{len(failed)} of {len(self.variants)} variant(s) failed to build: "
                + ", ".join(f"{v.variant_id} ({v.built.failure_note})" for v in failed),
                hint=hint,
                summary=self.to_json(),
            )
        errors = [s.error for v in self.variants for s in v.stages if s.status == "error" and s.error is not None]
        if errors:
            errors[0].details.setdefault("summary", self.to_json())
            raise errors[0]

    def to_json(self) -> RunDocument:
        return {
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "variants": [v.to_json() for v in self.variants],
        }


@dataclasses.dataclass(frozen=True)
class CheckSetup:
    """How to check: ``signer`` signs device-check results (the check runner's key, never the build
    key) and ``keys`` are its public keys (to reuse an earlier passing result); ``fleet``: static
    verdicts against this fleet file (None: skip); ``timeout`` seconds per check container;
    ``lock_dir`` for attestation writes; ``commit``: the project's git commit (the declared tests and
    benchmark come from it)."""

    signer: Signer | None
    keys: tuple[PublicKey, ...]
    lock_dir: Path
    fleet: Path | None = None
    timeout: float = 600.0
    enabled: bool = True
    commit: str | None = None  # the project's commit, recorded in test-result/v1 and benchmark/v1
    root: Path | None = None  # the project root: the declared tests' and benchmark's scripts
    bundle: bool = False  # device-check, test and benchmark results also as Sigstore bundle referrers


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """What ``builder run`` was asked: ``matrices`` (files; empty: every matrix), ``selection``,
    ``to_stage`` (None: the policy's first stage), ``ticket``, ``fleet`` (a fleet file for static
    verdicts), ``policy_file``, ``check_key`` (None: ``builder.toml`` ``check_key``), ``check``
    (False: skip device checks), ``workers`` (None: ``builder.toml``), ``builder`` (the buildx builder:
    ``--builder``; None: buildx's current one), ``allow_unpinned``,
    ``source_date_epoch`` (None: not set), ``bundle`` (``--bundle``: what is signed with a key is
    also written as a Sigstore bundle referrer, cosign 3's format)."""

    matrices: tuple[Path, ...] = ()
    selection: Selection = dataclasses.field(default_factory=Selection)
    to_stage: str | None = None
    ticket: str | None = None
    fleet: Path | None = None
    policy_file: Path | None = None
    check_key: Path | None = None
    check: bool = True
    workers: int | None = None
    builder: str | None = None
    allow_unpinned: bool = False
    source_date_epoch: int | None = None
    bundle: bool = False  # the provenance and device-check results also as Sigstore bundle referrers


def short_reason(reason: str) -> str:
    """The first clause of a rule's reason (up to ``"; "``), whole: the summary folds it at the
    console's width, and a cut would drop the cause it names (a digest, a key file)."""
    return reason.split("; ", maxsplit=1)[0]


def stages_to_run(stage_names: Sequence[str], to_stage: str | None) -> tuple[str, ...]:
    """Stages in policy order up to and including ``to_stage`` (default: the first).

    Raises NotFoundError for a stage the policy does not define."""
    from builder.errors import NotFoundError

    if not stage_names:
        return ()
    if to_stage is None:
        return (stage_names[0],)
    if to_stage not in stage_names:
        raise NotFoundError(f"stage {to_stage!r} is not in the policy", hint=f"stages: {', '.join(stage_names)}")
    return tuple(stage_names[: stage_names.index(to_stage) + 1])


def check_image(
    built: BuiltImage,
    client: RegistryClient,
    setup: CheckSetup,
    *,
    host_probe: Callable[[], HostInfo],
    declared: Sequence[CheckCommand] = (),
) -> CheckOutcome:
    """Device check, then the variant's ``declared`` tests and benchmark (builder.checks.evidence), each
    result attested; all reused when already passed and signed by ``setup.signer``; + static verdict."""
    from builder.checks import device, image
    from builder.checks.static import fleet_verdict

    if not setup.enabled:
        return CheckOutcome("skipped")
    repository = built.reference.split("/", 1)[1]
    facts = image.probe_image(client, repository, built.digest)
    static_verdict: str | None = None
    clusters: tuple[tuple[str, str], ...] = ()
    if setup.fleet is not None:
        summary = fleet_verdict(facts, setup.fleet).summary
        static_verdict = summary.verdict
        clusters = tuple(summary.clusters)
    if setup.signer is not None and _passed_before(client, repository, built.digest, setup, declared):
        return CheckOutcome("reused", static_verdict=static_verdict, static_clusters=clusters)
    start = time.monotonic()
    host = host_probe()
    result = device.run_device_check(built.pinned, facts, host, timeout=setup.timeout)
    if setup.signer is not None:
        device.attest_result(
            result, client, repository, built.digest, setup.signer, lock_dir=setup.lock_dir, bundle=setup.bundle
        )
    failed_evidence = None
    evidence: tuple[str, ...] = ()
    if declared and result.passed and setup.root is not None:
        from builder.checks.evidence import attest_evidence, evidence_failure, evidence_lines, run_evidence
        from builder.checks.topology import probe_topology

        run_ref = f"{built.reference}@{facts.platform_digest}"
        from builder.checks.dcgm import probe_dcgm

        topo = probe_topology(host.vendor)
        health = probe_dcgm() if host.vendor == "nvidia" else None  # the short DCGM diagnostic, when installed
        ev = run_evidence(run_ref, result, declared, topology=topo, commit=setup.commit, root=setup.root, health=health)
        if setup.signer is not None:
            attest_evidence(
                ev, client, repository, built.digest, setup.signer, lock_dir=setup.lock_dir, bundle=setup.bundle
            )
        failed_evidence = evidence_failure(ev)
        evidence = evidence_lines(ev)
    d = result.diagnosis
    return CheckOutcome(
        "passed" if result.passed and failed_evidence is None else "failed",
        diagnosis=d.key if d else ("declared-check-failed" if failed_evidence else None),
        at_fault=d.at_fault if d else ("image" if failed_evidence else None),
        summary=d.summary if d else failed_evidence,
        fix=d.fix if d else ("see the signed test-result/v1 / benchmark/v1" if failed_evidence else None),
        seconds=time.monotonic() - start,
        static_verdict=static_verdict,
        static_clusters=clusters,
        evidence=evidence,
    )


def _passed_before(
    client: RegistryClient, repository: str, digest: str, setup: CheckSetup, declared: Sequence[CheckCommand] = ()
) -> bool:
    """A verified device-check/v1 with ``result == "passed"`` signed by the check key exists, and so
    does a passing test-result/v1 / benchmark/v1 for each of the ``declared`` checks."""
    from builder.predicates import BENCHMARK_V1, DEVICE_CHECK_V1, TEST_RESULT_V1
    from builder.signing.verify import read_attestations

    assert setup.signer is not None
    kinds = {"tests": TEST_RESULT_V1, "benchmark": BENCHMARK_V1, "collective": BENCHMARK_V1}
    # every attestation read and verified once, then looked up per predicate type
    passed = {
        att.predicate_type
        for att in read_attestations(client, repository, digest, keys=setup.keys)
        if att.verified and att.signer == setup.signer.fingerprint and (att.predicate or {}).get("result") == "passed"
    }
    # a collective check may be skipped (fewer GPUs than it needs): its result is never required here
    required = (DEVICE_CHECK_V1, *(kinds[c.kind] for c in declared if c.kind != "collective"))
    return all(ptype in passed for ptype in required)


def promote_through(
    promotion: PromotionContext,
    built: BuiltImage,
    repository: str,
    stages: Sequence[str],
    *,
    ticket: str | None,
) -> tuple[StageOutcome, ...]:
    """Promote ``built`` into ``stages`` in order; stop at the first denial or error."""
    from builder.promote import Target, promote_many

    target = Target(built.variant_id, repository, promotion.registry)
    out: list[StageOutcome] = []
    for stage in stages:
        [o] = promote_many(promotion, [target], stage, ticket=ticket, confirm=False)
        plan = o.plan
        if plan is not None and plan.digest != built.digest and plan.from_stage == "build":
            moved = PromotionConflictError(
                f"{built.variant_id}: the build tag names {plan.digest}, not {built.digest} (built or checked "
                f"by this run): someone moved it meanwhile; nothing was promoted to {stage}",
                hint="find who pushes to the variant's tag (builder status, the registry's logs), then run again",
            )
            reason = f"the build tag names {plan.digest}, not {built.digest}"
            out.append(StageOutcome(stage, "error", (reason,), error=moved))
            break
        if o.error is None and plan is not None and plan.already:
            out.append(StageOutcome(stage, "already", destination=plan.destination.pinned(plan.digest or "")))
            continue
        if o.error is None and plan is not None and plan.decision.allowed:
            [o] = promote_many(promotion, [target], stage, ticket=ticket, confirm=True)
        if o.error is None and o.applied is not None:
            dest = o.applied.plan.destination.pinned(o.applied.record.digest)
            out.append(StageOutcome(stage, "promoted", destination=dest))
            continue
        reasons: tuple[str, ...]
        if o.plan is not None and not o.plan.decision.allowed:
            reasons = tuple(f"{r.rule}: {r.reason}" for r in o.plan.decision.failed())
            out.append(StageOutcome(stage, "denied", reasons))
        else:
            reasons = (o.error.message,) if o.error else ("no plan",)
            out.append(StageOutcome(stage, "error", reasons, error=o.error))
        break
    return tuple(out)


def run_pipeline(
    rendered: Sequence[RenderedImage],
    options: BuildOptions,
    *,
    client: RegistryClient,
    promotion: PromotionContext,
    check: CheckSetup,
    stages: Sequence[str],
    ticket: str | None = None,
    on_built: Callable[[BuiltImage, RenderedImage], None] | None = None,
    sign_keys: Sequence[PublicKey] = (),
    on_progress: ProgressFn | None = None,
    host_probe: Callable[[], HostInfo] | None = None,
) -> RunReport:
    """Build, check and promote ``rendered`` (see the module docstring). ``on_built`` signs a
    pushed image and attaches its provenance; it also runs for an image that was already there
    but carries no valid signature + provenance by ``sign_keys``. Returns a RunReport; raises
    only for infrastructure errors (engine/registry unavailable, unpinned inputs)."""
    from builder.build.plan import split_pinned, unpinned_error
    from builder.build.run import build_variants

    error = unpinned_error(split_pinned(rendered, allow_unpinned=options.allow_unpinned)[1])
    if error is not None:  # a run promotes what it builds: nothing starts while a variant is unpinned
        raise error
    start = time.monotonic()
    progress = on_progress or (lambda _v, _s, _d: None)
    by_id = {r.variant.id: r for r in rendered}
    run = build_variants(
        rendered,
        options,
        client=client,
        on_built=on_built,
        on_progress=lambda v, e, d: progress(v, f"build:{e}", d),
        # signed or refused before its variant tag moves: a refused digest is given no tag
        vet=lambda b, retag: sign_earlier(
            b, retag, client, on_built, by_id, sign_keys, progress, state_dir=options.state_dir
        ),
    )
    if host_probe is None:
        host_probe = _default_host_probe()
    results: list[VariantRun] = []
    for built in run.results:
        if built.status == "failed":
            results.append(VariantRun(built.variant_id, built, None, ()))
            continue
        progress(built.variant_id, "check", "running device checks" if check.enabled else "skipped")
        try:
            variant = by_id[built.variant_id].variant
            declared = tuple(c for c in (variant.tests, variant.benchmark, variant.collective) if c is not None)
            outcome = check_image(built, client, check, host_probe=host_probe, declared=declared)
        except CheckFailedError as exc:
            at_fault = exc.details.get("at_fault")
            outcome = CheckOutcome(
                "failed",
                diagnosis=exc.diagnosis,
                at_fault=at_fault if isinstance(at_fault, str) else None,
                summary=exc.message,
                fix=exc.hint or None,
            )
        except BuilderError as exc:
            if exc.exit_code in (3, 5):  # engine / registry gone: stop everything
                raise
            outcome = CheckOutcome("failed", diagnosis="unknown", summary=exc.message)
        progress(built.variant_id, f"check:{outcome.status}", outcome.diagnosis or "")
        repository = options.repository(by_id[built.variant_id])
        stage_results = promote_through(promotion, built, repository, stages, ticket=ticket)
        for s in stage_results:
            progress(built.variant_id, f"promote:{s.status}", s.stage)
        results.append(VariantRun(built.variant_id, built, outcome, stage_results))
    return RunReport(tuple(results), time.monotonic() - start)


def _default_host_probe() -> Callable[[], HostInfo]:
    """This host's facts (``probe_host`` with the engine's ``docker info``), probed on the first call only."""
    from builder import engine
    from builder.checks.host.probing import probe_host

    cache: list[HostInfo] = []

    def probe() -> HostInfo:
        if not cache:
            cache.append(probe_host(engine_info=engine.info_json()))
        return cache[0]

    return probe


def ensure_key(path: Path, password: str | None) -> bool:
    """Generate an ECDSA P-256 key pair at ``path`` (+ ``.pub`` beside it, as ``builder keys
    generate`` writes them) when it does not exist. Returns True when one was generated."""
    if path.exists():
        return False
    from builder.signing.keys import generate_key_pair

    if path.name != "builder.key":
        raise BuilderError(f"key path {path} must be named builder.key (as `builder keys generate` writes it)")
    generate_key_pair(path.parent, password)
    return True
