"""``builder check``: one image reference (or variant id) checked, statically or on this host's devices.

:func:`check_reference` resolves the target to a digest, reads what the image needs
(:mod:`builder.checks.image`) and then either judges it against a saved host or a fleet
(:mod:`builder.checks.static`, nothing runs) or runs the device checks here
(:mod:`builder.checks.device`) and attaches the signed ``device-check/v1`` result. The registry
clients, the signer and the project's matrices come from the caller (the composition root).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal, NotRequired, TypeVar

from typing_extensions import TypedDict

from builder.checks.device import DeviceCheckDocument, Mode, describe_run, run_device_check, with_measured_step
from builder.checks.evidence import EvidenceDocument, SkippedDocument, evidence_documents, evidence_failure
from builder.checks.image import ImageFacts, probe_image
from builder.errors import CheckFailedError, ConfigError
from builder.models import SummaryRow
from builder.predicates import DEVICE_CHECK_V1
from builder.registry import parse_reference
from builder.selection import HasVariants, looks_like_variant_id, variant_reference

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from pathlib import Path

    from builder.checks.dcgm import DcgmDiag
    from builder.checks.device import CheckResult, Runner
    from builder.checks.evidence import EvidenceRun
    from builder.checks.host.model import HostInfo
    from builder.checks.runners import Placement
    from builder.checks.static import StaticCheck
    from builder.checks.topology import Topology
    from builder.compat.kernels import KernelBinary
    from builder.image.layers import LayerCache
    from builder.models import CheckCommand
    from builder.registry import RegistryClient
    from builder.signing.signer import Signer

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class CheckRequest:
    """What ``builder check`` was asked. ``reference``: an image reference or a variant id (its moving tag
    ``<registry>/<repository>:<variant-id>``). ``static``: a verdict only, against the saved ``host_file``
    or the ``fleet_file`` (exactly one). Otherwise the device checks run here: ``mode``, ``cdi`` (GPUs as
    CDI devices), ``framework``, ``timeout`` (seconds per container), ``shm_size``; ``key``: the
    check-runner key that signs the result (None: the project's), ``attest`` (None: when the key exists).
    ``platform``: the image platform checked (None: an index's linux/amd64, else its first)."""

    reference: str
    static: bool = False
    host_file: Path | None = None
    fleet_file: Path | None = None
    mode: Mode | Literal["auto"] = "auto"
    cdi: bool = False
    framework: str = "auto"
    timeout: float = 600.0
    shm_size: str | None = "1g"
    platform: str | None = None
    key: Path | None = None
    attest: bool | None = None

    def validate(self) -> None:
        """Raise ConfigError (2) for a static check without exactly one of a host and a fleet."""
        if self.static and (self.host_file is None) == (self.fleet_file is None):
            raise ConfigError(
                "--static needs exactly one of --host FILE or --fleet NAME|FILE",
                hint="e.g. `builder check REF --static --fleet demo`, or --host with `builder hostinfo --json` output",
            )


# ------------------------------------------------------------------------------------- the answers


class AttestationDocument(TypedDict):
    """The ``device-check/v1`` attestation attached: its predicate type, the key that signed it and
    whether it was ``written`` (False: an equivalent one was already attached)."""

    predicate_type: str
    key: str
    written: bool


class DeviceRunDocument(DeviceCheckDocument):
    """``builder check REF --json``: the device check (the ``device-check/v1`` predicate with ``passed``)
    and, when it was attached, the attestation; ``evidence``: the tests and benchmark the variant
    declares, run after it (docs/evidence.md); ``evidence_skipped``: the declared checks that did not run,
    each with its reason (the device check failed; fewer GPUs than a collective check needs)."""

    attestation: NotRequired[AttestationDocument]
    evidence: NotRequired[list[EvidenceDocument]]
    evidence_skipped: NotRequired[list[SkippedDocument]]


@dataclasses.dataclass(frozen=True)
class Attestation:
    """The ``device-check/v1`` attestation attached to the checked digest (``written``: False when an
    equivalent one signed by the same key was already there)."""

    key: Path
    written: bool
    predicate_type: str = DEVICE_CHECK_V1

    def to_json(self) -> AttestationDocument:
        return {"predicate_type": self.predicate_type, "key": str(self.key), "written": self.written}


@dataclasses.dataclass(frozen=True)
class DeviceCheck:
    """The device checks of ``reference`` (``registry/repository@digest``) run on this host, and the
    attestation of the result when one was attached."""

    reference: str
    image: ImageFacts
    result: CheckResult
    attestation: Attestation | None = None
    evidence: EvidenceRun | None = None  # declared tests/benchmark (builder.checks.evidence)
    evidence_written: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.result.passed and (self.evidence is None or self.evidence.passed)

    def summary_rows(self) -> tuple[SummaryRow, ...]:
        """One row: the image (reference without its digest), its digest, ``passed`` or ``failed``."""
        status = "passed" if self.passed else "failed"
        return (SummaryRow(self.reference.split("@", 1)[0], self.image.digest, f"check {status}"),)

    def to_json(self) -> DeviceRunDocument:
        r = self.result.to_json()
        doc: DeviceRunDocument = {
            "predicate_type": r["predicate_type"],
            "passed": r["passed"],
            "checker": r["checker"],
            "result": r["result"],
            "image": r["image"],
            "host": r["host"],
            "run": r["run"],
            "placement": r["placement"],
            "steps": r["steps"],
            "diagnosis": r["diagnosis"],
        }
        if self.attestation is not None:
            doc["attestation"] = self.attestation.to_json()
        if self.evidence is not None:
            doc["evidence"] = evidence_documents(self.evidence, self.evidence_written)
            if self.evidence.skipped:
                doc["evidence_skipped"] = [s.to_json() for s in self.evidence.skipped]
        return doc

    def failure(self) -> CheckFailedError | None:
        """The error ``builder check`` exits with (20) when a step failed, carrying the diagnosis; else None."""
        if self.passed:
            return None
        failed = evidence_failure(self.evidence) if self.evidence is not None and self.result.passed else None
        if failed is not None:
            return CheckFailedError(
                f"device check of {self.reference} passed, but {failed}",
                hint="the program's output is in --json (evidence[]) and in the signed result",
                result=self.to_json(),
            )
        d = self.result.diagnosis
        return CheckFailedError(
            f"device check of {self.reference} failed: "
            + (f"{d.key} (at fault: {d.at_fault}): {d.summary}" if d else "see the failed steps"),
            hint=d.fix if d else None,
            diagnosis=d.key if d else None,
            at_fault=d.at_fault if d else None,
            noticed_by=d.noticed_by if d else None,
            result=self.to_json(),
        )


# ------------------------------------------------------------------------------------ the check


@dataclasses.dataclass(frozen=True)
class PinnedImage:
    """A checked image pinned by digest: its ``registry`` and ``repository``, the ``client`` for that
    registry, the ``digest`` the reference resolved to and the image's ``facts`` (for one platform)."""

    registry: str
    repository: str
    client: RegistryClient
    digest: str
    facts: ImageFacts

    @property
    def reference(self) -> str:
        """``registry/repository@sha256:...`` (the digest checked: an index or a manifest)."""
        return f"{self.registry}/{self.repository}@{self.digest}"

    @property
    def run_reference(self) -> str:
        """``registry/repository@sha256:...`` of the platform manifest that was probed (what runs)."""
        return f"{self.registry}/{self.repository}@{self.facts.platform_digest}"


def pin_image(
    reference: str,
    *,
    registries: Callable[[str], RegistryClient],
    default_registry: str,
    matrices: Callable[[], Iterable[HasVariants]],
    platform: str | None,
) -> PinnedImage:
    """Resolve ``reference`` (an image reference, or a variant id: its moving tag in ``default_registry``;
    ``matrices()`` is loaded only then) to a digest and read the image's facts for ``platform``: the
    manifest read by tag is the one pinned (its digest is the hash of the bytes read, checked against the
    registry's ``Docker-Content-Digest``), so a tag is read once, never resolved and then read again.
    Raises NotFoundError (unknown variant, tag or digest) and registry errors."""
    ref = reference
    if looks_like_variant_id(ref):
        ref = variant_reference(matrices(), ref, default_registry)
    r = parse_reference(ref, default_registry)
    client = registries(r.registry)
    facts = probe_image(client, r.repository, r.digest or r.ref, platform=platform)
    return PinnedImage(r.registry, r.repository, client, facts.digest, facts)


def check_reference(
    request: CheckRequest,
    *,
    registries: Callable[[str], RegistryClient],
    default_registry: str,
    matrices: Callable[[], Iterable[HasVariants]],
    signer: Callable[[Path], Signer],
    default_key: Path,
    lock_dir: Path,
    host: Callable[[], HostInfo] | None = None,
    on_run: Callable[[str], None] | None = None,
    runner: Runner | None = None,
    placement: Callable[[], Placement] | None = None,
    commit: Callable[[], str | None] | None = None,
    topology: Callable[[str], Topology] | None = None,
    root: Path | None = None,
    layer_dir: Path | None = None,
    cpu: Callable[[], str | None] | None = None,
    node_tools: Callable[[Sequence[str]], tuple[int, str]] | None = None,
) -> StaticCheck | DeviceCheck:
    """Check ``request.reference`` (see :class:`CheckRequest`).

    A variant id becomes its moving tag in ``default_registry`` (``matrices()`` loads the project's
    matrices, only then); the reference is resolved to a digest with the client ``registries(host)``
    gives, and the image's facts are read for ``request.platform``. Static: the verdict on the host file
    or the fleet (nothing runs). Otherwise ``host()`` describes this host (default:
    :func:`builder.checks.host.gather.live_host`, the live probe with the engine's ``docker info``; called
    in a thread while the reference is pinned and the containers run), ``on_run`` is told what runs (one
    line, :func:`describe_run`; in a thread as the containers start, returned before anything else is
    said), the checks run in fresh containers from the probed platform manifest (``runner``: a check
    runner's ``run_container``, default this host's engine; ``placement()`` afterwards says where they ran,
    for the predicate), and the result is attested with ``signer(key)`` (``request.key`` or
    ``default_key``; locks under ``lock_dir``) when asked, or by
    default when the key file exists. After a passing device check the ``tests`` and ``benchmark`` the
    image's variant declares in the matrices run with the same runner (:mod:`builder.checks.evidence`),
    recording ``topology(vendor)`` (default :func:`builder.checks.topology.probe_topology`) and the
    project's commit (``commit()``, asked only then; scripts read from the project ``root``; None: the
    declared checks are reported skipped with that reason), attested as ``test-result/v1`` /
    ``benchmark/v1`` with the same key. A cluster check (``runner``) runs them through the same runner;
    ``cpu()`` names the CPU model of the node they ran on (None: this host's; the call answering None: not
    known) and ``node_tools(argv) -> (exit code, output)`` runs that node's GPU tools, outside containers:
    the topology and the DCGM diagnostic are read with it (None: this host's tools).

    Never raises for a blocked verdict or a failed check (the answer's ``failure()`` is the error).
    A static verdict judges the GPU code measured in the image's layers (:mod:`builder.image`, layer
    summaries cached under ``layer_dir``, :class:`builder.image.layers.LayerCache`; None: not cached), each
    library per GPU; the declared architecture list only when none is found. A passing device check on a
    host without GPUs imports none of the static, image-layer or diagnosis modules.

    Raises ConfigError (a static request without one host or fleet), NotFoundError (unknown variant,
    tag or digest; missing host or fleet file), registry errors, EngineUnavailableError, SigningError /
    SigningKeyError when attesting."""
    request.validate()
    probing = None
    if not request.static:
        # the engine answers `docker info` while the registry answers the pin and the containers run
        probing = in_background(host or _live_host, "host-probe")
    image = pin_image(
        request.reference,
        registries=registries,
        default_registry=default_registry,
        matrices=matrices,
        platform=request.platform,
    )
    r, client, digest, facts, pinned = image, image.client, image.digest, image.facts, image.reference
    if request.static:
        from builder.checks.static import StaticCheck, fleet_verdict, host_verdict
        from builder.image.inspection import LayerRead, inspect_image

        def layer_read(layer: LayerRead, done: int, total: int) -> None:
            if on_run is not None and not layer.cached:  # progress on big images; cached layers are instant
                on_run(f"measured GPU code: layer {done}/{total} {layer.digest[:19]} read")

        measured = inspect_image(
            client, r.repository, digest, platform=request.platform, cache=_layer_cache(layer_dir), on_layer=layer_read
        )
        kernels = measured.kernel_binaries()
        if request.host_file is not None:
            from builder.checks.host.reading import load_hostinfo  # pydantic: only for a saved host

            return StaticCheck(pinned, facts, host_verdict(facts, load_hostinfo(request.host_file), kernels))
        assert request.fleet_file is not None  # validate(): exactly one
        return StaticCheck(pinned, facts, fleet_verdict(facts, request.fleet_file, kernels=kernels))

    assert probing is not None  # started above for every device check
    host_facts = probing
    # the GPU code in the image's layers, read on a GPU host while the containers run (the arch-measured step)
    measuring = measure_in_background(
        client,
        r.repository,
        digest,
        request.platform,
        layer_dir,
        when=lambda: host_facts().vendor in ("nvidia", "amd"),
    )
    # run exactly the platform manifest that was probed (an index would let the engine choose)
    run_ref = f"{r.registry}/{r.repository}@{facts.platform_digest}"
    told = None
    if on_run is not None:  # in a thread as the containers start: a slow terminal never delays them
        line = describe_run(facts, None, run_ref, mode=request.mode, cdi=request.cdi)  # the image decides
        told = in_background(lambda: on_run(line), "announce")
    try:
        result = run_device_check(
            run_ref,
            facts,
            # this host: the engine answers `docker info` while the containers run; a cluster session's steps
            # (a Slurm job's node facts, then its containers) go one after another
            host_facts if runner is None else host_facts(),
            mode=request.mode,
            cdi=request.cdi,
            framework=request.framework,
            timeout=request.timeout,
            shm_size=request.shm_size,
            runner=runner,
        )
    finally:
        if told is not None:
            told()  # said before anything after it (an error too)
    if result.host.vendor in ("nvidia", "amd") and result.mode in ("nvidia", "amd"):
        result = with_measured_step(result, measuring)
    if placement is not None:
        where = placement()
        found = result.diagnosis.on_node(where.node) if result.diagnosis is not None else None  # the fix names it
        result = dataclasses.replace(result, placement=where, diagnosis=found)
    key = request.key or default_key
    attest = request.attest if request.attest is not None else (request.key is not None or key.exists())
    attestation = None
    if attest:
        from builder.checks.device import attest_result

        written = attest_result(result, client, r.repository, digest, signer(key), lock_dir=lock_dir)
        attestation = Attestation(key, written.appended)
    # the one list of what a variant gets after its probe, wherever the probe ran (this host or a cluster)
    declared = declared_checks(matrices, facts.variant) if facts.variant else ()
    if not declared:
        return DeviceCheck(pinned, facts, result, attestation)
    from builder.checks.evidence import EvidenceRun, SkippedCheck, attest_evidence, run_evidence
    from builder.checks.topology import Topology

    if root is None:  # never silently: the declared checks are named as not run, with the reason
        why = "no project root was given to read the declared scripts from"
        skipped = tuple(SkippedCheck(c.kind, why) for c in declared)
        return DeviceCheck(
            pinned, facts, result, attestation, EvidenceRun(result, (), Topology(), None, None, skipped=skipped)
        )

    # a failed device check runs no declared check (all named as skipped): no node probes for them
    # either (a DCGM diagnostic is minutes of a job's steps)
    probed = result.passed
    topo, health = _topology_and_health(result.host.vendor, topology, node_tools) if probed else (Topology(), None)
    node_cpu = cpu() if cpu is not None and probed else None  # the node the checks ran on, not this host
    ev = run_evidence(
        run_ref,
        result,
        declared,
        topology=topo,
        commit=commit() if commit is not None else None,
        root=root,
        cdi=request.cdi,
        runner=runner,
        health=health,
        cpu=node_cpu,
    )
    if cpu is not None and node_cpu is None:  # not known there: never this host's CPU in its place
        ev = dataclasses.replace(ev, cpu=None)
    ev_written = attest_evidence(ev, client, r.repository, digest, signer(key), lock_dir=lock_dir) if attest else ()
    return DeviceCheck(pinned, facts, result, attestation, ev, ev_written)


def _topology_and_health(
    vendor: str,
    topology: Callable[[str], Topology] | None,
    tools: Callable[[Sequence[str]], tuple[int, str]] | None,
) -> tuple[Topology, DcgmDiag | None]:
    """The topology (``topology(vendor)``; else read with the node's ``tools``, None: this host's) and the DCGM
    diagnostic (NVIDIA) the declared checks' predicates record."""
    from builder.checks.dcgm import probe_dcgm
    from builder.checks.topology import probe_topology

    topo = topology(vendor) if topology is not None else probe_topology(vendor, run=tools)
    return topo, probe_dcgm(run=tools) if vendor == "nvidia" else None


def in_background(call: Callable[[], T], name: str) -> Callable[[], T]:
    """Start ``call()`` in a daemon thread named ``name`` (an error or a signal in the caller never waits on
    it); the returned call waits for it and returns its value or raises the exception it raised (also
    :class:`builder.process.Interrupted`: a signal stops the thread's commands too)."""
    import threading

    box: list[T] = []
    failed: list[BaseException] = []

    def work() -> None:
        try:
            box.append(call())
        except BaseException as exc:  # handed to the caller, raised where it waits (as a thread pool does)
            failed.append(exc)

    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()

    def wait() -> T:
        thread.join()
        if failed:
            raise failed[0]
        return box[0]

    return wait


def measure_in_background(
    client: RegistryClient,
    repository: str,
    digest: str,
    platform: str | None,
    layer_dir: Path | None,
    *,
    when: Callable[[], bool] | None = None,
) -> Callable[[], tuple[KernelBinary, ...]]:
    """Start reading the GPU libraries of ``repository@digest`` (``platform``; layer summaries cached under
    ``layer_dir``, None: not cached) in a daemon thread (:func:`in_background`), once ``when()`` says so
    (None: at once; False: nothing is read or imported, no libraries); the returned call waits for them and
    raises what ``when`` or :func:`builder.image.inspection.inspect_image` raised."""

    def read() -> tuple[KernelBinary, ...]:
        if when is not None and not when():
            return ()
        from builder.image.inspection import inspect_image

        cache = _layer_cache(layer_dir)
        return inspect_image(client, repository, digest, platform=platform, cache=cache).kernel_binaries()

    return in_background(read, "measure-gpu-code")


def _live_host() -> HostInfo:
    """:func:`builder.checks.host.gather.live_host`, its modules imported where it runs (a thread)."""
    from builder.checks.host.gather import live_host

    return live_host()


def _layer_cache(layer_dir: Path | None) -> LayerCache | None:
    """The layer summaries cached under ``layer_dir`` (None: none), built only where layers are read."""
    if layer_dir is None:
        return None
    from builder.image.layers import LayerCache

    return LayerCache(layer_dir)


def declared_checks(matrices: Callable[[], Iterable[HasVariants]], variant_id: str) -> tuple[CheckCommand, ...]:
    """The ``tests``, ``benchmark`` and ``collective`` the project's matrices declare for ``variant_id``
    (none for an id the matrices do not know: an image built elsewhere)."""
    for m in matrices():
        for v in m.variants:
            if v.id == variant_id:
                return tuple(c for c in (v.tests, v.benchmark, v.collective) if c is not None)
    return ()


__all__ = [
    "Attestation",
    "AttestationDocument",
    "CheckRequest",
    "DeviceCheck",
    "DeviceRunDocument",
    "PinnedImage",
    "check_reference",
    "declared_checks",
    "in_background",
    "measure_in_background",
    "pin_image",
]
