"""Image copies between repositories and registries, and reads over a whole image: blob
copies (mounted within a registry, streamed across), manifest-level image copy (used by
promotion), completeness checks and the image config.

Sources: OCI distribution-spec v1.1 (cross-repository mount, pushing manifests after their
blobs; https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pushing-blobs),
OCI image-spec v1.1 config (``config.Env``;
https://github.com/opencontainers/image-spec/blob/v1.1.0/config.md).
Errors: those of :class:`builder.registry.client.RegistryClient`; ``RegistryError`` when a
copied digest differs or an image has no config.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING, Any

from builder import process
from builder.errors import NotFoundError, RegistryError
from builder.registry.manifest import Descriptor, Manifest, parse_json_object, runnable_platforms

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping

    from builder.registry.client import RegistryClient


@dataclasses.dataclass
class CopyStats:
    """What a copy did (counts): blobs mounted, copied (and their bytes), already present;
    manifests written. Mutable: a running tally that parallel copies add to."""

    mounted: int = 0
    copied: int = 0
    copied_bytes: int = 0
    present: int = 0
    manifests: int = 0


def copy_blobs(
    src: RegistryClient,
    src_repo: str,
    dst: RegistryClient,
    dst_repo: str,
    blobs: Iterable[Descriptor],
    stats: CopyStats | None = None,
    *,
    workers: int = 8,
) -> CopyStats:
    """Make every blob exist in ``dst/dst_repo`` (in parallel, ``workers`` at a time).

    Within one registry each blob is mounted from ``src_repo`` (one POST; a blob already in the
    destination mounts too); when the registry does not mount it (202), or across registries,
    a HEAD checks the destination and only missing blobs are copied (streamed)."""
    stats = stats if stats is not None else CopyStats()
    same_registry = src.registry == dst.registry and src.base == dst.base
    lock = threading.Lock()

    def one(desc: Descriptor) -> None:
        if same_registry and src_repo == dst_repo:
            kind, n = "present", 0
        elif same_registry and dst.mount_blob(dst_repo, desc.digest, src_repo):
            kind, n = "mounted", 0
        elif dst.blob_exists(dst_repo, desc.digest):
            kind, n = "present", 0
        else:
            kind, n = "copied", dst.copy_blob_from(src, src_repo, dst_repo, desc)
        with lock:
            setattr(stats, kind, getattr(stats, kind) + 1)
            stats.copied_bytes += n

    items = list(dict.fromkeys(blobs))
    if len(items) <= 1 or workers <= 1:
        for d in items:
            one(d)
        return stats
    for fut in [dst.executor.submit(one, d) for d in items]:
        fut.result()  # re-raise the first error
    return stats


def copy_image(
    src: RegistryClient,
    src_repo: str,
    digest: str,
    dst: RegistryClient,
    dst_repo: str,
    tag: str | None = None,
    *,
    stats: CopyStats | None = None,
) -> str:
    """Manifest-level copy of ``src/src_repo@digest`` to ``dst/dst_repo`` (under ``tag`` when
    given, else by digest). Index children (attestation manifests included: they are part of
    the index digest) are copied first; blobs are mounted or copied only when missing;
    manifests are PUT byte for byte; the destination digest is verified equal to ``digest``
    (the registry's answer to the PUT, then a HEAD of the tag). Cost within one registry: a
    few requests per blob, independent of the blob sizes.
    Returns the digest. Raises RegistryError on a digest mismatch."""
    stats = stats if stats is not None else CopyStats()
    _copy_manifest(src, src_repo, digest, dst, dst_repo, stats, tag=tag)
    if tag is not None:
        got = dst.resolve(dst_repo, tag)
        if got != digest:
            raise RegistryError(
                f"after copying, {dst.registry}/{dst_repo}:{tag} resolves to {got}, expected {digest}",
                hint="another writer moved the tag at the same time; retry",
                registry=dst.registry,
            )
    return digest


def _copy_manifest(
    src: RegistryClient,
    src_repo: str,
    digest: str,
    dst: RegistryClient,
    dst_repo: str,
    stats: CopyStats,
    *,
    tag: str | None = None,
) -> None:
    # look at the destination and read the source at the same time (two round trips in one)
    there = dst.executor.submit(dst.try_resolve, dst_repo, digest)
    m = src.get_manifest(src_repo, digest)
    present = there.result() == digest
    if not present:  # a manifest in the registry implies its blobs and children are there
        if m.is_index:
            for child in m.manifests:
                _copy_manifest(src, src_repo, child.digest, dst, dst_repo, stats)
        else:
            copy_blobs(src, src_repo, dst, dst_repo, m.blobs, stats)
    if present and tag is None:
        return
    got = put_manifest_repairing(src, src_repo, dst, dst_repo, tag or digest, m, stats)
    stats.manifests += 1
    if got != digest:  # pragma: no cover - put_manifest already verifies
        raise RegistryError(f"copied manifest {dst.registry}/{dst_repo}@{got} != {digest}")


#: Re-PUTs of a manifest the registry refused with MANIFEST_BLOB_UNKNOWN after its blobs were sent.
BLOB_REPAIRS = 4


def blob_unknown(exc: RegistryError) -> bool:
    """The registry refused a manifest PUT because a blob it names is missing (HTTP 400
    ``MANIFEST_BLOB_UNKNOWN`` / ``BLOB_UNKNOWN``; distribution-spec v1.1 error codes:
    https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#error-codes)."""
    return exc.details.get("status") == 400 and "BLOB_UNKNOWN" in exc.message


def put_manifest_repairing(
    src: RegistryClient,
    src_repo: str,
    dst: RegistryClient,
    dst_repo: str,
    reference: str,
    manifest: Manifest,
    stats: CopyStats | None = None,
) -> str:
    """PUT ``manifest`` into ``dst/dst_repo`` under ``reference``; when the registry answers
    MANIFEST_BLOB_UNKNOWN (a cross-repository mount that reported success but did not stick, a
    blob removed meanwhile, or a blob link being rewritten by a concurrent mount: distribution's
    filesystem driver truncates a link file before writing it again), every blob of ``manifest``
    missing there (HEAD) is copied again by streaming it from ``src`` (never a mount: that is
    what failed), then, after the client's retry backoff, the PUT is repeated, at most
    :data:`BLOB_REPAIRS` times. Returns the digest; raises the registry's RegistryError when the blobs
    still do not stick, ``process.Interrupted`` when SIGTERM/SIGINT ends the backoff (no PUT follows)."""
    stats = stats if stats is not None else CopyStats()
    attempt = 0
    while True:
        try:
            return dst.put_manifest(dst_repo, reference, manifest.raw, manifest.media_type)
        except RegistryError as exc:
            if not blob_unknown(exc) or attempt >= BLOB_REPAIRS:
                raise
        attempt += 1
        for desc in manifest.blobs:
            if not dst.blob_exists(dst_repo, desc.digest):
                stats.copied_bytes += dst.copy_blob_from(src, src_repo, dst_repo, desc)
                stats.copied += 1
        process.backoff(dst.transport.delay(attempt, None))  # ends at SIGTERM/SIGINT: Interrupted


def image_blobs(client: RegistryClient, repository: str, digest: str) -> Iterator[tuple[Manifest, Descriptor]]:
    """Every (manifest, blob descriptor) reachable from ``digest`` (through index children)."""
    m = client.get_manifest(repository, digest)
    if m.is_index:
        for child in m.manifests:
            yield from image_blobs(client, repository, child.digest)
    else:
        for b in m.blobs:
            yield m, b


def verify_complete(client: RegistryClient, repository: str, digest: str) -> list[str]:
    """Check every child manifest and blob of ``digest`` exists; returns what is missing
    (empty list: complete). NotFoundError when ``digest`` itself is missing."""
    missing: list[str] = []
    m = client.get_manifest(repository, digest)
    children = m.manifests if m.is_index else []
    for child in children:
        if client.try_resolve(repository, child.digest) is None:
            missing.append(f"manifest {child.digest}")
            continue
        missing.extend(verify_complete(client, repository, child.digest))
    for b in m.blobs:
        if not client.blob_exists(repository, b.digest):
            missing.append(f"blob {b.digest}")
    return missing


def platform_manifest(
    client: RegistryClient, repository: str, reference: str, platform: str | None = None
) -> tuple[Manifest, Manifest, str | None]:
    """``(top, manifest, platform)``: the manifest ``reference`` (tag or digest) names and the image
    manifest of ``platform`` (``os/arch[/variant]``) in it, with the platform chosen (None for a plain
    image manifest). ``platform`` None (not asked for): an index's ``linux/amd64`` manifest, else its
    first runnable one; a plain image manifest as it is. ``platform`` given: the image must have it
    (:func:`platform_matches`; a plain manifest's platform is read from its config) - NotFoundError
    (exit 8) listing the platforms it has, never another platform silently. Attestation manifests are
    never picked. Raises RegistryError for an index without runnable platforms, NotFoundError /
    registry errors from the client."""
    top = client.get_manifest(repository, reference)
    where = f"{client.registry}/{repository}@{top.digest}"
    if not top.is_index:
        if platform is not None:
            own = _config_platform(client, repository, top)
            if own is None or not platform_matches(own, platform):
                raise _no_such_platform(where, platform, [own] if own else [])
        return top, top, None
    chosen = index_platform(top, platform, where)
    return top, client.get_manifest(repository, chosen.digest), str(chosen.platform) if chosen.platform else None


def index_platform(index: Manifest, platform: str | None, where: str) -> Descriptor:
    """The descriptor of ``platform`` in ``index`` by the rules of :func:`platform_manifest` (None: its
    ``linux/amd64`` manifest, else its first runnable one; attestation manifests never). ``where`` names
    the index in errors: RegistryError for an index without runnable platforms, NotFoundError (exit 8)
    listing the platforms it has when ``platform`` is not among them."""
    plats = runnable_platforms(index)
    if not plats:
        raise RegistryError(f"{where} is an index without runnable platforms")
    if platform is None:
        return next((d for d in plats if d.platform is not None and str(d.platform) == DEFAULT_PLATFORM), plats[0])
    found = next((d for d in plats if d.platform is not None and platform_matches(str(d.platform), platform)), None)
    if found is None:
        raise _no_such_platform(where, platform, [str(d.platform) for d in plats if d.platform is not None])
    return found


#: The platform of an index read when none is asked for (what ``docker pull`` on an x86-64 host runs).
DEFAULT_PLATFORM = "linux/amd64"


def platform_matches(have: str, wanted: str) -> bool:
    """Whether an image platform ``have`` (``os/arch[/variant]``) is the ``wanted`` one: os and
    architecture equal, and the variant too when ``wanted`` names one (``linux/arm64`` matches
    ``linux/arm64/v8``, as containerd's platform matcher does:
    https://github.com/containerd/platforms/blob/main/platforms.go)."""
    h, w = have.split("/"), wanted.split("/")
    return h[:2] == w[:2] and (len(w) < 3 or h[2:3] == w[2:3])


def _config_platform(client: RegistryClient, repository: str, manifest: Manifest) -> str | None:
    """``os/architecture[/variant]`` of a plain image manifest, from its config (None without one)."""
    if manifest.config is None:
        return None
    return _platform_of(
        parse_json_object(client.get_blob(repository, manifest.config.digest), f"config {manifest.config.digest}")
    )


def _platform_of(config: Mapping[str, Any]) -> str | None:
    """``os/architecture[/variant]`` of an image config (None when it does not name both)."""
    os_, arch, variant = config.get("os"), config.get("architecture"), config.get("variant")
    if not (isinstance(os_, str) and isinstance(arch, str)):
        return None
    return f"{os_}/{arch}" + (f"/{variant}" if isinstance(variant, str) and variant else "")


def _no_such_platform(where: str, platform: str, have: list[str]) -> NotFoundError:
    listed = ", ".join(have) or "none recorded"
    return NotFoundError(
        f"{where} has no {platform} image (its platforms: {listed})",
        hint="pass --platform with one of its platforms, or build the image for this one",
        platform=platform,
        platforms=have,
    )


def platform_config(
    client: RegistryClient, repository: str, reference: str, platform: str | None = None
) -> tuple[Manifest, Manifest, str | None, dict[str, Any]]:
    """``(top, manifest, platform, config)``: :func:`platform_manifest` and the image config object of the
    manifest chosen; for a plain image manifest the platform is its config's ``os/architecture[/variant]``
    (None when the config does not name both). Raises RegistryError when the manifest has no config
    descriptor (not an image manifest) or the config is not a JSON object, and what
    :func:`platform_manifest` raises."""
    top, manifest, chosen = platform_manifest(client, repository, reference, platform)
    config = manifest_config(client, repository, manifest)
    return top, manifest, chosen or _platform_of(config), config


def manifest_config(client: RegistryClient, repository: str, manifest: Manifest) -> dict[str, Any]:
    """The image config object of an image ``manifest`` already read (its config blob, read once per
    client). Raises RegistryError when the manifest has no config descriptor (not an image manifest)
    or the config is not a JSON object, and the client's errors."""
    cfg = manifest.config
    if cfg is None:
        where = f"{client.registry}/{repository}@{manifest.digest}"
        raise RegistryError(f"{where} has no config descriptor (not an image manifest)")
    return parse_json_object(client.get_blob(repository, cfg.digest), f"config {cfg.digest} of {repository}")


def image_config(client: RegistryClient, repository: str, digest: str, platform: str | None = None) -> dict[str, Any]:
    """The image config JSON for ``platform`` of ``digest`` (:func:`platform_config`). Used to read
    ``config.Env`` (NVIDIA_REQUIRE_CUDA, CUDA_VERSION) and ``config.Labels``."""
    return platform_config(client, repository, digest, platform)[3]


def config_env(config: Mapping[str, Any]) -> dict[str, str]:
    """``config.Env`` (``["K=V", ...]``) of an image config as a dict."""
    env = (config.get("config") or {}).get("Env") or []
    out: dict[str, str] = {}
    for item in env:
        k, _, v = str(item).partition("=")
        out[k] = v
    return out
