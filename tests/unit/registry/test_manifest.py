"""Descriptors, manifests and indexes: attestation manifests skipped, JSON round trips."""

from __future__ import annotations

import pytest

from builder.errors import RegistryError
from builder.registry.manifest import (
    OCI_INDEX,
    OCI_MANIFEST,
    Descriptor,
    Manifest,
    Platform,
    canonical_json,
    parse_json_object,
    platform_names,
    runnable_platforms,
)
from builder.registry.reference import sha256_digest

D = "sha256:" + "ab" * 32


def _manifest(doc: dict[str, object], media_type: str) -> Manifest:
    raw = canonical_json(doc)
    return Manifest(raw=raw, media_type=media_type, digest=sha256_digest(raw))


def test_runnable_platforms_skip_attestations() -> None:
    def desc(digest: str, os_: str, arch: str, ann: dict[str, str] | None = None) -> dict[str, object]:
        d: dict[str, object] = {
            "mediaType": OCI_MANIFEST,
            "digest": digest,
            "size": 10,
            "platform": {"os": os_, "architecture": arch},
        }
        if ann:
            d["annotations"] = ann
        return d

    a, b, c = ("sha256:" + x * 64 for x in "abc")
    index = _manifest(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                desc(a, "linux", "amd64"),
                desc(b, "linux", "arm64"),
                desc(c, "unknown", "unknown", {"vnd.docker.reference.type": "attestation-manifest"}),
            ],
        },
        OCI_INDEX,
    )
    assert [d.digest for d in runnable_platforms(index)] == [a, b]
    assert platform_names(index) == ("linux/amd64", "linux/arm64")


def test_descriptor_json_round_trip() -> None:
    d = Descriptor.from_json(
        {"mediaType": "m", "digest": D, "size": 3, "artifactType": "t", "annotations": {"b": "2", "a": "1"}}
    )
    assert d.to_json() == {
        "mediaType": "m",
        "digest": D,
        "size": 3,
        "artifactType": "t",
        "annotations": {"a": "1", "b": "2"},
    }
    assert not d.is_attestation
    arm = Descriptor("m", D, 1, platform=Platform("linux", "arm64", "v8"))
    assert Descriptor.from_json(arm.to_json()) == arm
    assert str(arm.platform) == "linux/arm64/v8"


def test_descriptor_without_digest_names_where() -> None:
    with pytest.raises(RegistryError, match="invalid descriptor in sha256:x"):
        Descriptor.from_json({"mediaType": "m", "size": 1}, where="sha256:x")


def test_image_manifest_blobs_subject_and_artifact_type() -> None:
    cfg = {"mediaType": "application/vnd.oci.empty.v1+json", "digest": D, "size": 2}
    layer = {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": "sha256:" + "cd" * 32, "size": 5}
    m = _manifest(
        {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": cfg, "layers": [layer], "subject": layer},
        OCI_MANIFEST,
    )
    assert not m.is_index and m.manifests == []
    assert [b.digest for b in m.blobs] == [D, layer["digest"]]
    assert m.subject is not None and m.subject.digest == layer["digest"]
    assert m.artifact_type == "application/vnd.oci.empty.v1+json"  # config media type (OCI 1.1 rule)
    assert m.descriptor().size == len(m.raw)


def test_parse_json_object_names_the_document() -> None:
    assert parse_json_object(b'{"a": 1}', "x") == {"a": 1}
    with pytest.raises(RegistryError, match="doc: the registry sent a document that is not JSON"):
        parse_json_object(b"not json", "doc")
    with pytest.raises(RegistryError, match="expected a JSON object, got list"):
        parse_json_object(b"[]", "doc")
