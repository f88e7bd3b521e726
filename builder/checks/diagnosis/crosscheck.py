"""Cross-checking a diagnosis against the facts in the text and the context, and the alternatives of ambiguous
messages with the context that decides between them.

* "driver too old" is checked against the driver and the image's CUDA the text (or the context) names: when the
  driver meets ``builder.compat``'s minimum for that CUDA, the driver is not the cause. Inside a container that
  means the host's driver libraries never reached it (raw ``--device`` nodes, no NVIDIA runtime):
  ``driver-libs-not-injected`` (run options). Without a container the contradiction is reported as a fact.
  The CUDA runtime reports error 35 also when it finds *no* libcuda it can use
  (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html, ``cudaErrorInsufficientDriver``).
* Messages that several kinds share carry ``facts.alternatives`` (each with what decides it); ``--engine``
  decides where the engine is the difference (a container's 64 MB /dev/shm; NCCL troubleshooting,
  https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#sharing-data).
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

from builder import compat
from builder.errors import ConfigError, NotFoundError

if TYPE_CHECKING:
    from builder.checks.diagnosis.model import Context

#: engines that run containers (docker's default /dev/shm is 64 MB; Kubernetes pods get the runtime's default)
CONTAINER_ENGINES = frozenset({"docker", "podman", "kubernetes"})

_BANNER = (
    r"built for NVIDIA Driver Release (\d{3}\.\d+(?:\.\d+)?) or later,\s*but\s*version (\d{3}\.\d+(?:\.\d+)?) "
    r"was detected"
)
_DRIVER_IN_TEXT = (
    r"NVRM version:[^\n]*?Kernel Module\s+(\d{3}\.\d+(?:\.\d+)?)",
    r"Driver Version:\s*(\d{3}\.\d+(?:\.\d+)?)",
    r"\b(?:host|driver)\b[^\n]{0,40}?\b(\d{3}\.\d{2,3}(?:\.\d{2})?)\b",
)
_CUDA_IN_TEXT = (
    r"nvidia/cuda:(\d+\.\d+)",
    r"\bCUDA_VERSION[= ](\d+\.\d+)",
    r"Cuda compilation tools, release (\d+\.\d+)",
    r"\bcuda[-_](\d+\.\d+)\b",
)


@dataclasses.dataclass(frozen=True)
class DriverCheck:
    """The driver and the image CUDA found (empty when an NGC banner names the required driver release instead),
    the minimum driver, and whether the driver meets it."""

    driver: str
    image_cuda: str
    min_driver: str
    sufficient: bool

    def facts(self) -> dict[str, Any]:
        out: dict[str, Any] = {"host_driver": self.driver}
        if self.image_cuda:
            out["image_cuda"], out["min_driver"] = self.image_cuda, self.min_driver
        else:  # an NGC banner: the image names the driver release it needs
            out["required_driver"] = self.min_driver
        if self.sufficient:
            of = f"CUDA {self.image_cuda}" if self.image_cuda else "the image"
            out["contradiction"] = (
                f"driver {self.driver} meets the minimum {self.min_driver} of {of}: the driver is "
                "not too old; the process did not load the host driver's libcuda"
            )
        return out


def _first(text: str, pats: tuple[str, ...]) -> str | None:
    for p in pats:
        m = re.search(p, text, re.I)
        if m:
            return m.group(1)
    return None


def check_driver(text: str, ctx: Context, image_cuda: str | None) -> DriverCheck | None:
    """The driver (context first, else the text) against the minimum of the image's CUDA (``image_cuda`` from
    the message's facts, the context, else the text); None when either is unknown or not in the tables."""
    banner = re.search(_BANNER, text)
    if banner:  # an NGC banner names both: the driver the image needs and the one it found
        required, found = banner.group(1), ctx.driver_version or banner.group(2)
        try:
            ok = compat.parse_driver(found) >= compat.parse_driver(required)
        except ConfigError:
            return None
        return DriverCheck(found, "", required, ok)
    driver = ctx.driver_version or _first(text, _DRIVER_IN_TEXT)
    cuda = image_cuda or ctx.image_cuda or _first(text, _CUDA_IN_TEXT)
    if not driver or not cuda:
        return None
    cuda = ".".join(cuda.split(".")[:2])
    try:
        minimum = compat.min_driver(cuda)
        sufficient = compat.parse_driver(driver) >= compat.parse_driver(minimum)
    except (NotFoundError, ConfigError):
        return None
    return DriverCheck(driver, cuda, minimum, sufficient)


def in_container(text: str, ctx: Context) -> bool:
    """Whether the failing process ran in a container (the context's engine, or the text: an engine command,
    raw ``--device`` nodes, a container prompt without nvidia-smi)."""
    if ctx.engine:
        return ctx.engine in CONTAINER_ENGINES
    return bool(
        re.search(
            r"\b(?:nvidia-)?docker run\b|\bpodman run\b|--device[= ]/dev/nvidia|root@[0-9a-f]{12}:|"
            r"nvidia-smi: command not found",
            text,
        )
    )


_ENGINE_WORDS = re.compile(
    r"\b(?:docker|podman|containerd|kubectl|kubelet|apptainer|singularity|enroot|nvidia-docker)\b|--gpus\b|"
    r"/usr/local/nvidia/lib",  # the library path of nvidia-docker images
    re.I,
)
#: the host a log names: TensorFlow's cuda_diagnostics "hostname: X", or a shell prompt "user@X:"
_HOSTNAME = re.compile(r"cuda_diagnostics\.cc:\d+\] hostname: (\S+)|^\S*?[\w.-]+@([\w.-]+):", re.M)


