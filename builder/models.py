"""Frozen value types that flow between the steps (matrix -> render -> build -> sign/check -> promote).

No I/O here. Modules that own a step may add their own value types next to their code; the types
below are the shared contracts named in DESIGN.md.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

AcceleratorKind = Literal["cuda", "rocm", "cpu"]
#: the GPU vendors builder knows: NVIDIA (CUDA images) and AMD (ROCm images); the one spelling of a vendor
GpuVendor = Literal["nvidia", "amd"]
#: a host's, an image's or a policy rule's GPU vendor; ``none``: no GPU (a CPU host or a CPU image)
Vendor = Literal[GpuVendor, "none"]


@dataclasses.dataclass(frozen=True)
class Accelerator:
    """What a variant is built for. ``version``: CUDA "12.8" / ROCm "6.4"; None for cpu."""

    kind: AcceleratorKind
    version: str | None = None

    @property
    def tag(self) -> str:
        """Short form used in variant ids: ``cu128``, ``rocm6.4``, ``cpu``."""
        if self.kind == "cpu" or self.version is None:
            return "cpu"
        if self.kind == "cuda":
            return "cu" + self.version.replace(".", "")
        return f"rocm{self.version}"


@dataclasses.dataclass(frozen=True)
class Framework:
    """The framework a variant ships: ``name`` (``torch``, ``jax``, ``tensorflow`` or ``none``) and its
    ``version`` as the matrix writes it (``2.9``)."""

    name: str  # "torch" | "jax" | "tensorflow" | "none"
    version: str


@dataclasses.dataclass(frozen=True)
class BaseImage:
    """A base image: ``reference`` as written in the matrix (e.g. ``nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04``),
    ``digest`` (``sha256:<hex>``) when pinned, ``pull`` the reference the Dockerfile uses
    (mirror-mapped, with ``@digest`` when pinned)."""

    reference: str
    digest: str | None
    pull: str

    @property
    def pinned(self) -> bool:
        return self.digest is not None


@dataclasses.dataclass(frozen=True)
class CheckCommand:
    """A check declared with the image in its matrix (``tests`` or ``benchmark``, docs/matrices.md),
    run by ``builder check`` in a fresh container of the image after the device probe.

    Exactly one of ``command`` (argv run in the image, e.g. ``("python", "-m", "pytest", "/opt/tests")``)
    and ``script`` (a file relative to the project root, sent on stdin to the image's python, with ``args``).
    ``timeout`` in seconds; ``gpus``: ``"all"``, ``"none"`` or a count; ``shm_size`` as ``docker run
    --shm-size`` takes it; ``env``: extra environment; ``junit``: path in the container of a JUnit XML
    report read after the run; ``dataset`` / ``model``: the versions the benchmark declares (free text,
    e.g. ``synthetic-matmul@1``), recorded in its attestation; ``min_devices`` (``collective``): the fewest
    GPUs the device check must have seen for it to run (0: on the CPU too)."""

    kind: Literal["tests", "benchmark", "collective"]
    command: tuple[str, ...] = ()
    script: str | None = None
    args: tuple[str, ...] = ()
    timeout: float = 600.0
    gpus: str = "all"
    shm_size: str | None = "1g"
    env: tuple[tuple[str, str], ...] = ()
    junit: str | None = None
    dataset: str | None = None
    model: str | None = None
    min_devices: int = 2  # collective: run only when the device check saw at least this many GPUs (0: CPU too)


@dataclasses.dataclass(frozen=True)
class Variant:
    """One cell of a matrix. ``id`` is stable, e.g. ``torch2.9-cu128-py3.12-ubuntu24.04``
    (``-arm64`` suffix when the platform is not linux/amd64)."""

    id: str
    matrix: str  # matrix name (file stem)
    family: str  # template family: images/<family>/Dockerfile.j2
    repository: str  # relative to the configured registry, e.g. "ml/pytorch"
    accelerator: Accelerator
    framework: Framework
    python: str
    os: str  # e.g. "ubuntu24.04", "debian12"
    platform: str  # "linux/amd64" | "linux/arm64"
    base: BaseImage
    build_args: tuple[tuple[str, str], ...] = ()
    packages: tuple[str, ...] = ()  # top-level Python requirements (exact pins come from the lock)
    gpu_archs: tuple[str, ...] = ()  # compiled GPU architectures: sm_80 ... / gfx90a ...
    index_url: str | None = None  # package index the lock resolves against (None: PyPI)
    tests: CheckCommand | None = None  # matrix `tests` (not part of the image: no content-hash input)
    benchmark: CheckCommand | None = None  # matrix `benchmark`
    collective: CheckCommand | None = None  # matrix `collective` (multi-device checks)


@dataclasses.dataclass(frozen=True)
class RenderedImage:
    """A variant rendered: Dockerfile text, context files (relative path -> bytes) and the
    content hash over everything that determines the image. ``content_tag`` is
    ``<variant-id>-<hash12>``."""

    variant: Variant
    dockerfile: str
    context: tuple[tuple[str, bytes], ...]
    content_hash: str  # sha256 hex
    labels: tuple[tuple[str, str], ...]
    # build arguments the build must pass (e.g. BASE_IMAGE=<pull reference>@<digest>, arch lists)
    build_args: tuple[tuple[str, str], ...] = ()
    # why this image is not reproducible yet (unpinned base, missing/stale lock); empty = pinned
    unpinned: tuple[str, ...] = ()

    @property
    def content_tag(self) -> str:
        return f"{self.variant.id}-{self.content_hash[:12]}"


@dataclasses.dataclass(frozen=True)
class BuiltImage:
    """A variant in the registry. ``reference`` = ``registry/repository``; ``digest`` is the one the
    registry returns for the pushed content tag (an index digest when buildx pushed an index)."""

    variant_id: str
    reference: str
    digest: str
    content_tag: str
    status: Literal["built", "up-to-date", "signed", "failed"]  # signed: built earlier, signed by this run
    seconds: float = 0.0
    log_path: str | None = None
    platforms: tuple[str, ...] = ()
    error: str | None = None

    @property
    def failure_note(self) -> str:
        """Where a failed variant's cause is told: ``log <path>`` when a build ran, else its error
        (signing refused before any build, for instance)."""
        return f"log {self.log_path}" if self.log_path else (self.error or "no log")

    @property
    def pinned(self) -> str:
        return f"{self.reference}@{self.digest}"


@dataclasses.dataclass(frozen=True)
class SummaryRow:
    """One line of a command's result summary (a CI step summary table): the ``variant`` id (or
    the reference checked), its ``digest`` (``sha256:<hex>``; empty when none is known), the
    ``status`` word the command uses (``built``, ``up-to-date``, ``failed``, ``promoted``,
    ``denied``, ``passed``, ...) and the ``stage`` (empty when the command works on no stage)."""

    variant: str
    digest: str
    status: str
    stage: str = ""
