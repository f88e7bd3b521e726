"""What a promotion may name: an index or an image manifest (image config, filesystem layers), never
BuildKit's attestation manifest, a cosign signature or another OCI artifact. The manifests are the
shapes the registry holds: the attestation and signature manifests as `docker buildx build` and
`cosign sign` wrote them for scripts/demo (annotations dropped), per
https://docs.docker.com/build/metadata/attestations/attestation-storage/ and
https://github.com/sigstore/cosign/blob/main/specs/SIGNATURE_SPEC.md."""

from __future__ import annotations

from builder.registry.manifest import OCI_INDEX, OCI_MANIFEST, Manifest, canonical_json, not_an_image
from builder.registry.reference import sha256_digest

D = "sha256:" + "ab" * 32
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"


def _manifest(config: str | None, *layers: str, artifact_type: str | None = None) -> Manifest:
    doc: dict[str, object] = {"schemaVersion": 2, "mediaType": OCI_MANIFEST}
    if config is not None:
        doc["config"] = {"mediaType": config, "digest": D, "size": 2}
    doc["layers"] = [{"mediaType": t, "digest": D, "size": 3} for t in layers]
    if artifact_type is not None:
        doc["artifactType"] = artifact_type
    raw = canonical_json(doc)
    return Manifest(raw=raw, media_type=OCI_MANIFEST, digest=sha256_digest(raw))


def test_images_pass() -> None:
    assert not_an_image(_manifest(OCI_CONFIG, "application/vnd.oci.image.layer.v1.tar+gzip")) is None
    assert not_an_image(_manifest(OCI_CONFIG, "application/vnd.oci.image.layer.v1.tar+zstd")) is None
    docker_config = "application/vnd.docker.container.image.v1+json"
    docker = _manifest(docker_config, "application/vnd.docker.image.rootfs.diff.tar.gzip")
    assert not_an_image(docker) is None
    raw = canonical_json({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []})
    assert not_an_image(Manifest(raw=raw, media_type=OCI_INDEX, digest=sha256_digest(raw))) is None


def test_attestations_signatures_and_artifacts_are_not_images() -> None:
    attestation = _manifest(OCI_CONFIG, "application/vnd.in-toto+json")  # BuildKit: an image config "for compatibility"
    assert "BuildKit attestation manifest" in (not_an_image(attestation) or "")
    signature = _manifest(OCI_CONFIG, *["application/vnd.dev.cosign.simplesigning.v1+json"] * 2)
    assert "application/vnd.dev.cosign.simplesigning.v1+json" in (not_an_image(signature) or "")
    spdx = "application/spdx+json"
    sbom = _manifest("application/vnd.oci.empty.v1+json", spdx, artifact_type=spdx)
    assert "an artifact (application/spdx+json)" in (not_an_image(sbom) or "")
    helm = _manifest("application/vnd.cncf.helm.config.v1+json", "application/vnd.cncf.helm.chart.content.v1.tar+gzip")
    assert "application/vnd.cncf.helm.config.v1+json" in (not_an_image(helm) or "")
    assert "no config" in (not_an_image(_manifest(None)) or "")
