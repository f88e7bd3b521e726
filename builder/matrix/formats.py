"""The JSON shapes of variants: ``builder matrix list --json`` and ``--format github``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from builder.models import Variant


def variant_json(v: Variant) -> dict[str, Any]:
    """The ``builder matrix list --json`` object of one variant."""
    return {
        "id": v.id,
        "matrix": v.matrix,
        "family": v.family,
        "repository": v.repository,
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


def github_matrix(variants: Sequence[Variant]) -> dict[str, Any]:
    """A GitHub Actions ``strategy.matrix`` value: ``{"include": [{...}, ...]}``; each entry has
    ``id``, ``matrix``, ``repository``, ``accelerator`` {``kind``, ``version``}, ``framework``
    {``name``, ``version``}, ``python``, ``os``, ``platform`` and ``runner_arch`` (``x64`` |
    ``arm64``), so a workflow can write ``${{ matrix.id }}`` or ``matrix.accelerator.kind == 'cuda'``."""
    return {
        "include": [
            {
                "id": v.id,
                "matrix": v.matrix,
                "repository": v.repository,
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
