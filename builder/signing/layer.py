"""The cosign signature/attestation layer format and the read-modify-write of its manifests.

Format (cosign ``specs/SIGNATURE_SPEC.md``,
https://github.com/sigstore/cosign/blob/main/specs/SIGNATURE_SPEC.md; checked against real cosign 2.5
and distribution 2.8.2):

- A signature is one layer of the OCI image manifest tagged ``sha256-<hex>.sig`` in the image's
  repository. Layer media type ``application/vnd.dev.cosign.simplesigning.v1+json``; the blob is
  the compact JSON "simple signing" payload; annotation ``dev.cosignproject.cosign/signature`` is
  the base64 DER ECDSA-P256-SHA256 signature over the blob bytes.
- Attestations use the same layout under ``sha256-<hex>.att`` with DSSE envelope layers
  (``builder.signing.dsse``; cosign ``specs/ATTESTATION_SPEC.md``).
- Writers read-modify-write that manifest (``append_layer``): append a layer, skip an identical
  one, never drop another signer's layers; under a file lock per registry+repository+tag; re-read
  after the write to confirm our layer is there.

Errors: ``SigningError`` (17) when a write cannot be confirmed; RegistryError (7) when a manifest is not JSON;
``NotFoundError`` (8) and other registry errors from ``builder.registry``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import hashlib
import json
import threading
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from builder.errors import NotFoundError, RegistryError, SigningError
from builder.lockfile import held
from builder.registry.manifest import parse_json_object

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
    from pathlib import Path

    from builder.registry import RegistryClient

SIG_SUFFIX = ".sig"
ATT_SUFFIX = ".att"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
SIMPLESIGNING_MEDIA_TYPE = "application/vnd.dev.cosign.simplesigning.v1+json"
DSSE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
CERTIFICATE_ANNOTATION = "dev.sigstore.cosign/certificate"
CHAIN_ANNOTATION = "dev.sigstore.cosign/chain"
BUNDLE_ANNOTATION = "dev.sigstore.cosign/bundle"
PREDICATE_TYPE_ANNOTATION = "predicateType"
#: Unsigned hint naming the key that made a layer (fingerprint); only used to explain failures.
SIGNER_HINT_ANNOTATION = "dev.builder-project/signer"
#: The DSSE envelope of an attestation layer builder writes, as its exact UTF-8 JSON text: a reader
#: takes it for the blob only when it hashes to the layer's digest and has its size (``fetch_blob``),
#: saving one blob read per layer; cosign ignores annotations it does not know (it reads
#: ``dev.cosignproject.cosign/*`` and ``dev.sigstore.cosign/*`` only:
#: https://github.com/sigstore/cosign/blob/main/pkg/oci/static/signature.go).
ENVELOPE_ANNOTATION = "dev.builder-project/envelope"
#: Envelopes larger than this many bytes are not carried in the annotation (the blob is read).
ENVELOPE_ANNOTATION_MAX = 16 * 1024
#: A manifest body larger than this many bytes gets no further envelope annotation: registries cap
#: a manifest at 4 MiB (distribution: ``maxManifestBodySize = 4 << 20``,
#: https://github.com/distribution/distribution/blob/main/registry/handlers/manifests.go).
ENVELOPE_MANIFEST_BUDGET = 1 << 20
SIMPLE_SIGNING_TYPE = "cosign container image signature"
ZERO_TIME = "0001-01-01T00:00:00Z"


def decode_base64(text: str) -> bytes | None:
    """Strict base64 ``text`` -> bytes; None when it is not base64 (never raises)."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def sha256_digest(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def signature_tag(digest: str, suffix: str) -> str:
    """``sha256:<hex>`` + ``.sig`` -> ``sha256-<hex>.sig`` (cosign's tag scheme)."""
    algo, _, hexpart = digest.partition(":")
    if algo != "sha256" or len(hexpart) != 64:
        raise ValueError(f"not a sha256 digest: {digest!r}")
    return f"sha256-{hexpart}{suffix}"


