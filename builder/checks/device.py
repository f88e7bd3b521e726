"""Device checks: in-container checks whose result becomes a ``device-check/v1`` attestation (predicate
documented in docs/checks.md). Static verdicts (host file or fleet): :mod:`builder.checks.static`.

In-container flow, each step in a fresh container with a timeout (``builder.engine.run_container``):

* NVIDIA (``mode="nvidia"``): ``docker run --gpus all`` (or, with ``cdi=True``,
  ``--device nvidia.com/gpu=all``) running ``nvidia-smi``; then the probe program
  (``builder/checks/probe.py``, sent on stdin to the image's own python) for framework import,
  device count, a computation on every GPU and architecture coverage.
* AMD (``mode="amd"``): ``--device /dev/kfd --device /dev/dri`` and ``--group-add`` with the gids
  that own those nodes on this host; the probe runs rocm-smi, rocminfo and the framework steps.
* CPU (``mode="cpu"``): the probe imports the framework and runs a small computation.

A failing step is diagnosed (``builder.checks.diagnosis``) with the host and image facts as context
(``builder.checks.context``).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import glob
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from typing_extensions import TypedDict

from builder import __version__
from builder.checks.diagnosis import Diagnosis, DiagnosisDocument  # the rules: only for a failure
from builder.checks.runners import Placement, PlacementDocument
from builder.errors import BuilderError
from builder.models import GpuVendor, Vendor
from builder.predicates import DEVICE_CHECK_V1

if TYPE_CHECKING:
    from builder.checks.host.model import HostInfo
    from builder.checks.image import ImageFacts
    from builder.compat.kernels import KernelBinary
    from builder.engine import ContainerResult
    from builder.registry import RegistryClient
    from builder.signing.layer import WriteResult
    from builder.signing.signer import Signer

PROBE_PATH = Path(__file__).with_name("probe.py")

#: Finds the image's python (demo images: /opt/venv/bin/python; else python3 on PATH) and runs the
#: probe from stdin with the remaining arguments.
PYTHON_SHIM = (
    "for p in /opt/venv/bin/python3 /opt/venv/bin/python python3 /usr/local/bin/python3 /usr/bin/python3 python; do "
    'if command -v "$p" >/dev/null 2>&1; then exec "$p" - "$@"; fi; done; '
    'echo "builder: no python3 in the image (looked for /opt/venv/bin/python, python3 on PATH)" >&2; exit 127'
)

DEFAULT_SHM = "1g"

#: how the GPUs are requested: ``nvidia`` (``--gpus all`` or CDI), ``amd`` (/dev/kfd, /dev/dri), ``cpu`` (none)
Mode = Literal[GpuVendor, "cpu"]


# --------------------------------------------------------------------------------------------
# the device-check/v1 predicate (docs/checks.md) and the --json document
# --------------------------------------------------------------------------------------------


class StepDocument(TypedDict):
    """One step: ``name`` (``container-start+nvidia-smi``, ``probe/<step>``), ``ok``, wall time in
    ``seconds``, ``detail`` (free-form: the step's own facts, e.g. the container's ``command``,
    ``exit_code``, ``stdout``, ``stderr``) and the ``error`` shown for a failed step."""

    name: str
    ok: bool
    seconds: float
    detail: dict[str, Any]
    error: str | None


class CheckerDocument(TypedDict):
    tool: str
    version: str


class CheckedImageDocument(TypedDict):
    """The image checked: the reference run and what the image says it needs (null: not known)."""

    reference: str
    digest: str | None
    platform_digest: str | None
    platform: str | None
    accelerator: str | None
    cuda_version: str | None
    rocm_version: str | None
    require_cuda: str | None
    framework: str | None
    framework_version: str | None
    gpu_archs: list[str]
    variant: str | None


class CheckedGpuDocument(TypedDict):
    name: str | None
    brand: str | None
    compute_capability: str | None
    gfx_target: str | None
    memory_mib: int | None
    bus_id: str | None
    vbios: str | None
    firmware: str | None
    mig_mode: str | None


class CheckedToolkitDocument(TypedDict):
    present: bool
    nvidia_ctk_version: str | None
    runtime_hook: str | None
    cdi_specs: list[str]


class CheckedEngineDocument(TypedDict):
    name: str
    version: str | None
    default_runtime: str | None
    oci_runtime: str | None
    runtimes: list[str]
    cgroup_driver: str | None


class CheckedHostDocument(TypedDict):
    """The host the check ran on (a summary of ``builder hostinfo``)."""

    vendor: Vendor
    driver_version: str | None
    cuda_version: str | None
    rocm_version: str | None
    gpus: list[CheckedGpuDocument]
    fabric_manager: str | None
    toolkit: CheckedToolkitDocument | None
    engine: CheckedEngineDocument | None


class RunDocument(TypedDict):
    """How the containers ran: the mode, the device request, ``--shm-size``, start and end (UTC, ISO 8601)."""

    mode: Mode
    device_request: str
    shm_size: str | None
    started_at: str
    finished_at: str


class DeviceCheckPredicate(TypedDict):
    """The ``device-check/v1`` predicate (docs/checks.md): who checked, the result, the image, the host,
    how it ran, where (``placement``: cluster, runner, node, job id), every step and, for a failure, the
    diagnosis."""

    checker: CheckerDocument
    result: Literal["passed", "failed"]
    image: CheckedImageDocument
    host: CheckedHostDocument
    run: RunDocument
    placement: PlacementDocument
    steps: list[StepDocument]
    diagnosis: DiagnosisDocument | None


class DeviceCheckDocument(DeviceCheckPredicate):
    """A finished device check as ``--json`` prints it: the predicate, its type and ``passed``."""

    predicate_type: str
    passed: bool


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of a check: ``name``, ``ok``, ``seconds`` (wall time), ``detail``, ``error``."""

    name: str
    ok: bool
    seconds: float
    detail: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    error: str | None = None

    def to_json(self) -> StepDocument:
        return {
            "name": self.name,
            "ok": self.ok,
            "seconds": self.seconds,
            "detail": dict(self.detail),
            "error": self.error,
        }


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """A finished device check. ``passed``: every step ok. ``diagnosis``: for a failure. ``placement``: where
    it ran (default: this host's engine, no cluster)."""

    image_ref: str
    image: ImageFacts | None
    host: HostInfo
    mode: Mode
    device_request: str
    shm_size: str | None
    steps: tuple[Step, ...]
    started_at: str
    finished_at: str
    diagnosis: Diagnosis | None = None
    placement: Placement = dataclasses.field(default_factory=lambda: Placement(None, "docker"))

    @property
    def passed(self) -> bool:
        return bool(self.steps) and all(s.ok for s in self.steps)

    def predicate(self) -> DeviceCheckPredicate:
        """The ``device-check/v1`` predicate (fields: docs/checks.md)."""
        h = self.host
        img = self.image
        return {
            "checker": {"tool": "builder", "version": __version__},
            "result": "passed" if self.passed else "failed",
            "image": {
                "reference": self.image_ref,
                "digest": img.digest if img else None,
                "platform_digest": img.platform_digest if img else None,
                "platform": img.platform if img else None,
                "accelerator": img.accelerator if img else None,
                "cuda_version": img.cuda_version if img else None,
                "rocm_version": img.rocm_version if img else None,
                "require_cuda": img.require_cuda if img else None,
                "framework": img.framework if img else None,
                "framework_version": img.framework_version if img else None,
                "gpu_archs": list(img.gpu_archs) if img else [],
                "variant": img.variant if img else None,
            },
            "host": {
                "vendor": h.vendor,
                "driver_version": h.driver_version,
                "cuda_version": h.cuda_version,
                "rocm_version": h.rocm_version,
                "gpus": [
                    {
                        "name": g.name,
                        "brand": g.brand,
                        "compute_capability": g.compute_capability,
                        "gfx_target": g.gfx_target,
                        "memory_mib": g.memory_mib,
                        "bus_id": g.bus_id,
                        "vbios": g.vbios,
                        "firmware": g.firmware,
                        "mig_mode": g.mig_mode,
                    }
                    for g in h.gpus
                ],
                "fabric_manager": h.fabric_manager,
                "toolkit": (
                    {
                        "present": h.toolkit.present,
                        "nvidia_ctk_version": h.toolkit.nvidia_ctk_version,
                        "runtime_hook": h.toolkit.runtime_hook,
                        "cdi_specs": [s.path for s in h.toolkit.cdi_specs],
                    }
                    if h.toolkit
                    else None
                ),
                "engine": (
                    {
                        "name": h.engine.name,
                        "version": h.engine.version,
                        "default_runtime": h.engine.default_runtime,
                        "oci_runtime": h.engine.oci_runtime_kind,
                        "runtimes": list(h.engine.runtimes),
                        "cgroup_driver": h.engine.cgroup_driver,
                    }
                    if h.engine
                    else None
                ),
            },
            "run": {
                "mode": self.mode,
                "device_request": self.device_request,
                "shm_size": self.shm_size,
                "started_at": self.started_at,
                "finished_at": self.finished_at,
            },
            "placement": self.placement.to_json(),
            "steps": [s.to_json() for s in self.steps],
            "diagnosis": self.diagnosis.to_json() if self.diagnosis else None,
        }

    def to_json(self) -> DeviceCheckDocument:
        return {"predicate_type": DEVICE_CHECK_V1, "passed": self.passed, **self.predicate()}


