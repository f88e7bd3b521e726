"""The registry's media types (OCI and Docker v2 schema 2 manifests and indexes, buildx's
attestation manifests) and the JSON of its documents, read as untrusted (:func:`load_json`,
:func:`parse_json_object`) and written canonically (:func:`canonical_json`).

Sources: OCI image-spec v1.1 (https://github.com/opencontainers/image-spec/blob/v1.1.0/manifest.md,
https://github.com/opencontainers/image-spec/blob/v1.1.0/image-index.md), Docker's v2 schema 2
media types (https://distribution.github.io/distribution/spec/manifest-v2-2/), buildx's
attestation manifests inside an index (https://docs.docker.com/build/metadata/attestations/attestation-storage/).

A module of its own, without the content model's classes (:mod:`builder.registry.manifest`): a
request that only names media types (``Accept`` of a manifest ``HEAD``: ``builder resolve``) creates
no descriptor or manifest class (start-up, issue 19). Errors: ``RegistryError`` (exit 7) for a
document that is not a JSON object.
"""

from __future__ import annotations

import json
from typing import Any

from builder.errors import RegistryError

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MANIFEST_TYPES = (OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST)
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
ACCEPT = ", ".join(MANIFEST_TYPES)
OCI_EMPTY = "application/vnd.oci.empty.v1+json"

#: buildx attestation manifests (in-toto provenance/SBOM) inside an index: never a runnable platform.
ATTESTATION_REF_TYPE_KEY = "vnd.docker.reference.type"
ATTESTATION_REF_TYPE = "attestation-manifest"


def load_json(raw: bytes | str) -> Any:  # noqa: ANN401  (JSON from outside: a true boundary)
    """``raw`` parsed as JSON, for documents from a registry or its blobs (untrusted). Raises
    ValueError when it is not JSON, also when it nests deeper than the parser's recursion limit
    (``[[[[...`` 100,000 deep makes :func:`json.loads` raise RecursionError, which no caller
    expects from bad input: https://docs.python.org/3/library/json.html#json.JSONDecodeError only
    covers malformed text)."""
    try:
        return json.loads(raw)
    except RecursionError as exc:
        raise ValueError("nested too deeply: crafted or broken") from exc


def parse_json_object(raw: bytes, where: str) -> dict[str, Any]:
    """``raw`` parsed as a JSON object; RegistryError naming ``where`` when it is not JSON (nested
    too deeply included, :func:`load_json`) or not an object."""
    try:
        data = load_json(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RegistryError(f"{where}: the registry sent a document that is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise RegistryError(f"{where}: expected a JSON object, got {type(data).__name__}")
    return data


def canonical_json(data: object) -> bytes:
    """Compact, key-sorted JSON bytes (what this project writes for manifests and indexes)."""
    return json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