def simple_signing_payload(docker_reference: str, digest: str, optional: Mapping[str, str] | None = None) -> bytes:
    """Compact JSON simple-signing payload exactly as cosign writes it (key order included)."""
    doc = {
        "critical": {
            "identity": {"docker-reference": docker_reference},
            "image": {"docker-manifest-digest": digest},
            "type": SIMPLE_SIGNING_TYPE,
        },
        "optional": dict(optional) if optional else None,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


@dataclasses.dataclass(frozen=True)
class SignatureLayer:
    """One layer of a ``.sig``/``.att`` manifest: media type, blob bytes, annotations."""

    media_type: str
    blob: bytes
    annotations: Mapping[str, str]

    @property
    def digest(self) -> str:
        return sha256_digest(self.blob)

    def descriptor(self) -> dict[str, Any]:
        return {
            "mediaType": self.media_type,
            "size": len(self.blob),
            "digest": self.digest,
            "annotations": dict(self.annotations),
        }


class WriteResultDocument(TypedDict):
    """A signature or attestation write in ``--json``: the ``repository`` and the ``tag``
    (``sha256-<hex>.sig``/``.att``) written, the manifest's and our layer's digests, ``appended``
    (False: an equivalent layer was already there), the number of ``layers`` now in the manifest,
    the ``signer`` (key fingerprint or keyless identity) and, for an attestation, its
    ``predicate_type`` (None for a signature)."""

    repository: str
    tag: str
    manifest_digest: str
    layer_digest: str
    appended: bool
    layers: int
    signer: str
    predicate_type: str | None


@dataclasses.dataclass(frozen=True)
class WriteResult:
    """What a signature/attestation write did: the tag and manifest digest written, our layer's
    digest, whether it was appended (False: an identical/equivalent layer was already there),
    the number of layers now in the manifest and the signer."""

    repository: str
    tag: str
    manifest_digest: str
    layer_digest: str
    appended: bool
    layers: int
    signer: str
    predicate_type: str | None = None

    def to_json(self) -> WriteResultDocument:
        return {
            "repository": self.repository,
            "tag": self.tag,
            "manifest_digest": self.manifest_digest,
            "layer_digest": self.layer_digest,
            "appended": self.appended,
            "layers": self.layers,
            "signer": self.signer,
            "predicate_type": self.predicate_type,
        }


def signature_config(layer_digests: Sequence[str]) -> bytes:
    """The config blob cosign writes for a signature manifest (diff_ids = layer digests); with no
    digests, the config of cosign's empty signature image (``SIGNATURE_CONFIG``)."""
    doc = {
        "architecture": "",
        "created": ZERO_TIME,
        "history": [{"created": ZERO_TIME} for _ in layer_digests],
        "os": "",
        "rootfs": {"type": "layers", "diff_ids": list(layer_digests)},
        "config": {},
    }
    return json.dumps(doc, separators=(",", ":")).encode()


SIGNATURE_CONFIG = signature_config(())
"""The one config blob builder writes into every ``.sig``/``.att`` manifest: the config of the empty
image cosign appends signature layers to (go-containerregistry ``empty.Image``:
https://github.com/google/go-containerregistry/blob/main/pkg/v1/empty/image.go), listing no
layers. Readers take the layers from the manifest, never from the config (cosign's
``Signatures.Get`` walks ``manifest.layers``:
https://github.com/sigstore/cosign/blob/main/pkg/oci/remote/signatures.go; checked with
``cosign verify`` / ``verify-attestation`` 2.5 in tests/integration/test_cosign_interop.py), and
cosign appending to such a manifest keeps every layer. Being the same bytes for every manifest, it
is uploaded once per repository: a ``.sig``/``.att`` manifest read in the repository that names it
proves it is there (``append_layer``'s ``uploaded``), where a per-layer-list config costs two
requests (upload ``POST`` + ``PUT``) on every write."""
SIGNATURE_CONFIG_DIGEST = sha256_digest(SIGNATURE_CONFIG)


def known_blobs(*manifests: Mapping[str, Any] | None) -> frozenset[str]:
    """Digests of the config and layer blobs the given manifests (parsed JSON, None: absent) name:
    blobs their repository holds (a registry stores a manifest only when every blob it names is
    there: https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pushing-manifests)."""
    out: set[str] = set()
    for m in manifests:
        if not m:
            continue
        for d in [m.get("config"), *(m.get("layers") or [])]:
            if isinstance(d, dict) and isinstance(d.get("digest"), str):
                out.add(d["digest"])
    return frozenset(out)


def signature_lock_path(lock_dir: Path, registry: str, repository: str, tag: str) -> Path:
    """The file lock every writer of ``registry/repository:tag`` (a ``.sig``/``.att`` tag) takes in
    ``lock_dir`` (``append_layer``; ``builder.promote`` when it copies evidence)."""
    key = hashlib.sha256(f"{registry}/{repository}:{tag}".encode()).hexdigest()[:32]
    return lock_dir / f"sig-{key}.lock"


@dataclasses.dataclass(frozen=True)
class HeldRead:
    """A ``.sig``/``.att`` manifest read while the caller held its lock
    (``signature_lock_path``), and still holds it: ``manifest`` parsed (None: the tag was absent).
    ``stored``: False when ``manifest`` is not in the registry yet but what the caller wants
    written there (a promotion's evidence copy, ``builder.promote.transfer.copy_evidence``): a
    layer already in it saves no write, the manifest is written as it is."""

    manifest: Mapping[str, Any] | None
    stored: bool = True


def append_layer(
    client: RegistryClient,
    repository: str,
    digest: str,
    suffix: str,
    layer: SignatureLayer,
    *,
    lock_dir: Path,
    signer: str = "",
    equivalent: Callable[[dict[str, Any]], bool] | None = None,
    lock_timeout: float = 60.0,
    attempts: int = 3,
    uploaded: Collection[str] = (),
    held: HeldRead | None = None,
) -> WriteResult:
    """Append ``layer`` to the manifest tagged ``signature_tag(digest, suffix)`` (create it if absent).

    Read-modify-write under a file lock in ``lock_dir`` (one per registry+repository+tag): GET the
    manifest, skip when a layer with the same digest and annotations exists (or ``equivalent``
    (existing descriptor) says it already holds the same signed content by the same key), else push the
    blob and a new config blob, PUT the manifest with every previous layer kept, then GET it again
    and check our layer is there; when it is not (a writer on another machine, not holding our
    lock, replaced the manifest), merge and write again, up to ``attempts`` times. Raises
    SigningError when every attempt lost our layer, registry errors otherwise.
    ``uploaded``: digests of blobs the caller knows ``repository`` holds (e.g. the layer, uploaded
    before taking the lock, or ``SIGNATURE_CONFIG`` named by a manifest it read there,
    ``known_blobs``): not uploaded again. The config is ``SIGNATURE_CONFIG``, not uploaded when the
    manifest read under the lock names it already. ``held``: the caller holds the lock and read the
    manifest under it: the lock is not taken again and the first attempt builds on that read (the
    same read-modify-write, its read made earlier under the same lock).
    """
    tag = signature_tag(digest, suffix)
    if held is not None:
        return _append_locked(client, repository, tag, layer, signer, equivalent, attempts, uploaded, held)
    with signature_lock(lock_dir, client.registry, repository, tag, lock_timeout):
        return _append_locked(client, repository, tag, layer, signer, equivalent, attempts, uploaded, None)


@contextlib.contextmanager
def signature_lock(lock_dir: Path, registry: str, repository: str, tag: str, timeout: float) -> Iterator[None]:
    """Hold the lock every writer of ``tag`` (``.sig``/``.att``) in ``registry/repository`` takes
    (:func:`signature_lock_path` under ``lock_dir``), waiting up to ``timeout`` seconds; released
    however the body ends (an error, an interrupt unwinding the stack). SigningError on timeout."""
    with held(
        signature_lock_path(lock_dir, registry, repository, tag),
        timeout,
        lambda path: SigningError(
            f"timed out after {timeout:.0f}s waiting for the lock on {repository}:{tag}",
            hint=f"another builder process is writing signatures; lock file {path}",
        ),
        what=f"the signature tag {registry}/{repository}:{tag}",
    ):
        yield


def _append_locked(
    client: RegistryClient,
    repository: str,
    tag: str,
    layer: SignatureLayer,
    signer: str,
    equivalent: Callable[[dict[str, Any]], bool] | None,
    attempts: int,
    uploaded: Collection[str],
    first: HeldRead | None,
) -> WriteResult:
    """``append_layer``'s read-modify-write, its lock held (``first``: the first read, made under it)."""
    ours = layer.descriptor()
    for attempt in range(attempts):
        if first is not None and attempt == 0:
            existing = dict(first.manifest) if first.manifest is not None else None
        else:
            existing = _get_manifest(client, repository, tag)
        layers: list[dict[str, Any]] = list(existing.get("layers", [])) if existing else []
        kept = next((d for d in layers if _same_layer(d, ours) or (equivalent is not None and equivalent(d))), None)
        unstored = first is not None and attempt == 0 and not first.stored  # a read still to be written
        if kept is not None and not unstored:
            return WriteResult(
                repository,
                tag,
                _digest_of_manifest(client, repository, tag),
                str(kept.get("digest")),
                False,
                len(layers),
                signer,
            )
        if kept is None and len(json.dumps(layers)) + len(json.dumps(ours)) > ENVELOPE_MANIFEST_BUDGET:
            ours = without_envelope(ours)  # a manifest this large keeps its layers' envelopes in blobs
        want = kept if kept is not None else ours  # the layer the written manifest must show
        if kept is None:
            layers.append(ours)
        there = known_blobs(existing) | set(uploaded)  # the config is usually among them
        blobs = (layer.blob, SIGNATURE_CONFIG) if kept is None else (SIGNATURE_CONFIG,)
        todo = [b for b in blobs if sha256_digest(b) not in there]
        _put_blobs(client, repository, todo)
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": OCI_CONFIG,
                "size": len(SIGNATURE_CONFIG),
                "digest": SIGNATURE_CONFIG_DIGEST,
            },
            "layers": layers,
        }
        body = json.dumps(manifest, separators=(",", ":")).encode()
        manifest_digest = _put_manifest_resending(client, repository, tag, body, [layer.blob, SIGNATURE_CONFIG])
        reread = _get_manifest(client, repository, tag)
        found = reread is not None and any(_same_layer(d, want) for d in reread.get("layers", []))
        if found:
            return WriteResult(repository, tag, manifest_digest, str(want["digest"]), kept is None, len(layers), signer)
        # another writer (not using our lock: another machine) replaced the manifest: merge again
    raise SigningError(
        f"wrote {repository}:{tag} {attempts} times but re-reading it never showed our layer {ours['digest']}",
        hint="another writer keeps replacing the manifest without the lock (another machine?); "
        "run signers of one digest in one CI concurrency group, then retry",
        repository=repository,
        tag=tag,
    )


