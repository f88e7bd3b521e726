"""Fleet verdicts for promotions: what an image needs (read from its config in the registry) and,
through ``builder.compat`` (the only owner of GPU, driver and ``NVIDIA_REQUIRE_CUDA`` knowledge),
whether it runs on each cluster of a fleet file. Used by the policy's ``fleet`` rule and by
``resolve --cluster``.

Errors: NotFoundError (8) for a missing fleet file or a cluster in none of the stage's fleet
files; ConfigError (2) when ``--cluster`` has no fleet file to take it from; registry errors.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.compat.kernels import KernelBinary
from builder.errors import ConfigError, NotFoundError
from builder.labels import gpu_archs as label_gpu_archs
from builder.labels import read as read_label
from builder.policy import FleetEvidence, Policy
from builder.registry import config_env, image_config

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from builder.image.layers import LayerCache
    from builder.promote.model import FleetChecker
    from builder.registry import RegistryClient


@dataclasses.dataclass(frozen=True)
class ImageNeeds:
    """What an image needs from a host: ``cuda`` (major.minor), the ``NVIDIA_REQUIRE_CUDA``
    expression (``require``), ``rocm`` (version), the GPU targets it was compiled for
    (``image_archs``: ``sm_80``, ``gfx942``, ...). None/empty: unknown."""

    cuda: str | None = None
    require: str | None = None
    rocm: str | None = None
    image_archs: tuple[str, ...] = ()

    @property
    def vendor(self) -> str | None:
        """``nvidia`` / ``amd`` from what the image needs; None when it needs neither."""
        if self.cuda or self.require:
            return "nvidia"
        return "amd" if self.rocm else None


def image_requirements(config: Mapping[str, Any]) -> ImageNeeds:
    """What an image needs from a host, from its config (OCI image config JSON): the labels
    ``builder render`` writes (``cuda.version``, ``rocm.version``, ``gpu-archs`` under
    :data:`builder.labels.OWN`, or the older ``io.builder.``), with the environment
    (``NVIDIA_REQUIRE_CUDA``, ``CUDA_VERSION``, ``ROCM_VERSION``) as fallback."""
    labels = (config.get("config") or {}).get("Labels") or {}
    env = config_env(config)
    cuda = read_label(labels, "cuda.version")
    if not cuda and env.get("CUDA_VERSION"):
        cuda = ".".join(env["CUDA_VERSION"].split(".")[:2])
    rocm = read_label(labels, "rocm.version") or env.get("ROCM_VERSION") or None
    archs = label_gpu_archs(labels) or ()
    return ImageNeeds(cuda, env.get("NVIDIA_REQUIRE_CUDA") or None, rocm, archs)


#: the GPU code measured in an image (``builder.image``): client, repository, digest -> libraries that load
MeasureKernels = Callable[["RegistryClient", str, str], tuple[KernelBinary, ...]]


def check_fleet(
    client: RegistryClient, repository: str, digest: str, fleet: str, *, kernels: MeasureKernels | None = None
) -> list[FleetEvidence]:
    """One verdict per cluster of the fleet file ``fleet`` for the image ``digest`` in
    ``repository``; ``kernels`` measures the image's GPU libraries, which are then judged per GPU
    (``builder.compat.check_compat``; the declared ``gpu-archs`` only when none is measured). Raises
    NotFoundError for a missing fleet file, registry errors."""
    from builder.compat.fleets import check_cluster, load_fleet  # only for a fleet rule or --cluster

    loaded = load_fleet(Path(fleet))
    needs = image_requirements(image_config(client, repository, digest))
    vendor = needs.vendor
    measured = kernels(client, repository, digest) if kernels is not None else ()
    out = []
    for cluster in loaded.clusters:
        cv = check_cluster(
            cluster,
            cuda=needs.cuda,
            require=needs.require,
            rocm=needs.rocm,
            image_archs=() if measured else needs.image_archs,
            kernels=measured,
        )
        out.append(
            FleetEvidence(
                fleet,
                cluster.name,
                cv.verdict.verdict,
                cluster_reason(cv.verdict.verdict, [(h.label, v.verdict, v.reasons) for h, v in cv.configs])
                or "; ".join(cv.verdict.reasons),
                vendor is None or cluster.vendor == vendor,
            )
        )
    return out


def compat_fleet_checker(layer_cache: LayerCache | None = None) -> FleetChecker:
    """A FleetChecker backed by ``builder.compat`` (``check_fleet``) that judges the GPU code measured in
    the image's layers (:func:`builder.image.inspection.inspect_image`, layers cached in ``layer_cache``)."""

    def measure(client: RegistryClient, repository: str, digest: str) -> tuple[KernelBinary, ...]:
        from builder.image.inspection import inspect_image

        return inspect_image(client, repository, digest, cache=layer_cache).kernel_binaries()

    return functools.partial(check_fleet, kernels=measure)


