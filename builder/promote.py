"""Promotion of digests through stages: plan (dry run), apply, rollback, status, history, resolve.

A promotion is data: a source digest (the variant tag written by the build for a stage that
takes builds, else the previous stage's pointer) -> a stage pointer tag ``<variant-id>-<stage>``
in the stage's repository (DESIGN.md "Promotion model"). It moves the digest and never
rebuilds: same repository - one tag PUT; another repository of the same registry - cross-repo
blob mounts then manifest PUTs; another registry - only missing blobs are copied. ``.sig`` /
``.att`` manifests and referrers travel byte for byte (merged layer by layer when the
destination already has some), the fallback referrers index is rebuilt in the destination,
and the destination digest is verified equal (``/work/shared/docs/signing-formats.md``).

The distribution protocol has no conditional PUT, so a stage tag moves only under a per-stage
file lock (``<state_dir>/locks``), after re-reading it (it must still name the digest the plan
saw), after checking the previous-digest chain (the digest it names must carry a trusted
``promotion/v1`` record), and it is re-read after the write: any difference raises
``PromotionConflictError`` naming both digests. The promotion record is written *before* the
tag moves, so a process killed at any point leaves the tag on the old or the new digest and
re-running completes the promotion (the ledger row is appended when missing).

``status``, ``history``, ``rollback`` and ``resolve`` read only the registry (promotion records
chained through their ``previous`` digests), so they work on a fresh machine; the SQLite ledger
(``builder.ledger``) is the local audit trail.

Errors: ``PolicyDeniedError`` (31), ``PromotionConflictError`` (32), ``NotFoundError`` (8),
``IncompatibleError`` (11), ``SigningKeyError`` (16), registry errors (5-7), ``LedgerError`` (33).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.errors import (
    BuilderError,
    IncompatibleError,
    NotFoundError,
    PolicyDeniedError,
    PromotionConflictError,
    SigningKeyError,
    VerificationError,
)
from builder.policy import (
    BUILD_STAGE,
    AttestationEvidence,
    Decision,
    Evidence,
    FleetEvidence,
    KeySet,
    Policy,
    RuleResult,
    SignatureEvidence,
    evaluate,
    parse_time,
)
from builder.predicates import PROMOTION_V1

if TYPE_CHECKING:
    from builder.keys import PublicKey
    from builder.ledger import Ledger, LedgerRecord
    from builder.registry import CopyStats, Descriptor, Manifest, RegistryClient
    from builder.sign import LayerVerifier, Signer, VerifiedItem

FleetChecker = Callable[["RegistryClient", str, str, str], list[FleetEvidence]]
"""(client, repository, digest, fleet file) -> one verdict per cluster of the fleet."""

_UNSET: Any = object()


# ---------------------------------------------------------------------------------------------
# concurrency: one pool of reused threads per process


POOL_WORKERS = 24
"""Threads of the shared pool: enough for one promotion's widest step (the blob mounts, the
evidence copy and the record at once) in each of several promotions; more only add GIL
contention (a batch of 100 on 2 cores: 4.2-4.6 s with 64 threads, 4.1-4.2 s with 24)."""

_POOL: ThreadPoolExecutor | None = None
_POOL_PID = 0
_POOL_GUARD = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """The process's shared worker pool (created on first use, again after a fork). Reused threads
    keep their registry sessions, and no thread is started per call: starting one waits for it to
    run, under a lock every executor of the process shares."""
    global _POOL, _POOL_PID
    import os

    with _POOL_GUARD:
        if _POOL is None or os.getpid() != _POOL_PID:
            _POOL = ThreadPoolExecutor(max_workers=POOL_WORKERS, thread_name_prefix="promote")
            _POOL_PID = os.getpid()
        return _POOL


class _Task:
    """``fn(*args)`` started on the shared pool. ``result()`` runs it in the caller instead when no
    worker has taken it yet, so a caller never waits on queued work: calls can nest to any depth
    on one bounded pool without deadlock."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self.fn, self.args = fn, args
        self.future = _pool().submit(fn, *args)

    def result(self) -> Any:
        if self.future.cancel():
            return self.fn(*self.args)
        return self.future.result()


def _all(tasks: Sequence[_Task]) -> list[Any]:
    """Every task's result in order; waits for all of them even when one fails, then raises the
    first error (like leaving a ``with ThreadPoolExecutor()`` block)."""
    out: list[Any] = []
    error: BaseException | None = None
    for t in tasks:
        try:
            out.append(t.result())
        except BaseException as exc:  # re-raised below once all have finished
            error = error or exc
            out.append(None)
    if error is not None:
        raise error
    return out


def _map(fn: Callable[..., Any], *iterables: Any) -> list[Any]:
    """``list(map(fn, *iterables))`` run concurrently on the shared pool; the caller runs the first
    item itself."""
    args = list(zip(*iterables, strict=True))
    if len(args) <= 1:
        return [fn(*a) for a in args]
    rest = [_Task(fn, *a) for a in args[1:]]
    try:
        first = fn(*args[0])
    except BaseException:
        for t in rest:  # queued ones never start; running ones finish before the error leaves
            if not t.future.cancel():
                with contextlib.suppress(BaseException):
                    t.future.result()
        raise
    return [first, *_all(rest)]


