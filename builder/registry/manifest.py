"""OCI content model: platforms, descriptors, manifests and indexes as stored; the media types and
the JSON of the registry's documents are :mod:`builder.registry.media`'s (named here too).

Sources: OCI image-spec v1.1 (descriptors, ``artifactType``, ``subject``, the image index;
https://github.com/opencontainers/image-spec/blob/v1.1.0/descriptor.md and
https://github.com/opencontainers/image-spec/blob/v1.1.0/manifest.md), Docker's v2 schema 2
media types (https://distribution.github.io/distribution/spec/manifest-v2-2/), buildx's
attestation manifests inside an index (platform ``unknown/unknown``, annotation
``vnd.docker.reference.type: attestation-manifest``;
https://docs.docker.com/build/metadata/attestations/attestation-storage/).
Errors: ``RegistryError`` (exit 7) for a document that is not a JSON object or a descriptor
without ``digest``/``size``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

from builder.errors import RegistryError
from builder.registry.media import (
    ACCEPT,
    ATTESTATION_REF_TYPE,
    ATTESTATION_REF_TYPE_KEY,
    DOCKER_LIST,
    DOCKER_MANIFEST,
    INDEX_TYPES,
    MANIFEST_TYPES,
    OCI_EMPTY,
    OCI_INDEX,
    OCI_MANIFEST,
    canonical_json,
    load_json,
    parse_json_object,
)

__all__ = [
    "ACCEPT",
    "ATTESTATION_REF_TYPE",
    "ATTESTATION_REF_TYPE_KEY",
    "DOCKER_LIST",
    "DOCKER_MANIFEST",
    "INDEX_TYPES",
    "MANIFEST_TYPES",
    "OCI_EMPTY",
    "OCI_INDEX",
    "OCI_MANIFEST",
    "Descriptor",
    "Manifest",
    "Platform",
    "canonical_json",
    "load_json",
    "not_an_image",
    "parse_json_object",
    "platform_names",
    "runnable_platforms",
]


@dataclasses.dataclass(frozen=True)
class Platform:
    """An image platform: ``os``/``architecture`` and an optional ``variant`` (``linux/arm64/v8``)."""

    os: str
    architecture: str
    variant: str | None = None

    def __str__(self) -> str:
        return f"{self.os}/{self.architecture}" + (f"/{self.variant}" if self.variant else "")


@dataclasses.dataclass(frozen=True)
class Descriptor:
    """An OCI content descriptor. ``annotations`` is a sorted tuple of pairs (hashable)."""

    media_type: str
    digest: str
    size: int
    artifact_type: str | None = None
    annotations: tuple[tuple[str, str], ...] = ()
    platform: Platform | None = None

    @property
    def annotation_map(self) -> dict[str, str]:
        """The annotations as a dict (key -> value)."""
        return dict(self.annotations)

    def to_json(self) -> dict[str, Any]:
        """The descriptor as OCI JSON (``mediaType``, ``digest``, ``size``, ...)."""
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        if self.artifact_type:
            out["artifactType"] = self.artifact_type
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        if self.platform:
            p: dict[str, Any] = {"architecture": self.platform.architecture, "os": self.platform.os}
            if self.platform.variant:
                p["variant"] = self.platform.variant
            out["platform"] = p
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any], *, where: str = "") -> Descriptor:
        """Parse a descriptor; RegistryError naming ``where`` if a required field is missing."""
        try:
            media_type = str(d["mediaType"]) if "mediaType" in d else ""
            digest = str(d["digest"])
            size = int(d["size"])
        except (KeyError, TypeError, ValueError) as exc:
            raise RegistryError(f"invalid descriptor in {where or 'manifest'}: {exc!r} in {dict(d)!r}") from exc
        ann = d.get("annotations") or {}
        plat = d.get("platform")
        platform = None
        if isinstance(plat, Mapping):
            platform = Platform(
                os=str(plat.get("os", "")),
                architecture=str(plat.get("architecture", "")),
                variant=str(plat["variant"]) if plat.get("variant") else None,
            )
        at = d.get("artifactType")
        return cls(
            media_type=media_type,
            digest=digest,
            size=size,
            artifact_type=str(at) if at else None,
            annotations=tuple(sorted((str(k), str(v)) for k, v in ann.items())),
            platform=platform,
        )

    @property
    def is_attestation(self) -> bool:
        """True for buildx attestation manifests (``unknown/unknown`` + reference-type annotation)."""
        if self.annotation_map.get(ATTESTATION_REF_TYPE_KEY) == ATTESTATION_REF_TYPE:
            return True
        return self.platform is not None and self.platform.os == "unknown" and self.platform.architecture == "unknown"


@dataclasses.dataclass(frozen=True)
class Manifest:
    """A manifest or index as the registry stored it: ``raw`` bytes (kept byte for byte),
    ``media_type``, ``digest`` (sha256 of ``raw``) and the parsed JSON."""

    raw: bytes
    media_type: str
    digest: str

    @functools.cached_property
    def json(self) -> dict[str, Any]:
        """The parsed document (parsed once; treat as read-only)."""
        return parse_json_object(self.raw, self.digest)

    @property
    def is_index(self) -> bool:
        """True for an OCI image index or a Docker manifest list."""
        return self.media_type in INDEX_TYPES

    @property
    def size(self) -> int:
        """Length of ``raw`` in bytes."""
        return len(self.raw)

    @property
    def artifact_type(self) -> str | None:
        """``artifactType``, else the config media type for image manifests (OCI 1.1 rule)."""
        j = self.json
        at = j.get("artifactType")
        if at:
            return str(at)
        if not self.is_index:
            cfg = j.get("config") or {}
            mt = cfg.get("mediaType")
            return str(mt) if mt else None
        return None

    def descriptor(self, *, with_artifact_type: bool = False) -> Descriptor:
        """This manifest as a descriptor (media type, digest, size; artifact type if asked)."""
        ann = self.json.get("annotations") or {}
        return Descriptor(
            media_type=self.media_type,
            digest=self.digest,
            size=self.size,
            artifact_type=self.artifact_type if with_artifact_type else None,
            annotations=tuple(sorted((str(k), str(v)) for k, v in ann.items())) if with_artifact_type else (),
        )

    @property
    def manifests(self) -> list[Descriptor]:
        """Child manifests of an index (empty for an image manifest)."""
        if not self.is_index:
            return []
        return [Descriptor.from_json(d, where=self.digest) for d in self.json.get("manifests") or []]

    @property
    def config(self) -> Descriptor | None:
        """The config descriptor of an image manifest (None for an index)."""
        cfg = self.json.get("config")
        return Descriptor.from_json(cfg, where=self.digest) if isinstance(cfg, Mapping) else None

    @property
    def layers(self) -> list[Descriptor]:
        """The layer descriptors of an image manifest, in order (empty for an index)."""
        return [Descriptor.from_json(d, where=self.digest) for d in self.json.get("layers") or []]

    @property
    def blobs(self) -> list[Descriptor]:
        """Config + layers of an image manifest (what must exist before it can be PUT)."""
        cfg = self.config
        return ([cfg] if cfg else []) + self.layers

    @property
    def subject(self) -> Descriptor | None:
        """The ``subject`` descriptor of a referrer (OCI 1.1), else None."""
        s = self.json.get("subject")
        return Descriptor.from_json(s, where=self.digest) if isinstance(s, Mapping) else None


IN_TOTO_LAYER = "application/vnd.in-toto+json"
"""The layer media type of a buildx attestation manifest's in-toto blobs
(https://docs.docker.com/build/metadata/attestations/attestation-storage/)."""
IMAGE_CONFIG_TYPES = ("application/vnd.oci.image.config.v1+json", "application/vnd.docker.container.image.v1+json")
"""An image config (https://github.com/opencontainers/image-spec/blob/v1.1.0/config.md, Docker v2 schema 2)."""
FILESYSTEM_LAYER_PREFIXES = ("application/vnd.oci.image.layer.", "application/vnd.docker.image.rootfs.")
"""Filesystem layers (https://github.com/opencontainers/image-spec/blob/v1.1.0/layer.md, Docker v2 schema 2)."""


def not_an_image(manifest: Manifest) -> str | None:
    """Why ``manifest`` is not a runnable image, else None (an index, or an image manifest whose
    config is an image config and whose layers are filesystem layers). A buildx attestation
    manifest has an image config "only for compatibility" and ``application/vnd.in-toto+json``
    layers (https://docs.docker.com/build/metadata/attestations/attestation-storage/); a cosign
    signature, an SBOM or another OCI artifact has an ``artifactType``, another config or
    non-filesystem layers (https://github.com/opencontainers/image-spec/blob/v1.1.0/artifacts-guidance.md)."""
    if manifest.is_index:
        return None
    types = [d.media_type for d in manifest.layers]
    if IN_TOTO_LAYER in types:
        return "a BuildKit attestation manifest (in-toto provenance/SBOM of a platform image), not an image"
    config = manifest.config
    kind = manifest.json.get("artifactType") or (config.media_type if config is not None else "no config")
    other = next((t for t in types if not t.startswith(FILESYSTEM_LAYER_PREFIXES)), None)
    if config is None or config.media_type not in IMAGE_CONFIG_TYPES or manifest.json.get("artifactType"):
        return f"an artifact ({kind}), not an image"
    if other is not None:
        return f"an artifact (a layer of {other}), not an image"
    return None


def runnable_platforms(index: Manifest) -> list[Descriptor]:
    """The platform manifests of an index that can run, in index order: buildx attestation
    manifests (``unknown/unknown`` / ``vnd.docker.reference.type: attestation-manifest``) are
    skipped. For an image manifest (no index) the result is empty: the caller reads its config."""
    return [d for d in index.manifests if not d.is_attestation]


def platform_names(index: Manifest) -> tuple[str, ...]:
    """``("linux/amd64", ...)`` of :func:`runnable_platforms` (descriptors without platform skipped)."""
    return tuple(str(d.platform) for d in runnable_platforms(index) if d.platform is not None)
