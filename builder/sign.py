"""Cosign-compatible signatures on image digests (legacy ``sha256-<hex>.sig`` tags) and verification.

Formats (binding, checked against real cosign 2.5 and distribution 2.8.2):
``/work/shared/docs/signing-formats.md``, from sigstore/cosign ``specs/SIGNATURE_SPEC.md``.

- A signature is one layer of the OCI image manifest tagged ``sha256-<hex>.sig`` in the image's
  repository. Layer media type ``application/vnd.dev.cosign.simplesigning.v1+json``; the blob is
  the compact JSON "simple signing" payload; annotation ``dev.cosignproject.cosign/signature`` is
  the base64 DER ECDSA-P256-SHA256 signature over the blob bytes.
- Writers read-modify-write that manifest (``append_layer``): append a layer, skip an identical
  one, never drop another signer's layers; under a file lock per repository+tag; re-read after
  the write to confirm our layer is there.
- Attestations (``.att``) use the same manifest layout with DSSE layers: see ``builder.attest``.

Signers: anything with ``kind``, ``public_key_pem``, ``fingerprint`` and ``sign(data) -> DER``
(``Signer``); ``builder.keys.KeyPairSigner`` is the key-pair one. A signer may also provide
``layer_annotations(data, signature) -> dict`` (keyless: certificate, chain, Rekor bundle).
Verification of a layer goes through ``LayerVerifier`` objects: ``KeyVerifier`` (public keys,
``cryptography``); a keyless verifier can be added by ``builder.keyless`` with the same protocol.

Errors: ``SigningError`` (17) when a write cannot be confirmed, ``VerificationError`` (18) from
``VerificationReport.raise_for_failure``, ``NotFoundError`` (8) when the digest does not resolve,
registry errors from ``builder.registry``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from builder.errors import NotFoundError, SigningError, VerificationError
from builder.keys import KeyPairSigner, PublicKey, load_public_keys, load_signer

if TYPE_CHECKING:
    from builder.registry import RegistryClient

__all__ = [
    "ATT_SUFFIX",
    "SIG_SUFFIX",
    "KeyPairSigner",
    "KeyVerifier",
    "LayerCheck",
    "LayerVerifier",
    "SignatureLayer",
    "Signer",
    "VerificationReport",
    "VerifiedItem",
    "WriteResult",
    "append_layer",
    "describe_failures",
    "load_public_keys",
    "load_signer",
    "sign_and_attest_build",
    "sign_image",
    "signature_tag",
    "simple_signing_payload",
    "verify_image",
]

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
SIMPLE_SIGNING_TYPE = "cosign container image signature"
ZERO_TIME = "0001-01-01T00:00:00Z"


# ---------------------------------------------------------------------------------------------
# signers and verifiers


@runtime_checkable
class Signer(Protocol):
    """What signs: key pairs (``builder.keys.KeyPairSigner``) and keyless signers.

    ``kind``: ``"key"`` or ``"keyless"``; ``fingerprint``: ``sha256:<hex of DER SPKI>`` (key) or
    an identity string (keyless); ``sign(data)``: DER ECDSA signature over ``data``.
    """

    @property
    def kind(self) -> str: ...

    @property
    def public_key_pem(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...

    def sign(self, data: bytes) -> bytes: ...


@dataclasses.dataclass(frozen=True)
class LayerCheck:
    """A verifier's answer for one signature: ``ok``; ``signer`` (fingerprint or identity);
    ``reason`` (why not, empty when ok); ``time`` (RFC 3339, when known: keyless integrated time);
    ``untrusted``: not ok, but a well-formed signature by a key or identity that was not given
    (cosign semantics: other signers are allowed; not a sign of tampering)."""

    ok: bool
    signer: str | None = None
    reason: str = ""
    time: str | None = None
    untrusted: bool = False


class LayerVerifier(Protocol):
    """Checks one signature over ``data`` (simple-signing payload, or DSSE PAE bytes).

    Returns None when the layer is not for this kind of verifier (e.g. a keyless layer and a
    key verifier), else a LayerCheck.
    """

    def check(self, data: bytes, signature: bytes, annotations: Mapping[str, str]) -> LayerCheck | None: ...


@dataclasses.dataclass(frozen=True)
class KeyVerifier:
    """Verifies ECDSA P-256 signatures against any of ``keys`` (cosign ``--key`` semantics).

    A signature that verifies with none of them: ``invalid`` (not untrusted) when the layer's
    ``dev.builder-project/signer`` annotation names one of ``keys`` (that key's own layer, edited);
    otherwise ``untrusted`` (another signer, or a layer naming none, as cosign writes it), with the
    claimed fingerprint as ``signer``, unverified. The caller still checks the layer is well formed
    (payload parses, names the digest, blob matches its descriptor): anything malformed is invalid."""

    keys: tuple[PublicKey, ...]

    def check(self, data: bytes, signature: bytes, annotations: Mapping[str, str]) -> LayerCheck | None:
        for key in self.keys:
            if key.verify(data, signature):
                return LayerCheck(True, signer=key.fingerprint)
        given = ", ".join(_short(k.fingerprint) for k in self.keys)
        if annotations.get(CERTIFICATE_ANNOTATION):
            return LayerCheck(
                False,
                reason=f"keyless signature (certificate) that none of the given keys ({given}) made",
                untrusted=True,
            )
        hint = annotations.get(SIGNER_HINT_ANNOTATION, "")
        if hint and any(k.fingerprint == hint for k in self.keys):
            return LayerCheck(
                False,
                signer=hint,
                reason=f"signature does not match the key it names: payload or signature edited "
                f"(the layer names key {_short(hint)}, which was given)",
            )
        # Not verifiable with what was given: a signer we were not told about (allowed, never
        # counted). The claim is the unsigned signer annotation: shown, never trusted.
        claim = (
            f"the layer claims {_short(hint)} (unverified: that annotation is not signed)"
            if hint
            else "the layer names no signer, as cosign writes it (another key's signature, or a payload edited "
            "after signing: the two cannot be told apart without that key)"
        )
        return LayerCheck(
            False,
            signer=hint or None,
            reason=f"wrong key? none of the given keys ({given}) verifies this signature; {claim}",
            untrusted=True,
        )


def _short(fingerprint: str) -> str:
    return fingerprint[:19] if fingerprint.startswith("sha256:") else fingerprint


def verifiers_for(keys: Iterable[PublicKey], extra: Iterable[LayerVerifier] = ()) -> tuple[LayerVerifier, ...]:
    """Key verifier for ``keys`` (if any) followed by ``extra`` verifiers (e.g. keyless)."""
    ks = tuple(keys)
    out: list[LayerVerifier] = [KeyVerifier(ks)] if ks else []
    out.extend(extra)
    return tuple(out)


#: How ``builder.keyless`` words a certificate (chain, SCT and log entry verified) whose identity
#: matches none of the given --identity/--issuer policies: an untrusted signer, not tampering.
_IDENTITY_MISMATCH = "which no allowed identity matches"


def run_verifiers(
    verifiers: Sequence[LayerVerifier], data: bytes, signature: bytes, annotations: Mapping[str, str]
) -> LayerCheck:
    """First ok answer of ``verifiers``; else the first failure that is not merely "untrusted"
    (a verifier that found something wrong knows more than one that does not know the signer);
    else the first failure; else 'no verifier applies'."""
    failures: list[LayerCheck] = []
    for v in verifiers:
        res = v.check(data, signature, annotations)
        if res is None:
            continue
        if res.ok:
            return res
        if not res.untrusted and _IDENTITY_MISMATCH in res.reason:
            res = dataclasses.replace(res, untrusted=True)  # keyless: a trusted chain, another identity
        failures.append(res)
    if failures:
        return next((f for f in failures if not f.untrusted), failures[0])
    return LayerCheck(False, reason="no key or identity given that applies to this signature")


# ---------------------------------------------------------------------------------------------
# layers and the read-modify-write of .sig / .att manifests


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
        return "sha256:" + hashlib.sha256(self.blob).hexdigest()

    def descriptor(self) -> dict[str, Any]:
        return {
            "mediaType": self.media_type,
            "size": len(self.blob),
            "digest": self.digest,
            "annotations": dict(self.annotations),
        }


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

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def signature_config(layer_digests: Sequence[str]) -> bytes:
    """The config blob cosign writes for a signature manifest (diff_ids = layer digests)."""
    doc = {
        "architecture": "",
        "created": ZERO_TIME,
        "history": [{"created": ZERO_TIME} for _ in layer_digests],
        "os": "",
        "rootfs": {"type": "layers", "diff_ids": list(layer_digests)},
        "config": {},
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def signature_lock_path(lock_dir: Path, registry: str, repository: str, tag: str) -> Path:
    """The file lock every writer of ``registry/repository:tag`` (a ``.sig``/``.att`` tag) takes in
    ``lock_dir`` (``append_layer``; ``builder.promote`` when it copies evidence)."""
    key = hashlib.sha256(f"{registry}/{repository}:{tag}".encode()).hexdigest()[:32]
    return lock_dir / f"sig-{key}.lock"


_lock_path = signature_lock_path  # the earlier private name


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
) -> WriteResult:
    """Append ``layer`` to the manifest tagged ``signature_tag(digest, suffix)`` (create it if absent).

    Read-modify-write under a file lock in ``lock_dir`` (one per registry+repository+tag): GET the
    manifest, skip when a layer with the same digest and annotations exists (or ``equivalent``
    (existing descriptor) says it already holds the same signed content by the same key), else push the
    blob and a new config blob, PUT the manifest with every previous layer kept, then GET it again
    and check our layer is there; when it is not (a writer on another machine, not holding our
    lock, replaced the manifest), merge and write again, up to ``attempts`` times. Raises
    SigningError when every attempt lost our layer, registry errors otherwise.
    ``uploaded``: digests of blobs the caller already put into ``repository`` (e.g. the layer and
    the config of a one-layer manifest, uploaded before taking the lock): not uploaded again.
    """
    from filelock import FileLock, Timeout

    tag = signature_tag(digest, suffix)
    lock_dir.mkdir(parents=True, exist_ok=True)
    # mode: rw-r--r-- as under umask 022, and no per-new-file flock probe of the directory (filelock 4)
    lock = FileLock(str(signature_lock_path(lock_dir, client.registry, repository, tag)), mode=0o644)
    try:
        lock.acquire(timeout=lock_timeout)
    except Timeout as exc:
        raise SigningError(
            f"timed out after {lock_timeout:.0f}s waiting for the lock on {repository}:{tag}",
            hint=f"another builder process is writing signatures; lock file {lock.lock_file}",
        ) from exc
    try:
        ours = layer.descriptor()
        for _attempt in range(attempts):
            existing = _get_manifest(client, repository, tag)
            layers: list[dict[str, Any]] = list(existing.get("layers", [])) if existing else []
            for d in layers:
                identical = d.get("digest") == ours["digest"] and (d.get("annotations") or {}) == ours["annotations"]
                if identical or (equivalent is not None and equivalent(d)):
                    return WriteResult(
                        repository,
                        tag,
                        _digest_of_manifest(client, repository, tag),
                        str(d.get("digest")),
                        False,
                        len(layers),
                        signer,
                    )
            layers.append(ours)
            config = signature_config([str(d["digest"]) for d in layers])
            todo = [b for b in (layer.blob, config) if "sha256:" + hashlib.sha256(b).hexdigest() not in uploaded]
            _put_blobs(client, repository, todo)
            manifest = {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": {
                    "mediaType": OCI_CONFIG,
                    "size": len(config),
                    "digest": "sha256:" + hashlib.sha256(config).hexdigest(),
                },
                "layers": layers,
            }
            body = json.dumps(manifest, separators=(",", ":")).encode()
            manifest_digest = _put_manifest(client, repository, tag, body, OCI_MANIFEST)
            reread = _get_manifest(client, repository, tag)
            found = reread is not None and any(
                d.get("digest") == ours["digest"] and (d.get("annotations") or {}) == ours["annotations"]
                for d in reread.get("layers", [])
            )
            if found:
                return WriteResult(repository, tag, manifest_digest, ours["digest"], True, len(layers), signer)
            # another writer (not using our lock: another machine) replaced the manifest: merge again
        raise SigningError(
            f"wrote {repository}:{tag} {attempts} times but re-reading it never showed our layer {ours['digest']}",
            hint="another writer keeps replacing the manifest without the lock (another machine?); "
            "run signers of one digest in one CI concurrency group, then retry",
            repository=repository,
            tag=tag,
        )
    finally:
        lock.release()


# ---------------------------------------------------------------------------------------------
# signing


def _layer_annotations(signer: Signer, data: bytes, signature: bytes) -> dict[str, str]:
    extra = getattr(signer, "layer_annotations", None)
    out: dict[str, str] = {}
    if callable(extra):
        out.update(extra(data, signature))
    elif signer.kind == "key":
        out[SIGNER_HINT_ANNOTATION] = signer.fingerprint
    return out


def sign_image(
    client: RegistryClient,
    repository: str,
    digest: str,
    signer: Signer,
    *,
    lock_dir: Path,
    annotations: Mapping[str, str] | None = None,
) -> WriteResult:
    """Sign ``repository@digest``: append a simple-signing layer to ``sha256-<hex>.sig``.

    ``annotations`` go into the payload's ``optional`` (signed, like ``cosign sign -a``).
    An existing layer with the same payload already signed by this key pair is kept and nothing
    is written (``appended=False``). Raises SigningError / registry errors.
    """
    payload = simple_signing_payload(f"{client.registry}/{repository}", digest, annotations)
    layer_equivalent = _same_key_signature(signer, payload) if signer.kind == "key" else None
    signature = signer.sign(payload)
    layer = SignatureLayer(
        SIMPLESIGNING_MEDIA_TYPE,
        payload,
        {SIGNATURE_ANNOTATION: base64.b64encode(signature).decode(), **_layer_annotations(signer, payload, signature)},
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
    )


def _same_key_signature(signer: Signer, payload: bytes) -> Callable[[dict[str, Any]], bool]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pub = serialization.load_pem_public_key(signer.public_key_pem.encode())
    assert isinstance(pub, ec.EllipticCurvePublicKey)
    key = PublicKey(pub)
    payload_digest = "sha256:" + hashlib.sha256(payload).hexdigest()

    def equivalent(descriptor: dict[str, Any]) -> bool:
        if descriptor.get("digest") != payload_digest:
            return False
        sig = _b64(str((descriptor.get("annotations") or {}).get(SIGNATURE_ANNOTATION, "")))
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
) -> tuple[WriteResult, WriteResult]:
    """What the build step does after a push: sign ``digest`` and attach ``provenance`` (SLSA v1 by
    default) as an attestation, the two writes concurrently (different tags and locks).
    Returns (signature write, attestation write). Raises SigningError / registry errors."""
    from concurrent.futures import ThreadPoolExecutor

    from builder.attest import attest_image
    from builder.predicates import SLSA_PROVENANCE_V1

    with ThreadPoolExecutor(max_workers=2) as pool:  # two tags, two locks: independent writes
        sig = pool.submit(sign_image, client, repository, digest, signer, lock_dir=lock_dir)
        att = pool.submit(
            attest_image,
            client,
            repository,
            digest,
            predicate_type or SLSA_PROVENANCE_V1,
            dict(provenance),
            signer,
            lock_dir=lock_dir,
        )
        return sig.result(), att.result()


# ---------------------------------------------------------------------------------------------
# verification


@dataclasses.dataclass(frozen=True)
class VerifiedItem:
    """One signature or attestation layer and the verdict on it.

    ``kind``: ``signature`` | ``attestation``; ``ok``; ``reason`` (why it failed, "" when ok);
    ``signer``: key fingerprint or keyless identity (when known, also for failures that name a
    key); ``predicate_type`` and ``statement`` (attestations whose envelope could be read);
    ``time``: RFC 3339 when known (predicate timestamps, keyless integrated time; None for
    key-pair signatures, which carry no time); ``tag`` and ``layer_digest`` locate the layer;
    ``untrusted``: not ok, but a well-formed signature (for this digest) by a key or identity that
    was not given; ``signer`` then is the fingerprint the layer's ``dev.builder-project/signer``
    annotation claims (unverified: the annotation is not signed; None for cosign-written layers,
    which name no key) or the keyless identity. Such items never count, and never carry a
    ``statement`` (unverified content).
    """

    kind: str
    ok: bool
    reason: str
    tag: str
    layer_digest: str
    signer: str | None = None
    predicate_type: str | None = None
    time: str | None = None
    statement: Mapping[str, Any] | None = None
    untrusted: bool = False

    def __post_init__(self) -> None:
        if not self.ok and not self.untrusted and _IDENTITY_MISMATCH in self.reason:
            object.__setattr__(self, "untrusted", True)  # keyless items built outside check_*_layer

    @property
    def verified(self) -> bool:
        return self.ok

    @property
    def classification(self) -> str:
        """``ok`` (valid, by a given key/identity), ``untrusted`` (valid-looking, by a signer not
        given: allowed, never counted) or ``invalid`` (tampered or broken)."""
        return "ok" if self.ok else "untrusted" if self.untrusted else "invalid"

    @property
    def predicate(self) -> Mapping[str, Any] | None:
        if self.statement is None:
            return None
        p = self.statement.get("predicate")
        return p if isinstance(p, dict) else None

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["statement"] = dict(self.statement) if self.statement is not None else None
        d["classification"] = self.classification
        return d


@dataclasses.dataclass(frozen=True)
class VerificationReport:
    """Result of ``verify_image``: the reference asked for, the digest checked, every item, and
    ``problems`` (unmet requirements, each a sentence). ``ok`` when there are no problems."""

    reference: str
    repository: str
    digest: str
    items: tuple[VerifiedItem, ...]
    problems: tuple[str, ...]
    required_predicate_types: tuple[str, ...] = ()
    tag: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def other_signers(self) -> tuple[str, ...]:
        """Fingerprints / identities that ``untrusted`` items (signers not given) claim, in first-seen
        order: key fingerprints come from the unsigned signer annotation and are unverified;
        cosign-written layers name none and are not listed."""
        return tuple(dict.fromkeys(i.signer for i in self.items if i.untrusted and i.signer))

    @property
    def diagnosis(self) -> str:
        """Why the report is not ok, in one word: ``""`` (ok), ``reference`` (the digest no longer
        resolves, or the tag moved), ``tampered`` (an invalid item), ``not-signed`` (nothing
        found), ``wrong-key`` (only signers that were not given), ``missing`` (otherwise: e.g. a
        required attestation type is absent)."""
        if self.ok:
            return ""
        if any(p.startswith(("digest ", "image replaced", "tag ", "registry answered")) for p in self.problems):
            return "reference"
        if any(i.classification == "invalid" for i in self.items):
            return "tampered"
        if not self.items:
            return "not-signed"
        if any(i.untrusted for i in self.items) and not any(i.ok for i in self.items):
            return "wrong-key"
        return "missing"

    def to_json(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "repository": self.repository,
            "digest": self.digest,
            "tag": self.tag,
            "ok": self.ok,
            "problems": list(self.problems),
            "required_predicate_types": list(self.required_predicate_types),
            "items": [i.to_json() for i in self.items],
            "diagnosis": self.diagnosis,
            "other_signers": list(self.other_signers),
        }

    def raise_for_failure(self) -> None:
        """Raise VerificationError (exit 18) naming every problem when ``ok`` is False; the hint
        follows ``diagnosis`` (wrong key given / not signed / tampered)."""
        if self.ok:
            return
        others = ", ".join(_short(s) for s in self.other_signers) or "keys that the layers do not name"
        hint = {
            "wrong-key": f"the digest is signed, but only by keys or identities you did not pass (claimed: {others}): "
            "pass the matching public key (--key) or identity; do not use it until one you trust verifies",
            "not-signed": "nothing has signed this digest: sign it (`builder sign REF --key KEY`), or check the "
            "reference (a rebuilt image has a new digest)",
        }.get(self.diagnosis)
        raise VerificationError(
            f"{self.reference} ({self.digest}) did not verify: " + "; ".join(self.problems),
            hint=hint,
            items=[i.to_json() for i in self.items],
            problems=list(self.problems),
            digest=self.digest,
            diagnosis=self.diagnosis,
            other_signers=list(self.other_signers),
        )


def _b64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def fetch_blob(client: RegistryClient, repository: str, descriptor: Mapping[str, Any]) -> bytes | None:
    """The bytes of the blob a descriptor names, as served (None when the registry has none).
    Integrity is checked by ``blob_problem`` so the reason can say what is wrong."""
    digest = str(descriptor.get("digest", ""))
    if not digest.startswith("sha256:") or len(digest) != 71:
        return None
    try:
        return _get_blob(client, repository, digest)
    except NotFoundError:
        return None


def blob_problem(descriptor: Mapping[str, Any], blob: bytes | None) -> str:
    """Why ``blob`` does not match its descriptor ("" when it does): missing, digest or size."""
    digest = str(descriptor.get("digest", ""))
    if not digest.startswith("sha256:") or len(digest) != 71:
        return f"layer descriptor has no valid sha256 digest ({digest!r})"
    if blob is None:
        return f"layer blob {digest} is missing from the registry"
    actual = "sha256:" + hashlib.sha256(blob).hexdigest()
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


def verify_layer(
    client: RegistryClient,
    repository: str,
    digest: str,
    descriptor: Mapping[str, Any],
    verifiers: Sequence[LayerVerifier],
    *,
    tag: str,
) -> VerifiedItem:
    """Fetch the blob of one layer of the ``.sig`` or ``.att`` manifest ``tag`` and check it:
    ``check_signature_layer``, or ``builder.attest.check_attestation_layer`` for an ``.att`` tag."""
    blob = fetch_blob(client, repository, descriptor)
    if tag.endswith(ATT_SUFFIX):
        from builder.attest import check_attestation_layer

        return check_attestation_layer(descriptor, blob, digest, verifiers, tag=tag)
    return check_signature_layer(descriptor, blob, digest, verifiers, tag=tag)


def check_signature_layer(
    descriptor: Mapping[str, Any],
    blob: bytes | None,
    digest: str,
    verifiers: Sequence[LayerVerifier],
    *,
    tag: str = "",
) -> VerifiedItem:
    """Verify one ``.sig`` layer from its descriptor and blob bytes (pure): media type, signature
    annotation, blob integrity (digest, size), signature, payload type, signed digest == ``digest``.
    Never raises for bad content: the reason says what is wrong."""
    layer_digest = str(descriptor.get("digest", ""))

    def fail(reason: str, signer: str | None = None) -> VerifiedItem:
        return VerifiedItem("signature", False, reason, tag, layer_digest, signer=signer)

    media_type = descriptor.get("mediaType")
    if media_type != SIMPLESIGNING_MEDIA_TYPE:
        return fail(f"layer media type {media_type!r} is not {SIMPLESIGNING_MEDIA_TYPE}")
    annotations = descriptor.get("annotations") or {}
    if not isinstance(annotations, dict) or SIGNATURE_ANNOTATION not in annotations:
        return fail(f"annotation {SIGNATURE_ANNOTATION} is missing (stripped): the layer carries no signature")
    signature = _b64(str(annotations[SIGNATURE_ANNOTATION]))
    if not signature:
        return fail(f"annotation {SIGNATURE_ANNOTATION} is empty or not base64")
    why = blob_problem(descriptor, blob)
    if why or blob is None:
        return fail(why)
    check = run_verifiers(verifiers, blob, signature, {str(k): str(v) for k, v in annotations.items()})
    if not check.ok and not check.untrusted:
        return fail(check.reason, check.signer)
    try:
        payload = json.loads(blob)
        critical = payload["critical"]
        signed_digest = critical["image"]["docker-manifest-digest"]
        payload_type = critical["type"]
    except (ValueError, KeyError, TypeError):
        return fail("signed payload is not a simple-signing document", check.signer)
    if payload_type != SIMPLE_SIGNING_TYPE:
        return fail(f"signed payload type is {payload_type!r}, not {SIMPLE_SIGNING_TYPE!r}", check.signer)
    if signed_digest != digest:
        return fail(f"signature is for another digest ({signed_digest}), not {digest}", check.signer)
    if not check.ok:  # well-formed, for this digest, by a signer that was not given
        return VerifiedItem(
            "signature", False, check.reason, tag, layer_digest, signer=check.signer, time=check.time, untrusted=True
        )
    return VerifiedItem("signature", True, "", tag, layer_digest, signer=check.signer, time=check.time)


def describe_failures(items: Sequence[VerifiedItem]) -> str:
    """One phrase for items that are not ok, so "wrong key given" reads differently from
    "tampered": ``2 by keys or identities not given (claimed: sha256:ab12..., 1 unnamed key(s)), 1 invalid
    (tampered or broken)``; the claimed fingerprints are the layers' unsigned signer annotations."""
    untrusted = [i for i in items if not i.ok and i.untrusted]
    invalid = [i for i in items if not i.ok and not i.untrusted]
    parts: list[str] = []
    if untrusted:
        named = sorted({_short(i.signer) for i in untrusted if i.signer})
        unnamed = sum(1 for i in untrusted if not i.signer)
        who = named + ([f"{unnamed} unnamed key(s)"] if unnamed else [])
        parts.append(f"{len(untrusted)} by keys or identities not given (claimed: {', '.join(who)})")
    if invalid:
        parts.append(f"{len(invalid)} invalid (tampered or broken)")
    return ", ".join(parts) or "none"


def read_layers(client: RegistryClient, repository: str, digest: str, suffix: str) -> tuple[str, list[dict[str, Any]]]:
    """(tag, layer descriptors) of the ``.sig``/``.att`` manifest for ``digest`` ([] when absent)."""
    tag = signature_tag(digest, suffix)
    manifest = _get_manifest(client, repository, tag)
    if manifest is None:
        return tag, []
    layers = manifest.get("layers")
    return tag, [d for d in layers if isinstance(d, dict)] if isinstance(layers, list) else []


def confirm_digest(client: RegistryClient, repository: str, digest: str, tag: str | None) -> list[str]:
    """Problems with the reference itself: the digest must still resolve, and a tag given together
    with a digest must still point at it (else the image was replaced under the same tag)."""
    problems: list[str] = []
    try:
        current = client.resolve(repository, digest)
    except NotFoundError:
        return [f"digest {digest} no longer resolves in {client.registry}/{repository}"]
    if current != digest:
        problems.append(f"registry answered {current} for {digest}")
    if tag is not None:
        try:
            at_tag = client.resolve(repository, tag)
        except NotFoundError:
            problems.append(f"tag {tag} no longer exists in {client.registry}/{repository}")
        else:
            if at_tag != digest:
                problems.append(
                    f"image replaced under the same tag: {tag} now points at {at_tag}, not the expected {digest}"
                )
    return problems


def verify_image(
    client: RegistryClient,
    repository: str,
    digest: str,
    *,
    keys: Sequence[PublicKey] = (),
    predicate_types: Sequence[str] = (),
    verifiers: Sequence[LayerVerifier] = (),
    require_signature: bool = True,
    tag: str | None = None,
    reference: str | None = None,
) -> VerificationReport:
    """Verify every signature (``.sig``) and attestation (``.att``) of ``repository@digest``.

    ``keys``: trusted public keys (cosign ``--key``); ``verifiers``: more LayerVerifiers
    (keyless). Requirements: the digest resolves (and ``tag``, when given, still points at it);
    at least one valid signature when ``require_signature``; for each of ``predicate_types``
    at least one valid attestation of that type. Failed items that are not needed are reported
    but do not fail the report (cosign semantics: another signer's layers are allowed).
    Never raises for bad content; registry errors (unreachable, auth) propagate.
    """
    ref = reference or f"{client.registry}/{repository}@{digest}"
    problems = confirm_digest(client, repository, digest, tag)
    vs = verifiers_for(keys, verifiers)
    if not vs:
        problems.append("no public key or identity given to verify with")
    items: list[VerifiedItem] = []
    sig_tag, sig_layers = read_layers(client, repository, digest, SIG_SUFFIX)
    for d in sig_layers:
        items.append(verify_layer(client, repository, digest, d, vs, tag=sig_tag))
    att_tag, att_layers = read_layers(client, repository, digest, ATT_SUFFIX)
    for d in att_layers:
        items.append(verify_layer(client, repository, digest, d, vs, tag=att_tag))
    problems += unmet_requirements(
        items, digest, require_signature, predicate_types, looked_in=f"tag {sig_tag} does not exist"
    )
    return VerificationReport(ref, repository, digest, tuple(items), tuple(problems), tuple(predicate_types), tag)


def unmet_requirements(
    items: Sequence[VerifiedItem],
    digest: str,
    require_signature: bool,
    predicate_types: Sequence[str],
    *,
    looked_in: str,
) -> list[str]:
    """The problems of a verification's requirements (key-pair or keyless): a valid signature when
    ``require_signature``; a valid attestation of each of ``predicate_types``. ``looked_in``: where
    signatures were looked for, said when none exist."""
    problems: list[str] = []
    if require_signature:
        sigs = [i for i in items if i.kind == "signature"]
        if not sigs:
            problems.append(f"no signatures found for {digest} ({looked_in})")
        elif not any(i.ok for i in sigs):
            problems.append(f"none of the {len(sigs)} signature(s) is valid: {describe_failures(sigs)}")
    for ptype in predicate_types:
        atts = [i for i in items if i.kind == "attestation"]
        if not any(i.ok and i.predicate_type == ptype for i in atts):
            word = {"ok": "valid", "untrusted": "by a signer not given", "invalid": "invalid"}
            found = sorted({f"{i.predicate_type} ({word[i.classification]})" for i in atts})
            problems.append(
                f"no valid attestation of type {ptype}" + (f"; found: {', '.join(found)}" if found else "; none found")
            )
    return problems


# ---------------------------------------------------------------------------------------------
# registry I/O (thin wrappers over builder.registry.RegistryClient)


def _get_manifest(client: RegistryClient, repository: str, reference: str) -> dict[str, Any] | None:
    """The OCI manifest at ``reference`` parsed, or None when the tag does not exist."""
    manifest = client.try_get_manifest(repository, reference)
    if manifest is None:
        return None
    try:
        doc = json.loads(manifest.raw)
    except ValueError as exc:
        raise SigningError(f"{client.registry}/{repository}:{reference} is not a JSON manifest") from exc
    if not isinstance(doc, dict):
        raise SigningError(f"{client.registry}/{repository}:{reference} is not a JSON manifest")
    return doc


def _digest_of_manifest(client: RegistryClient, repository: str, reference: str) -> str:
    return client.resolve(repository, reference)


def _put_manifest(client: RegistryClient, repository: str, tag: str, body: bytes, media_type: str) -> str:
    return client.put_manifest(repository, tag, body, media_type)


def _get_blob(client: RegistryClient, repository: str, digest: str) -> bytes:
    """The bytes as served, unchecked (the caller checks digest and size to name what is wrong)."""
    resp = client.request("GET", f"/v2/{repository}/blobs/{digest}", ref=f"{repository}@{digest}")
    return bytes(resp.content)


def _put_blobs(client: RegistryClient, repository: str, blobs: Sequence[bytes]) -> None:
    """Upload small blobs concurrently (one thread each; the client is thread-safe). No HEAD
    first: re-uploading a few hundred bytes costs less than a round trip to ask."""
    from concurrent.futures import ThreadPoolExecutor

    if not blobs:
        return
    if len(blobs) == 1:
        client.put_blob(repository, blobs[0])
        return
    with ThreadPoolExecutor(max_workers=len(blobs)) as pool:
        for f in [pool.submit(client.put_blob, repository, b) for b in blobs]:
            f.result()