class _Uploads(Collection[str]):
    """Digests of blobs being uploaded by ``_Task`` s returning them: ``digest in uploads`` waits
    for that upload (re-raising its registry error), so a caller can read while they finish."""

    def __init__(self, tasks: Sequence[_Task]) -> None:
        self.tasks = list(tasks)
        self.done: set[str] = set()

    def _wait(self) -> None:
        for t in self.tasks:
            self.done.add(t.result())
        self.tasks = []

    def __contains__(self, digest: object) -> bool:
        self._wait()
        return digest in self.done

    def __iter__(self) -> Iterator[str]:
        self._wait()
        return iter(self.done)

    def __len__(self) -> int:
        self._wait()
        return len(self.done)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def fmt_time(t: dt.datetime) -> str:
    """RFC 3339 UTC with microseconds (records written in one second stay ordered)."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ---------------------------------------------------------------------------------------------
# values


@dataclasses.dataclass(frozen=True)
class Location:
    """``registry/repository[:tag]``."""

    registry: str
    repository: str
    tag: str | None = None

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.repository}"

    def __str__(self) -> str:
        return self.name + (f":{self.tag}" if self.tag else "")

    def pinned(self, digest: str) -> str:
        return f"{self.name}@{digest}"


@dataclasses.dataclass(frozen=True)
class Target:
    """What to promote: a variant id and its matrix repository (relative to ``registry``), or an
    explicit reference (``digest`` pinned, or ``tag`` to resolve) in that repository."""

    variant: str
    repository: str
    registry: str
    tag: str | None = None
    digest: str | None = None

    @property
    def explicit(self) -> bool:
        return self.tag is not None or self.digest is not None


@dataclasses.dataclass(frozen=True)
class PromotionRecord:
    """What a ``promotion/v1`` predicate says (docs/promotion.md). ``reference``: the stage pointer
    ``registry/repository:tag``; ``previous``: the digest the stage held before (None: first);
    ``action``: ``promote`` | ``rollback``. Read back: ``signer`` and ``layer`` (its .att layer)."""

    action: str
    variant: str
    stage: str
    from_stage: str
    reference: str
    digest: str
    previous: str | None
    allowed: bool
    reasons: tuple[str, ...]
    policy: str
    promoter: str
    promoter_name: str | None
    time: str
    ticket: str | None = None
    signer: str | None = None
    layer: str | None = None

    @property
    def when(self) -> dt.datetime:
        t = parse_time(self.time)
        return t if t is not None else dt.datetime.min.replace(tzinfo=dt.UTC)

    def predicate(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "variant": self.variant,
            "stage": self.stage,
            "fromStage": self.from_stage,
            "reference": self.reference,
            "digest": self.digest,
            "previous": self.previous,
            "decision": {"allowed": self.allowed, "reasons": list(self.reasons), "policy": self.policy},
            "promoter": {"fingerprint": self.promoter, "name": self.promoter_name},
            "time": self.time,
            "ticket": self.ticket,
        }

    @classmethod
    def from_predicate(
        cls, p: Mapping[str, Any], *, signer: str | None = None, layer: str | None = None
    ) -> PromotionRecord | None:
        """Parse a predicate; None when a required field is missing or mistyped."""
        try:
            decision = p.get("decision") or {}
            promoter = p.get("promoter") or {}
            prev = p.get("previous")
            fields = (p["action"], p["variant"], p["stage"], p["fromStage"], p["reference"], p["digest"], p["time"])
            if not all(isinstance(x, str) for x in fields) or not (prev is None or isinstance(prev, str)):
                return None
            return cls(
                action=p["action"],
                variant=p["variant"],
                stage=p["stage"],
                from_stage=p["fromStage"],
                reference=p["reference"],
                digest=p["digest"],
                previous=prev,
                allowed=bool(decision.get("allowed")),
                reasons=tuple(str(r) for r in decision.get("reasons") or ()),
                policy=str(decision.get("policy") or ""),
                promoter=str(promoter.get("fingerprint") or ""),
                promoter_name=promoter.get("name") if isinstance(promoter.get("name"), str) else None,
                time=p["time"],
                ticket=p.get("ticket") if isinstance(p.get("ticket"), str) else None,
                signer=signer,
                layer=layer,
            )
        except (KeyError, TypeError, AttributeError):
            return None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Plan:
    """A planned promotion: ``digest`` from ``source`` into ``destination`` (the stage pointer),
    which now holds ``previous``; ``decision`` says whether policy allows it and why."""

    target: Target
    stage: str
    from_stage: str
    source: Location
    digest: str | None
    destination: Location
    previous: str | None
    decision: Decision
    ticket: str | None = None
    present: bool = False  # the destination repository already holds the digest's manifest
    manifest: Manifest | None = dataclasses.field(default=None, repr=False)  # the source manifest, as stored
    # the source's .sig/.att manifests as the plan read them (None: absent), reused by the copy
    evidence_manifests: Mapping[str, Manifest | None] | None = dataclasses.field(default=None, repr=False)
    # a trusted promotion record says the pointer names `previous` (True when the pointer is empty);
    # False: moved outside builder or by a promoter this policy does not list (the plan then carries
    # a failing `chain` row, and `already` is False)
    trusted: bool = True
    untrusted_signers: tuple[str, ...] = ()  # who signed the promotion records that do not count

    @property
    def already(self) -> bool:
        """The stage already names this digest, and a trusted record says so (applying completes or
        records nothing new)."""
        return self.digest is not None and self.previous == self.digest and self.trusted

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.target.variant,
            "stage": self.stage,
            "from_stage": self.from_stage,
            "source": str(self.source),
            "digest": self.digest,
            "destination": str(self.destination),
            "previous": self.previous,
            "already": self.already,
            "trusted": self.trusted,
            "untrusted_signers": list(self.untrusted_signers),
            "ticket": self.ticket,
            "allowed": self.decision.allowed,
            "decision": self.decision.to_json(),
        }


@dataclasses.dataclass(frozen=True)
class Applied:
    """A promotion or rollback that happened. ``completed``: a re-run finished an interrupted one
    (the tag already named the digest); ``copy``: blobs mounted/copied/present, manifests written."""

    plan: Plan
    record: PromotionRecord
    seconds: float
    completed: bool = False
    copy: Mapping[str, int] = dataclasses.field(default_factory=dict)
    ledger_seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.plan.to_json(),
            "applied": True,
            "completed": self.completed,
            "record": self.record.to_json(),
            "seconds": round(self.seconds, 4),
            "copy": dict(self.copy),
            "ledger_seq": self.ledger_seq,
            "pinned": self.plan.destination.pinned(self.record.digest),
        }


@dataclasses.dataclass(frozen=True)
class StatusRow:
    variant: str
    stage: str
    pointer: str
    digest: str | None
    since: str | None
    age_seconds: float | None
    action: str | None
    promoter: str | None
    signatures: int = 0
    attestations: tuple[str, ...] = ()
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------------------------
# environment


@dataclasses.dataclass
class Environment:
    """Everything the promotion functions need, passed in by the CLI (core never reads config
    files or environment variables itself).

    ``registry``: the configured default registry; ``insecure``: which registries speak plain
    HTTP; ``lock_dir``: file locks (stage pointers, .sig/.att writes); ``ledger``: the audit
    ledger (None: no local trail); ``signer``: signs promotion records (required to apply);
    ``fleet_checker``: compatibility verdicts for fleet rules and ``resolve --cluster``."""

    policy: Policy
    registry: str
    insecure: Callable[[str], bool]
    lock_dir: Path
    ledger: Ledger | None = None
    signer: Signer | None = None
    fleet_checker: FleetChecker | None = None
    verifiers: Sequence[LayerVerifier] = ()
    now: Callable[[], dt.datetime] = utcnow
    lock_timeout: float = 60.0
    _clients: dict[str, RegistryClient] = dataclasses.field(default_factory=dict)
    _keys: list[PublicKey] | None = None
    _no_referrers_api: set[str] = dataclasses.field(default_factory=set)
    _guard: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def client(self, registry: str) -> RegistryClient:
        from builder.registry import DockerCredentials, client_for

        with self._guard:
            if registry not in self._clients:
                self._clients[registry] = client_for(
                    registry, insecure=self.insecure, auth=DockerCredentials.from_file(None)
                )
            return self._clients[registry]

    @property
    def keys(self) -> list[PublicKey]:
        """Public keys of every key file the policy names (unusable ones are skipped: the rules
        that need them deny)."""
        if self._keys is None:
            from builder.keys import load_public_keys

            out: list[PublicKey] = []
            for ref in self.policy.all_keys():
                if ref.file:
                    try:
                        out.extend(load_public_keys([Path(ref.file)]))
                    except BuilderError:
                        continue
            self._keys = out
        return self._keys

    def record_signers(self, stage: str) -> tuple[KeySet, ...]:
        """Who may sign trusted promotion records of ``stage``: promoters and its rollback list."""
        sets = list(self.policy.promoters)
        try:
            rb = self.policy.stage(stage).rollback
        except NotFoundError:
            rb = None
        if rb is not None:
            sets.extend(rb.keysets)
            sets.extend(KeySet(a.name, (a.key,)) for a in rb.approvers)
        return tuple(sets)

    def name_of(self, fingerprint: str) -> str | None:
        for a in self.policy.approvers:
            if a.key.fingerprint == fingerprint:
                return a.name
        return None


def promoter_label(env: Environment, rec: PromotionRecord) -> str:
    """Who signed ``rec``, for people: the policy's approver name for a known key (checked against
    the verified signer, never the record's own claim), else the key set it belongs to
    (``build``), else the short fingerprint."""
    fp = rec.signer or rec.promoter
    name = env.name_of(fp)
    if name:
        return name
    sets = [s.name for s in env.policy.keysets if any(k.fingerprint == fp for k in s.keys)]
    return sets[0] if sets else _short(fp)


def stage_location(env: Environment, target: Target, stage: str) -> Location:
    """Where ``stage`` keeps ``target``: the build's variant tag for ``build``, else the stage's
    pointer ``<variant-id>-<stage>`` in the stage's repository/registry."""
    if stage == BUILD_STAGE:
        return Location(target.registry, target.repository, target.variant)
    st = env.policy.stage(stage)
    return Location(st.registry or target.registry, st.repository_for(target.repository), st.tag_for(target.variant))


EARLY_RECORD_MAX_AGE_S = 2.0
"""A promotion record signed before taking the stage lock is used only this soon after."""

LOCK_FILE_MODE = 0o644
"""Lock files are created ``rw-r--r--`` (what filelock's default 0o666 gives under the usual umask
022); an explicit mode without group/other write also spares filelock 4 its per-new-file probe of
the directory's flock support (a temporary file opened, locked and closed each time)."""


def _lock(env: Environment, loc: Location, kind: str = "stage") -> Any:
    from filelock import FileLock

    env.lock_dir.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(str(loc).encode()).hexdigest()[:32]
    return FileLock(str(env.lock_dir / f"{kind}-{key}.lock"), timeout=env.lock_timeout, mode=LOCK_FILE_MODE)


