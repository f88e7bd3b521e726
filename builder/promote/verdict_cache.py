"""Verdicts on ``.sig``/``.att`` layers kept by content, so that ``status`` on a machine that asked
before reads neither the layers' blobs nor checks their signatures again (issue 19: ``status`` of
1,000 variants).

A layer's verdict (``builder.signing.verify.verify_layer``) depends only on the image digest it is
about, the tag it is read under (``sha256-<hex>.sig``/``.att``, itself a function of that digest),
the layer's descriptor (its blob's sha256 digest and size, and the annotations that carry the
signature: cosign's tag layout, https://github.com/sigstore/cosign/blob/main/specs/SIGNATURE_SPEC.md),
the blob (content-addressed by that digest: OCI image-spec v1.1 "Descriptors",
https://github.com/opencontainers/image-spec/blob/v1.1.0/descriptor.md#digests) and the trust
material it is checked with. The cache key is the sha256 of all of these (every public key's
fingerprint: the sha256 of its DER SubjectPublicKeyInfo, ``builder.signing.keys.fingerprint_of``),
plus the registry and repository it was read from and builder's code that judges layers
(``builder.cachefile.code_stamp`` of :data:`JUDGES`, with the installed cryptography's version: an
edited verifier or another library never reads an older one's verdicts). A key
never names a tag's current content: the ``.sig``/``.att`` manifests (tags move) and the stage
pointer are read from the registry on every run, so a tag that now names another manifest brings
other descriptors and so other keys, and a key added to or removed from the policy changes every key.

What is kept: only verdicts that verified (``ok``); a failure (a missing blob, a wrong key, an
edited payload) is checked again on every run. A blob deleted from the registry's storage after its
layer verified still counts here (its bytes were checked against the digest when read, and a
registry refuses a manifest naming a missing blob: OCI distribution spec v1.1, "Pushing
Manifests", https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pushing-manifests);
``builder verify`` reads every blob it cannot derive and reports such storage damage (a ``.sig``
payload without annotations is derived from the digest, not read: ``builder.signing.layer.fetch_blob``).
Layers carrying a Sigstore certificate (keyless: their verdict also depends on the trusted root,
which may be refreshed) are never kept, and nothing is kept when a verifier is not one whose trust
material this module can name.

Bundle referrers (cosign 3's key-pair Sigstore bundles, ``builder.signing.bundles``) are kept the same
way: the referrers listing is read every run, and a listed referrer's verdict is keyed by its
descriptor (its manifest digest pins the manifest, which pins the bundle blob by digest) with the
subject, registry, repository and trust, so its manifest and blob are not read again.

Where: one file per repository, ``<state_dir>/cache/verdicts/<2 hex>/<64 hex>.json`` (the sha256 of
``<registry>/<repository>``), holding ``{"format": 2, "verdicts": {key: {"key": key, "item":
verdict}}}`` (an entry not holding its own key is a miss): a run reads a
repository's file once (not a file per layer) and writes the verdicts it verified into it once,
at the end (:meth:`VerdictCache.flush`: the file read again and merged, so runs writing at once
lose at most each other's new verdicts, which only costs the next run their reads; at most
:data:`MAX_PER_REPOSITORY` verdicts, the oldest dropped). Machine-local, like the keys and the
ledger next to it; deleting the directory at any time only costs the next run its reads. Written
atomically (``builder.cachefile.write_json``); a file that cannot be read is empty, and an entry
that is not a verdict is a miss. Thread-safe; also remembers verdicts in memory for the run (``status`` verifies the
``.att`` layers once for the row's attestation types and once for its promotion record).
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from typing import TYPE_CHECKING, Any

from builder.cachefile import code_stamp, read_private, write_json
from builder.promote.context import KeylessOnFirstUse
from builder.promote.pool import Once
from builder.signing.layer import CERTIFICATE_ANNOTATION
from builder.signing.report import VerifiedItem
from builder.signing.verifiers import KeyVerifier
from builder.signing.verify import verify_layer

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from builder.promote.context import PromotionContext
    from builder.registry import Descriptor, RegistryClient
    from builder.signing.verifiers import LayerVerifier

FORMAT = 2
"""Version of the key material and of the file's shape (a change makes every old file a miss;
1: a file per verdict)."""

MAX_PER_REPOSITORY = 20_000
"""Verdicts kept in one repository's file (about 1 KiB each); the oldest written are dropped."""

REFERRER_TAG = "referrer"
"""What stands for the tag in the key of a bundle referrer's verdict (it is listed, not tagged)."""

JUDGES = ("signing", "registry", "predicates.py", "labels.py", "promote/context.py", "promote/verdict_cache.py")
"""builder's sources that decide a layer's verdict (``code_stamp`` names, relative to the package):
the verifiers and layer checks, the registry client that reads the manifests and blobs judged (and
checks their digests), the predicate types named, the signature role key (``labels.py``: a kept
verdict names the role its payload states), ``KeylessOnFirstUse`` (whose trust this module
names) and this module. Not here: ``errors.py`` (exception classes: a kept verdict raised none)."""

