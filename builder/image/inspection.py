"""``builder inspect REF``: the image's GPU code and installed stack, read from the registry.

manifest (an index: the runnable manifest of the platform asked for) -> config (environment) -> every
layer, each read once (:func:`builder.image.layers.read_layer`, cached by digest in a
:class:`~builder.image.layers.LayerCache`; uncached layers are streamed in parallel) -> the merged
filesystem -> :class:`ImageInspection` (ELF files with GPU code, :class:`~builder.image.stack.Stack`).

Errors: RegistryError (an index without a runnable platform manifest, no config, a layer that does not
match its digest or is not a tar stream), BlobSourceError (a download broken off) and the registry
client's errors (NotFoundError for an unknown image).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from typing import TYPE_CHECKING

from typing_extensions import TypedDict

from builder.compat import min_driver
from builder.compat.kernels import KernelBinary, loading_binaries, ptx_isa_needs_cuda, uncovered_claims
from builder.errors import NotFoundError
from builder.image.elf import GpuCode, GpuCodeDocument, isa_key
from builder.image.layers import LayerCache, LayerSummary, merge, read_layer
from builder.image.stack import Stack, StackDocument, read_stack
from builder.labels import gpu_archs
from builder.registry.copy import config_env, platform_config

if TYPE_CHECKING:
    from collections.abc import Callable

    from builder.registry.client import RegistryClient
    from builder.registry.manifest import Descriptor

#: layers streamed at the same time
PARALLEL_LAYERS = 4


class LayerReadDocument(TypedDict):
    """One layer: its digest, compressed size, and whether its summary came from the cache."""

    digest: str
    size: int
    cached: bool


class LabelCheckDocument(TypedDict):
    """The ``gpu-archs`` label as a checked claim: ``declared`` (the label), ``libraries`` (the framework's
    GPU libraries it was checked against), ``uncovered`` (declared targets none of them has code for)."""

    declared: list[str]
    libraries: list[str]
    uncovered: list[str]


class InspectDocument(TypedDict):
    """``builder inspect --json``: ``reference`` (registry/repository@digest), ``digest`` (the digest asked
    for), ``platform_digest`` and ``platform`` (the manifest read), ``binaries`` (ELF files with GPU code,
    paths absolute in the image), ``loading`` (the paths of those that load: one per group of per-CUDA-line
    libraries), ``min_driver`` (of the installed CUDA runtime's line) and ``min_driver_jit`` (to JIT the newest
    PTX of those libraries), ``label_check`` (the ``gpu-archs`` label checked against the framework's GPU
    libraries; None without the label or without framework GPU code to check it against), ``stack`` (the
    installed GPU stack), ``layers`` (each layer read)."""

    reference: str
    digest: str
    platform_digest: str
    platform: str | None
    binaries: list[GpuCodeDocument]
    loading: list[str]
    min_driver: str | None
    min_driver_jit: str | None
    label_check: LabelCheckDocument | None
    stack: StackDocument
    layers: list[LayerReadDocument]


@dataclasses.dataclass(frozen=True)
class LayerRead:
    """One layer as read by an inspection: digest, compressed size, from the cache or streamed."""

    digest: str
    size: int
    cached: bool

    def to_json(self) -> LayerReadDocument:
        return {"digest": self.digest, "size": self.size, "cached": self.cached}


@dataclasses.dataclass(frozen=True)
class ImageInspection:
    """What an image holds: its GPU code (``binaries``), installed ``stack`` and ``layers`` read."""

    reference: str
    digest: str
    platform_digest: str
    platform: str | None
    binaries: tuple[GpuCode, ...]
    stack: Stack
    layers: tuple[LayerRead, ...]
    declared_archs: tuple[str, ...] | None = None

    def framework_binaries(self) -> tuple[KernelBinary, ...]:
        """The loading GPU libraries inside a framework's package (``.../site-packages/torch/``,
        ``jaxlib/``, ``jax_plugins/``, ``tensorflow/``, ...): what the ``gpu-archs`` label describes."""
        roots: list[str] = []
        for fw in self.stack.frameworks:
            site = fw.path.rsplit("/", 2)[0]
            roots.append(f"{site}/{fw.name.replace('-', '_')}/")
            if fw.name in ("jax", "jaxlib"):
                roots.append(f"{site}/jax_plugins/")
        return tuple(b for b in self.kernel_binaries() if b.path.startswith(tuple(roots)))

    @property
    def label_check(self) -> LabelCheckDocument | None:
        """The ``gpu-archs`` label checked against :meth:`framework_binaries`
        (:func:`builder.compat.kernels.uncovered_claims`); None without the label, with ``none``, or
        without framework GPU code."""
        declared = tuple(a for a in (self.declared_archs or ()) if a.lower() != "none")
        libs = self.framework_binaries()
        if not declared or not libs:
            return None
        return {
            "declared": list(declared),
            "libraries": [b.path for b in libs],
            "uncovered": list(uncovered_claims(declared, libs)),
        }

    def kernel_binaries(self) -> tuple[KernelBinary, ...]:
        """The binaries that load (:func:`builder.compat.kernels.loading_binaries` with the stack's
        CUDA / ROCm line), as the measured side of a verdict."""
        return loading_binaries(_grouped(self.binaries), cuda=self.stack.cuda, rocm=self.stack.rocm_line)

    @property
    def targets(self) -> tuple[str, ...]:
        """Every GPU target of the loading binaries (``sm_90``, ``compute_90``, ``gfx942``), sorted."""
        out: set[str] = set()
        for b in self.kernel_binaries():
            out.update(b.sass + b.ptx + tuple(g.split(":")[0] for g in b.gfx))
        return tuple(sorted(out))

    @property
    def min_driver(self) -> str | None:
        """The minimum driver of the installed CUDA runtime's line (the framework build's CUDA when it
        has one): the Linux minimum of NVIDIA's CUDA -> driver table (:func:`builder.compat.min_driver`).
        None for an image without CUDA or a line the table does not know."""
        return _driver_for(self.stack.cuda)

    @property
    def min_driver_jit(self) -> str | None:
        """The minimum driver that can JIT the newest PTX among the loading libraries: its ISA's CUDA
        release (:func:`builder.compat.kernels.ptx_isa_needs_cuda`) -> driver. None without PTX."""
        isas = [b.ptx_isa for b in self.kernel_binaries() if b.ptx_isa]
        if not isas:
            return None
        newest = max(isas, key=isa_key)
        return _driver_for(ptx_isa_needs_cuda(newest))

    def to_json(self) -> InspectDocument:
        return {
            "reference": self.reference,
            "digest": self.digest,
            "platform_digest": self.platform_digest,
            "platform": self.platform,
            "binaries": [b.to_json() for b in self.binaries],
            "loading": [b.path for b in self.kernel_binaries()],
            "min_driver": self.min_driver,
            "min_driver_jit": self.min_driver_jit,
            "label_check": self.label_check,
            "stack": self.stack.to_json(),
            "layers": [x.to_json() for x in self.layers],
        }


def _grouped(binaries: tuple[GpuCode, ...]) -> tuple[KernelBinary, ...]:
    """The measured side of verdicts: each library, and the AMDGPU code object files of one directory
    (``rocblas/library/*.co``: one per target, the runtime loads the GPU's) as one library named by the
    directory with every target of its files."""
    out = [b.kernel_binary() for b in binaries if not b.code_object]
    dirs: dict[str, set[str]] = {}
    for b in binaries:
        if b.code_object:
            dirs.setdefault(b.path.rsplit("/", 1)[0] + "/", set()).update(b.gfx)
    out.extend(KernelBinary(d, gfx=tuple(sorted(g))) for d, g in sorted(dirs.items()))
    return tuple(out)


def _driver_for(cuda: str | None) -> str | None:
    if not cuda:
        return None
    try:
        return min_driver(".".join(cuda.split(".")[:2]))
    except NotFoundError:
        return None


def inspect_image(
    client: RegistryClient,
    repository: str,
    reference: str,
    *,
    platform: str | None = None,
    cache: LayerCache | None = None,
    on_layer: Callable[[LayerRead, int, int], None] | None = None,
) -> ImageInspection:
    """Inspect ``repository`` at ``reference`` (tag or digest) in ``client``'s registry. ``cache``: layer
    summaries by digest (None: read every layer); ``on_layer(layer, done, total)`` is called as each
    layer is finished (progress)."""
    top, manifest, chosen, config = platform_config(client, repository, reference, platform)
    env = config_env(config)
    labels = (config.get("config") or {}).get("Labels") or {}
    descriptors = manifest.layers
    summaries: dict[str, LayerSummary] = {}
    reads: dict[str, LayerRead] = {}
    total = len(descriptors)
    todo: list[Descriptor] = []
    for d in descriptors:
        hit = cache.get(d.digest) if cache is not None else None
        if hit is not None:
            summaries[d.digest] = hit
            reads[d.digest] = LayerRead(d.digest, d.size, True)
            if on_layer is not None:
                on_layer(reads[d.digest], len(reads), total)
        elif d.digest not in (t.digest for t in todo):
            todo.append(d)
    if todo:
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(PARALLEL_LAYERS, len(todo))) as pool:
            futures = {pool.submit(read_layer, client, repository, d): d for d in todo}
            for fut in concurrent.futures.as_completed(futures):
                d = futures[fut]
                summary = fut.result()
                if cache is not None:
                    cache.put(summary)
                summaries[d.digest] = summary
                reads[d.digest] = LayerRead(d.digest, d.size, False)
                if on_layer is not None:
                    on_layer(reads[d.digest], len(reads), total)
    fs = merge(summaries[d.digest] for d in descriptors)
    stack = read_stack(fs.paths, fs.files, env)
    return ImageInspection(
        reference=f"{client.registry}/{repository}@{top.digest}",
        digest=top.digest,
        platform_digest=manifest.digest,
        platform=chosen,
        binaries=fs.code,
        stack=stack,
        layers=tuple(reads[d.digest] for d in descriptors),
        declared_archs=gpu_archs(labels) if isinstance(labels, dict) else None,
    )


__all__ = ["ImageInspection", "InspectDocument", "LayerRead", "LayerReadDocument", "inspect_image"]