# ---------------------------------------------------------------------------------------------
# reading layers


def fetch_blob(
    client: RegistryClient, repository: str, descriptor: Mapping[str, Any], *, subject: str | None = None
) -> bytes | None:
    """The bytes of the blob a descriptor names, as served (None when the registry has none).
    Integrity is checked by ``blob_problem`` so the reason can say what is wrong.

    ``subject``: the image digest a ``.sig`` layer signs. A simple-signing payload is fully
    determined by the identity and the digest (``simple_signing_payload``; cosign writes the same
    bytes, ``optional: null`` when nothing was added): when the payload builder would write for
    ``<registry>/<repository>`` and ``subject`` hashes to the descriptor's digest, those are the
    blob's bytes (sha256 names content) and no request is sent. Any other payload (annotations,
    another spelling of the registry) is read from the registry. A manifest names only blobs the
    registry holds (it refuses a manifest PUT naming a missing blob: OCI distribution spec,
    https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pushing-manifests),
    so the derived bytes stand for the stored ones."""
    digest = str(descriptor.get("digest", ""))
    if not digest.startswith("sha256:") or len(digest) != 71:
        return None
    if subject is not None and descriptor.get("mediaType") == SIMPLESIGNING_MEDIA_TYPE:
        derived = simple_signing_payload(f"{client.registry}/{repository}", subject)
        if sha256_digest(derived) == digest:
            return derived
    carried = embedded_envelope(descriptor)
    if carried is not None:
        return carried
    try:
        return _get_blob(client, repository, digest)
    except NotFoundError:
        return None


