"""The JSON shapes of variants: ``builder matrix list --json`` and ``--format github``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from typing_extensions import TypedDict

from builder.config import repository_path
from builder.models import AcceleratorKind, Variant

if TYPE_CHECKING:
    from collections.abc import Sequence


class AcceleratorDocument(TypedDict):
    """What a variant is built for: ``kind`` and its CUDA / ROCm line (null for cpu)."""

    kind: AcceleratorKind
    version: str | None


class FrameworkDocument(TypedDict):
    name: str
    version: str


class BaseDocument(TypedDict):
    """The base image as the matrix names it, its digest when pinned (null: unpinned) and the reference the
    Dockerfile pulls."""

    reference: str
    digest: str | None
    pull: str


class VariantDocument(TypedDict):
    """One variant (matrix cell): its id, matrix, template family, repository (relative to the registry),
    accelerator, framework, Python, OS, platform, base image, top-level packages, package index (null:
    PyPI), compiled GPU architectures and build arguments."""

    id: str
    matrix: str
    family: str
    repository: str
    accelerator: AcceleratorDocument
    framework: FrameworkDocument
    python: str
    os: str
    platform: str
    base: BaseDocument
    packages: list[str]
    index_url: str | None
    gpu_archs: list[str]
    build_args: dict[str, str]


#: ``builder matrix list --json``: the selected variants, in selection order
MatrixListDocument = list[VariantDocument]


class GithubAcceleratorDocument(TypedDict):
    """As :class:`AcceleratorDocument`, the version ``""`` for cpu (workflow expressions compare strings)."""

    kind: AcceleratorKind
    version: str


class GithubEntryDocument(TypedDict):
    id: str
    matrix: str
    repository: str
    accelerator: GithubAcceleratorDocument
    framework: FrameworkDocument
    python: str
    os: str
    platform: str
    runner_arch: Literal["x64", "arm64"]


class GithubMatrixDocument(TypedDict):
    """``builder matrix list --format github``: a GitHub Actions ``strategy.matrix`` value
    (https://docs.github.com/en/actions/using-jobs/using-a-matrix-for-your-jobs)."""

    include: list[GithubEntryDocument]


def variant_json(v: Variant, prefix: str = "") -> VariantDocument:
    """The ``builder matrix list --json`` object of one variant; ``repository`` is its registry
    repository, under the checkout's ``repository_prefix`` ``prefix``."""
    return {
        "id": v.id,
        "matrix": v.matrix,
        "family": v.family,
        "repository": repository_path(prefix, v.repository),
        "accelerator": {"kind": v.accelerator.kind, "version": v.accelerator.version},
        "framework": {"name": v.framework.name, "version": v.framework.version},
        "python": v.python,
        "os": v.os,
        "platform": v.platform,
        "base": {"reference": v.base.reference, "digest": v.base.digest, "pull": v.base.pull},
        "packages": list(v.packages),
        "index_url": v.index_url,
        "gpu_archs": list(v.gpu_archs),
        "build_args": dict(v.build_args),
    }


def github_matrix(variants: Sequence[Variant], prefix: str = "") -> GithubMatrixDocument:
    """A GitHub Actions ``strategy.matrix`` value: ``{"include": [{...}, ...]}``; each entry has
    ``id``, ``matrix``, ``repository``, ``accelerator`` {``kind``, ``version``}, ``framework``
    {``name``, ``version``}, ``python``, ``os``, ``platform`` and ``runner_arch`` (``x64`` |
    ``arm64``), so a workflow can write ``${{ matrix.id }}`` or ``matrix.accelerator.kind == 'cuda'``.
    ``repository`` is the registry repository, under the checkout's ``repository_prefix`` ``prefix``
    (:func:`builder.config.repository_path`)."""
    return {
        "include": [
            {
                "id": v.id,
                "matrix": v.matrix,
                "repository": repository_path(prefix, v.repository),
                "accelerator": {"kind": v.accelerator.kind, "version": v.accelerator.version or ""},
                "framework": {"name": v.framework.name, "version": v.framework.version},
                "python": v.python,
                "os": v.os,
                "platform": v.platform,
                "runner_arch": "arm64" if v.platform == "linux/arm64" else "x64",
            }
            for v in variants
        ]
    }


__all__ = [
    "AcceleratorDocument",
    "BaseDocument",
    "FrameworkDocument",
    "GithubMatrixDocument",
    "MatrixListDocument",
    "VariantDocument",
    "github_matrix",
    "variant_json",
]
