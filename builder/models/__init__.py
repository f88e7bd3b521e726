"""Frozen value types that flow between the steps (matrix -> render -> build -> sign/check -> promote).

No I/O here. Modules that own a step may add their own value types next to their code; the types
below are the shared contracts named in DESIGN.md. A variant and what it is made of are defined
here; what the steps make of it lives in modules of this package, imported on first use (PEP 562,
:func:`builder.lazy.lazy_exports`): ``images`` (``RenderedImage``, ``BuiltImage``) and ``summary``
(``SummaryRow``). ``from builder.models import BuiltImage`` works as before; ``builder resolve``,
which decodes variants only, no longer creates those classes (each frozen dataclass costs about
1 ms of start-up; issue 19).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

from builder.lazy import lazy_exports

if TYPE_CHECKING:  # the names below are imported on first use (``__getattr__``)
    from builder.models.images import BuiltImage, RenderedImage
    from builder.models.summary import SummaryRow

__all__ = [
    "Accelerator",
    "AcceleratorKind",
    "BaseImage",
    "BuiltImage",
    "CheckCommand",
    "Framework",
    "GpuVendor",
    "RenderedImage",
    "SummaryRow",
    "Variant",
    "Vendor",
]

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


#: Public name -> the module of this package that defines it (https://peps.python.org/pep-0562/).
__getattr__ = lazy_exports(
    __name__, {"RenderedImage": "images", "BuiltImage": "images", "SummaryRow": "summary"}, globals()
)