def embedded_envelope(descriptor: Mapping[str, Any]) -> bytes | None:
    """The DSSE envelope a layer descriptor carries in ``ENVELOPE_ANNOTATION`` (UTF-8 bytes) when
    they are exactly the blob's: the same length as the descriptor's ``size`` and the same sha256
    as its ``digest`` (the checks a blob read gets); None otherwise (absent, edited, another layer
    type): the blob is then read from the registry. sha256 names content, so these bytes are the
    stored blob's (OCI image spec, descriptor digests:
    https://github.com/opencontainers/image-spec/blob/v1.1.0/descriptor.md#digests)."""
    annotations = descriptor.get("annotations")
    text = annotations.get(ENVELOPE_ANNOTATION) if isinstance(annotations, dict) else None
    if descriptor.get("mediaType") != DSSE_MEDIA_TYPE or not isinstance(text, str):
        return None
    data = text.encode()
    if len(data) != descriptor.get("size") or sha256_digest(data) != descriptor.get("digest"):
        return None
    return data


def without_envelope(descriptor: Mapping[str, Any]) -> dict[str, Any]:
    """``descriptor`` without ``ENVELOPE_ANNOTATION`` (a copy)."""
    out = dict(descriptor)
    annotations = {k: v for k, v in (descriptor.get("annotations") or {}).items() if k != ENVELOPE_ANNOTATION}
    if annotations:
        out["annotations"] = annotations
    else:
        out.pop("annotations", None)
    return out


