"""``builder diff A B``: two images inspected from the registry (:mod:`builder.image`) and compared for an
approver (:func:`builder.image.diff.diff_inspections`), with the fleet clusters whose static verdict
changes (:func:`builder.checks.static.fleet_verdict` on the GPU code measured in each image).

Errors: the registry client's (auth 6, not found 8, unavailable 5), ConfigError for an invalid fleet file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.checks.image import probe_image
from builder.checks.static import fleet_verdict
from builder.image.diff import ImageDiff, diff_inspections, with_fleet
from builder.image.inspection import ImageInspection, inspect_image
from builder.registry.reference import parse_reference

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from builder.image.layers import LayerCache
    from builder.registry import RegistryClient


def _inspect(
    ref: str,
    registries: Callable[[str], RegistryClient],
    default_registry: str,
    platform: str | None,
    cache: LayerCache | None,
) -> tuple[ImageInspection, RegistryClient, str]:
    r = parse_reference(ref, default_registry)
    client = registries(r.registry)
    return (
        inspect_image(client, r.repository, r.ref, platform=platform, cache=cache),
        client,
        r.repository,
    )


def _fleet(
    found: tuple[ImageInspection, RegistryClient, str], platform: str | None, fleet_file: Path
) -> dict[str, str]:
    inspection, client, repository = found
    facts = probe_image(client, repository, inspection.digest, platform=platform)
    check = fleet_verdict(facts, fleet_file, kernels=inspection.kernel_binaries())
    return {c.name: (v.verdict.verdict if check.applies(c.name) else "not-applicable") for c, v in check.clusters}


def diff_references(
    ref_a: str,
    ref_b: str,
    *,
    registries: Callable[[str], RegistryClient],
    default_registry: str,
    platform: str | None = None,
    cache: LayerCache | None = None,
    fleet_file: Path | None = None,
) -> ImageDiff:
    """``ref_b`` against ``ref_a`` (each a tag or digest reference; relative names in
    ``default_registry``; clients from ``registries(host)``, layers cached in ``cache``); with
    ``fleet_file``, the clusters whose verdict differs."""
    a = _inspect(ref_a, registries, default_registry, platform, cache)
    b = _inspect(ref_b, registries, default_registry, platform, cache)
    diff = diff_inspections(a[0], b[0])
    if fleet_file is not None:
        diff = with_fleet(diff, _fleet(a, platform, fleet_file), _fleet(b, platform, fleet_file))
    return diff


__all__ = ["diff_references"]