# ---------------------------------------------------------------------------------------------
# evidence


def keyless_identity(signer: str | None) -> tuple[str, str] | None:
    """``(issuer, subject)`` of a keyless signer as ``builder.keyless`` reports it
    (``"<SAN> (issuer <issuer>)"``); None for key fingerprints."""
    if not signer or signer.startswith("sha256:"):
        return None
    from builder.keyless import parse_signer

    return parse_signer(signer)


def _subject_digests(statement: Mapping[str, Any] | None) -> tuple[str, ...]:
    if not statement:
        return ()
    out = []
    for s in statement.get("subject") or []:
        if isinstance(s, Mapping) and isinstance(s.get("digest"), Mapping):
            h = s["digest"].get("sha256")
            if isinstance(h, str):
                out.append("sha256:" + h)
    return tuple(out)


def gather_evidence(
    env: Environment,
    digest: str,
    stage: str,
    places: Sequence[Location],
    *,
    ticket: str | None = None,
) -> Evidence:
    """Read and verify every signature and attestation on ``digest`` in each of ``places`` (source
    first; the same layer seen in two places counts once; places after the first are skipped when
    they do not hold the digest), plus fleet verdicts for the fleets the stage's rules name.
    Unreadable pieces become ``Evidence.problems`` (rules then deny)."""
    return _gather(env, digest, stage, places, ticket=ticket)[0]


@dataclasses.dataclass(frozen=True)
class _PlaceRead:
    items: tuple[VerifiedItem, ...]
    problems: tuple[str, ...]
    manifests: dict[str, Manifest | None]


INDEX_KEY = "index"
"""Key of the source's ``sha256-<hex>`` fallback referrers index in ``Plan.evidence_manifests``."""


def _read_place(
    env: Environment, loc: Location, digest: str, *, check_present: bool, index: bool = False
) -> _PlaceRead | None:
    """Every ``.sig``/``.att`` layer of ``digest`` in ``loc``'s repository, verified by
    ``builder.sign``/``builder.attest`` (the same checks as ``verify_image``), manifests and layers
    fetched in parallel. None when ``check_present`` and the repository does not hold the digest.
    ``index``: also read the ``sha256-<hex>`` fallback referrers index (under ``INDEX_KEY``) in the
    same parallel round, when the registry is known to have no referrers API (the copy reuses it)."""
    from builder.registry import fallback_tag
    from builder.sign import ATT_SUFFIX, SIG_SUFFIX, signature_tag, verifiers_for, verify_layer

    client = env.client(loc.registry)
    if check_present and client.try_resolve(loc.repository, digest) is None:
        return None  # not copied there yet: no evidence there either
    verifiers = verifiers_for(env.keys, env.verifiers)
    tags = {sfx: signature_tag(digest, sfx) for sfx in (SIG_SUFFIX, ATT_SUFFIX)}
    if index and _lacks_referrers_api(env, loc.registry):
        tags[INDEX_KEY] = fallback_tag(digest)
    got = dict(zip(tags, _map(lambda t: client.try_get_manifest(loc.repository, t), tags.values()), strict=True))
    jobs: list[tuple[dict[str, Any], str]] = []
    for sfx, m in got.items():
        if m is None or sfx == INDEX_KEY:
            continue
        jobs.extend((d, tags[sfx]) for d in m.json.get("layers") or [] if isinstance(d, dict))
    items = tuple(_map(lambda j: verify_layer(client, loc.repository, digest, j[0], verifiers, tag=j[1]), jobs))
    problems = () if verifiers else ("no public key or identity given to verify with",)
    return _PlaceRead(items, problems, got)


def _gather(
    env: Environment,
    digest: str,
    stage: str,
    places: Sequence[Location],
    *,
    ticket: str | None = None,
    source_known: bool = False,
) -> tuple[Evidence, tuple[bool, ...], dict[str, Manifest | None] | None]:
    """``gather_evidence`` plus, for each place, whether it holds the digest, and the source's
    ``.sig``/``.att`` manifests as read (None when absent), for the copy to reuse."""
    sigs: list[SignatureEvidence] = []
    atts: list[AttestationEvidence] = []
    problems: list[str] = []
    seen: set[tuple[str, str, str, str]] = set()

    def read(i: int, loc: Location) -> Any:
        try:
            return _read_place(env, loc, digest, check_present=i > 0 or not source_known, index=i == 0 and source_known)
        except BuilderError as exc:
            return exc

    def fleet_rows() -> tuple[list[FleetEvidence], list[str]]:
        rows: list[FleetEvidence] = []
        probs: list[str] = []
        for fleet in env.policy.fleets(stage):
            if env.fleet_checker is None:
                probs.append(f"no compatibility checker available for fleet {fleet}")
                continue
            try:
                rows.extend(env.fleet_checker(env.client(places[0].registry), places[0].repository, digest, fleet))
            except BuilderError as exc:
                probs.append(f"fleet {fleet}: {exc.message}")
        return rows, probs

    fleet_t = _Task(fleet_rows) if places and env.policy.fleets(stage) else None
    reports = _map(read, range(len(places)), places)
    fleet_result: tuple[list[FleetEvidence], list[str]] = fleet_t.result() if fleet_t else ([], [])
    source_manifests: dict[str, Manifest | None] | None = None
    for i, (loc, report) in enumerate(zip(places, reports, strict=True)):
        if report is None:
            if i == 0:  # signatures about a digest the registry no longer holds are not evidence
                problems.append(f"{digest} does not resolve in {loc.name}")
            continue
        if isinstance(report, BuilderError):
            problems.append(f"{loc.name}: {report.message}")
            continue
        if i == 0:
            problems.extend(report.problems)
            source_manifests = report.manifests
        for it in report.items:
            # signature layers of one payload share the blob digest: tell them apart by signer
            key = (it.kind, it.layer_digest, it.signer or "", it.reason)
            if key in seen:
                continue
            seen.add(key)
            if it.kind == "signature":
                sigs.append(SignatureEvidence(it.signer, it.ok, it.reason, keyless_identity(it.signer), it.untrusted))
            else:
                atts.append(
                    AttestationEvidence(
                        it.predicate_type or "",
                        dict(it.predicate or {}),
                        it.signer,
                        it.ok,
                        it.reason,
                        keyless_identity(it.signer),
                        _subject_digests(it.statement),
                        it.untrusted,
                    )
                )
    fleet_evidence, fleet_problems = fleet_result
    problems.extend(fleet_problems)
    present = tuple(r is not None for r in reports)
    evidence = Evidence(
        repository=places[0].name if places else "",
        digest=digest,
        stage=stage,
        signatures=tuple(sigs),
        attestations=tuple(atts),
        fleet=tuple(fleet_evidence),
        ticket=ticket,
        problems=tuple(problems),
    )
    return evidence, present, source_manifests


# ---------------------------------------------------------------------------------------------
# promotion records in the registry


def read_records(env: Environment, loc: Location, digest: str, stage: str) -> list[PromotionRecord]:
    """Trusted ``promotion/v1`` records on ``digest`` in ``loc``'s repository for ``loc`` (the
    stage pointer): verified, signed by a promoter (or a listed roll-backer), naming this digest
    and pointer. Oldest first."""
    return _read_records(env, loc, digest, stage)[0]