# --------------------------------------------------------------------------------------------
# in-container checks
# --------------------------------------------------------------------------------------------

Runner = Callable[..., "ContainerResult"]


def mode_for(image: ImageFacts | None, host: HostInfo | None, requested: Mode | Literal["auto"] = "auto") -> Mode:
    """nvidia | amd | cpu: the requested mode, else from the image's accelerator (cuda -> nvidia,
    rocm -> amd), else (no image facts) from the host's vendor, else cpu. The host is read only without
    image facts (None: not known)."""
    if requested != "auto":
        return requested
    modes: dict[str, Mode] = {"cuda": "nvidia", "rocm": "amd", "nvidia": "nvidia", "amd": "amd"}
    if image is not None:
        return modes.get(image.accelerator, "cpu")
    return modes.get(host.vendor, "cpu") if host is not None else "cpu"


def describe_run(
    image: ImageFacts | None,
    host: HostInfo | None,
    run_ref: str,
    *,
    mode: Mode | Literal["auto"] = "auto",
    cdi: bool = False,
) -> str:
    """One honest line saying what ``run_device_check`` is about to run (not a command to paste: each
    step's exact ``docker run`` argv is in its ``detail.command``), e.g. ``running device checks (mode
    nvidia, GPUs requested with --gpus all) in fresh containers from R@sha256:P (the linux/amd64
    platform manifest of image index sha256:D)``. ``host``: read only without image facts (:func:`mode_for`)."""
    m = mode_for(image, host, mode)
    request = {
        "nvidia": "GPUs requested with " + ("--device nvidia.com/gpu=all (CDI)" if cdi else "--gpus all"),
        "amd": "GPUs requested with --device /dev/kfd --device /dev/dri",
        "cpu": "no devices requested",
    }.get(m, "no devices requested")
    where = ""
    if image is not None:
        platform = image.platform or "single-platform"
        if image.digest != image.platform_digest:
            where = f" (the {platform} platform manifest of image index {image.digest})"
        else:
            where = f" (image manifest {image.digest}, {platform})"
    return f"running device checks (mode {m}, {request}) in fresh containers from {run_ref}{where}"


