"""The diagnosis context of a host and an image: what :func:`builder.checks.diagnosis.diagnose` knows besides
the message, built the same way for ``builder diagnose --host`` and for a failed device check."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from builder.checks.diagnosis import Context, Diagnosis, diagnose, read_input
from builder.compat.drivers import driver_cuda, parse_cuda, parse_driver
from builder.compat.gpus import sm_of
from builder.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from builder.checks.host.model import HostInfo
    from builder.checks.image import ImageFacts


def diagnosis_context(
    host: HostInfo | None,
    image: ImageFacts | None = None,
    *,
    require_cuda: str | None = None,
    image_cuda: str | None = None,
    driver_version: str | None = None,
    gpu_brand: str | None = None,
    vendor: str | None = None,
    engine: str | None = None,
) -> Context:
    """Context from the host's first GPU (vendor, driver, the driver's CUDA, GPU name/brand/architecture) and
    the image (``NVIDIA_REQUIRE_CUDA``, CUDA version, compiled architectures); the keyword arguments (what the
    user said: ``--require-cuda``, ``--image-cuda``, ``--driver``, ``--brand``, ``--vendor``, ``--engine``) win
    where given; the engine is otherwise the host's (``docker info`` / ``podman info`` in the host facts).
    Without a reported CUDA version the
    driver's is taken from ``builder.compat.driver_cuda`` (NVIDIA). Raises ConfigError for a driver version
    that is not a version."""
    g = host.gpus[0] if host is not None and host.gpus else None
    arch = None
    if g is not None:
        arch = sm_of(g.compute_capability) if g.compute_capability else g.gfx_target
    ctx = Context(
        vendor=host.vendor if host else None,
        driver_version=host.driver_version if host else None,
        driver_cuda=host.cuda_version if host else None,
        gpu_name=g.name if g else None,
        gpu_brand=g.brand if g else None,
        gpu_arch=arch,
        require_cuda=image.require_cuda if image else None,
        image_cuda=image.cuda_version if image else None,
        image_archs=tuple(image.gpu_archs) if image else (),
    )
    ctx = dataclasses.replace(
        ctx,
        require_cuda=require_cuda or ctx.require_cuda,
        image_cuda=image_cuda or ctx.image_cuda,
        driver_version=driver_version or ctx.driver_version,
        gpu_brand=gpu_brand or ctx.gpu_brand,
        vendor=vendor or ctx.vendor,
        engine=engine or (host.engine.name.lower() if host is not None and host.engine is not None else None),
    )
    if ctx.driver_version and not ctx.driver_cuda and ctx.vendor in (None, "nvidia"):
        ctx = dataclasses.replace(ctx, driver_cuda=driver_cuda(ctx.driver_version))
    return ctx


def _check_given(*, require_cuda: str | None, image_cuda: str | None, driver_version: str | None) -> None:
    """What the user typed (``--require-cuda``, ``--image-cuda``, ``--driver``) read by builder.compat's
    parsers, so a value that is no version is refused naming the option (ConfigError, exit 2) instead of
    being taken silently and deciding nothing."""
    from builder.compat.requirement import parse_requirement

    checks: list[tuple[str, str | None, Callable[[str], object]]] = [
        ("--require-cuda", require_cuda, parse_requirement),
        ("--image-cuda", image_cuda, lambda v: parse_cuda(v, what="--image-cuda")),
        ("--driver", driver_version, lambda v: parse_driver(v, what="--driver")),
    ]
    for option, value, parse in checks:
        if value is None:
            continue
        try:
            parse(value)
        except ConfigError as exc:
            said = exc.message if exc.message.startswith(option) else f"{option}: {exc.message}"
            raise ConfigError(said, hint=exc.hint, option=option) from None


def diagnose_message(
    message: str | Path,
    *,
    host: Path | None = None,
    require_cuda: str | None = None,
    image_cuda: str | None = None,
    driver_version: str | None = None,
    gpu_brand: str | None = None,
    vendor: str | None = None,
    engine: str | None = None,
) -> Diagnosis:
    """``builder diagnose``: the diagnosis of ``message`` (the error text, or a file holding it) in the
    context of the saved ``host`` facts and what the user said (see :func:`diagnosis_context`). Never
    fails for an unknown message (``unknown``); raises NotFoundError (a file that cannot be read),
    HostProbeError (host facts not recognisable or a field that is no version, exit 21 naming the file
    and field) and ConfigError (``--require-cuda``/``--image-cuda``/``--driver`` not what they name, exit 2)."""
    from builder.checks.host.reading import load_hostinfo  # pydantic: only for saved host facts

    _check_given(require_cuda=require_cuda, image_cuda=image_cuda, driver_version=driver_version)
    text = read_input(message) if isinstance(message, Path) else message
    ctx = diagnosis_context(
        load_hostinfo(host) if host is not None else None,
        require_cuda=require_cuda,
        image_cuda=image_cuda,
        driver_version=driver_version,
        gpu_brand=gpu_brand,
        vendor=vendor,
        engine=engine,
    )
    return diagnose(text, ctx)


__all__ = ["diagnose_message", "diagnosis_context"]