def _read_records(
    env: Environment, loc: Location, digest: str, stage: str
) -> tuple[list[PromotionRecord], tuple[str, ...]]:
    """``read_records`` plus, for every other ``promotion/v1`` layer on the digest, who signed it
    (as text: ``sha256:…`` with the key set it belongs to, or what the layer claims), deduplicated:
    the records that do not count, for the note on an untrusted pointer."""
    from builder.sign import ATT_SUFFIX, PREDICATE_TYPE_ANNOTATION, signature_tag, verifiers_for, verify_layer

    signers = env.record_signers(stage)
    client = env.client(loc.registry)
    tag = signature_tag(digest, ATT_SUFFIX)
    att = client.try_get_manifest(loc.repository, tag)
    # only layers announcing promotion/v1 are verified (the signed statement must say so too:
    # check_attestation_layer rejects an annotation that differs from the signed type)
    layers = [
        d
        for d in (att.json.get("layers") or [] if att is not None else [])
        if isinstance(d, dict) and (d.get("annotations") or {}).get(PREDICATE_TYPE_ANNOTATION) == PROMOTION_V1
    ]
    verifiers = verifiers_for(env.keys, env.verifiers)
    items = _map(lambda d: verify_layer(client, loc.repository, digest, d, verifiers, tag=tag), layers)
    out: list[PromotionRecord] = []
    foreign: list[str] = []
    for it in items:
        ident = keyless_identity(it.signer)
        if not it.ok:
            if it.untrusted:
                claim = f"{it.signer[:19]}… (claimed, unverified)" if it.signer else "an unnamed key"
                foreign.append(f"{claim}, a key this policy does not list")
            else:
                foreign.append(f"{(it.signer or 'unknown')[:19]}… (does not verify: {it.reason})")
            continue
        rec = (
            PromotionRecord.from_predicate(it.predicate, signer=it.signer, layer=it.layer_digest)
            if it.predicate
            else None
        )
        if rec is None or rec.stage != stage or rec.digest != digest or rec.reference != str(loc):
            continue
        if not any(s.match(it.signer, ident) for s in signers):
            sets = [s.name for s in env.policy.keysets if s.match(it.signer, ident)]
            named = env.name_of(it.signer or "")
            where = f"key set {', '.join(sets)}" if sets else (f"approver {named}" if named else "listed")
            foreign.append(f"{_short(it.signer)} ({where}, not a promoter of {stage})")
            continue
        out.append(rec)
    out.sort(key=lambda r: r.when)
    return out, tuple(dict.fromkeys(foreign))


def _short(signer: str | None) -> str:
    if not signer:
        return "unknown signer"
    return signer[:19] + "…" if signer.startswith("sha256:") else signer


@dataclasses.dataclass(frozen=True)
class PointerTrust:
    """What a stage pointer names and whether a trusted record says so. ``digest``: what the tag
    names (None: no tag); ``record``: the latest trusted ``promotion/v1`` record that put it there;
    ``foreign``: who signed the other promotion records on it (they do not count)."""

    pointer: Location
    digest: str | None
    record: PromotionRecord | None
    foreign: tuple[str, ...] = ()

    @property
    def trusted(self) -> bool:
        """No tag, or a trusted record says the tag names this digest."""
        return self.digest is None or self.record is not None

    def note(self, promoters: Sequence[str] = (), *, short: bool = False) -> str:
        """Why the pointer is not trusted (empty when it is): the plan's ``chain`` row, ``resolve``
        and ``rollback`` name the pointer and the full digest; ``short`` (``status`` and
        ``history``, which show the pointer already) the short digest."""
        if self.trusted or self.digest is None:
            return ""
        who = f" ({', '.join(promoters)})" if promoters else ""
        what = f"untrusted: names {self.digest[:19]}…" if short else f"{self.pointer} names {self.digest}"
        text = f"{what} but no promotion record by a trusted promoter{who} says so: "
        if self.foreign:
            return text + "promotion record(s) there are signed by " + "; ".join(self.foreign)
        return text + "it carries no promotion record for this pointer (moved outside builder?)"


def untrusted_hint(env: Environment, stage: str, variant: str = "VARIANT", *, foreign: bool = True) -> str:
    """What to do about a pointer no trusted promotion record explains (``foreign``: records by
    other keys exist)."""
    fix = (
        f"if those records come from a legitimate promoter (e.g. another checkout sharing the registry), list "
        f"its public key in a key set named under `promoters` in {env.policy.path}; otherwise "
        if foreign
        else "the tag was moved outside builder: "
    )
    return (
        f"{fix}point the tag back at a digest with a trusted record (or delete it) and promote again; "
        f"`builder history {variant} --stage {stage}` shows the chain"
    )


def pointer_trust(env: Environment, loc: Location, stage: str, digest: Any = _UNSET) -> PointerTrust:
    """Read the pointer ``loc`` (unless ``digest``, what it names, is given) and its records."""
    assert loc.tag is not None
    if digest is _UNSET:
        digest = env.client(loc.registry).try_resolve(loc.repository, loc.tag)
    if digest is None:
        return PointerTrust(loc, None, None)
    recs, foreign = _read_records(env, loc, digest, stage)
    return PointerTrust(loc, digest, recs[-1] if recs else None, foreign)


def _promoter_names(env: Environment, stage: str) -> list[str]:
    return list(dict.fromkeys(s.name for s in env.record_signers(stage)))


def current_record(
    env: Environment, loc: Location, digest: str, stage: str, *, before: dt.datetime | None = None
) -> PromotionRecord | None:
    """The latest trusted record that put ``digest`` into the pointer (before ``before``)."""
    recs = [r for r in read_records(env, loc, digest, stage) if before is None or r.when < before]
    return recs[-1] if recs else None


def history(
    env: Environment, target: Target, stage: str, *, limit: int = 100
) -> tuple[Location, list[PromotionRecord]]:
    """The stage pointer's chain of records, newest first, read from the registry alone: the record
    on the digest the tag names, then the record on its ``previous`` digest older than it, ...
    Raises NotFoundError when the stage holds no digest for the variant."""
    loc = stage_location(env, target, stage)
    client = env.client(loc.registry)
    assert loc.tag is not None
    digest = client.try_resolve(loc.repository, loc.tag)
    if digest is None:
        raise NotFoundError(f"{loc} does not exist: {target.variant} was never promoted to {stage}")
    out: list[PromotionRecord] = []
    before: dt.datetime | None = None
    cur: str | None = digest
    while cur is not None and len(out) < limit:
        rec = current_record(env, loc, cur, stage, before=before)
        if rec is None:
            break
        out.append(rec)
        before, cur = rec.when, rec.previous
    return loc, out


# ---------------------------------------------------------------------------------------------
# plan


def _source_digest(
    env: Environment, target: Target, st_from: str, src: Location
) -> tuple[str | None, RuleResult, Manifest | None]:
    """(digest, the ``source`` rule result, the manifest as stored) of what is to be promoted."""
    client = env.client(src.registry)
    if target.explicit:
        ref = target.digest or target.tag
        assert ref is not None
        manifest = client.try_get_manifest(target.repository, ref)
        given = f"{target.registry}/{target.repository}{'@' if target.digest else ':'}{ref}"
        if manifest is None:
            return None, RuleResult("source", False, f"{given} does not exist"), None
        digest = manifest.digest
        if st_from == BUILD_STAGE:
            return digest, RuleResult("source", True, f"{given} is {digest}"), manifest
        assert src.tag is not None
        held = client.try_resolve(src.repository, src.tag)
        if held != digest:
            return (
                digest,
                RuleResult(
                    "source",
                    False,
                    f"{digest} is not in stage {st_from} ({src} holds {held or 'nothing'}): promote it there first",
                ),
                manifest,
            )
        return digest, RuleResult("source", True, f"{given} is what {st_from} holds ({src})"), manifest
    assert src.tag is not None
    manifest = client.try_get_manifest(src.repository, src.tag)
    if manifest is None:
        what = "no build pushed the variant tag" if st_from == BUILD_STAGE else f"not promoted to {st_from} yet"
        return None, RuleResult("source", False, f"{src} does not exist: {what}"), None
    return manifest.digest, RuleResult("source", True, f"{src} -> {manifest.digest}"), manifest


