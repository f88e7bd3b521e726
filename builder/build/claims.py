"""The ``gpu-archs`` label as a checked claim at build time (issue 15 item 2): after the push and before
the content tag is written (and so before signing), the GPU libraries inside the framework's package
are read from the pushed image (:mod:`builder.image`) and every architecture the label declares must
have code in them (:attr:`builder.image.inspection.ImageInspection.label_check`, which uses
:func:`builder.compat.kernels.uncovered_claims`: ``sm_XY`` needs SASS ``sm_XY``, ``compute_XY`` PTX
``compute_XY``, ``gfxNNN`` a code object for that processor).

Images that declare no GPU code (``gpu-archs=none``, CPU images) or no label are not read at all;
others read only their new layers (base layers come from the layer cache). A framework package with no
GPU library is not judged (nothing measured to disagree with).

Errors: BuildFailedError (14) naming the label, the uncovered architectures and each library file
with the targets it has; what :func:`builder.image.inspection.inspect_image` raises (registry errors).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.errors import BuildFailedError
from builder.labels import NO_GPU_CODE, gpu_archs

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from builder.image.layers import LayerCache
    from builder.registry import RegistryClient

#: the label, as people read it in an error
LABEL = "io.builder.gpu-archs"


def claimed_archs(labels: Mapping[str, str]) -> tuple[str, ...]:
    """The architectures the ``gpu-archs`` label of ``labels`` claims (empty: none declared or ``none``)."""
    return tuple(a for a in gpu_archs(labels) or () if a.lower() != NO_GPU_CODE)


def check_label_claim(
    client: RegistryClient,
    repository: str,
    digest: str,
    labels: Mapping[str, str],
    *,
    platforms: Sequence[str],
    cache: LayerCache | None,
    log: Callable[[str], None] | None = None,
) -> None:
    """Check the pushed image ``repository@digest`` (each of ``platforms``) against the ``gpu-archs``
    label the build gave it (``labels``); ``log`` gets one line per platform checked. Raises
    BuildFailedError when a declared architecture has no code in the framework's GPU libraries."""
    declared = claimed_archs(labels)
    if not declared:
        return
    from builder.image.inspection import inspect_image

    for platform in platforms:
        inspection = inspect_image(client, repository, digest, platform=platform, cache=cache)
        check = inspection.label_check
        if check is None:
            if log is not None:
                log(f"# {LABEL}={','.join(declared)} ({platform}): no framework GPU library to check")
            continue
        if not check["uncovered"]:
            if log is not None:
                log(f"# {LABEL}={','.join(declared)} ({platform}): covered by {len(check['libraries'])} libraries")
            continue
        has = {b.path: b for b in inspection.framework_binaries()}
        files = "; ".join(
            f"{path} (SASS {' '.join(has[path].sass) or '-'}, PTX {' '.join(has[path].ptx) or '-'}"
            + (f", gfx {' '.join(has[path].gfx)}" if has[path].gfx else "")
            + ")"
            for path in check["libraries"]
        )
        raise BuildFailedError(
            f"{repository}@{digest} ({platform}): the label {LABEL}={','.join(declared)} claims "
            f"{', '.join(check['uncovered'])}, but no GPU library of the framework has code for it: {files}",
            hint="build the framework's GPU code for those architectures (e.g. TORCH_CUDA_ARCH_LIST), or correct "
            "the variant's GPU architectures in the matrix; no content tag was written and nothing was signed",
            label=LABEL,
            uncovered=check["uncovered"],
            libraries=check["libraries"],
        )


__all__ = ["LABEL", "check_label_claim", "claimed_archs"]