def blob_problem(descriptor: Mapping[str, Any], blob: bytes | None) -> str:
    """Why ``blob`` does not match its descriptor ("" when it does): missing, digest or size."""
    digest = str(descriptor.get("digest", ""))
    if not digest.startswith("sha256:") or len(digest) != 71:
        return f"layer descriptor has no valid sha256 digest ({digest!r})"
    if blob is None:
        return f"layer blob {digest} is missing from the registry"
    actual = sha256_digest(blob)
    size = descriptor.get("size")
    if isinstance(size, int) and size != len(blob):
        return f"truncated layer: the blob is {len(blob)} bytes, the manifest says {size}"
    if actual != digest:
        return f"layer blob does not match its digest (got {actual[:19]}, expected {digest[:19]}): truncated or edited"
    return ""


def fetch_layer_blob(
    client: RegistryClient, repository: str, descriptor: Mapping[str, Any]
) -> tuple[bytes | None, str]:
    """The blob a descriptor names, checked against its digest and size; (None, reason) on failure."""
    blob = fetch_blob(client, repository, descriptor)
    why = blob_problem(descriptor, blob)
    return (None, why) if why else (blob, "")


MAX_EVIDENCE_LAYERS = 20_000
"""The most layers builder reads from one ``.sig``/``.att``/approval manifest. Each layer costs a
verification (and, unless derived or embedded, a blob request), so a manifest listing 100,000 or
more, which fits under the 16 MiB body limit, would keep a command busy for hours: the "endless
data" attack cosign was fixed for (CVE-2023-46737, https://github.com/golang/vulndb/issues/2181).
Genuine manifests grow: re-signing with the same key keeps the layer (``append_layer``), but every
keyed device check and every promotion record adds one, so a digest checked hourly by a fleet
canary gains about 8,800 layers a year; the bound leaves room for years of that."""


