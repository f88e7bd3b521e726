"""Image probe: what an image needs, read from the registry without running it.

manifest (an index: the runnable platform asked for, attestation manifests skipped) -> config
blob -> labels and environment. Labels written by the project's templates (prefix
``io.github.builder-project.``, or ``io.builder.`` on older images; :mod:`builder.labels`:
``accelerator``, ``cuda.version``, ``rocm.version``, ``framework``,
``framework.version``, ``gpu-archs``, ``min-driver``, ``variant``) win; the environment is the
fallback (``NVIDIA_REQUIRE_CUDA``, ``CUDA_VERSION``, ``ROCM_VERSION``, ``TORCH_CUDA_ARCH_LIST``,
``PYTORCH_ROCM_ARCH``), as set by NVIDIA's and AMD's official base images.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from builder.labels import gpu_archs as label_gpu_archs
from builder.labels import read as read_label

if TYPE_CHECKING:
    from collections.abc import Mapping

    from builder.registry import RegistryClient


class ImageFactsDocument(TypedDict):
    """What an image needs (:class:`ImageFacts`) as JSON; ``labels`` and ``env`` are the image config's
    own, ``sources`` says where each fact came from (``label`` | ``env`` | ``derived``)."""

    repository: str
    digest: str
    platform_digest: str
    platform: str | None
    accelerator: str
    cuda_version: str | None
    rocm_version: str | None
    require_cuda: str | None
    framework: str | None
    framework_version: str | None
    gpu_archs: list[str]
    min_driver: str | None
    variant: str | None
    user: str | None
    entrypoint: list[str]
    labels: dict[str, str]
    env: dict[str, str]
    sources: dict[str, str]


@dataclasses.dataclass(frozen=True)
class ImageFacts:
    """What an image needs. ``digest``: the digest asked for (index or manifest);
    ``platform_digest``: the platform manifest read; ``accelerator``: cuda | rocm | cpu;
    ``gpu_archs``: compiled architectures (``sm_80``, ``compute_90``, ``gfx942``);
    ``sources``: field -> "label" | "env" | "derived"."""

    repository: str
    digest: str
    platform_digest: str
    platform: str | None
    accelerator: str
    cuda_version: str | None = None
    rocm_version: str | None = None
    require_cuda: str | None = None
    framework: str | None = None
    framework_version: str | None = None
    gpu_archs: tuple[str, ...] = ()
    min_driver: str | None = None
    variant: str | None = None
    user: str | None = None
    entrypoint: tuple[str, ...] = ()
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def to_json(self) -> ImageFactsDocument:
        return {
            "repository": self.repository,
            "digest": self.digest,
            "platform_digest": self.platform_digest,
            "platform": self.platform,
            "accelerator": self.accelerator,
            "cuda_version": self.cuda_version,
            "rocm_version": self.rocm_version,
            "require_cuda": self.require_cuda,
            "framework": self.framework,
            "framework_version": self.framework_version,
            "gpu_archs": list(self.gpu_archs),
            "min_driver": self.min_driver,
            "variant": self.variant,
            "user": self.user,
            "entrypoint": list(self.entrypoint),
            "labels": dict(self.labels),
            "env": dict(self.env),
            "sources": dict(self.sources),
        }


def arch_list_from_env(value: str) -> tuple[str, ...]:
    """``TORCH_CUDA_ARCH_LIST`` ("7.5;8.0;9.0+PTX" / "8.0 8.6") -> ("sm_75", "sm_80", "sm_90",
    "compute_90"); ``PYTORCH_ROCM_ARCH`` ("gfx90a;gfx942") -> ("gfx90a", "gfx942")."""
    out: list[str] = []
    for tok in re.split(r"[;,\s]+", value.strip()):
        if not tok:
            continue
        if tok.startswith(("gfx", "sm_", "compute_")):
            out.append(tok)
            continue
        m = re.fullmatch(r"(\d+)\.(\d+)(\+PTX)?", tok, re.I)
        if m:
            out.append(f"sm_{m.group(1)}{m.group(2)}")
            if m.group(3):
                out.append(f"compute_{m.group(1)}{m.group(2)}")
    return tuple(dict.fromkeys(out))


def facts_from_config(
    config: Mapping[str, Any], *, repository: str, digest: str, platform_digest: str, platform: str | None
) -> ImageFacts:
    """Build ImageFacts from an OCI image config document (pure; tested on real configs)."""
    cfg = config.get("config")
    cfg = cfg if isinstance(cfg, dict) else {}  # an image's config is its pusher's: any JSON shape
    raw_labels, raw_env = cfg.get("Labels"), cfg.get("Env")
    labels: dict[str, str] = {str(k): str(v) for k, v in raw_labels.items()} if isinstance(raw_labels, dict) else {}
    env: dict[str, str] = {}
    for item in raw_env if isinstance(raw_env, list) else []:
        k, _, v = str(item).partition("=")
        env[k] = v
    sources: dict[str, str] = {}

    def pick(label: str, *env_names: str) -> str | None:
        v = read_label(labels, label)
        if v:
            sources[label] = "label"
            return v
        for e in env_names:
            if env.get(e):
                sources[label] = "env"
                return env[e]
        return None

    cuda = pick("cuda.version", "CUDA_VERSION")
    rocm = pick("rocm.version", "ROCM_VERSION")
    accel = read_label(labels, "accelerator")
    if accel:
        sources["accelerator"] = "label"
    else:
        accel = "cuda" if cuda or env.get("NVIDIA_REQUIRE_CUDA") else "rocm" if rocm else "cpu"
        sources["accelerator"] = "derived"
    require = env.get("NVIDIA_REQUIRE_CUDA") or None
    if cuda is None and require:
        m = re.search(r"cuda>=(\d+\.\d+)", require)
        if m:
            cuda = m.group(1)
            sources["cuda.version"] = "derived"
    labelled = label_gpu_archs(labels)
    if labelled is not None:
        archs = labelled
        sources["gpu-archs"] = "label"
    else:
        archs = arch_list_from_env(env.get("TORCH_CUDA_ARCH_LIST") or env.get("PYTORCH_ROCM_ARCH") or "")
        if archs:
            sources["gpu-archs"] = "env"
    ep = cfg.get("Entrypoint") or ()
    return ImageFacts(
        repository=repository,
        digest=digest,
        platform_digest=platform_digest,
        platform=platform,
        accelerator=accel,
        cuda_version=cuda or None,
        rocm_version=rocm or None,
        require_cuda=require,
        framework=pick("framework") or None,
        framework_version=pick("framework.version") or None,
        gpu_archs=archs,
        min_driver=pick("min-driver") or None,
        variant=pick("variant") or None,
        user=str(cfg.get("User") or "") or None,
        entrypoint=tuple(str(x) for x in ep) if isinstance(ep, list) else (str(ep),),
        labels=labels,
        env=env,
        sources=sources,
    )


def probe_image(client: RegistryClient, repository: str, reference: str, *, platform: str | None = None) -> ImageFacts:
    """Read the image's facts from the registry (manifest -> config blob). The manifest of
    ``platform`` is read as :func:`builder.registry.copy.platform_config` picks it (None: an
    index's linux/amd64, else its first runnable one; given: exactly that platform or
    NotFoundError listing the image's). Raises NotFoundError / RegistryError from the registry."""
    from builder.registry.copy import platform_config

    top, manifest, chosen, config = platform_config(client, repository, reference, platform)
    return facts_from_config(
        config, repository=repository, digest=top.digest, platform_digest=manifest.digest, platform=chosen
    )


__all__ = ["ImageFacts", "ImageFactsDocument", "arch_list_from_env", "facts_from_config", "probe_image"]