def amd_group_ids(dev_root: Path = Path("/dev")) -> tuple[str, ...]:
    """Numeric gids owning /dev/kfd and /dev/dri/renderD* on this host (for ``--group-add``)."""
    gids: list[str] = []
    for p in [str(dev_root / "kfd"), *sorted(glob.glob(str(dev_root / "dri" / "renderD*")))]:
        try:
            gid = str(os.stat(p).st_gid)
        except OSError:
            continue
        if gid != "0" and gid not in gids:
            gids.append(gid)
    return tuple(gids)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: Lines the engine prints while it pulls the image before ``docker run`` starts it (the docker CLI's
#: non-TTY pull progress: ``Unable to find image 'R' locally``, ``TAG: Pulling from REPO``, per-layer
#: ``<layer id>: Pulling fs layer|Waiting|Downloading|Verifying Checksum|Download complete|Extracting|
#: Pull complete|Already exists``, ``Digest: sha256:...``, ``Status: Downloaded newer image for R``).
#: Anchored to those shapes so that a real error that merely contains "Waiting" is never dropped.
PULL_NOISE = (
    re.compile(r"^Unable to find image '[^']*' locally$"),
    re.compile(r"^\S+: Pulling from \S+$"),
    re.compile(
        r"^[0-9a-f]{4,64}: (?:Pulling fs layer|Waiting|Downloading|Verifying Checksum|Download complete|Extracting"
        r"|Pull complete|Already exists)\b.*$"
    ),
    re.compile(r"^Digest: sha256:[0-9a-f]+$"),
    re.compile(r"^Status: (?:Downloaded newer image|Image is up to date) for \S+$"),
)

#: How much of a container's stdout/stderr a step keeps in ``detail`` (the tail, in characters).
KEEP_OUTPUT = 20000


def meaningful_lines(text: str) -> list[str]:
    """The non-empty lines of engine/container output without the pull progress (``PULL_NOISE``)."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    return [ln for ln in lines if not any(p.match(ln.strip()) for p in PULL_NOISE)]


def container_step(name: str, r: ContainerResult) -> Step:
    """A step from one container run: ``error`` is the meaningful stderr (pull progress left out, the
    last 1500 characters); ``detail`` keeps stdout and the whole stderr (up to ``KEEP_OUTPUT``)."""
    ok = r.exit_code == 0
    detail = {
        "exit_code": r.exit_code,
        "stdout": r.stdout[-KEEP_OUTPUT:],
        "stderr": r.stderr[-KEEP_OUTPUT:],
        "command": list(r.command),
        "timed_out": r.timed_out,
    }
    err = None
    if not ok:
        meaningful = "\n".join(meaningful_lines(r.stderr)) or r.stdout.strip() or f"exit code {r.exit_code}"
        err = meaningful[-1500:]
    return Step(name, ok, r.seconds, detail, err)


def with_measured_step(result: CheckResult, measured: Callable[[], tuple[KernelBinary, ...]]) -> CheckResult:
    """``result`` with the ``arch-measured`` step (:mod:`builder.checks.measured`): ``measured()`` gives
    the GPU libraries measured in the image's layers (called now, so a measurement started before the
    containers ran overlaps them). A failing step fails the result and, when the containers passed, is
    diagnosed; a BuilderError from ``measured`` skips the step, saying why."""
    from builder.checks.measured import STEP, measured_arch

    t0 = time.monotonic()
    try:
        kernels = measured()
    except BuilderError as exc:  # the layers could not be read: the step says so, the container steps decide
        skipped = {"skipped": f"the image's layers were not read: {exc.message}"}
        return dataclasses.replace(result, steps=(*result.steps, Step(STEP, True, time.monotonic() - t0, skipped)))
    ok, detail, error = measured_arch(result.host, kernels)
    step = Step(STEP, ok, time.monotonic() - t0, detail, error)
    diagnosis = result.diagnosis
    if not ok and diagnosis is None:
        from builder.checks.context import diagnosis_context
        from builder.checks.diagnosis import diagnose_many

        diagnosis = diagnose_many([error or ""], diagnosis_context(result.host, result.image))
    return dataclasses.replace(result, steps=(*result.steps, step), diagnosis=diagnosis)


def device_request(mode: Mode, *, cdi: bool = False) -> tuple[str, dict[str, Any]]:
    """How ``mode``'s containers get the GPUs: the request as the predicate records it (``--gpus all``,
    ``cdi:nvidia.com/gpu=all``, ``--device /dev/kfd --device /dev/dri --group-add G``..., ``none``) and the
    :class:`builder.engine.ContainerOptions` that make it (``gpus``, ``devices``, ``group_add``)."""
    if mode == "nvidia" and cdi:
        return "cdi:nvidia.com/gpu=all", {"gpus": None, "devices": ["nvidia.com/gpu=all"], "group_add": ()}
    if mode == "nvidia":
        return "--gpus all", {"gpus": "all", "devices": [], "group_add": ()}
    if mode == "amd":
        gids = amd_group_ids()
        request = "--device /dev/kfd --device /dev/dri" + "".join(f" --group-add {g}" for g in gids)
        return request, {"gpus": None, "devices": ["/dev/kfd", "/dev/dri"], "group_add": gids}
    return "none", {"gpus": None, "devices": [], "group_add": ()}


def probe_steps(r: ContainerResult) -> tuple[list[Step], list[str]]:
    """The steps of the probe container ``r`` (its JSON document on stdout: ``probe/<step>`` each; else one
    ``probe`` step from the container's exit) and the texts a failure is diagnosed from (failed steps'
    errors, tracebacks and stderr, the probe's warnings, the container's stderr)."""
    texts: list[str] = []
    try:
        parsed = json.loads(r.stdout) if r.stdout.strip().startswith("{") else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return [container_step("probe", r)], [r.stderr + "\n" + r.stdout]
    steps: list[Step] = []
    for s in parsed.get("steps") or []:
        detail = dict(s.get("detail") or {})
        ok = bool(s.get("ok"))
        steps.append(Step("probe/" + str(s.get("name")), ok, float(s.get("seconds") or 0.0), detail, s.get("error")))
        if not ok:
            texts += [str(s.get("error") or ""), str(detail.get("traceback") or ""), str(detail.get("stderr") or "")]
    texts.extend(str(w) for w in parsed.get("warnings") or [])
    if r.stderr.strip() and not parsed.get("ok", False):
        texts.append(r.stderr)
    return steps, texts


def run_device_check(
    image_ref: str,
    image: ImageFacts | None,
    host: HostInfo | Callable[[], HostInfo],
    *,
    mode: Mode | Literal["auto"] = "auto",
    cdi: bool = False,
    framework: str = "auto",
    timeout: float = 600.0,
    shm_size: str | None = DEFAULT_SHM,
    user: str | None = None,
    runner: Runner | None = None,
) -> CheckResult:
    """Run the checks for ``image_ref`` (pin it by digest) on this engine; never raises for a
    failing check (the result says so, with a diagnosis). Engine unavailability raises.

    ``host``: this host's facts, or a call that gives them, made once the containers ran (a probe of the
    host then overlaps them), or first when neither ``mode`` nor the ``image`` decides the mode
    (:func:`mode_for`); what the call raises is raised."""
    if runner is None:
        from builder.engine import run_container

        runner = run_container
    if callable(host) and image is None and mode == "auto":
        host = host()  # only the host's vendor decides the mode
    run_mode = mode_for(image, None if callable(host) else host, mode)
    started = _now()
    steps: list[Step] = []
    request, devices = device_request(run_mode, cdi=cdi)
    common: dict[str, Any] = {**devices, "shm_size": shm_size, "timeout": timeout, "user": user}
    texts: list[str] = []
    if run_mode == "nvidia":
        r = runner(image_ref, ["nvidia-smi"], entrypoint="", stdin=None, **common)
        step = container_step("container-start+nvidia-smi", r)
        steps.append(step)
        if not step.ok:
            texts.append(r.stderr + "\n" + r.stdout)
    if all(s.ok for s in steps):
        r = runner(
            image_ref,
            ["-c", PYTHON_SHIM, "sh", "--mode", run_mode, "--framework", framework],
            entrypoint="sh",
            stdin=PROBE_PATH.read_bytes(),
            **common,
        )
        probed, said = probe_steps(r)
        steps.extend(probed)
        texts.extend(said)
    finished = _now()
    if callable(host):
        host = host()
    diagnosis = None
    if not (steps and all(s.ok for s in steps)):
        from builder.checks.context import diagnosis_context
        from builder.checks.diagnosis import diagnose_many

        diagnosis = diagnose_many(texts, diagnosis_context(host, image))
    return CheckResult(
        image_ref=image_ref,
        image=image,
        host=host,
        mode=run_mode,
        device_request=request,
        shm_size=shm_size,
        steps=tuple(steps),
        started_at=started,
        finished_at=finished,
        diagnosis=diagnosis,
    )


def attest_result(
    result: CheckResult,
    client: RegistryClient,
    repository: str,
    digest: str,
    signer: Signer,
    *,
    lock_dir: Path,
    bundle: bool = False,
) -> WriteResult:
    """Attach ``result`` as a signed ``device-check/v1`` attestation to ``repository@digest``
    (:func:`builder.signing.bundles.attest_both`: the legacy layer and, with ``bundle``, the same
    statement as a Sigstore bundle referrer, cosign 3's format).
    Returns the legacy layer's WriteResult; raises SigningError / registry errors."""
    from builder.signing.bundles import attest_both

    predicate = result.predicate()
    return attest_both(
        client, repository, digest, DEVICE_CHECK_V1, predicate, signer, lock_dir=lock_dir, bundle=bundle
    )[0]


__all__ = [
    "DEFAULT_SHM",
    "KEEP_OUTPUT",
    "PROBE_PATH",
    "PULL_NOISE",
    "PYTHON_SHIM",
    "CheckResult",
    "DeviceCheckDocument",
    "DeviceCheckPredicate",
    "Mode",
    "Step",
    "StepDocument",
    "amd_group_ids",
    "attest_result",
    "container_step",
    "describe_run",
    "device_request",
    "meaningful_lines",
    "mode_for",
    "probe_steps",
    "run_device_check",
]