_KINDS = ("signature", "attestation")


def trust_identity(verifiers: Sequence[LayerVerifier]) -> str | None:
    """sha256 hex naming the trust material of ``verifiers`` in order (a ``KeyVerifier``: the sorted
    fingerprints of its keys; ``KeylessOnFirstUse``: only its kind, as it answers None for every
    layer without a certificate and such layers are never kept); None when some verifier is of
    another kind (its trust cannot be named: nothing is kept)."""
    parts: list[str] = []
    for v in verifiers:
        if isinstance(v, KeyVerifier):
            parts.append("keys:" + ",".join(sorted(k.fingerprint for k in v.keys)))
        elif isinstance(v, KeylessOnFirstUse):
            parts.append("keyless-certificate-layers-only")
        else:
            return None
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def verdict_key(
    registry: str, repository: str, digest: str, descriptor: Mapping[str, Any], trust: str, *, tag: str, code: str
) -> str:
    """sha256 hex of everything a layer's verdict depends on (see the module's docstring); ``code``:
    the sha256 hex of the ``code_stamp`` of :data:`JUDGES` (a line per source: hashed once per run,
    not JSON-encoded into every key)."""
    material = {
        "format": FORMAT,
        "code": code,
        "registry": registry,
        "repository": repository,
        "subject": digest,
        "tag": tag,
        "descriptor": descriptor,
        "trust": trust,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@functools.cache
def file_name(registry: str, repository: str) -> str:
    """sha256 hex naming the file of ``repository``'s verdicts on ``registry``."""
    return hashlib.sha256(f"{registry}/{repository}".encode()).hexdigest()


def _read_file(path: Path) -> dict[str, Any]:
    """The verdicts (key -> verdict as JSON) of one repository's file
    (``<directory>/<2 hex>/<64 hex>.json``); empty when it is absent, unreadable, not JSON, of
    another format, or not private (``cachefile.read_private``: others could have planted verdicts)."""
    raw = read_private(path, path.parent.parent)
    try:
        data = json.loads(raw) if raw is not None else None
    except ValueError:
        return {}
    verdicts = data.get("verdicts") if isinstance(data, dict) and data.get("format") == FORMAT else None
    return verdicts if isinstance(verdicts, dict) else {}


def _item(data: object) -> VerifiedItem | None:
    """The VerifiedItem a cache file holds; None when it is not one (edited, truncated, older shape)."""
    if not isinstance(data, dict):
        return None
    kind, statement = data.get("kind"), data.get("statement")
    texts = ("reason", "tag", "layer_digest")
    optional = ("signer", "predicate_type", "time", "role")
    if (
        kind not in _KINDS
        or data.get("ok") is not True
        or not all(isinstance(data.get(k), str) for k in texts)
        or not all(data.get(k) is None or isinstance(data.get(k), str) for k in optional)
        or not (statement is None or isinstance(statement, dict))
        or not isinstance(data.get("keyless"), bool)
    ):
        return None
    return VerifiedItem(
        "signature" if kind == "signature" else "attestation",
        True,
        str(data["reason"]),
        str(data["tag"]),
        str(data["layer_digest"]),
        data.get("signer"),
        data.get("predicate_type"),
        data.get("time"),
        statement,
        False,
        bool(data["keyless"]),
        data.get("role"),
    )


class VerdictCache:
    """Verified layer verdicts under ``directory`` (None: kept in memory for this run only).
    ``hits``/``misses``/``unwritable``: layers answered from here, layers verified from the
    registry, verdicts that could not be written (a read-only state directory: counted, never an
    error)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self.hits = 0
        self.misses = 0
        self.unwritable = 0
        self._memory: dict[str, VerifiedItem] = {}
        self._files: Once[str, dict[str, Any]] = Once()  # each repository's file, read once per run
        self._fresh: dict[str, dict[str, Any]] = {}  # file name -> verdicts verified this run, to write
        self._code: str | None = None
        # trust_identity by the identity of the objects it names (kept alive here, so ids stay
        # unique): every row builds its own KeyVerifier over the same PublicKey objects
        self._trusts: dict[tuple[int, ...], tuple[tuple[object, ...], str | None]] = {}
        self._guard = threading.Lock()

    @classmethod
    def of(cls, ctx: PromotionContext) -> VerdictCache:
        """The cache under ``<ctx.cache_dir>/verdicts`` (``<state_dir>/cache/verdicts``); in memory
        only when the context has no cache directory."""
        return cls(ctx.cache_dir / "verdicts" if ctx.cache_dir is not None else None)

    def verify_layer(
        self,
        client: RegistryClient,
        repository: str,
        digest: str,
        descriptor: Mapping[str, Any],
        verifiers: Sequence[LayerVerifier],
        *,
        tag: str,
    ) -> VerifiedItem:
        """``builder.signing.verify.verify_layer`` (same arguments, result and errors), answered
        from the cache when this exact layer was verified with this trust before."""
        annotations = descriptor.get("annotations")
        trust = self._trust(verifiers)
        code = self._code_stamp()
        if trust is None or code is None or (isinstance(annotations, dict) and annotations.get(CERTIFICATE_ANNOTATION)):
            return verify_layer(client, repository, digest, descriptor, verifiers, tag=tag)
        key = verdict_key(client.registry, repository, digest, descriptor, trust, tag=tag, code=code)
        got = self._recall(client.registry, repository, key)
        if got is not None:
            with self._guard:
                self.hits += 1
            return got
        item = verify_layer(client, repository, digest, descriptor, verifiers, tag=tag)
        with self._guard:
            self.misses += 1
        if item.ok and not item.keyless:
            self._keep(client.registry, repository, key, item)
        return item

    def bundle_items(
        self,
        client: RegistryClient,
        repository: str,
        digest: str,
        verifiers: Sequence[LayerVerifier],
        descriptors: Sequence[Descriptor],
    ) -> list[VerifiedItem]:
        """``builder.signing.bundles.key_bundle_items`` of the listed referrers ``descriptors``
        (keyless bundles not reported; same items in the same order, same errors), a referrer
        verified before with this trust answered from the cache (its manifest and bundle blob not
        read): keyed by the referrer's descriptor, never by the listing that names it."""
        from builder.signing.bundles import key_bundle_items, listed_bundles  # as evidence.read_place

        trust = self._trust(verifiers)
        code = self._code_stamp()
        if trust is None or code is None:
            return key_bundle_items(
                client, repository, digest, verifiers, descriptors=descriptors, report_keyless=False
            )
        bundles = listed_bundles(client, repository, digest, descriptors)
        out: list[VerifiedItem] = []
        for desc in bundles:
            key = verdict_key(client.registry, repository, digest, desc.to_json(), trust, tag=REFERRER_TAG, code=code)
            got = self._recall(client.registry, repository, key)
            if got is not None:
                with self._guard:
                    self.hits += 1
                out.append(got)
                continue
            items = key_bundle_items(client, repository, digest, verifiers, descriptors=[desc], report_keyless=False)
            with self._guard:
                self.misses += 1
            if len(items) == 1 and items[0].ok and not items[0].keyless:
                self._keep(client.registry, repository, key, items[0])
            out.extend(items)
        return out

    def flush(self) -> None:
        """Write the verdicts verified since the last flush into their repositories' files (each
        file read again and merged with them, the oldest dropped past :data:`MAX_PER_REPOSITORY`;
        one atomic write per file). A file that cannot be written counts its verdicts in
        ``unwritable`` (never an error)."""
        with self._guard:
            fresh, self._fresh = self._fresh, {}
        for name, verdicts in fresh.items():
            path = self._path(name)
            if path is None:
                continue
            merged = {k: v for k, v in _read_file(path).items() if k not in verdicts}  # another run's, since
            merged.update(verdicts)
            if len(merged) > MAX_PER_REPOSITORY:
                merged = dict(list(merged.items())[-MAX_PER_REPOSITORY:])
            if not write_json(path, {"format": FORMAT, "verdicts": merged}):  # read-only or full: not kept
                with self._guard:
                    self.unwritable += len(verdicts)

    def _trust(self, verifiers: Sequence[LayerVerifier]) -> str | None:
        ident: list[int] = []
        named: list[object] = []
        for v in verifiers:  # (is a key verifier, how many members, each member's id)
            members: tuple[object, ...] = v.keys if isinstance(v, KeyVerifier) else (v,)
            ident.extend((int(isinstance(v, KeyVerifier)), len(members), *map(id, members)))
            named.extend(members)
        with self._guard:
            got = self._trusts.get(tuple(ident))
        if got is None:
            got = (tuple(named), trust_identity(verifiers))
            with self._guard:
                self._trusts[tuple(ident)] = got
        return got[1]

    def _code_stamp(self) -> str | None:
        """The sha256 hex of the code stamp of :data:`JUDGES`, read once; None when a source
        vanished while read (builder being reinstalled: nothing is cached this run)."""
        with self._guard:
            if self._code is None:
                try:
                    self._code = hashlib.sha256(code_stamp(JUDGES).encode()).hexdigest()
                except OSError:
                    return None
            return self._code

    def _path(self, name: str) -> Path | None:
        return self.directory / name[:2] / f"{name}.json" if self.directory is not None else None

    def _recall(self, registry: str, repository: str, key: str) -> VerifiedItem | None:
        with self._guard:
            if (got := self._memory.get(key)) is not None:
                return got
        name = file_name(registry, repository)
        path = self._path(name)
        if path is None:
            return None
        entry = self._files.get(name, lambda: _read_file(path)).get(key)
        # each entry names its own key: a verdict moved under another key is a miss
        item = _item(entry.get("item")) if isinstance(entry, dict) and entry.get("key") == key else None
        if item is not None:
            with self._guard:
                self._memory[key] = item
        return item

    def _keep(self, registry: str, repository: str, key: str, item: VerifiedItem) -> None:
        with self._guard:
            self._memory[key] = item
            if self.directory is not None:
                self._fresh.setdefault(file_name(registry, repository), {})[key] = {"key": key, "item": item.to_json()}