def on_bare_metal(text: str, ctx: Context) -> bool:
    """Whether the failing process ran on the host itself: no engine in the context or the text, and the host
    the log names is not a container's (Docker names a container by its 12-hex id)."""
    if ctx.engine or in_container(text, ctx) or _ENGINE_WORDS.search(text):
        return False
    hosts = [a or b for a, b in _HOSTNAME.findall(text)]
    return bool(hosts) and not any(re.fullmatch(r"[0-9a-f]{12}", h) for h in hosts)


#: kinds that share their messages with others: (other kind, what decides for it)
ALTERNATIVES: dict[str, tuple[tuple[str, str], ...]] = {
    "nccl-system-error": (
        ("nccl-shm-too-small", "in a container (--engine docker|podman|kubernetes): /dev/shm is 64 MB by default"),
        ("nccl-network-failure", "across nodes (--engine slurm, bare metal): the network NCCL chose"),
    ),
    "driver-not-loaded": (
        ("wsl-gpu-unavailable", "on WSL: WSL 1 has no GPU; WSL 2 needs the Windows driver only"),
        ("apptainer-gpu-libs-missing", "under --engine apptainer: --nv found no driver libraries"),
    ),
    "gpu-not-requested": (
        ("driver-capabilities-missing", "NVIDIA_DRIVER_CAPABILITIES without compute (--host / the image's env)"),
        ("k8s-runtime-not-configured", "under --engine kubernetes: the node runtime does not inject the driver"),
    ),
    "no-gpu-visible": (
        ("gpu-fallen-off-bus", "the host's dmesg shows Xid 79 / 'fallen off the bus'"),
        ("gpu-driver-fault", "the host's dmesg shows 'RmInitAdapter failed' or a GSP timeout (Xid 119/120)"),
        ("wsl-gpu-unavailable", "on WSL 1, or a GPU WSL 2 cannot use (TCC mode)"),
    ),
    "gpu-program-fault": (
        ("gpu-ecc-error", "the host's dmesg shows Xid 48/63/64/94/95 at the same time (a memory error of the GPU)"),
        ("gpu-fallen-off-bus", "the host's dmesg shows Xid 79, or the same image passes on another GPU"),
    ),
}

#: what the context decides: (kind, engine) -> the kind it becomes
DECIDED_BY_ENGINE: dict[tuple[str, str], str] = {
    ("nccl-system-error", "docker"): "nccl-shm-too-small",
    ("nccl-system-error", "podman"): "nccl-shm-too-small",
    ("nccl-system-error", "kubernetes"): "nccl-shm-too-small",
    ("nccl-system-error", "slurm"): "nccl-network-failure",
    ("gpu-not-requested", "kubernetes"): "k8s-runtime-not-configured",
    ("driver-not-loaded", "apptainer"): "apptainer-gpu-libs-missing",
}

#: the run-options fix as each engine spells it
ENGINE_FIX: dict[tuple[str, str], str] = {
    ("gpu-not-requested", "apptainer"): "in the run options: add `--nv` (NVIDIA) or `--rocm` (AMD) to apptainer "
    "exec/run so the host's driver libraries are bound into the container",
    ("gpu-not-requested", "slurm"): "in the job: request GPUs (`--gres=gpu:N` or `--gpus=N`) so Slurm's cgroup "
    "gives the job the devices, and run the container with the engine's GPU option (--gpus / --nv)",
    ("gpu-not-requested", "podman"): "in the run options: `--device nvidia.com/gpu=all` (CDI; generate the spec "
    "with `nvidia-ctk cdi generate`) or `--hooks-dir` with the NVIDIA hook",
    ("no-gpu-visible", "slurm"): "in the job: request GPUs (`--gres=gpu:N` or `--gpus=N`); with "
    "ConstrainDevices=yes in cgroup.conf a job sees only the GPUs Slurm allocated to it",
    ("no-gpu-visible", "apptainer"): "in the run options: add `--nv` (NVIDIA) or `--rocm` (AMD); on a Slurm node "
    "also request the GPUs for the job (`--gres=gpu:N`)",
    ("nccl-shm-too-small", "kubernetes"): "in the pod spec: mount an emptyDir with `medium: Memory` (and a "
    "sizeLimit) at /dev/shm; `NCCL_SHM_DISABLE=1` works around it at a cost in speed",
    ("nccl-shm-too-small", "apptainer"): "on the host: Apptainer shares the host's /dev/shm - free space there "
    "(stale /dev/shm/nccl-* files) or set `NCCL_SHM_DISABLE=1`",
}


def alternatives(key: str, matched: list[str]) -> list[dict[str, str]]:
    """The other kinds a message of kind ``key`` can be, with what decides each (known ambiguities first, then
    the other kinds that matched)."""
    out = [{"diagnosis": k, "decided_by": why} for k, why in ALTERNATIVES.get(key, ())]
    seen = {a["diagnosis"] for a in out}
    out.extend({"diagnosis": k, "decided_by": "also matched the text"} for k in matched if k not in seen)
    return out


__all__ = [
    "ALTERNATIVES",
    "CONTAINER_ENGINES",
    "DECIDED_BY_ENGINE",
    "ENGINE_FIX",
    "DriverCheck",
    "alternatives",
    "check_driver",
    "in_container",
    "on_bare_metal",
]
