"""Sign image digests: cosign-compatible simple-signing layers in ``sha256-<hex>.sig``.

Format: ``builder.signing.layer`` (cosign ``specs/SIGNATURE_SPEC.md``,
https://github.com/sigstore/cosign/blob/main/specs/SIGNATURE_SPEC.md).

Errors: ``SigningError`` (17) when a write cannot be confirmed, ``SigningKeyError`` (16) for a
signer without an ECDSA key, registry errors from ``builder.registry``.
"""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from builder.predicates import SLSA_PROVENANCE_V1
from builder.registry import runnable_platforms
from builder.signing.attest import attest_image, prepare_attestation
from builder.signing.bundles import attest_bundle
from builder.signing.layer import (
    SIG_SUFFIX,
    SIGNATURE_ANNOTATION,
    SIMPLESIGNING_MEDIA_TYPE,
    HeldRead,
    SignatureLayer,
    WriteResult,
    append_layer,
    decode_base64,
    sha256_digest,
    simple_signing_payload,
)
from builder.signing.signer import Signer, layer_annotations, signer_public_key

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from builder.registry import Manifest, RegistryClient


def sign_image(
    client: RegistryClient,
    repository: str,
    digest: str,
    signer: Signer,
    *,
    lock_dir: Path,
    annotations: Mapping[str, str] | None = None,
    manifest: Manifest | None = None,
    held: HeldRead | None = None,
) -> WriteResult:
    """Sign ``repository@digest``: append a simple-signing layer to ``sha256-<hex>.sig``; when the
    digest is an image index, each runnable platform manifest of it is signed too (same identity,
    concurrently; buildx attestation manifests skipped), because containers/image (skopeo, podman,
    CRI-O) verifies the signature of the platform manifest it pulls, not only the index's
    (https://github.com/containers/image/blob/main/docs/containers-policy.json.5.md). The index is
    signed last, once every platform manifest's signature is written: a run killed midway never
    leaves a signed index over an unsigned platform manifest, so a signed index (what
    ``builder.publish.is_signed`` checks) means the whole image is signed.

    The payload's identity (``critical.identity.docker-reference``) is ``<registry>/<repository>``
    as cosign writes it. ``annotations`` go into the payload's ``optional`` (signed, like
    ``cosign sign -a``). An existing layer with the same payload already signed by this key pair
    is kept and nothing is written (``appended=False``). ``manifest``: the manifest of ``digest``
    when the caller already holds it (saves reading it again). ``held``: the caller holds the lock
    of ``digest``'s ``.sig`` and read it under that lock (``builder.signing.layer.append_layer``).
    Returns the write of ``digest`` itself (the index). Raises SigningError / registry errors.
    """
    if manifest is not None and manifest.digest == digest:
        children = [d.digest for d in runnable_platforms(manifest)] if manifest.is_index else []
    else:
        children = platform_manifests(client, repository, digest)
    if children:
        with ThreadPoolExecutor(max_workers=min(4, len(children))) as pool:
            for f in [pool.submit(_sign_one, client, repository, c, signer, lock_dir, annotations) for c in children]:
                f.result()
    return _sign_one(client, repository, digest, signer, lock_dir, annotations, held)  # last: see above


def platform_manifests(client: RegistryClient, repository: str, digest: str) -> list[str]:
    """Digests of the runnable platform manifests of ``repository@digest`` when it is an index
    (``builder.registry.runnable_platforms``: buildx attestation manifests skipped); [] for an image
    manifest or when the digest is not there. Raises registry errors."""
    manifest = client.try_get_manifest(repository, digest)
    if manifest is None or not manifest.is_index:
        return []
    return [d.digest for d in runnable_platforms(manifest)]


def _sign_one(
    client: RegistryClient,
    repository: str,
    digest: str,
    signer: Signer,
    lock_dir: Path,
    annotations: Mapping[str, str] | None,
    held: HeldRead | None = None,
) -> WriteResult:
    payload = simple_signing_payload(f"{client.registry}/{repository}", digest, annotations)
    layer_equivalent = _same_key_signature(signer, payload) if signer.kind == "key" else None
    signature = signer.sign(payload)
    layer = SignatureLayer(
        SIMPLESIGNING_MEDIA_TYPE,
        payload,
        {SIGNATURE_ANNOTATION: base64.b64encode(signature).decode(), **layer_annotations(signer, payload, signature)},
    )
    return append_layer(
        client,
        repository,
        digest,
        SIG_SUFFIX,
        layer,
        lock_dir=lock_dir,
        signer=signer.fingerprint,
        equivalent=layer_equivalent,
        held=held,
    )


def _same_key_signature(signer: Signer, payload: bytes) -> Callable[[dict[str, Any]], bool]:
    key = signer_public_key(signer)
    payload_digest = sha256_digest(payload)

    def equivalent(descriptor: dict[str, Any]) -> bool:
        if descriptor.get("digest") != payload_digest:
            return False
        sig = decode_base64(str((descriptor.get("annotations") or {}).get(SIGNATURE_ANNOTATION, "")))
        return sig is not None and key.verify(payload, sig)

    return equivalent


def sign_and_attest_build(
    client: RegistryClient,
    repository: str,
    digest: str,
    signer: Signer,
    provenance: Mapping[str, Any],
    *,
    lock_dir: Path,
    predicate_type: str | None = None,
    bundle: bool = False,
) -> tuple[WriteResult, WriteResult]:
    """What the build step does after a push: sign ``digest`` and attach ``provenance`` (SLSA v1 by
    default) as an attestation, the writes concurrently (different tags and locks); with ``bundle``
    the same statement also as a Sigstore bundle referrer (``builder.signing.bundles.attest_bundle``,
    cosign 3's format). Returns (signature write, attestation write). Raises SigningError /
    registry errors."""
    ptype = predicate_type or SLSA_PROVENANCE_V1
    prepared = prepare_attestation(client.registry, repository, digest, ptype, dict(provenance), signer)
    with ThreadPoolExecutor(max_workers=3) as pool:  # two tags, two locks (+ the referrer): independent writes
        sig = pool.submit(sign_image, client, repository, digest, signer, lock_dir=lock_dir)
        about = (client, repository, digest, ptype, dict(provenance), signer)  # both formats: one statement
        att = pool.submit(attest_image, *about, lock_dir=lock_dir, prepared=prepared)
        if bundle:
            ref = pool.submit(attest_bundle, *about, lock_dir=lock_dir, statement=prepared.statement)
            ref.result()
        return sig.result(), att.result()
