"""The values of a diagnosis: the layers, the CUDA error codes named, what is known besides the message
(:class:`Context`), a failure kind (:class:`FailureRule`) and the answer (:class:`Diagnosis`).

Layers, bottom to top (docs/diagnosis.md): ``kernel-driver``, ``fabric-manager``, ``interconnect`` (the links
between GPUs and between hosts: PCIe/NVLink peer-to-peer, InfiniBand/RoCE HCAs, links and switches),
``container-toolkit``, ``container-engine``, ``run-options``, ``image-user-space``, ``framework-build``.
CUDA runtime error codes: https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html (``cudaError``).
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any, Literal, get_args

from typing_extensions import TypedDict

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

#: a layer of the GPU container stack, bottom to top
Layer = Literal[
    "kernel-driver",
    "fabric-manager",
    "interconnect",
    "container-toolkit",
    "container-engine",
    "run-options",
    "image-user-space",
    "framework-build",
]
#: the layer a diagnosis names (``unknown``: no failure kind matched)
LayerOrUnknown = Literal[Layer, "unknown"]

LAYERS: tuple[Layer, ...] = get_args(Layer)

CUDA_ERRORS = {
    3: "initialization error",
    35: "cudaErrorInsufficientDriver",
    46: "cudaErrorDevicesUnavailable",
    48: "no kernel image is available (legacy code)",
    100: "cudaErrorNoDevice",
    209: "cudaErrorNoKernelImageForDevice",
    802: "cudaErrorSystemNotReady",
    803: "cudaErrorSystemDriverMismatch",
    804: "cudaErrorCompatNotSupportedOnDevice",
}

#: what can have run the failing program (:attr:`Context.engine`, ``builder diagnose --engine``)
ENGINES = ("docker", "podman", "apptainer", "kubernetes", "slurm")


@dataclasses.dataclass(frozen=True)
class Context:
    """What is known besides the message (all optional): host vendor, driver version, the
    newest CUDA the driver supports, GPU name/brand/arch, the image's NVIDIA_REQUIRE_CUDA,
    CUDA version and compiled GPU architectures, NVIDIA_DRIVER_CAPABILITIES used, and the engine or
    orchestrator that ran it (decides between kinds that share a message)."""

    vendor: str | None = None
    driver_version: str | None = None
    driver_cuda: str | None = None
    gpu_name: str | None = None
    gpu_brand: str | None = None
    gpu_arch: str | None = None  # "sm_90" / "gfx942"
    require_cuda: str | None = None
    image_cuda: str | None = None
    image_archs: tuple[str, ...] = ()
    driver_capabilities: str | None = None
    engine: str | None = None  # one of ENGINES (what started the container)


class DiagnosisDocument(TypedDict):
    """``builder diagnose --json`` (and the ``diagnosis`` of a failed device check): the failure kind
    (``diagnosis``: ``unknown`` when none matched), the layer at fault and the one that noticed, summary,
    fix, ``facts`` (what the message and the context say; free-form: versions, GPU names, quoted lines),
    ``evidence`` (the lines matched) and ``also_matched`` (weaker kinds)."""

    diagnosis: str
    at_fault: LayerOrUnknown
    noticed_by: LayerOrUnknown
    summary: str
    fix: str
    facts: dict[str, Any]
    evidence: list[str]
    also_matched: list[str]


#: how a fix addresses the machine the check ran on ("on the host: upgrade the driver ..."): the one
#: phrase the fixes use for it, named by :meth:`Diagnosis.on_node` when that machine is a known node
HOST_ADDRESS = re.compile(r"\bon the host\b")


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """The answer: ``key`` (failure kind), ``at_fault`` (layer that is wrong), ``noticed_by``
    (layer that reported it), ``summary``, ``fix`` (names the layer to change), ``facts``,
    ``evidence`` (the lines matched), ``also_matched`` (other kinds that matched, weaker)."""

    key: str
    at_fault: LayerOrUnknown
    noticed_by: LayerOrUnknown
    summary: str
    fix: str
    facts: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    evidence: tuple[str, ...] = ()
    also_matched: tuple[str, ...] = ()

    def on_node(self, node: str | None) -> Diagnosis:
        """This diagnosis of a check that ran on the cluster node ``node`` (a Slurm node, a cluster
        engine's host name): the fix says ``on node NAME`` wherever it says ``on the host``
        (:data:`HOST_ADDRESS`), so the reader knows which machine to act on. ``node`` None or empty
        (not known): unchanged."""
        if not node:
            return self
        return dataclasses.replace(self, fix=HOST_ADDRESS.sub(lambda _: f"on node {node}", self.fix))

    def to_json(self) -> DiagnosisDocument:
        return {
            "diagnosis": self.key,
            "at_fault": self.at_fault,
            "noticed_by": self.noticed_by,
            "summary": self.summary,
            "fix": self.fix,
            "facts": dict(self.facts),
            "evidence": list(self.evidence),
            "also_matched": list(self.also_matched),
        }


@dataclasses.dataclass(frozen=True)
class FailureRule:
    """One failure kind: its key, the layer at fault, the layer that usually notices, summary and fix, the
    patterns that recognise it (``unless``: patterns that rule it out) and its fact extractor."""

    key: str
    at_fault: Layer
    noticed_by: Layer
    summary: str
    fix: str
    patterns: tuple[re.Pattern[str], ...]
    facts: Callable[[str, Context], dict[str, Any]] | None = None
    unless: tuple[re.Pattern[str], ...] = ()


def patterns(*texts: str) -> tuple[re.Pattern[str], ...]:
    """Case-insensitive, multi-line patterns of a rule."""
    return tuple(re.compile(p, re.I | re.M) for p in texts)


def captured(text: str, wordings: Mapping[str, str]) -> dict[str, Any]:
    """``{fact: the first group that took part}`` for each pattern of ``wordings`` (fact name ->
    regular expression) that matches ``text``; a pattern may offer alternative wordings, each
    with its own group."""
    found = {name: re.search(pattern, text) for name, pattern in wordings.items()}
    return {name: next((g for g in m.groups() if g is not None), m.group(0)) for name, m in found.items() if m}


__all__ = [
    "CUDA_ERRORS",
    "ENGINES",
    "LAYERS",
    "Context",
    "Diagnosis",
    "DiagnosisDocument",
    "FailureRule",
    "Layer",
    "LayerOrUnknown",
    "captured",
    "patterns",
]