def plan_promotion(env: Environment, target: Target, stage: str, *, ticket: str | None = None) -> Plan:
    """Decide (without writing anything) the promotion of ``target`` into ``stage``.

    The decision contains a ``source`` result (the digest exists and, for a stage that takes from
    another stage, is what that stage holds) followed by the stage's policy rules. Never raises
    for denied promotions; NotFoundError for an unknown stage; registry errors propagate."""
    st = env.policy.stage(stage)
    src = stage_location(env, target, st.source)
    dst = stage_location(env, target, stage)
    digest, source_result, manifest = _source_digest(env, target, st.source, src)
    assert dst.tag is not None
    same = src.name == dst.name
    if digest is None:
        trust = pointer_trust(env, dst, stage)
        decision = Decision(stage, "", False, (source_result, *_chain_rows(env, stage, trust)))
        return Plan(
            target,
            stage,
            st.source,
            src,
            None,
            dst,
            trust.digest,
            decision,
            ticket,
            trusted=trust.trusted,
            untrusted_signers=trust.foreign,
        )
    # the pointer and the records on what it names, read while the evidence is gathered
    trust_t = _Task(pointer_trust, env, dst, stage)
    try:
        evidence, found, src_manifests = _gather(
            env, digest, stage, [src] if same else [src, dst], ticket=ticket, source_known=True
        )
    finally:
        trust = trust_t.result()
    present = same or found[-1]
    policy_decision = evaluate(env.policy, stage, evidence, env.now())
    chain = _chain_rows(env, stage, trust)
    reasons = (source_result, *chain, *policy_decision.reasons)
    allowed = source_result.passed and not chain and policy_decision.allowed
    decision = Decision(stage, digest, allowed, reasons)
    return Plan(
        target,
        stage,
        st.source,
        src,
        digest,
        dst,
        trust.digest,
        decision,
        ticket,
        present,
        manifest,
        src_manifests,
        trust.trusted,
        trust.foreign,
    )


def _chain_rows(env: Environment, stage: str, trust: PointerTrust) -> tuple[RuleResult, ...]:
    """A failing ``chain`` row when the pointer names a digest no trusted promotion record explains
    (the promotion could only be refused at apply time: show it in the dry run)."""
    if trust.trusted:
        return ()
    return (RuleResult("chain", False, trust.note(_promoter_names(env, stage))),)


# ---------------------------------------------------------------------------------------------
# apply


def _require_signer(env: Environment, stage: str) -> Signer:
    if env.signer is None:
        raise SigningKeyError(
            "applying a promotion needs a signing key for its promotion/v1 record",
            hint="pass --key FILE (default: builder.toml `key`)",
        )
    return env.signer


def _require_promoter(env: Environment, signer: Signer) -> None:
    if not any(s.match(signer.fingerprint, None) for s in env.policy.promoters):
        listed = ", ".join(s.name for s in env.policy.promoters) or "none"
        raise SigningKeyError(
            f"key {signer.fingerprint[:19]}… is not a promoter in {env.policy.path} (promoters: {listed}); "
            "records it signs would not be trusted by status, history and rollback",
            hint="sign with a promoter key (--key) or add its public key to the policy's promoter key set",
        )


def _copy(
    env: Environment, src: Location, dst: Location, manifest: Manifest, stats: CopyStats, *, known_absent: bool = False
) -> None:
    """Manifest-level copy of ``manifest`` (and its index children) from ``src`` to ``dst``: every
    blob mounted (same registry) or copied only when missing (another registry), in parallel;
    then the manifests PUT by digest, children first; the registry verifies each digest."""

    sc, dc = env.client(src.registry), env.client(dst.registry)
    manifests: list[Manifest] = []
    blobs: dict[str, Descriptor] = {}

    def collect(m: Manifest) -> None:
        if m.is_index:
            for child in m.manifests:
                if dc.try_resolve(dst.repository, child.digest) is None:
                    collect(sc.get_manifest(src.repository, child.digest))
        else:
            for b in m.blobs:
                blobs.setdefault(b.digest, b)
        manifests.append(m)

    if not known_absent and dc.try_resolve(dst.repository, manifest.digest) == manifest.digest:
        return  # a manifest in the registry implies its blobs and children are there
    collect(manifest)
    _transfer_blobs(env, src, dst, list(blobs.values()), stats)
    for m in manifests:
        dc.put_manifest(dst.repository, m.digest, m.raw, m.media_type)
        stats.manifests += 1


def _transfer_blobs(
    env: Environment, src: Location, dst: Location, blobs: Sequence[Descriptor], stats: CopyStats
) -> None:
    """Make ``blobs`` exist in ``dst``, in parallel: one cross-repository mount each within a
    registry (a mount of a blob already there also answers 201), else copy only missing ones."""
    from builder.registry import CopyStats

    sc, dc = env.client(src.registry), env.client(dst.registry)
    same = sc.registry == dc.registry and sc.base == dc.base

    def one(desc: Descriptor) -> CopyStats:
        st = CopyStats()
        if same and src.repository == dst.repository:
            st.present += 1
        elif same and dc.mount_blob(dst.repository, desc.digest, src.repository):
            st.mounted += 1
        elif dc.blob_exists(dst.repository, desc.digest):
            st.present += 1
        else:
            st.copied_bytes += dc.copy_blob_from(sc, src.repository, dst.repository, desc)
            st.copied += 1
        return st

    if not blobs:
        return
    for st in _map(one, blobs):
        stats.mounted += st.mounted
        stats.present += st.present
        stats.copied += st.copied
        stats.copied_bytes += st.copied_bytes


_NO_REFERRERS_API: set[str] = set()
"""Registries (``scheme://host``) that answered the referrers API with 404 in this process
(distribution 2.8): asked once per process, not once per promotion."""
_NO_REFERRERS_GUARD = threading.Lock()


def _lacks_referrers_api(env: Environment, registry: str) -> bool:
    base = env.client(registry).base
    with _NO_REFERRERS_GUARD:
        return registry in env._no_referrers_api or base in _NO_REFERRERS_API


def _referrers(env: Environment, loc: Location, digest: str, known_index: Any = _UNSET) -> list[Descriptor]:
    """Referrers of ``digest``: the OCI referrers API, or the ``sha256-<hex>`` fallback index when the
    registry has none (remembered per registry for the process: distribution 2.8 answers 404).
    ``known_index``: the fallback index as the plan read it (a Manifest or None: absent)."""
    from builder.registry import OCI_INDEX, fallback_tag

    client = env.client(loc.registry)
    if not _lacks_referrers_api(env, loc.registry):
        resp = client.request(
            "GET", f"/v2/{loc.repository}/referrers/{digest}", ref=f"{loc.repository}@{digest}", ok=(200, 404)
        )
        if resp.status_code == 200 and resp.headers.get("Content-Type", "").split(";")[0].strip() == OCI_INDEX:
            return client.referrers(loc.repository, digest)
        with _NO_REFERRERS_GUARD:
            env._no_referrers_api.add(loc.registry)
            _NO_REFERRERS_API.add(client.base)
    if known_index is _UNSET:
        known_index = client.try_get_manifest(loc.repository, fallback_tag(digest))
    index = known_index
    return index.manifests if index is not None and index.is_index else []


def copy_evidence(
    env: Environment,
    src: Location,
    dst: Location,
    digest: str,
    stats: CopyStats,
    *,
    known: Mapping[str, Manifest | None] | None = None,
) -> None:
    """Copy ``.sig``/``.att`` manifests (byte for byte when the destination has none; otherwise
    every missing layer is appended under the same lock writers use) and referrers (manifest
    copied, destination fallback index rebuilt with each referrer's ``artifactType``).
    ``known``: the source's ``.sig``/``.att`` manifests already read (suffix -> manifest or None)."""
    from filelock import FileLock

    from builder.registry import CopyStats, copy_image
    from builder.sign import ATT_SUFFIX, SIG_SUFFIX, SignatureLayer, append_layer, signature_lock_path, signature_tag

    sc, dc = env.client(src.registry), env.client(dst.registry)

    def one_suffix(suffix: str) -> CopyStats:
        st = CopyStats()
        tag = signature_tag(digest, suffix)
        sm = known[suffix] if known is not None and suffix in known else sc.try_get_manifest(src.repository, tag)
        if sm is None:
            return st
        _transfer_blobs(env, src, dst, sm.blobs, st)
        env.lock_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(
            str(signature_lock_path(env.lock_dir, dc.registry, dst.repository, tag)),
            timeout=env.lock_timeout,
            mode=LOCK_FILE_MODE,
        ):
            dm = dc.try_get_manifest(dst.repository, tag)
            if dm is None:
                dc.put_manifest(dst.repository, tag, sm.raw, sm.media_type)
                st.manifests += 1
                return st
        if dm.digest == sm.digest:
            return st
        have = {(d.digest, d.annotations) for d in dm.layers}
        for layer in sm.layers:
            if (layer.digest, layer.annotations) in have:
                continue
            blob = sc.get_blob(src.repository, layer.digest)
            append_layer(
                dc,
                dst.repository,
                digest,
                suffix,
                SignatureLayer(layer.media_type, blob, layer.annotation_map),
                lock_dir=env.lock_dir,
            )
            st.manifests += 1
        return st

    def referrers() -> CopyStats:
        st = CopyStats()
        index = known[INDEX_KEY] if known is not None and INDEX_KEY in known else _UNSET
        for desc in _referrers(env, src, digest, index):
            copy_image(sc, src.repository, desc.digest, dc, dst.repository, stats=st)
            if desc.artifact_type:
                dc.add_referrer_to_fallback_index(dst.repository, digest, desc)
        return st

    for st in _map(lambda f: f(), [lambda: one_suffix(SIG_SUFFIX), lambda: one_suffix(ATT_SUFFIX), referrers]):
        for name in ("mounted", "present", "copied", "copied_bytes", "manifests"):
            setattr(stats, name, getattr(stats, name) + getattr(st, name))


