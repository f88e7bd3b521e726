"""The OCI registry client: the only package that speaks HTTP to registries (distribution-spec
1.1, https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md).

Modules, one concern each:

- :mod:`~builder.registry.reference`: image references, tag/digest syntax, fallback tags, digests;
- :mod:`~builder.registry.manifest`: media types, platforms, descriptors, manifests and indexes;
- :mod:`~builder.registry.auth`: Docker credentials (read through the docker SDK) and the
  Basic/Bearer challenge handshake;
- :mod:`~builder.registry.transport`: sessions, connection pool, retries, HTTP errors;
- :mod:`~builder.registry.client`: :class:`RegistryClient` (manifests, blob reads; the three
  modules below through its methods) and :func:`client_for`;
- :mod:`~builder.registry.uploads`, :mod:`~builder.registry.tag_list`,
  :mod:`~builder.registry.referrers`: blob writes, tag listing, referrers (typed against
  :class:`~builder.registry.api.RegistryApi`, the protocol the client satisfies);
- :mod:`~builder.registry.copy`: blob and image copies, completeness, the image config.

Compatibility re-exports of every public name the single ``builder/registry.py`` module had;
import from ``builder.registry.<module>`` in new code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.lazy import lazy_exports

if TYPE_CHECKING:  # the names below are imported on first use (``__getattr__``)
    from builder.registry.auth import Credential, DockerCredentials, parse_www_authenticate
    from builder.registry.client import COPY_STREAMS, RegistryClient, client_for
    from builder.registry.copy import (
        CopyStats,
        config_env,
        copy_blobs,
        copy_image,
        image_blobs,
        image_config,
        put_manifest_repairing,
        verify_complete,
    )
    from builder.registry.manifest import (
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
        Descriptor,
        Manifest,
        Platform,
        canonical_json,
        platform_names,
        runnable_platforms,
    )
    from builder.registry.reference import Reference, fallback_tag, parse_reference, sha256_digest
    from builder.registry.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT, RETRY_STATUSES

#: Public name -> the module of this package that defines it (PEP 562 module ``__getattr__``:
#: https://peps.python.org/pep-0562/): ``from builder.registry import Reference`` loads the
#: reference module alone, not the client, its transport or the copy code (start-up, issue 19).
#: ``tests/unit/registry/test_exports.py`` keeps it equal to ``__all__`` and the imports above.
_EXPORTS: dict[str, str] = {
    "ACCEPT": "manifest",
    "ATTESTATION_REF_TYPE": "manifest",
    "ATTESTATION_REF_TYPE_KEY": "manifest",
    "COPY_STREAMS": "client",
    "CopyStats": "copy",
    "Credential": "auth",
    "DEFAULT_RETRIES": "transport",
    "DEFAULT_TIMEOUT": "transport",
    "DOCKER_LIST": "manifest",
    "DOCKER_MANIFEST": "manifest",
    "Descriptor": "manifest",
    "DockerCredentials": "auth",
    "INDEX_TYPES": "manifest",
    "MANIFEST_TYPES": "manifest",
    "Manifest": "manifest",
    "OCI_EMPTY": "manifest",
    "OCI_INDEX": "manifest",
    "OCI_MANIFEST": "manifest",
    "Platform": "manifest",
    "RETRY_STATUSES": "transport",
    "Reference": "reference",
    "RegistryClient": "client",
    "canonical_json": "manifest",
    "client_for": "client",
    "config_env": "copy",
    "copy_blobs": "copy",
    "copy_image": "copy",
    "fallback_tag": "reference",
    "image_blobs": "copy",
    "image_config": "copy",
    "parse_reference": "reference",
    "parse_www_authenticate": "auth",
    "platform_names": "manifest",
    "put_manifest_repairing": "copy",
    "runnable_platforms": "manifest",
    "sha256_digest": "reference",
    "verify_complete": "copy",
}

__getattr__ = lazy_exports(__name__, _EXPORTS, globals())

__all__ = [
    "ACCEPT",
    "ATTESTATION_REF_TYPE",
    "ATTESTATION_REF_TYPE_KEY",
    "COPY_STREAMS",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT",
    "DOCKER_LIST",
    "DOCKER_MANIFEST",
    "INDEX_TYPES",
    "MANIFEST_TYPES",
    "OCI_EMPTY",
    "OCI_INDEX",
    "OCI_MANIFEST",
    "RETRY_STATUSES",
    "CopyStats",
    "Credential",
    "Descriptor",
    "DockerCredentials",
    "Manifest",
    "Platform",
    "Reference",
    "RegistryClient",
    "canonical_json",
    "client_for",
    "config_env",
    "copy_blobs",
    "copy_image",
    "fallback_tag",
    "image_blobs",
    "image_config",
    "parse_reference",
    "parse_www_authenticate",
    "platform_names",
    "put_manifest_repairing",
    "runnable_platforms",
    "sha256_digest",
    "verify_complete",
]
