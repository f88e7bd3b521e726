"""``builder sbom REF``: a CycloneDX SBOM of an image read from the registry, optionally attached as a
signed attestation. Thin Click layer over :func:`builder.sbom.sbom_reference` (docs/inspect.md)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from builder.cli._common import (
    PathParam,
    app_context,
    console,
    docker_config_option,
    emit,
    json_option,
    platform_option,
)
from builder.cli.terminal import counted
from builder.errors import SigningKeyError

if TYPE_CHECKING:
    import pathlib


@click.command()
@click.argument("reference")
@click.option(
    "--key",
    type=PathParam(dir_okay=False, error=SigningKeyError),
    default=None,
    help="Sign and attach the SBOM with this private key (cosign .att, predicate https://cyclonedx.org/bom).",
)
@click.option(
    "--output",
    "-o",
    type=PathParam(dir_okay=False),
    default=None,
    help="Write the CycloneDX JSON to this file (missing folders are created).",
)
@platform_option("Platform manifest of an index to describe.")
@docker_config_option
@json_option
def sbom(reference: str, key: pathlib.Path | None, output: pathlib.Path | None, platform: str | None) -> None:
    """CycloneDX SBOM of an image: dpkg and Python packages, GPU libraries with their targets.

    Read from the registry as `builder inspect` does. With --key the SBOM is attached to the
    digest as a signed attestation that `cosign verify-attestation --type cyclonedx` reads.

    \b
    builder sbom REF -o sbom.cdx.json
    builder sbom REF --key keys/builder.key
    cosign verify-attestation --key keys/builder.pub --type cyclonedx REF
    """
    from builder.image.layers import LayerCache
    from builder.outputs import write_output
    from builder.sbom import sbom_reference
    from builder.signing.operations import Place

    app = app_context().app
    cfg = app.config
    place = Place(app.client, cfg.registry, cfg.state_dir / "locks")
    signer = app.signer(key) if key is not None else None
    result = sbom_reference(
        app.signable_reference(reference) if signer is not None else app.image_reference(reference),
        place,
        signer=signer,
        platform=platform,
        cache=LayerCache(cfg.state_dir / "cache" / "layers"),
    )
    if output is not None:
        write_output(output, json.dumps(result.bom, indent=2) + "\n", "--output")
    doc = result.to_json()

    def human() -> None:
        c = console()
        c.print(result.reference, markup=False, highlight=False, soft_wrap=True)
        gpu = counted(doc["gpu_libraries"], "GPU library", "GPU libraries")
        c.print(f"  {counted(doc['components'], 'component')} ({gpu})", markup=False)
        if output is not None:
            c.print(f"  written to {output}", markup=False, highlight=False)
        if result.tag is not None:
            what = "attached" if result.appended else "already attached (identical statement)"
            c.print(f"  {what}: {result.tag} ({doc['predicate_type']})", markup=False, highlight=False)

    emit(doc, human)