def _ledger_row(env: Environment, plan: Plan, rec: PromotionRecord, decision: Decision) -> LedgerRecord:
    from builder.ledger import LedgerRecord

    who = rec.promoter + (f" {rec.promoter_name}" if rec.promoter_name else "")
    action = rec.action if rec.allowed else "denied"
    return LedgerRecord(
        time=rec.time,
        action=action,
        variant=rec.variant,
        stage=rec.stage,
        from_stage=rec.from_stage,
        reference=rec.reference,
        digest=rec.digest,
        previous=rec.previous,
        allowed=rec.allowed,
        decision=json.dumps(decision.to_json(), sort_keys=True),
        who=who,
        ticket=rec.ticket,
        attestation=rec.layer,
    )


def _reasons(decision: Decision) -> tuple[str, ...]:
    out: list[str] = []

    def walk(r: RuleResult) -> None:
        if not r.children:
            out.append(f"{'pass' if r.passed else 'FAIL'} {r.rule}: {r.reason}")
        for c in r.children:
            walk(c)

    for r in decision.reasons:
        walk(r)
    return tuple(out)


def _record(
    env: Environment, plan: Plan, signer: Signer, action: str, digest: str, previous: str | None
) -> PromotionRecord:
    return PromotionRecord(
        action=action,
        variant=plan.target.variant,
        stage=plan.stage,
        from_stage=plan.from_stage,
        reference=str(plan.destination),
        digest=digest,
        previous=previous,
        allowed=plan.decision.allowed,
        reasons=_reasons(plan.decision),
        policy=str(env.policy.path),
        promoter=signer.fingerprint,
        promoter_name=env.name_of(signer.fingerprint),
        time=fmt_time(env.now()),
        ticket=plan.ticket,
    )


def _conflict(loc: Location, expected: str | None, found: str | None, when: str) -> PromotionConflictError:
    return PromotionConflictError(
        f"{loc} changed {when}: expected {expected or 'no tag'}, found {found or 'no tag'}; nothing was overwritten",
        expected=expected,
        found=found,
        pointer=str(loc),
    )


def apply_promotion(env: Environment, plan: Plan, *, expect_previous: str | None = _UNSET) -> Applied:
    """Apply an allowed plan: copy, write the signed record, move the tag, re-read, ledger row.

    ``expect_previous``: the digest the stage must still hold (default: what the plan saw; pass
    the digest from a reviewed plan to turn the apply into a compare-and-swap). A denied plan is
    recorded in the ledger (``denied``) and raises PolicyDeniedError. PromotionConflictError when
    the pointer moved, the chain forks (the digest it names has no trusted record) or another
    writer moved it during the write."""
    t0 = time.perf_counter()
    signer = _require_signer(env, plan.stage)
    if plan.digest is None or not plan.decision.allowed:
        if plan.digest is not None and env.ledger is not None:
            denied = _record(env, plan, signer, "promote", plan.digest, plan.previous)
            env.ledger.append(_ledger_row(env, plan, denied, plan.decision))
        failed = plan.decision.failed()
        raise PolicyDeniedError(
            f"promotion of {plan.target.variant} to {plan.stage} denied: "
            + "; ".join(f"{r.rule}: {r.reason}" for r in failed),
            hint=None
            if plan.trusted
            else untrusted_hint(env, plan.stage, plan.target.variant, foreign=bool(plan.untrusted_signers)),
            reasons=[r.to_json() for r in failed],
            decision=plan.decision.to_json(),
        )
    _require_promoter(env, signer)
    from builder.attest import attest_image, prepare_attestation
    from builder.registry import CopyStats
    from builder.sign import signature_config

    digest = plan.digest
    dst = plan.destination
    assert dst.tag is not None
    dc = env.client(dst.registry)
    expected = plan.previous if expect_previous is _UNSET else expect_previous
    stats = CopyStats()
    # A new record is written only when the stage still holds `expected` (checked under the lock
    # below), so it can be signed now and its blobs (the DSSE layer, and the config of a fresh
    # one-layer .att) uploaded while the lock is taken and the pointer re-read. Blobs are
    # content-addressed and inert until a manifest names them: if the promotion stops here (a
    # conflict, an interrupted run's record reused), nothing refers to them.
    early = _record(env, plan, signer, "promote", digest, expected)
    prepared = prepare_attestation(dc.registry, dst.repository, digest, PROMOTION_V1, early.predicate(), signer)
    early_blobs = [prepared.layer.blob, signature_config([prepared.layer.digest])]
    uploading = [_Task(dc.put_blob, dst.repository, b) for b in early_blobs] if expected != digest else []
    with _lock(env, dst):
        current = dc.try_resolve(dst.repository, dst.tag)
        # current == digest: an interrupted run of this promotion (tag moved, ledger row missing)
        # or a concurrent promotion of the same digest: completed below if a record says so
        if current != digest and current != expected:
            raise _conflict(dst, expected, current, "since the plan was made")
        # checked again under the lock even when the plan found a trusted record (never trust a plan)
        if current is not None and current != digest and current_record(env, dst, current, plan.stage) is None:
            raise PromotionConflictError(
                f"{dst} names {current}, which has no trusted promotion record: the tag was moved outside "
                "builder or the previous-digest chain forks; refusing to build on it",
                found=current,
                pointer=str(dst),
                hint=untrusted_hint(env, plan.stage, plan.target.variant),
            )
        if current == digest:
            return _complete(env, plan, t0)
        src = plan.source
        manifest = plan.manifest if plan.manifest is not None and plan.manifest.digest == digest else None
        if manifest is None:
            manifest = env.client(src.registry).get_manifest(src.repository, digest)

        def write_record() -> PromotionRecord:
            # only a destination that already had the digest can hold a record of an interrupted run
            pending = _pending_record(env, plan, digest, current, signer) if plan.present else None
            if pending is not None:
                return pending
            # a record signed long before the lock was ours (another promotion held it) would carry a
            # stale time (history orders records by time): sign a fresh one then
            stale = time.perf_counter() - t0 > EARLY_RECORD_MAX_AGE_S
            if early.previous != current or not uploading or stale:
                rec = _record(env, plan, signer, "promote", digest, current)
                write = attest_image(
                    dc, dst.repository, digest, PROMOTION_V1, rec.predicate(), signer, lock_dir=env.lock_dir
                )
                return dataclasses.replace(rec, signer=signer.fingerprint, layer=write.layer_digest)
            write = attest_image(
                dc,
                dst.repository,
                digest,
                PROMOTION_V1,
                early.predicate(),
                signer,
                lock_dir=env.lock_dir,
                prepared=prepared,
                uploaded=_Uploads(uploading),  # waited for only when the .att manifest is about to name them
            )
            return dataclasses.replace(early, signer=signer.fingerprint, layer=write.layer_digest)

        # the image, its evidence and our record are independent writes: do them at once; the tag
        # moves only after all three are in the registry
        evidence_stats = CopyStats()
        jobs: list[Callable[[], Any]] = [write_record]
        if src.name != dst.name:
            jobs.append(lambda: copy_evidence(env, src, dst, digest, evidence_stats, known=plan.evidence_manifests))
            jobs.append(lambda: _copy(env, src, dst, manifest, stats, known_absent=not plan.present))
        rec = _map(lambda job: job(), jobs)[0]
        for f in ("mounted", "present", "copied", "copied_bytes", "manifests"):
            setattr(stats, f, getattr(stats, f) + getattr(evidence_stats, f))
        again = dc.try_resolve(dst.repository, dst.tag)
        if again != current:
            raise _conflict(dst, current, again, "while the promotion was being written")
        dc.put_manifest(dst.repository, dst.tag, manifest.raw, manifest.media_type)
        after = dc.resolve(dst.repository, dst.tag)
        if after != digest:
            raise _conflict(dst, digest, after, "right after our write (another writer without the lock)")
        seq = None
        if env.ledger is not None:
            seq = env.ledger.append(_ledger_row(env, plan, rec, plan.decision)).seq
    copied = {
        "mounted": stats.mounted,
        "copied": stats.copied,
        "copied_bytes": stats.copied_bytes,
        "present": stats.present,
        "manifests": stats.manifests,
    }
    return Applied(plan, rec, time.perf_counter() - t0, False, copied, seq)