def evidence_layers(manifest: Mapping[str, Any] | None, where: str) -> list[dict[str, Any]]:
    """The layer descriptors (objects only) of the evidence manifest ``manifest`` read from
    ``where`` (``registry/repository:tag``); [] for None. RegistryError (exit 7) naming ``where``
    when it lists more than :data:`MAX_EVIDENCE_LAYERS`: none of them is read."""
    layers = manifest.get("layers") if manifest is not None else None
    if not isinstance(layers, list):
        return []
    refuse_excess(len(layers), where, "layers")
    return [d for d in layers if isinstance(d, dict)]


def refuse_excess(count: int, where: str, what: str) -> None:
    """RegistryError (exit 7) naming ``where`` when ``count`` pieces of evidence (``what``: the
    layers of one manifest, the bundle referrers of one digest) are more than
    :data:`MAX_EVIDENCE_LAYERS`: none of them is to be read."""
    if count > MAX_EVIDENCE_LAYERS:
        raise RegistryError(
            f"{where} lists {count:,} {what}, over the {MAX_EVIDENCE_LAYERS:,} builder reads: none of them "
            "was read",
            hint="look at it (skopeo inspect --raw docker://REF): more than that is crafted by someone who "
            "can push to the registry, or a digest checked or promoted for many years; keep the tag "
            "(it holds the promotion records) until you know which",
        )


def read_layers(client: RegistryClient, repository: str, digest: str, suffix: str) -> tuple[str, list[dict[str, Any]]]:
    """(tag, layer descriptors) of the ``.sig``/``.att`` manifest for ``digest`` ([] when absent).
    RegistryError (7) for one over :data:`MAX_EVIDENCE_LAYERS` layers (:func:`evidence_layers`)."""
    tag = signature_tag(digest, suffix)
    manifest = _get_manifest(client, repository, tag)
    return tag, evidence_layers(manifest, f"{client.registry}/{repository}:{tag}")


# ---------------------------------------------------------------------------------------------
# registry I/O (thin wrappers over builder.registry.RegistryClient)


def _get_manifest(client: RegistryClient, repository: str, reference: str) -> dict[str, Any] | None:
    """The OCI manifest at ``reference`` parsed (a fresh object the caller may change), or None
    when the tag does not exist. RegistryError (7) when it is not a JSON object (also: nested too
    deeply, ``builder.registry.manifest.load_json``)."""
    manifest = client.try_get_manifest(repository, reference)
    if manifest is None:
        return None
    return parse_json_object(manifest.raw, f"{client.registry}/{repository}:{reference}")


def _same_layer(d: Mapping[str, Any], ours: Mapping[str, Any]) -> bool:
    """Descriptor ``d`` names the same blob with the same annotations as ``ours``."""
    return bool(d.get("digest") == ours["digest"] and (d.get("annotations") or {}) == (ours.get("annotations") or {}))


def _digest_of_manifest(client: RegistryClient, repository: str, reference: str) -> str:
    return client.resolve(repository, reference)


def _put_manifest(client: RegistryClient, repository: str, tag: str, body: bytes, media_type: str) -> str:
    return client.put_manifest(repository, tag, body, media_type)


BLOB_RESENDS = 3
"""Times a ``.sig``/``.att`` manifest PUT refused with ``BLOB_UNKNOWN`` is retried after sending its
blobs again."""


