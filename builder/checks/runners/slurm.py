"""The ``slurm`` check runner: one Slurm job per check, each container started by ``srun`` in it.

The session submits a holding job (``sbatch --parsable --wrap 'sleep ...'``, in the cluster's
``partition``, ``account``, ``qos``, with ``--gres`` when the check needs GPUs), waits until
``squeue`` says it runs, then runs every step of the check as a job step
(``srun --jobid=J --overlap --ntasks=1 ...``) that starts the container with the cluster's ``launcher``
(the probe goes in on the step's standard input):

* ``docker`` / ``podman``: the engine on the node, ``docker run ... REPO@sha256:...``. The engine's
  containers are outside the job's cgroup, so docker's ``--gpus all`` would see every GPU of the node,
  not the job's: the step's wrapper replaces it by
  the allocation Slurm gives the step: ``--gpus '"device=IDS"'`` with IDS from ``$SLURM_STEP_GPUS``
  (else ``$SLURM_JOB_GPUS``), the global GPU indices Slurm's GRES allocated
  (https://slurm.schedmd.com/srun.html#OPT_SLURM_STEP_GPUS,
  https://slurm.schedmd.com/sbatch.html#OPT_SLURM_JOB_GPUS; ``device=`` takes host indices:
  https://docs.docker.com/reference/cli/docker/container/run/#gpus). ``$CUDA_VISIBLE_DEVICES`` is not
  used: ``srun`` passes the submitter's environment on, and with ``ConstrainDevices=yes`` Slurm
  renumbers it from 0 inside the job's cgroup (https://slurm.schedmd.com/gres.html#GPU_Management).
  Neither set (no ``gres:`` asked, or a cluster without GRES that hands out whole nodes): ``all``.
  Podman's ``--gpus`` names CDI devices, so it keeps ``all`` (every GPU of the node; docs/hpc.md).
* ``apptainer``: ``apptainer exec --nv docker://REPO@sha256:... CMD`` (``--rocm`` for AMD; GPUs are
  those Slurm's cgroup and ``CUDA_VISIBLE_DEVICES`` leave the step;
  https://apptainer.org/docs/user/latest/gpu.html,
  https://apptainer.org/docs/user/latest/docker_and_oci.html; ``--no-https`` for a loopback registry).
* ``pyxis``: ``srun --container-image=REGISTRY#REPO@sha256:... --no-container-entrypoint CMD``, the
  enroot URI form (https://github.com/NVIDIA/pyxis/wiki/Usage,
  https://github.com/NVIDIA/enroot/blob/master/doc/cmd/import.md); enroot's hooks expose the step's
  GPUs. ``ENROOT_ALLOW_HTTP=yes`` for a loopback registry
  (https://github.com/NVIDIA/enroot/blob/master/doc/configuration.md).

Apptainer and pyxis run the command itself (``exec``, no image entrypoint; the check always names its
command) as the submitting user. Each step
first prints the job id and node name Slurm gives it (``$SLURM_JOB_ID``, ``$SLURMD_NODENAME``:
https://slurm.schedmd.com/srun.html#SECTION_OUTPUT-ENVIRONMENT-VARIABLES) on standard error,
so the placement is what Slurm said, not what was asked. Leaving the session cancels the job
(``scancel``). The node's facts come from a first step that runs the GPU tools and ``docker
info`` there (:func:`builder.checks.host.reading.parse_text`).

Command reference: https://slurm.schedmd.com/sbatch.html, https://slurm.schedmd.com/srun.html
(``--overlap``: steps share the job's resources, Slurm 20.11+), https://slurm.schedmd.com/squeue.html,
https://slurm.schedmd.com/scancel.html.

Errors: RunnerError (22) when ``sbatch``/``srun`` are missing, the job is refused or ends before it
runs, it is still pending after ``start_timeout`` seconds (the scheduler's reason is named), or a step
never started (no placement line from the wrapper: ``srun`` itself failed). A container that ran and
failed is a check result, never a RunnerError.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import subprocess
import threading
import time
from typing import TYPE_CHECKING

from builder import process
from builder.checks.runners import Placement
from builder.checks.runners.engines import loopback
from builder.engine import DEFAULT_TIMEOUT, ContainerResult, container_name, run_argv
from builder.errors import RunnerError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from typing_extensions import Unpack

    from builder.checks.host.model import HostInfo
    from builder.compat.fleet_model import RunnerSettings
    from builder.engine import ContainerOptions

#: printed by every step before its command (standard error), then removed from the step's output
MARKER = "builder-slurm-step"
NODE_TOOL_TIMEOUT_S = 300.0
"""Seconds a tool run on the node outside a container (``dcgmi diag``, ``nvidia-smi topo -m``) may take
as a step of the job; past it the step is stopped and the tool's result says so (exit 124, as
``timeout(1)``), never the whole check."""
_MARKER_RE = re.compile(rf"^{MARKER} job=(\S*) step=(\S*) node=(\S*)\n?", re.MULTILINE)

#: the argument the step's wrapper replaces by the step's GPUs (``"device=0,1"``; ``all`` without an allocation)
GPUS = "@builder-step-gpus@"

#: the step's wrapper: say where it runs, put the step's GPU allocation in place of :data:`GPUS`, then exec
#: the container command given as "$@" (POSIX sh: the ``for`` loop walks the original arguments)
WRAPPER = (
    f'printf "{MARKER} job=%s step=%s node=%s\\n" "$SLURM_JOB_ID" "$SLURM_STEP_ID" "$SLURMD_NODENAME" >&2; '
    'g="${SLURM_STEP_GPUS:-$SLURM_JOB_GPUS}"; '
    f'for a do shift; if [ "$a" = "{GPUS}" ]; then '
    'if [ -n "$g" ]; then a="\\"device=$g\\""; else a=all; fi; fi; set -- "$@" "$a"; done; '
    'exec "$@"'
)

#: what the node-facts step runs: the GPU tools that are there, then the launcher's own report ("$@")
NODE_FACTS = (
    "command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -q; "
    "command -v rocm-smi >/dev/null 2>&1 && rocm-smi --showproductname --showdriverversion; "
    '"$@"'
)

#: the launcher's report in the node-facts step: the engine's ``info`` (read by the hostinfo parsers), else
#: the runtime's version
LAUNCHER_FACTS: dict[str, tuple[str, ...]] = {
    "docker": ("docker", "info"),
    "podman": ("podman", "info"),
    "apptainer": ("apptainer", "--version"),
    "pyxis": ("enroot", "version"),
}

#: squeue job states that will never become RUNNING (https://slurm.schedmd.com/squeue.html#SECTION_JOB-STATE-CODES)
_ENDED = {
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "TIMEOUT",
}


def _run(argv: Sequence[str], stdin: bytes | None, timeout: float) -> subprocess.CompletedProcess[bytes]:
    return process.run(list(argv), input=stdin, text=False, timeout=timeout)


def _run_to_end(argv: Sequence[str], stdin: bytes | None, timeout: float) -> subprocess.CompletedProcess[bytes]:
    return process.run_to_end(list(argv), input=stdin, timeout=timeout)


def _text(b: bytes | str | None) -> str:
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else (b or "")


def sbatch_argv(settings: RunnerSettings, *, gpus: bool, name: str, minutes: int) -> list[str]:
    """The ``sbatch`` command of the holding job (pure): one node, one task, ``--gres`` only when the
    check needs GPUs, output discarded (the steps' output comes back through ``srun``)."""
    cmd = ["sbatch", "--parsable", f"--job-name={name}", "--nodes=1", "--ntasks=1", f"--time={minutes}"]
    cmd.append("--output=/dev/null")
    for flag, value in (("partition", settings.partition), ("account", settings.account), ("qos", settings.qos)):
        if value:
            cmd.append(f"--{flag}={value}")
    if gpus and settings.gres:
        cmd.append(f"--gres={settings.gres}")
    return [*cmd, f"--wrap=exec sleep {minutes * 60}"]


def srun_argv(job_id: str, command: Sequence[str], options: Sequence[str] = ()) -> list[str]:
    """One step of job ``job_id`` running ``command`` behind :data:`WRAPPER` (pure); ``options``: more ``srun``
    options (pyxis's ``--container-image=...``)."""
    return [
        "srun",
        f"--jobid={job_id}",
        "--overlap",
        "--nodes=1",
        "--ntasks=1",
        "--quiet",
        *options,
        "sh",
        "-c",
        WRAPPER,
        MARKER,
        *command,
    ]


def enroot_uri(image: str) -> str:
    """``host[:port]/repo@sha256:...`` as enroot's URI (``REGISTRY#REPO@sha256:...``: the registry is set off
    by ``#``, https://github.com/NVIDIA/enroot/blob/master/doc/cmd/import.md); a reference without a
    registry host (Docker Hub) is unchanged (pure)."""
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return image


def launcher_argv(
    launcher: str,
    image: str,
    argv: Sequence[str],
    *,
    gpus: str | None = None,
    devices: Sequence[str] = (),
    entrypoint: str | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[list[str], list[str]]:
    """The ``apptainer`` / ``pyxis`` start of one container (pure): the step's command and the extra ``srun``
    options, for ``image`` (pinned ``REPO@sha256:...``) running ``[entrypoint,] *argv``. NVIDIA GPUs
    (``gpus`` or a CDI ``nvidia.com/gpu`` device) are ``--nv``; ``env`` is set by ``env K=V ...`` before the
    command, AMD's ``/dev/kfd`` is ``--rocm``
    (apptainer); pyxis takes the step's GPUs through enroot's hooks. Raises ValueError for another
    launcher (``docker``/``podman`` go through :func:`builder.engine.run_argv`)."""
    command = [entrypoint, *argv] if entrypoint else list(argv)
    if env:  # set in the container by env(1), which every image has (neither launcher takes docker's -e)
        command = ["env", *(f"{k}={v}" for k, v in env.items()), *command]
    insecure = loopback(image)
    if launcher == "apptainer":
        flags: list[str] = []
        if gpus or any(d.startswith("nvidia.com/gpu") for d in devices):
            flags.append("--nv")
        if "/dev/kfd" in devices:
            flags.append("--rocm")
        if insecure:
            flags.append("--no-https")
        return ["apptainer", "exec", *flags, f"docker://{image}", *command], []
    if launcher == "pyxis":
        options = [f"--container-image={enroot_uri(image)}", "--no-container-entrypoint"]
        if insecure:
            options.append("--export=ALL,ENROOT_ALLOW_HTTP=yes")
        return command, options
    raise ValueError(f"launcher {launcher!r} is an engine: use builder.engine.run_argv")


@dataclasses.dataclass
class SlurmSession:
    """A check inside one Slurm job (see the module docstring). ``job_id`` is set by :meth:`submit` (given:
    a job that already runs); ``node`` by the first step that ran. Thread-safe: the first step, in
    whichever thread, queues the one job; the others wait until it runs."""

    cluster: str | None
    settings: RunnerSettings
    gpus: bool
    run: Callable[[Sequence[str], bytes | None, float], subprocess.CompletedProcess[bytes]] = _run
    submit_run: Callable[[Sequence[str], bytes | None, float], subprocess.CompletedProcess[bytes]] = _run_to_end
    job_id: str | None = None
    node: str | None = None
    start_timeout: float = 600.0
    poll: float = 1.0
    _queueing: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)
    _running: threading.Event = dataclasses.field(default_factory=threading.Event, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.job_id is not None:  # made for a job that already runs: its steps start at once
            self._running.set()

    @property
    def engine(self) -> list[str]:
        return [self.settings.launcher]

    def _call(
        self, argv: Sequence[str], stdin: bytes | None = None, timeout: float = 60.0, *, to_end: bool = False
    ) -> subprocess.CompletedProcess[bytes]:
        try:
            return (self.submit_run if to_end else self.run)(argv, stdin, timeout)
        except FileNotFoundError:
            raise RunnerError(
                f"cluster {self.cluster}: `{argv[0]}` is not installed here (the slurm runner submits with "
                "sbatch and runs steps with srun)",
                hint="run builder on a Slurm login node, or `bash scripts/slurm` for a local single-node Slurm",
                cluster=self.cluster,
            ) from None

    def submit(self) -> str:
        """Queue the holding job (once, whichever thread asks first) and wait until it runs; returns its
        id. Raises RunnerError, and ``process.Interrupted`` with the job id recorded for :meth:`cancel`."""
        with self._queueing:
            if self.job_id is None:
                self._queue()
        process.raise_if_interrupted()  # a signal during sbatch: now, with the job known to cancel()
        assert self.job_id is not None
        if not self._running.is_set():
            self._wait_running()
            self._running.set()
        return self.job_id

    def _queue(self) -> None:
        """``sbatch`` the holding job and record its id. ``sbatch`` names the job it queued only in its
        output, so it runs to its end even when SIGTERM arrives meanwhile (``process.run_to_end``): a
        job queued by an ``sbatch`` cut short would wait in the queue, cancelled by nobody."""
        minutes = self.settings.time_limit or 60
        argv = sbatch_argv(
            self.settings, gpus=self.gpus, name=f"builder-check-{self.cluster or 'host'}", minutes=minutes
        )
        proc = self._call(argv, to_end=True)
        out = _text(proc.stdout).strip()
        if proc.returncode != 0 or not out:
            raise RunnerError(
                f"cluster {self.cluster}: sbatch refused the check job: {_text(proc.stderr).strip() or out}",
                hint="check the cluster's runner (partition, account, qos, gres) in its fleet file; `sinfo` lists them",
                cluster=self.cluster,
                command=argv,
            )
        self.job_id = out.split(";", 1)[0]  # --parsable: "JOBID" or "JOBID;CLUSTER"

    def _wait_running(self) -> None:
        assert self.job_id is not None
        deadline = time.monotonic() + self.start_timeout
        state, reason = "", ""
        while True:
            proc = self._call(["squeue", "-h", "-j", self.job_id, "-o", "%T|%N|%r"])
            line = _text(proc.stdout).strip()
            if line:
                state, node, reason = ([*line.split("|"), "", ""])[:3]
                if state == "RUNNING":
                    self.node = node or None
                    return
                if state in _ENDED:
                    break
            else:  # no longer listed: the job has ended
                state = state or "gone"
                break
            if time.monotonic() > deadline:
                raise RunnerError(
                    f"cluster {self.cluster}: job {self.job_id} still {state} after {self.start_timeout:.0f} s "
                    f"(reason: {reason or 'none given'})",
                    hint="the partition is busy or the request cannot be met; `squeue -j JOBID` shows why",
                    cluster=self.cluster,
                    job_id=self.job_id,
                )
            process.backoff(self.poll)  # SIGTERM/SIGINT ends the wait in any thread
        raise RunnerError(
            f"cluster {self.cluster}: job {self.job_id} ended before it ran "
            f"({state}; reason: {reason or 'none given'})",
            hint="`scontrol show job JOBID` and the slurmctld log say why",
            cluster=self.cluster,
            job_id=self.job_id,
        )

    def step(
        self, command: Sequence[str], stdin: bytes | None, timeout: float, options: Sequence[str] = ()
    ) -> tuple[int, str, str, float]:
        """Run ``command`` as one step (``options``: more ``srun`` options); returns exit code, stdout, stderr
        (the marker removed), seconds. Raises subprocess.TimeoutExpired after ``timeout`` seconds."""
        job = self.job_id if self._running.is_set() else self.submit()
        assert job is not None
        start = time.monotonic()
        proc = self._call(srun_argv(job, command, options), stdin, timeout)
        seconds = round(time.monotonic() - start, 3)
        err = _text(proc.stderr)
        m = _MARKER_RE.search(err)
        if m is None:  # the wrapper never ran: Slurm did not start the step, the image is not at fault
            no_pyxis = any(o.startswith("--container-image") for o in options) and "container-image" in err
            raise RunnerError(
                f"cluster {self.cluster}: srun did not start a step of job {self.job_id} "
                f"(exit {proc.returncode}): {err.strip()[-800:] or 'no output'}",
                hint="this Slurm has no pyxis plugin (`srun --help` lists --container-image when it has): set the "
                "cluster's `launcher:` to the runtime its nodes have (apptainer, docker, podman)"
                if no_pyxis
                else "`scontrol show job JOBID` and the slurmd log of the node say why",
                cluster=self.cluster,
                job_id=self.job_id,
            )
        self.node = m.group(3) or self.node
        err = err[: m.start()] + err[m.end() :]
        return proc.returncode, _text(proc.stdout), err, seconds

    def run_container(self, image: str, argv: Sequence[str], **options: Unpack[ContainerOptions]) -> ContainerResult:
        """One container on the job's node through the cluster's launcher; a timeout removes it there (exit
        code 124: ``docker rm -f`` for an engine; an apptainer/pyxis step ends with its ``srun``)."""
        launcher = self.settings.launcher
        name = container_name()
        gpus, devices, env = options.get("gpus"), options.get("devices", ()), options.get("env")
        stdin, entrypoint = options.get("stdin"), options.get("entrypoint")
        timeout = options.get("timeout", DEFAULT_TIMEOUT)
        srun_options: list[str] = []
        if launcher in ("apptainer", "pyxis"):
            cmd, srun_options = launcher_argv(
                launcher, image, argv, gpus=gpus, devices=devices, entrypoint=entrypoint, env=env
            )
        else:
            # docker: the step's allocation, not the node's GPUs (podman's --gpus takes CDI names: as given)
            step: ContainerOptions = {**options, "gpus": GPUS if gpus == "all" and launcher == "docker" else gpus}
            tls = ["--tls-verify=false"] if launcher == "podman" and loopback(image) else []
            cmd = run_argv(name, image, argv, client=self.engine, options=tls, **step)
        try:
            code, out, err, seconds = self.step(cmd, stdin, timeout, srun_options)
        except subprocess.TimeoutExpired:
            if self.job_id is not None and launcher in ("docker", "podman"):
                process.cleanup(srun_argv(self.job_id, [*self.engine, "rm", "-f", name]))
            return ContainerResult(124, "", f"builder: timed out after {timeout:.0f} s", timeout, tuple(cmd), True)
        return ContainerResult(code, out, err, seconds, tuple(srun_argv(self.job_id or "?", cmd, srun_options)))

    def host(self) -> HostInfo:
        """The node's facts: its GPU tools' output and the engine's ``info``, read by the hostinfo parsers."""
        from builder.checks.host.reading import parse_text

        report = LAUNCHER_FACTS[self.settings.launcher]
        code, out, err, _ = self.step(["sh", "-c", NODE_FACTS, "sh", *report], None, 120.0)
        if code != 0 and not out.strip():
            raise RunnerError(
                f"cluster {self.cluster}: the node-facts step of job {self.job_id} failed: {err.strip()[-500:]}",
                hint=f"is `{report[0]}` installed on the cluster's nodes (the runner's `launcher:`)?",
                cluster=self.cluster,
                job_id=self.job_id,
            )
        return parse_text(out, source=f"node {self.node} of job {self.job_id}")

    def placement(self) -> Placement:
        return Placement(self.cluster, "slurm", self.node, self.job_id)

    def node_tools(self) -> Callable[[Sequence[str]], tuple[int, str]]:
        """Run a tool on the job's node as a step of the job, outside any container: its exit code and output
        (with its standard error when it failed; ``(127, "")`` when the node does not have it, as a missing
        program here)."""

        def run(argv: Sequence[str]) -> tuple[int, str]:
            try:
                code, out, err, _ = self.step(list(argv), None, NODE_TOOL_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                return 124, f"{argv[0]} ran past {NODE_TOOL_TIMEOUT_S:.0f} s on node {self.node} (step stopped)"
            except RunnerError as exc:  # the step did not start (the job ended, the node went away)
                return 125, exc.message
            if code == 127 and not out:  # the step's `exec` found no such program on the node
                return 127, ""
            return code, out if code == 0 else out + err

        return run

    def cpu_model(self) -> str | None:
        """The CPU model of the job's node: a step that reads its ``/proc/cpuinfo`` (None when that fails)."""
        from builder.checks.host.cpu import cpu_model_of

        try:
            code, out, _, _ = self.step(["cat", "/proc/cpuinfo"], None, 60.0)
        except (subprocess.TimeoutExpired, RunnerError):
            return None
        return cpu_model_of(out) if code == 0 else None

    def cancel(self) -> None:
        """Cancel the job (``scancel``); an already finished job is fine. An ``sbatch`` still running in
        another thread (the node-facts step runs while the image is pinned) is waited for first, so the
        job it queues is cancelled too, not left in the queue when an interrupted check unwinds."""
        with self._queueing:
            job = self.job_id
        if job is not None:
            process.cleanup(["scancel", job])


@contextlib.contextmanager
def slurm_session(cluster: str | None, settings: RunnerSettings, *, gpus: bool = True) -> Iterator[SlurmSession]:
    """A Slurm session (the job is submitted on first use, cancelled on leaving, also when interrupted)."""
    session = SlurmSession(cluster, settings, gpus)
    try:
        yield session
    finally:
        session.cancel()


__all__ = [
    "GPUS",
    "LAUNCHER_FACTS",
    "MARKER",
    "NODE_FACTS",
    "WRAPPER",
    "SlurmSession",
    "enroot_uri",
    "launcher_argv",
    "sbatch_argv",
    "slurm_session",
    "srun_argv",
]
