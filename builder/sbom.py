"""``builder sbom REF``: the image inspected from the registry (:mod:`builder.image`), its CycloneDX BOM
(:func:`builder.image.sbom.image_bom`) and, with a signer, the BOM attached to the digest as a signed
in-toto attestation of predicate type ``https://cyclonedx.org/bom`` in cosign's ``.att`` format
(:func:`builder.signing.attest.attest_image`), which ``cosign verify-attestation --type cyclonedx`` reads.

Errors: the registry client's (5/6/7/8), SigningError when attaching.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from builder.image.inspection import inspect_image
from builder.image.sbom import CYCLONEDX_PREDICATE, image_bom
from builder.signing.attest import attest_image

if TYPE_CHECKING:
    from builder.image.layers import LayerCache
    from builder.signing.operations import Place
    from builder.signing.signer import Signer


class SbomDocument(TypedDict):
    """``builder sbom --json``: the image (``reference`` pinned by digest), how many components the BOM
    lists, whether it was attached (``attested``; ``tag``: the ``.att`` tag written, ``appended``: False
    when the same statement was already there), ``predicate_type`` and the ``bom`` itself."""

    reference: str
    components: int
    gpu_libraries: int
    attested: bool
    appended: bool
    tag: str | None
    predicate_type: str
    bom: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class SbomResult:
    """What :func:`sbom_reference` produced: the pinned ``reference``, the ``bom`` and, when attached,
    the ``.att`` ``tag`` and whether a layer was ``appended``."""

    reference: str
    bom: dict[str, Any]
    tag: str | None = None
    appended: bool = False

    def to_json(self) -> SbomDocument:
        components = self.bom.get("components") or []
        return {
            "reference": self.reference,
            "components": len(components),
            "gpu_libraries": sum(1 for c in components if c.get("type") == "file"),
            "attested": self.tag is not None,
            "appended": self.appended,
            "tag": self.tag,
            "predicate_type": CYCLONEDX_PREDICATE,
            "bom": self.bom,
        }


def sbom_reference(
    reference: str,
    place: Place,
    *,
    signer: Signer | None = None,
    platform: str | None = None,
    cache: LayerCache | None = None,
) -> SbomResult:
    """The BOM of the image ``reference`` names (resolved in ``place``) and, with ``signer``, attached to
    the digest asked for (an index: the index) as a signed CycloneDX attestation."""
    target = place.target(reference)
    inspection = inspect_image(target.client, target.repository, target.digest, platform=platform, cache=cache)
    bom = image_bom(inspection)
    if signer is None:
        return SbomResult(inspection.reference, bom)
    write = attest_image(
        target.client, target.repository, target.digest, CYCLONEDX_PREDICATE, bom, signer, lock_dir=place.lock_dir
    )
    return SbomResult(inspection.reference, bom, write.tag, write.appended)


__all__ = ["SbomDocument", "SbomResult", "sbom_reference"]
