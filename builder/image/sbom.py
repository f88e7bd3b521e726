"""A CycloneDX SBOM of an inspected image (``builder sbom``), written with cyclonedx-python-lib (the
CycloneDX project's own library, https://github.com/CycloneDX/cyclonedx-python-lib) as CycloneDX 1.6 JSON.

Components: every dpkg package (``pkg:deb/<os id>/<name>@<version>``), every Python distribution
(``pkg:pypi/<name>@<version>``) and every ELF file with GPU code (a ``file`` component whose properties
``builder:gpu:sass``, ``builder:gpu:ptx``, ``builder:gpu:ptx-isa``, ``builder:gpu:gfx`` list its targets and
``builder:gpu:loads`` says whether it is the build that loads). The image is the BOM's
``metadata.component`` (``container``, ``pkg:oci/<name>@<digest>?repository_url=...``; package URLs per
https://github.com/package-url/purl-spec/blob/master/PURL-TYPES.rst). The stack versions builder read
(CUDA runtime, cuDNN, NCCL, ...) are ``metadata.properties`` ``builder:stack:<name>``.

As an attestation the BOM is the in-toto predicate of type :data:`CYCLONEDX_PREDICATE`
(https://github.com/in-toto/attestation/blob/main/spec/predicates/cyclonedx.md), which
``cosign verify-attestation --type cyclonedx`` selects.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import TYPE_CHECKING, Any

from cyclonedx.model import Property
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.dependency import Dependency
from cyclonedx.schema.schema import SchemaVersion1Dot6
from packageurl import PackageURL

from builder.predicates import CYCLONEDX_BOM

if TYPE_CHECKING:
    from builder.image.elf import GpuCode
    from builder.image.inspection import ImageInspection

#: in-toto predicate type of a CycloneDX BOM (what ``cosign attest --type cyclonedx`` writes)
CYCLONEDX_PREDICATE = CYCLONEDX_BOM
#: the CycloneDX 1.6 JSON schema's id, as the library's outputter writes it in ``$schema``
#: (https://cyclonedx.org/docs/1.6/json/)
SCHEMA_1_6 = "http://cyclonedx.org/schema/bom-1.6.schema.json"
STACK_FACTS = ("os", "cuda_runtime", "cuda_toolkit", "cudnn", "nccl", "cublas", "rocm", "hip", "rccl")


def _os_id(inspection: ImageInspection) -> str:
    name = (inspection.stack.os or "").lower()
    for known in ("debian", "ubuntu", "rocky", "almalinux", "rhel", "alpine"):
        if known in name:
            return known
    return "debian"


def _loads(code: GpuCode, loading: set[str]) -> bool:
    """Whether the file loads: a library of the loading set, or a code object of a loading directory."""
    return code.path in loading or (code.code_object and code.path.rsplit("/", 1)[0] + "/" in loading)


def image_bom(inspection: ImageInspection) -> dict[str, Any]:
    """The CycloneDX 1.6 BOM of ``inspection`` as a JSON object, deterministic for the same image:
    ``serialNumber`` is the UUIDv5 (RFC 4122 name-based, https://www.rfc-editor.org/rfc/rfc4122#section-4.3)
    of the image reference and the BOM's content, and there is no ``metadata.timestamp`` (optional in
    the CycloneDX 1.6 JSON schema, https://cyclonedx.org/docs/1.6/json/#metadata_timestamp). So the
    same image signed by the same key gives the identical in-toto statement, which
    :func:`builder.signing.attest.attest_image` does not append twice (``builder sbom --key`` run
    again adds nothing); a changed image or BOM gets a new serial number."""
    name, _, digest = inspection.reference.partition("@")
    repository = name.partition("/")[2]
    image = Component(
        name=repository,
        version=digest,
        type=ComponentType.CONTAINER,
        bom_ref=inspection.reference,
        purl=PackageURL(
            type="oci",
            name=repository.rsplit("/", 1)[-1],
            version=digest,
            qualifiers={"repository_url": name},
        ),
    )
    bom = Bom()
    bom.metadata.component = image
    stack = inspection.stack
    facts = {f: getattr(stack, f) for f in STACK_FACTS}
    facts["python"] = ", ".join(stack.python) or None
    for fw in stack.frameworks:
        facts[fw.name] = (
            fw.version + (f" (CUDA {fw.cuda})" if fw.cuda else "") + (f" (ROCm {fw.rocm})" if fw.rocm else "")
        )
    for key, value in facts.items():
        if value:
            bom.metadata.properties.add(Property(name=f"builder:stack:{key}", value=value))
    components: dict[str, Component] = {}  # by bom-ref: one component per package URL or file

    def add(component: Component) -> None:
        components.setdefault(str(component.bom_ref), component)

    os_id = _os_id(inspection)
    for pkg, version in stack.dpkg_packages.items():
        purl = PackageURL(type="deb", namespace=os_id, name=pkg, version=version)
        add(Component(name=pkg, version=version, purl=purl, bom_ref=str(purl)))
    for pkg, version in stack.python_packages.items():
        purl = PackageURL(type="pypi", name=pkg, version=version)
        add(Component(name=pkg, version=version, purl=purl, bom_ref=str(purl)))
    loading = {b.path for b in inspection.kernel_binaries()}
    for code in inspection.binaries:
        props = [
            Property(name="builder:gpu:sass", value=" ".join(code.sass)),
            Property(name="builder:gpu:ptx", value=" ".join(code.ptx)),
            Property(name="builder:gpu:gfx", value=" ".join(code.gfx)),
            Property(name="builder:gpu:loads", value="true" if _loads(code, loading) else "false"),
        ]
        if code.ptx_isa:
            props.append(Property(name="builder:gpu:ptx-isa", value=code.ptx_isa))
        add(
            Component(
                name=code.path,
                type=ComponentType.FILE,
                bom_ref=f"file:{code.path}",
                properties=[p for p in props if p.value],
            )
        )
    doc = _bom_json(bom, image, list(components.values()))
    doc.pop("serialNumber", None)
    doc.get("metadata", {}).pop("timestamp", None)
    content = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    doc["serialNumber"] = f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, f'{inspection.reference}#{content}')}"
    return doc


def _bom_json(bom: Bom, image: Component, components: list[Component]) -> dict[str, Any]:
    """``bom`` with ``components`` (bom-refs unique, non-empty) and the dependency graph "``image``
    depends on each of them", as CycloneDX 1.6 JSON, in n log n ``BomRef`` comparisons.

    The library's ``JsonV1Dot6.output_as_string`` first runs ``Bom.validate()``, which registers
    every component with ``register_dependency``: a linear scan of the dependency set per component,
    so O(n^2) ``BomRef`` comparisons (an image with 20,000 distributions spent minutes there;
    https://github.com/CycloneDX/cyclonedx-python-lib/issues/1006), and then makes bom-refs unique
    by a list scan (``BomRefDiscriminator``, O(n^2) again). Here the components and the whole graph
    are set in one go (each set sorted once) and the library's serializer writes the document
    (``Bom.as_json`` with the 1.6 view, plus the ``$schema``/``bomFormat``/``specVersion`` that
    ``JsonV1Dot6`` adds: https://github.com/CycloneDX/cyclonedx-python-lib/blob/main/cyclonedx/output/json.py);
    what ``validate()`` ensures holds by construction: every component has a dependency entry, every
    reference is a component of the BOM, bom-refs are unique (no license expressions are written)."""
    bom.components = components  # the setter takes any iterable (one SortedSet, sorted once)
    root = Dependency(ref=image.bom_ref, dependencies=[Dependency(ref=c.bom_ref) for c in components])
    bom.dependencies = [root, *(Dependency(ref=c.bom_ref) for c in components)]
    doc: dict[str, Any] = json.loads(bom.as_json(view_=SchemaVersion1Dot6))  # type: ignore[attr-defined]
    doc.update({"$schema": SCHEMA_1_6, "bomFormat": "CycloneDX", "specVersion": "1.6"})
    return doc


__all__ = ["CYCLONEDX_PREDICATE", "image_bom"]