def cluster_reason(verdict: str, hosts: Sequence[tuple[str, str, Sequence[str]]]) -> str:
    """One line for a cluster's ``verdict`` from its host configurations ``(label, verdict,
    reasons)``: each configuration that has this verdict named once (``driver 550.144.03, NVIDIA
    GeForce RTX 4090 (blocked): reason; reason``), configurations with the same reasons merged,
    groups separated by `` | ``."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for label, v, reasons in hosts:
        if v == verdict:
            groups.setdefault(tuple(dict.fromkeys(reasons)), []).append(label)
    return " | ".join(f"{' and '.join(labels)} ({verdict}): {'; '.join(rs)}" for rs, labels in groups.items())


def stage_fleet_file(policy: Policy, stage: str, cluster: str) -> str:
    """The fleet file for ``resolve --cluster`` without ``--fleet``: the ``file`` of the stage's
    policy ``fleet`` rule (of several, the first that names ``cluster``). Never a guess: a stage
    without a fleet rule is a ConfigError asking for ``--fleet FILE``; NotFoundError when no fleet
    file of the stage names the cluster; NotFoundError for an unknown stage."""
    files = policy.fleets(stage)
    if not files:
        raise ConfigError(
            f"--cluster {cluster} needs a fleet file: stage {stage} in {policy.path} has no `fleet` rule "
            "to take it from",
            hint="pass --fleet FILE (e.g. --fleet fleets/demo.yaml), or add a `fleet: {file: ...}` rule to the stage",
        )
    if len(files) == 1:
        return files[0]  # resolve names the file when the cluster is not in it
    from builder.compat.fleets import load_fleet

    for f in files:
        if load_fleet(Path(f)).cluster(cluster) is not None:
            return f
    raise NotFoundError(
        f"cluster {cluster!r} is in none of the fleet files of stage {stage}: {', '.join(files)}",
        hint="check the cluster name, or pass --fleet FILE",
    )


def cluster_fleet_file(policy: Policy, stage: str, cluster: str, fleets_dir: Path) -> Path:
    """The fleet file naming ``cluster`` for ``resolve --cluster`` without ``--fleet``, looked up as
    ``check --cluster`` looks it up: the files of the stage's policy ``fleet`` rules first, then every
    fleet of ``fleets_dir`` (``builder.compat.fleets.find_cluster``, the one lookup by name). Raises
    NotFoundError ("unknown cluster", naming the files looked in and every cluster they have),
    NotFoundError for an unknown stage, ConfigError for an invalid fleet file."""
    from builder.compat.fleets import find_cluster, load_fleet, load_fleets

    policy.stage(stage)  # an unknown stage is named first
    staged = tuple(load_fleet(Path(f)) for f in policy.fleets(stage))
    seen = {Path(f.path).resolve() for f in staged}
    others = tuple(f for f in load_fleets(fleets_dir) if Path(f.path).resolve() not in seen)
    fleet, _ = find_cluster((*staged, *others), cluster)
    return Path(fleet.path)
