"""`builder sbom` of an image with thousands of Python distributions stays n log n inside
cyclonedx-python-lib: the BOM's components and dependency graph are built in one go, not by the
library's `register_dependency`/`validate()`, whose linear scan compares every bom-ref with every
other (O(n^2) `BomRef` comparisons; upstream
https://github.com/CycloneDX/cyclonedx-python-lib/issues/1006). Counted, not timed: the `BomRef`
comparisons per component. The image is real (a layer of tiny `*.dist-info/METADATA` files pushed
to the registry and read back by `inspect_image`); the BOM still validates against the CycloneDX
1.6 JSON schema (the library's own validator)."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

import pytest
from cyclonedx.model.bom_ref import BomRef
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from builder.image.inspection import inspect_image
from builder.image.sbom import image_bom
from builder.registry import RegistryClient
from tests.integration.test_promote_support import push_image, tar_layer

if TYPE_CHECKING:
    from collections.abc import Callable

pytestmark = pytest.mark.integration

SITE = "usr/local/lib/python3.11/site-packages"


def dist_info_layer(count: int) -> bytes:
    """A layer of ``count`` tiny distributions, as pip installs them (PyPA core metadata,
    https://packaging.python.org/en/latest/specifications/core-metadata/)."""
    files = {}
    for i in range(count):
        name, version = f"pkg{i:05d}", f"1.{i % 7}"
        metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        files[f"{SITE}/{name}-{version}.dist-info/METADATA"] = metadata.encode()
    return tar_layer(files)


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    counts = {"compared": 0}
    for name in ("__eq__", "__lt__"):
        original: Callable[..., Any] = getattr(BomRef, name)

        @functools.wraps(original)
        def counted(self: BomRef, other: object, _original: Callable[..., Any] = original) -> Any:
            counts["compared"] += 1
            return _original(self, other)

        monkeypatch.setattr(BomRef, name, counted)
    return counts


def test_an_sbom_of_thousands_of_distributions_compares_each_bom_ref_a_few_times(
    registry_address: str, unique_repo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = 3000
    client = RegistryClient(registry_address, insecure=True)
    digest = push_image(client, unique_repo, "many", layers=[dist_info_layer(count)])
    inspection = inspect_image(client, unique_repo, digest)
    assert len(inspection.stack.python_packages) == count
    counts = _counting(monkeypatch)
    bom = image_bom(inspection)
    per_component = counts["compared"] / count
    # n log n sorting is ~2 log2(n) = 23 here; the library's validate() scan is ~n/2 = 1500
    assert per_component < 60, per_component
    assert len(bom["components"]) == count
    last = count - 1
    assert {c["purl"] for c in bom["components"]} >= {"pkg:pypi/pkg00000@1.0", f"pkg:pypi/pkg{last:05d}@1.{last % 7}"}
    image = next(d for d in bom["dependencies"] if d["ref"] == bom["metadata"]["component"]["bom-ref"])
    assert len(image["dependsOn"]) == count  # the image depends on every component
    assert len(bom["dependencies"]) == count + 1  # and every component has its entry
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(json.dumps(bom)) is None


def test_the_document_is_the_one_the_librarys_outputter_writes(registry_address: str, unique_repo: str) -> None:
    """For a small image, the BOM equals what `JsonV1Dot6(bom).output_as_string()` (with its
    `validate()`) writes for the same components added one by one and registered with
    `register_dependency`, as builder did before: the same document, built without the scans."""
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component
    from cyclonedx.output.json import JsonV1Dot6

    client = RegistryClient(registry_address, insecure=True)
    digest = push_image(client, unique_repo, "few", layers=[dist_info_layer(40)])
    inspection = inspect_image(client, unique_repo, digest)
    ours = image_bom(inspection)
    theirs = Bom()
    image = Component.from_json(ours["metadata"]["component"])  # type: ignore[attr-defined]
    theirs.metadata.component = image
    for c in ours["components"]:
        theirs.components.add(Component.from_json(c))  # type: ignore[attr-defined]
    theirs.register_dependency(image, list(theirs.components))
    for prop in ours["metadata"].get("properties", []):
        from cyclonedx.model import Property

        theirs.metadata.properties.add(Property(name=prop["name"], value=prop["value"]))
    expected = json.loads(JsonV1Dot6(theirs).output_as_string())
    for doc in (ours, expected):
        doc.pop("serialNumber", None)
        doc["metadata"].pop("timestamp", None)
    assert ours == expected