def _put_manifest_resending(
    client: RegistryClient, repository: str, tag: str, body: bytes, blobs: Sequence[bytes]
) -> str:
    """PUT the manifest; when the registry answers that a blob it names is unknown
    (``builder.registry.blob_unknown``), upload ``blobs`` (our layer and ``SIGNATURE_CONFIG``) again
    and retry, at most ``BLOB_RESENDS`` times. The config is one blob shared by every
    ``.sig``/``.att`` manifest of the repository, so concurrent writers upload or mount it at the
    same time, and distribution's filesystem driver rewrites a blob's link file in place on each
    (truncate, then write): a manifest PUT verifying it meanwhile finds it missing. Other registry
    errors propagate."""
    from builder.registry.copy import blob_unknown  # the registry's copy module: imported on a write only

    for attempt in range(BLOB_RESENDS + 1):
        try:
            return _put_manifest(client, repository, tag, body, OCI_MANIFEST)
        except RegistryError as exc:
            if attempt == BLOB_RESENDS or not blob_unknown(exc):
                raise
            _put_blobs(client, repository, blobs, again=True)
    raise AssertionError("unreachable")  # the loop returns or raises


def _get_blob(client: RegistryClient, repository: str, digest: str) -> bytes:
    """The bytes as served, unchecked (the caller checks digest and size to name what is wrong),
    read with the registry body limits (``Transport.read_body``: 16 MiB, RegistryError exit 7
    past it, so a hostile layer cannot fill memory). Bytes that match ``digest`` are kept in the
    client's content cache: the same evidence blob is read once per invocation (``status`` over
    several stages of one digest, plan then apply)."""

    def load() -> bytes:
        where = f"{repository}@{digest}"
        resp = client.request("GET", f"/v2/{repository}/blobs/{digest}", ref=where, stream=True)
        return client.transport.read_body(resp, where)

    return client.content.blob_once(repository, digest, load)


_CONFIG_UPLOADS: weakref.WeakKeyDictionary[RegistryClient, dict[str, Future[str]]] = weakref.WeakKeyDictionary()
_CONFIG_LOCK = threading.Lock()


def put_signature_config(client: RegistryClient, repository: str, *, again: bool = False) -> str:
    """Upload ``SIGNATURE_CONFIG`` into ``repository`` once per client (the threads of a batch
    writing many ``.sig``/``.att`` manifests share one upload: each upload rewrites the blob's link,
    see ``_put_manifest_resending``); ``again``: upload even if this client did (a PUT found it
    missing). A failed upload is not remembered. Returns its digest; registry errors propagate."""
    with _CONFIG_LOCK:
        mine = _CONFIG_UPLOADS.setdefault(client, {})
        fut = None if again else mine.get(repository)
        first = fut is None
        if fut is None:
            fut = mine[repository] = Future()
    if not first:
        return fut.result()
    try:
        fut.set_result(client.put_blob(repository, SIGNATURE_CONFIG))
    except BaseException as exc:
        with _CONFIG_LOCK:
            mine.pop(repository, None)
        fut.set_exception(exc)
        raise
    return fut.result()


def _config_uploaded(client: RegistryClient, repository: str) -> bool:
    """Whether ``put_signature_config`` finished uploading the shared config into ``repository``
    through ``client`` (a pending or failed upload: False)."""
    with _CONFIG_LOCK:
        fut = _CONFIG_UPLOADS.get(client, {}).get(repository)
    return fut is not None and fut.done() and fut.exception() is None


def _put_blobs(client: RegistryClient, repository: str, blobs: Sequence[bytes], *, again: bool = False) -> None:
    """Upload small blobs concurrently (one thread each; the client is thread-safe), the shared
    config through ``put_signature_config``. No HEAD first: re-uploading a few hundred bytes costs
    less than a round trip to ask."""

    def put(blob: bytes) -> str:
        if blob == SIGNATURE_CONFIG:
            return put_signature_config(client, repository, again=again)
        return client.put_blob(repository, blob)

    if not again:  # the shared config this client already uploaded there: no thread started for it
        blobs = [b for b in blobs if b != SIGNATURE_CONFIG or not _config_uploaded(client, repository)]
    if not blobs:
        return
    if len(blobs) == 1:
        put(blobs[0])
        return
    with ThreadPoolExecutor(max_workers=len(blobs)) as pool:
        for f in [pool.submit(put, b) for b in blobs]:
            f.result()