def _pending_record(
    env: Environment, plan: Plan, digest: str, previous: str | None, signer: Signer
) -> PromotionRecord | None:
    """A record an interrupted run wrote (same pointer, digest, previous, promoter) but whose tag
    move did not happen: reuse it instead of writing a second one."""
    for rec in reversed(read_records(env, plan.destination, digest, plan.stage)):
        if rec.action == "promote" and rec.previous == previous and rec.signer == signer.fingerprint:
            return rec
    return None


def _complete(env: Environment, plan: Plan, t0: float) -> Applied:
    assert plan.digest is not None
    rec = current_record(env, plan.destination, plan.digest, plan.stage)
    if rec is None:
        raise PromotionConflictError(
            f"{plan.destination} already names {plan.digest} but no trusted promotion record says so: "
            "the tag was moved outside builder",
            found=plan.digest,
            pointer=str(plan.destination),
        )
    seq = None
    if env.ledger is not None and rec.layer and not env.ledger.has_attestation(rec.layer):
        seq = env.ledger.append(_ledger_row(env, plan, rec, plan.decision)).seq
    return Applied(plan, rec, time.perf_counter() - t0, True, {}, seq)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One target's result in a batch: a plan (dry run), an applied promotion, or an error."""

    target: Target
    plan: Plan | None = None
    applied: Applied | None = None
    error: BuilderError | None = None

    @property
    def ok(self) -> bool:
        if self.error is not None:
            return False
        return self.applied is not None or (self.plan is not None and self.plan.decision.allowed)

    def to_json(self) -> dict[str, Any]:
        if self.applied is not None:
            return self.applied.to_json()
        out: dict[str, Any] = self.plan.to_json() if self.plan is not None else {"variant": self.target.variant}
        out["applied"] = False
        if self.error is not None:
            out["error"] = self.error.to_json()
        return out


def promote_many(
    env: Environment,
    targets: Sequence[Target],
    stage: str,
    *,
    ticket: str | None = None,
    confirm: bool = False,
    expect_previous: str | None = _UNSET,
    workers: int = 16,
) -> list[Outcome]:
    """Plan (and with ``confirm`` apply) ``stage`` for each target, one decision each, in parallel
    (``workers`` threads; registry clients are thread-safe). Errors are per target."""

    def one(t: Target) -> Outcome:
        plan = None
        try:
            plan = plan_promotion(env, t, stage, ticket=ticket)
            if not confirm:
                return Outcome(t, plan)
            return Outcome(t, plan, apply_promotion(env, plan, expect_previous=expect_previous))
        except BuilderError as exc:
            return Outcome(t, plan, None, exc)

    if len(targets) <= 1 or workers <= 1:
        return [one(t) for t in targets]
    with ThreadPoolExecutor(max_workers=min(workers, len(targets))) as pool:
        return list(pool.map(one, targets))


# ---------------------------------------------------------------------------------------------
# rollback


def rollback(env: Environment, target: Target, stage: str) -> Applied:
    """Point ``stage`` back at the previous digest named by the current trusted promotion record,
    if the signer may roll the stage back (the stage's ``rollback.allowed``); writes a
    ``promotion/v1`` record with ``action: rollback`` and a ledger row. Reads the registry only.
    Raises PolicyDeniedError (not allowed), NotFoundError (nothing to roll back to),
    VerificationError (no trusted record on what the pointer names), PromotionConflictError
    (concurrent change)."""
    from builder.attest import attest_image

    t0 = time.perf_counter()
    signer = _require_signer(env, stage)
    st = env.policy.stage(stage)
    if st.rollback is None:
        raise PolicyDeniedError(
            f"stage {stage} has no rollback rule in {env.policy.path}: nobody may roll it back",
            hint="add `rollback: {allowed: [...]}` to the stage",
        )
    who = st.rollback.allows(signer.fingerprint)
    if who is None:
        raise PolicyDeniedError(
            f"key {signer.fingerprint[:19]}… may not roll back {stage} (allowed: "
            f"{', '.join([a.name for a in st.rollback.approvers] + [s.name for s in st.rollback.keysets])})",
            hint=f"roll back with the key of someone the stage's rollback rule allows: `--key FILE` "
            f"({env.policy.path}, stage {stage})",
            reasons=[{"rule": "rollback", "passed": False, "location": st.rollback.location}],
        )
    dst = stage_location(env, target, stage)
    assert dst.tag is not None
    dc = env.client(dst.registry)
    with _lock(env, dst):
        current = dc.try_resolve(dst.repository, dst.tag)
        if current is None:
            raise NotFoundError(
                f"{dst} does not exist: {target.variant} was never promoted to {stage}, nothing to roll back",
                hint=f"`builder history {target.variant}` shows the stages it is in",
            )
        trust = pointer_trust(env, dst, stage, current)
        rec = trust.record
        if rec is None:
            raise VerificationError(
                trust.note(_promoter_names(env, stage)) + ": cannot tell its previous digest",
                found=current,
                pointer=str(dst),
                foreign=list(trust.foreign),
                hint=untrusted_hint(env, stage, target.variant, foreign=bool(trust.foreign)),
            )
        if rec.previous is None:
            raise NotFoundError(
                f"nothing to roll back to: {current} was the first promotion of {target.variant} into {stage} "
                f"({dst} had no digest before it)",
                hint=f"to replace it, promote another digest explicitly: `builder promote "
                f"{dst.name}@sha256:… --to {stage} --confirm` (it must be what the previous stage holds); "
                f"`builder history {target.variant} --stage {stage}` shows the chain",
            )
        target_digest = rec.previous
        if dc.try_resolve(dst.repository, target_digest) != target_digest:
            raise NotFoundError(
                f"previous digest {target_digest} is no longer in {dst.name} (deleted from the registry): "
                "cannot roll back to it",
                hint=f"promote a digest that still exists explicitly: `builder promote REF@sha256:… --to {stage}`",
            )
        decision = Decision(
            stage, target_digest, True, (RuleResult("rollback", True, f"allowed for {who}", st.rollback.location),)
        )
        plan = Plan(target, stage, stage, dst, target_digest, dst, current, decision, None)
        new = _record(env, plan, signer, "rollback", target_digest, current)
        write = attest_image(
            dc, dst.repository, target_digest, PROMOTION_V1, new.predicate(), signer, lock_dir=env.lock_dir
        )
        new = dataclasses.replace(new, signer=signer.fingerprint, layer=write.layer_digest)
        again = dc.try_resolve(dst.repository, dst.tag)
        if again != current:
            raise _conflict(dst, current, again, "while the rollback was being written")
        manifest = dc.get_manifest(dst.repository, target_digest)
        dc.put_manifest(dst.repository, dst.tag, manifest.raw, manifest.media_type)
        after = dc.resolve(dst.repository, dst.tag)
        if after != target_digest:
            raise _conflict(dst, target_digest, after, "right after our write")
        seq = env.ledger.append(_ledger_row(env, plan, new, decision)).seq if env.ledger is not None else None
    return Applied(plan, new, time.perf_counter() - t0, False, {}, seq)


# ---------------------------------------------------------------------------------------------
# status and resolve


def status(
    env: Environment, targets: Sequence[Target], stages: Sequence[str] | None = None, *, workers: int = 16
) -> list[StatusRow]:
    """Variant x stage: the digest each pointer names, since when (its trusted record), who moved
    it, and the evidence on it (verified signatures, verified attestation types)."""
    from builder.sign import verify_image

    names = list(stages or env.policy.stage_names)
    now = env.now()

    def one(pair: tuple[Target, str]) -> StatusRow:
        t, stage = pair
        loc = stage_location(env, t, stage)
        assert loc.tag is not None
        client = env.client(loc.registry)
        try:
            digest = client.try_resolve(loc.repository, loc.tag)
            if digest is None:
                return StatusRow(t.variant, stage, str(loc), None, None, None, None, None)
            trust = pointer_trust(env, loc, stage, digest)
            rec = trust.record
            report = verify_image(
                client, loc.repository, digest, keys=env.keys, verifiers=env.verifiers, require_signature=False
            )
        except BuilderError as exc:
            return StatusRow(t.variant, stage, str(loc), None, None, None, None, None, note=exc.message)
        sigs = sum(1 for i in report.items if i.kind == "signature" and i.ok)
        types = tuple(sorted({i.predicate_type or "" for i in report.items if i.kind == "attestation" and i.ok}))
        if rec is None:
            return StatusRow(
                t.variant,
                stage,
                str(loc),
                digest,
                None,
                None,
                None,
                None,
                sigs,
                types,
                note=trust.note(_promoter_names(env, stage), short=True),
            )
        age = (now - rec.when).total_seconds()
        who = promoter_label(env, rec)
        return StatusRow(t.variant, stage, str(loc), digest, rec.time, age, rec.action, who, sigs, types)

    pairs = [(t, s) for t in targets for s in names]
    if len(pairs) <= 1 or workers <= 1:
        return [one(p) for p in pairs]
    with ThreadPoolExecutor(max_workers=min(workers, len(pairs))) as pool:
        return list(pool.map(one, pairs))


def resolve(
    env: Environment,
    target: Target,
    stage: str,
    *,
    cluster: str | None = None,
    fleet: str | None = None,
    verify: bool = True,
) -> str:
    """``registry/repository@sha256:...`` of the digest ``stage`` holds for ``target`` - never an
    older one. ``verify``: the digest must carry a trusted promotion record (else
    VerificationError, exit 18, naming who signed the records that exist). With ``cluster``
    (+ ``fleet`` file): IncompatibleError naming the cluster and why when the image cannot run
    there; NotFoundError for an unknown cluster."""
    loc = stage_location(env, target, stage)
    assert loc.tag is not None
    client = env.client(loc.registry)
    digest = client.try_resolve(loc.repository, loc.tag)
    if digest is None:
        raise NotFoundError(
            f"{target.variant} is not in stage {stage} ({loc} does not exist)",
            hint=f"promote it: builder promote {target.variant} --to {stage} --confirm",
        )
    if verify:
        trust = pointer_trust(env, loc, stage, digest)
        if not trust.trusted:
            raise VerificationError(
                trust.note(_promoter_names(env, stage)),
                found=digest,
                pointer=str(loc),
                foreign=list(trust.foreign),
                hint=untrusted_hint(env, stage, target.variant, foreign=bool(trust.foreign))
                + "; pass --no-verify only if you trust the registry's tag as is",
            )
    pinned = loc.pinned(digest)
    if cluster is not None:
        if fleet is None:
            raise NotFoundError(f"--cluster {cluster} needs a fleet file (--fleet FILE)")
        if env.fleet_checker is None:
            raise IncompatibleError(f"cannot decide whether {pinned} runs on {cluster}: no compatibility checker")
        rows = [r for r in env.fleet_checker(client, loc.repository, digest, fleet) if r.cluster == cluster]
        if not rows:
            raise NotFoundError(f"cluster {cluster!r} is not in fleet {fleet}")
        bad = [r for r in rows if r.verdict not in ("ok", "minor-version-compat")]
        if bad:
            raise IncompatibleError(
                f"{pinned} ({stage}) cannot run on cluster {cluster}: " + (bad[0].reason or bad[0].verdict),
                cluster=cluster,
                digest=digest,
                verdict=bad[0].verdict,
            )
    return pinned


def iter_failed(decision: Decision) -> Iterator[RuleResult]:
    yield from decision.failed()


# ---------------------------------------------------------------------------------------------
# compatibility with fleets (builder.compat)


def compat_fleet_checker() -> FleetChecker:
    """A FleetChecker backed by ``builder.compat`` (fleet files and verdicts are owned there).

    Reads the image's config (``NVIDIA_REQUIRE_CUDA``/labels) from the registry and asks the
    compatibility module for one verdict per cluster. Raises NotFoundError for a missing fleet
    file; a compat module without fleet support raises IncompatibleError (rules then deny)."""

    def check(client: RegistryClient, repository: str, digest: str, fleet: str) -> list[FleetEvidence]:
        return _check_fleet(client, repository, digest, fleet)

    return check


LABEL_CUDA = "io.builder.cuda.version"
LABEL_ROCM = "io.builder.rocm.version"
LABEL_ARCHS = "io.builder.gpu-archs"


def image_requirements(config: Mapping[str, Any]) -> dict[str, Any]:
    """What an image needs from a host, from its config: the labels ``builder render`` writes
    (``io.builder.cuda.version``, ``io.builder.rocm.version``, ``io.builder.gpu-archs``), with
    the environment (``NVIDIA_REQUIRE_CUDA``, ``CUDA_VERSION``, ``ROCM_VERSION``) as fallback.
    Returns keyword arguments for ``builder.compat.fleets.check_fleet``."""
    from builder.registry import config_env

    labels = (config.get("config") or {}).get("Labels") or {}
    env = config_env(config)
    cuda = labels.get(LABEL_CUDA) or None
    if not cuda and env.get("CUDA_VERSION"):
        cuda = ".".join(env["CUDA_VERSION"].split(".")[:2])
    rocm = labels.get(LABEL_ROCM) or env.get("ROCM_VERSION") or None
    archs = tuple(a for a in str(labels.get(LABEL_ARCHS) or "").split(",") if a)
    return {"cuda": cuda, "require": env.get("NVIDIA_REQUIRE_CUDA") or None, "rocm": rocm, "image_archs": archs}


def _check_fleet(client: RegistryClient, repository: str, digest: str, fleet: str) -> list[FleetEvidence]:
    from builder.compat.fleets import check_cluster, load_fleet
    from builder.registry import image_config

    loaded = load_fleet(Path(fleet))
    needs = image_requirements(image_config(client, repository, digest))
    vendor = "nvidia" if needs["cuda"] or needs["require"] else ("amd" if needs["rocm"] else None)
    out = []
    for cluster in loaded.clusters:
        cv = check_cluster(cluster, **needs)
        out.append(
            FleetEvidence(
                fleet,
                cluster.name,
                cv.verdict.verdict,
                cluster_reason(cv.verdict.verdict, [(h.label, v.verdict, v.reasons) for h, v in cv.configs])
                or "; ".join(cv.verdict.reasons),
                vendor is None or cluster.vendor == vendor,
            )
        )
    return out


def cluster_reason(verdict: str, hosts: Sequence[tuple[str, str, Sequence[str]]]) -> str:
    """One line for a cluster's ``verdict`` from its host configurations ``(label, verdict,
    reasons)``: each configuration that has this verdict named once (``driver 550.144.03, NVIDIA
    GeForce RTX 4090 (blocked): reason; reason``), configurations with the same reasons merged,
    groups separated by `` | ``."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for label, v, reasons in hosts:
        if v == verdict:
            groups.setdefault(tuple(dict.fromkeys(reasons)), []).append(label)
    return " | ".join(f"{' and '.join(labels)} ({verdict}): {'; '.join(rs)}" for rs, labels in groups.items())
