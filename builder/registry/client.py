"""The OCI distribution client (distribution-spec 1.1) for one registry: tags and digests,
manifests and indexes byte for byte, blobs (existence, upload, cross-repository mount, copy
from another registry), tag listing with pagination and the referrers API with the
``sha256-<hex>`` fallback tag index. :func:`client_for` is the public way to get one.

Sources: OCI distribution-spec v1.1 (endpoints, ``Link`` pagination, the referrers API and
its fallback tag schema;
https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md), OCI image-spec v1.1
(``artifactType``, ``subject``; https://github.com/opencontainers/image-spec/blob/v1.1.0/manifest.md).

Errors (from :mod:`builder.registry.transport`): ``RegistryUnavailableError`` (exit 5),
``RegistryAuthError`` (exit 6), ``NotFoundError`` (exit 8), ``RegistryError`` (exit 7, also a
digest mismatch or a document that is not JSON).
"""

from __future__ import annotations

import hashlib
import random
import re
import threading
import time
from typing import IO, TYPE_CHECKING, Any, Unpack
from urllib.parse import urlencode, urljoin

from builder.errors import NotFoundError, RegistryAuthError, RegistryError, RegistryUnavailableError
from builder.lockfile import held
from builder.registry.auth import Authenticator, Credential, DockerCredentials
from builder.registry.cache import ContentCache
from builder.registry.media import ACCEPT, MANIFEST_TYPES, OCI_INDEX, canonical_json, parse_json_object
from builder.registry.reference import fallback_tag, is_digest, is_sha256_digest, join_reference, sha256_digest
from builder.registry.transport import (
    DEFAULT_BACKOFF,
    DEFAULT_MAX_DELAY,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    RETRY_STATUSES,
    Transport,
)

if TYPE_CHECKING:
    import concurrent.futures  # imported where a pool or a mount is made (start-up, issue 19)
    from collections.abc import Callable, Mapping
    from pathlib import Path

    # the content model's classes: made where a manifest or referrers list is read (start-up, issue 19)
    from builder.registry.manifest import Descriptor, Manifest
    from builder.registry.response import Response
    from builder.registry.transport import RequestOptions

#: Blob copies (:meth:`RegistryClient.copy_blob_from`) one client streams at once (``copy_streams``).
COPY_STREAMS = 4
#: Upload sessions one :meth:`RegistryClient.put_blob` may start (each PUT retried by the transport).
UPLOAD_SESSIONS = 3
#: Answers to cancelling an upload session: cancelled, already gone, or cancelling not supported.
_CANCEL_UPLOAD_OK = (200, 202, 204, 400, 404, 405, 501)


class RegistryClient:
    """Client for one registry host (``host[:port]``). Thread-safe for concurrent requests.

    ``credential_name``: the registry name credentials are looked up under when the host is
    another name's endpoint (``docker.io`` served at ``registry-1.docker.io`` or at a stand-in);
    None: ``registry`` itself.

    ``insecure=True`` uses plain HTTP (only for loopback or explicitly insecure registries).
    ``auth``: credentials (a :class:`DockerCredentials` or a fixed :class:`Credential`; None:
    anonymous); Basic and Bearer challenges are answered when the registry sends them.
    ``timeout``: (connect, read) seconds. ``retries``: extra attempts on 429/5xx/connection
    reset with exponential backoff starting at ``backoff`` seconds, no wait (``Retry-After``
    included) longer than ``max_delay`` seconds (:class:`builder.registry.transport.Transport`).
    ``copy_streams``: blobs streamed into this registry at once (:meth:`copy_blob_from`).
    ``environ``: the environment whose proxy (``HTTPS_PROXY``/``NO_PROXY``), CA-bundle and
    ``.netrc`` settings apply (:mod:`builder.registry.environment`); None: none of them.
    """

    def __init__(
        self,
        registry: str,
        *,
        insecure: bool = False,
        auth: DockerCredentials | Credential | None = None,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        backoff: float = DEFAULT_BACKOFF,
        max_delay: float = DEFAULT_MAX_DELAY,
        credential_name: str | None = None,
        copy_streams: int = COPY_STREAMS,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.registry = registry
        self.transport = Transport(
            registry,
            Authenticator(credential_name or registry, auth),
            insecure=insecure,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            max_delay=max_delay,
            environ=environ,
        )
        self._lock = threading.Lock()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._streams = threading.BoundedSemaphore(max(1, copy_streams))
        self.content = ContentCache()  # blobs read by digest, once per client
        # cross-repository mounts made (or in flight) by this client: (repository, digest) -> mounted
        self._mounts: dict[tuple[str, str], concurrent.futures.Future[bool]] = {}

    def __repr__(self) -> str:
        return f"RegistryClient({self.registry!r}, scheme={self.scheme!r})"

    # -- plumbing (the transport's) -----------------------------------------------------------

    @property
    def scheme(self) -> str:
        """``https``, or ``http`` for an insecure registry."""
        return self.transport.scheme

    @property
    def base(self) -> str:
        """``scheme://host[:port]`` every ``/v2/`` path is sent to."""
        return self.transport.base

    @property
    def requests_sent(self) -> int:
        """HTTP requests sent so far, retries and auth round trips included."""
        return self.transport.requests_sent

    def request(
        self,
        method: str,
        path: str,
        *,
        ref: str = "",
        ok: tuple[int, ...] = (200,),
        scopes: tuple[str, ...] = (),
        headers: Mapping[str, str] | None = None,
        **kw: Unpack[RequestOptions],
    ) -> Response:
        """One HTTP request (see :meth:`Transport.request`); raises the builder error for the status.
        The answer is a :class:`builder.registry.response.Response` (``status_code``, ``headers``,
        ``url``, ``content``; with ``stream=True`` the caller reads and closes it). A blob path whose
        digest is no digest (a manifest's ``sha256:../../x``) is RegistryError (exit 7), never sent."""
        blob = path.partition("/blobs/")[2].partition("?")[0]
        if blob and not blob.startswith("uploads/") and not is_digest(blob):
            raise RegistryError(f"{ref or path}: {blob!r} is not a digest (algorithm:hex); nothing was requested")
        return self.transport.request(method, path, ref=ref, ok=ok, scopes=scopes, headers=headers, **kw)

    def credential(self) -> Credential | None:
        """The credential used for this registry (None: anonymous)."""
        return self.transport.auth.credential()

    @property
    def executor(self) -> concurrent.futures.ThreadPoolExecutor:
        """A small thread pool owned by this client (reused, so its threads keep their
        keep-alive connections): parallel blob mounts/copies. Never submit from inside it."""
        import concurrent.futures

        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=8, thread_name_prefix=f"registry-{self.registry}"
                )
            return self._pool

    # -- basic operations -------------------------------------------------------------------

    def ping(self) -> None:
        """GET /v2/; RegistryUnavailableError when nothing answers (401 counts as alive)."""
        self.request("GET", "/v2/", ok=(200, 401))

    def check_auth(self) -> None:
        """GET /v2/ answering any challenge: RegistryAuthError when our credentials are refused."""
        self.request("GET", "/v2/", ok=(200,))

    def resolve(self, repository: str, reference: str) -> str:
        """Tag or digest -> manifest digest (``sha256:<hex>``) via HEAD with every manifest type
        (its ``Docker-Content-Digest``; absent or not a sha256 digest: the bytes of a GET hashed).

        Raises NotFoundError (404), RegistryAuthError, RegistryUnavailableError, RegistryError."""
        resp = self.request(
            "HEAD",
            f"/v2/{repository}/manifests/{reference}",
            ref=join_reference(repository, reference),
            headers={"Accept": ACCEPT},
        )
        digest = resp.headers.get("Docker-Content-Digest")
        if not digest or not is_sha256_digest(digest):
            # a registry may omit the header on HEAD, and a hostile one may send any text
            # (`sha256:../..`, which would become a tag and a path): GET and hash the bytes
            return self.get_manifest(repository, reference).digest
        return digest

    def try_resolve(self, repository: str, reference: str) -> str | None:
        """Like :meth:`resolve` but None when the tag/digest (or the repository) does not exist."""
        try:
            return self.resolve(repository, reference)
        except NotFoundError:
            return None

    def get_manifest(self, repository: str, reference: str) -> Manifest:
        """GET a manifest or index; the bytes are kept exactly as served. When ``reference`` is a
        digest the bytes are checked against it (RegistryError on mismatch)."""
        where = join_reference(repository, reference)
        resp = self.request(
            "GET", f"/v2/{repository}/manifests/{reference}", ref=where, headers={"Accept": ACCEPT}, stream=True
        )
        raw = self.transport.read_body(resp, where)  # size and total-time limits
        digest = sha256_digest(raw)
        if reference.startswith("sha256:") and digest != reference:
            raise RegistryError(
                f"registry {self.registry} served bytes for {where} that hash to {digest}",
                hint="the registry or a proxy changed the manifest; do not trust this registry",
                registry=self.registry,
            )
        header_digest = resp.headers.get("Docker-Content-Digest")
        if header_digest and header_digest.startswith("sha256:") and header_digest != digest:
            raise RegistryError(
                f"registry {self.registry} says {where} is {header_digest} but its bytes hash to {digest}",
                registry=self.registry,
            )
        media_type = resp.headers.get("Content-Type", "").split(";")[0].strip()
        if media_type not in MANIFEST_TYPES:
            media_type = str(parse_json_object(raw, where).get("mediaType") or media_type)
        from builder.registry.manifest import Manifest

        return Manifest(raw=raw, media_type=media_type, digest=digest)

    def try_get_manifest(self, repository: str, reference: str) -> Manifest | None:
        """Like :meth:`get_manifest` but None when the tag/digest (or the repository) does not exist."""
        try:
            return self.get_manifest(repository, reference)
        except NotFoundError:
            return None

    def put_manifest(self, repository: str, reference: str, raw: bytes, media_type: str) -> str:
        """PUT ``raw`` (sent byte for byte) under a tag or its digest; returns the digest.

        The digest the registry returns must equal sha256(raw) (RegistryError otherwise); a digest
        ``reference`` must equal it too. Every blob/child it names must already be in the repository
        (the registry answers 400 MANIFEST_BLOB_UNKNOWN otherwise)."""
        digest = sha256_digest(raw)
        where = join_reference(repository, reference)
        if reference.startswith("sha256:") and reference != digest:
            raise RegistryError(f"refusing to PUT {where}: the bytes hash to {digest}", registry=self.registry)
        resp = self.request(
            "PUT",
            f"/v2/{repository}/manifests/{reference}",
            ref=where,
            ok=(201, 200),
            data=raw,
            headers={"Content-Type": media_type},
        )
        returned = resp.headers.get("Docker-Content-Digest")
        if returned and returned != digest:
            raise RegistryError(
                f"registry {self.registry} stored {where} as {returned}, expected {digest}",
                hint="the registry rewrote the manifest; use a registry that stores manifests byte for byte",
                registry=self.registry,
            )
        return digest

    def delete_manifest(self, repository: str, digest: str) -> None:
        """DELETE a manifest by digest (the registry must allow deletes). For tests and clean-up.
        NotFoundError when it is not there, unless an earlier attempt's answer was lost (then the
        registry deleted it: the retry's 404 is success)."""
        self.transport.request(
            "DELETE",
            f"/v2/{repository}/manifests/{digest}",
            ref=join_reference(repository, digest),
            ok=(202, 200),
            ok_after_loss=(404,),
        )

    def blob_exists(self, repository: str, digest: str) -> bool:
        """HEAD a blob: True if the repository has it (or can serve it)."""
        try:
            self.request("HEAD", f"/v2/{repository}/blobs/{digest}", ref=f"{repository}@{digest}")
        except NotFoundError:
            return False
        return True

    def get_blob(self, repository: str, digest: str) -> bytes:
        """GET a whole blob into memory, checking its sha256 (RegistryError on mismatch); a blob
        this client already read (or is reading in another thread) is not read again
        (:attr:`content`)."""

        def load() -> bytes:
            where = f"{repository}@{digest}"
            resp = self.request("GET", f"/v2/{repository}/blobs/{digest}", ref=where, stream=True)
            data = self.transport.read_body(resp, where)  # size and total-time limits
            if digest.startswith("sha256:") and sha256_digest(data) != digest:
                raise RegistryError(f"blob {repository}@{digest} from {self.registry} does not match its digest")
            return data

        return self.content.blob_once(repository, digest, load)

    def open_blob(self, repository: str, digest: str) -> Response:
        """GET a blob as a stream (``resp.iter_content``; a redirect to storage is followed); the
        caller closes the response."""
        return self.request("GET", f"/v2/{repository}/blobs/{digest}", ref=f"{repository}@{digest}", stream=True)

    def put_blob(self, repository: str, data: bytes | IO[bytes], digest: str | None = None) -> str:
        """Upload a blob monolithically (POST a session, PUT the bytes with ``?digest=``); returns
        the digest. ``data`` may be bytes or a seekable binary file (then pass ``digest``)."""
        if digest is None:
            if not isinstance(data, bytes):
                raise ValueError("put_blob: pass digest= with a file object")
            digest = sha256_digest(data)
        where = f"{repository}@{digest}"
        length = len(data) if isinstance(data, bytes) else _file_size(data)
        session = 0
        while True:
            session += 1
            resp = self.request("POST", f"/v2/{repository}/blobs/uploads/", ref=where, ok=(202,))
            location = self._location(resp, where)
            sep = "&" if "?" in location else "?"
            try:
                self.request(
                    "PUT",
                    f"{location}{sep}{urlencode({'digest': digest})}",
                    ref=where,
                    ok=(201, 204),
                    data=data,
                    headers={"Content-Type": "application/octet-stream", "Content-Length": str(length)},
                )
            except (NotFoundError, RegistryError, RegistryUnavailableError) as exc:
                if not _upload_may_recover(exc):
                    raise
                # the answer may have been lost after the registry stored the blob (a retried PUT
                # then finds its session gone: 404 BLOB_UPLOAD_UNKNOWN): ask the registry
                if self.blob_exists(repository, digest):
                    return digest
                if session >= UPLOAD_SESSIONS:
                    raise
                continue  # the session is spent or unknown: start a new one and send the bytes again
            return digest

    def mount_blob(self, repository: str, digest: str, from_repository: str) -> bool:
        """Cross-repository mount (same registry): True when mounted (201). When the registry
        starts an upload instead (202), the session is cancelled and False is returned (a registry
        that cannot cancel uploads answers 400/405/501 there: the session then expires by itself).
        A mounted blob this client holds in memory for ``from_repository`` is then answered from
        memory in ``repository`` too (the 201 says the registry holds those very bytes there).

        A blob mounted into ``repository`` is mounted once per client (a batch sharing base layers;
        threads mounting it at once share one request); a failed mount is not remembered. A blob
        the registry lost since fails the manifest PUT (``put_manifest_repairing`` copies it)."""
        import concurrent.futures

        key = (repository, digest)
        with self._lock:
            fut = self._mounts.get(key)
            mine = fut is None
            if fut is None:
                fut = self._mounts[key] = concurrent.futures.Future()
        if not mine:
            if fut.result():
                return True
            return self._mount_once(repository, digest, from_repository)
        try:
            mounted = self._mount_once(repository, digest, from_repository)
        except BaseException as exc:
            with self._lock:
                del self._mounts[key]
            fut.set_exception(exc)
            raise
        if not mounted:
            with self._lock:
                del self._mounts[key]
        fut.set_result(mounted)
        return mounted

    def _mount_once(self, repository: str, digest: str, from_repository: str) -> bool:
        where = f"{repository}@{digest}"
        resp = self.request(
            "POST",
            f"/v2/{repository}/blobs/uploads/?{urlencode({'mount': digest, 'from': from_repository})}",
            ref=where,
            ok=(201, 202),
            scopes=(f"repository:{from_repository}:pull",),
        )
        if resp.status_code == 201:
            known = self.content.blob(from_repository, digest)
            if known is not None:
                self.content.keep_blob(repository, digest, known)
            return True
        loc = resp.headers.get("Location")
        if loc:
            self.request("DELETE", urljoin(resp.url, loc), ref=where, ok=_CANCEL_UPLOAD_OK)
        return False

    def _location(self, resp: Response, where: str) -> str:
        loc = resp.headers.get("Location")
        if not loc:
            raise RegistryError(f"registry {self.registry} sent no upload Location for {where}")
        return urljoin(resp.url, loc)

    def list_tags(self, repository: str, *, page_size: int = 1000) -> list[str]:
        """Every tag of a repository, following ``Link: <...>; rel="next"`` pages. A repository
        that does not exist has no tags (empty list). Bounded against a registry that never
        stops: each page is read with the body limits (``Transport.read_body``), and a page
        linking back to one already read, or more than :data:`MAX_LISTED_TAGS` tags in all, is a
        RegistryError (7) naming the repository."""
        tags: list[str] = []
        url: str | None = f"/v2/{repository}/tags/list?n={page_size}"
        seen: set[str] = set()
        where = f"{repository} (tags)"
        while url:
            try:
                resp = self.request("GET", url, ref=where, stream=True)
            except NotFoundError:
                return tags
            seen.add(resp.url)
            body = parse_json_object(self.transport.read_body(resp, where), f"{self.registry}/{repository} tag list")
            tags.extend(str(t) for t in body.get("tags") or [])
            url = next_link(resp.headers.get("Link"), resp.url)
            if (url is not None and url in seen) or len(tags) > MAX_LISTED_TAGS:
                raise RegistryError(
                    f"registry {self.registry} listed over {min(len(tags), MAX_LISTED_TAGS):,} tags of {repository}"
                    + (" and links back to a page already read" if url in seen else "")
                    + "; stopped listing",
                    hint="a registry or proxy whose tag list never ends is broken or hostile",
                    registry=self.registry,
                )
        return tags

    # -- referrers --------------------------------------------------------------------------

    def referrers(self, repository: str, digest: str, artifact_type: str | None = None) -> list[Descriptor]:
        """Manifests whose ``subject`` is ``digest``: the referrers API when it answers a 200 OCI
        index (:meth:`referrers_api`), else the ``sha256-<hex>`` fallback tag index (none: empty
        list). Filtered by ``artifact_type`` when given."""
        try:
            descs = self.referrers_api(repository, digest, artifact_type)
        except RegistryError:  # an answer other than 200/404 (e.g. 400, 405): treated as no API
            descs = None
        if descs is None:
            index = self.try_get_manifest(repository, fallback_tag(digest))
            descs = index.manifests if index is not None and index.is_index else []
        if artifact_type:
            descs = [d for d in descs if d.artifact_type == artifact_type]
        return descs

    def referrers_api(self, repository: str, digest: str, artifact_type: str | None = None) -> list[Descriptor] | None:
        """One GET of the referrers API (``/v2/<name>/referrers/<digest>``, ``?artifactType=`` when
        given; OCI distribution-spec v1.1, "Listing Referrers":
        https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#listing-referrers):
        the descriptors of its OCI index, as the registry filtered them; None when the registry has
        no referrers API (404, as distribution 2.8 answers, or a 200 that is not an OCI index).
        Raises RegistryError (NotFoundError excluded) for other answers, RegistryAuthError."""
        path = f"/v2/{repository}/referrers/{digest}"
        if artifact_type:
            path += "?" + urlencode({"artifactType": artifact_type})
        where = f"{repository}@{digest} (referrers)"
        resp = self.request("GET", path, ref=where, ok=(200, 404), stream=True)
        if resp.status_code != 200 or resp.headers.get("Content-Type", "").split(";")[0].strip() != OCI_INDEX:
            resp.close()  # not read: the connection goes back to the pool
            return None
        # read with the body limits: a referrers answer is a document, never a stream to fill memory with
        body = parse_json_object(self.transport.read_body(resp, where), f"referrers of {repository}@{digest}")
        from builder.registry.manifest import Descriptor

        return [Descriptor.from_json(d, where="referrers") for d in body.get("manifests") or []]

    def add_referrer_to_fallback_index(
        self,
        repository: str,
        subject_digest: str,
        descriptor: Descriptor,
        *,
        attempts: int = 6,
        lock_dir: Path | None = None,
        lock_timeout: float = 60.0,
    ) -> str:
        """Add ``descriptor`` (with ``artifactType``) to the ``sha256-<hex>`` fallback index of
        ``subject_digest``: GET-or-create, add (an entry with the same digest is replaced), sort
        by digest, PUT, re-read; when a concurrent writer dropped our entry, start over (bounded).
        The referrer manifest itself must already be pushed. Returns the index digest.
        Writers in one process are serialised per index; ``lock_dir`` adds a file lock there
        (one per registry/repository/tag) so processes on one machine are serialised too.
        Raises RegistryError when the entry does not stick after ``attempts`` tries (or the file
        lock is not acquired within ``lock_timeout`` seconds)."""
        if not descriptor.artifact_type:
            raise ValueError("a fallback-index entry needs artifactType (consumers filter on it)")
        tag = fallback_tag(subject_digest)
        with _index_lock(self.registry, repository, tag):
            if lock_dir is None:
                return self._add_to_fallback_index(repository, tag, descriptor, attempts)
            key = hashlib.sha256(f"{self.registry}/{repository}:{tag}".encode()).hexdigest()[:32]
            with held(
                lock_dir / f"referrers-{key}.lock",
                lock_timeout,
                lambda path: RegistryError(
                    f"another process holds the lock of {self.registry}/{repository}:{tag} for {lock_timeout:.0f} s",
                    hint=f"wait for it to finish, or remove a stale lock file {path}",
                ),
                what=f"the referrers index {self.registry}/{repository}:{tag}",
            ):
                return self._add_to_fallback_index(repository, tag, descriptor, attempts)

    def _add_to_fallback_index(self, repository: str, tag: str, descriptor: Descriptor, attempts: int) -> str:
        for attempt in range(attempts):
            current = self.try_get_manifest(repository, tag)
            if current is not None and not current.is_index:
                raise RegistryError(
                    f"{self.registry}/{repository}:{tag} exists but is not an OCI index ({current.media_type})",
                    hint="the referrers fallback tag is reserved for the index of referrers; remove what is there",
                )
            doc: dict[str, Any] = (
                dict(current.json) if current is not None else {"schemaVersion": 2, "mediaType": OCI_INDEX}
            )
            entries = [d for d in (doc.get("manifests") or []) if d.get("digest") != descriptor.digest]
            if current is not None and any(
                d.get("digest") == descriptor.digest and d.get("artifactType") == descriptor.artifact_type
                for d in doc.get("manifests") or []
            ):
                return current.digest
            entries.append(descriptor.to_json())
            entries.sort(key=lambda d: str(d.get("digest")))
            doc["manifests"] = entries
            doc.setdefault("schemaVersion", 2)
            doc["mediaType"] = OCI_INDEX
            raw = canonical_json(doc)
            self.put_manifest(repository, tag, raw, OCI_INDEX)
            time.sleep(random.uniform(0.0, 0.02) * attempt)
            after = self.get_manifest(repository, tag)
            if any(d.digest == descriptor.digest for d in after.manifests):
                return after.digest
        raise RegistryError(
            f"could not add {descriptor.digest} to the referrers index {self.registry}/{repository}:{tag} "
            f"after {attempts} attempts (concurrent writers)",
            hint="retry; if it persists, something keeps rewriting the fallback index",
        )

    # -- copies ----------------------------------------------------------------------------

    def copy_blob_from(self, src: RegistryClient, src_repo: str, dst_repo: str, desc: Descriptor) -> int:
        """Copy one blob from ``src`` (any registry) by streaming: the source's GET is the body of
        this registry's upload PUT (``Content-Length`` from ``desc.size``), one 1 MiB buffer in
        memory, nothing on disk (:class:`builder.registry.stream.BlobStream`, read in the uploading
        thread). At most ``copy_streams`` copies of this client run at once; more wait. When the
        source or this registry drops the connection or answers 429/5xx mid-way, a HEAD asks
        whether the blob arrived anyway, else a new upload session streams it again from the first byte (at most
        ``UPLOAD_SESSIONS`` sessions, after the transport's backoff). Returns ``desc.size``, or 0
        when an attempt failed and the HEAD then found the blob there (stored by that attempt
        or by another writer). Raises RegistryError when the source's bytes do not match ``desc``
        (never retried), the last transient error otherwise; ``process.Interrupted`` once the
        process is interrupted (SIGTERM/SIGINT: checked before each session and after a failed
        one, and the backoff between sessions ends at the signal)."""
        from builder import process  # not at import: resolve's start-up never copies
        from builder.registry.stream import BlobStream

        where = f"{dst_repo}@{desc.digest}"
        with self._streams:
            session = 0
            while True:
                if (signum := process.interrupted()) is not None:  # SIGTERM/SIGINT: no new session
                    raise process.Interrupted(signum)
                session += 1
                resp = self.request("POST", f"/v2/{dst_repo}/blobs/uploads/", ref=where, ok=(202,))
                location = self._location(resp, where)
                sep = "&" if "?" in location else "?"
                body = BlobStream(src, src_repo, desc, ahead=False)  # read in this thread: no hand-offs
                try:
                    self.transport.request(
                        "PUT",
                        f"{location}{sep}{urlencode({'digest': desc.digest})}",
                        ref=where,
                        ok=(201, 204),
                        data=body,
                        headers={"Content-Type": "application/octet-stream"},
                        retry=False,
                    )
                    return desc.size
                except (NotFoundError, RegistryError, RegistryUnavailableError) as exc:
                    if not _upload_may_recover(exc):
                        raise
                    if (signum := process.interrupted()) is not None:  # no HEAD, DELETE, backoff or new session
                        raise process.Interrupted(signum) from exc
                    if self.blob_exists(dst_repo, desc.digest):
                        return 0
                    if session >= UPLOAD_SESSIONS:
                        raise
                    self.request("DELETE", location, ref=where, ok=_CANCEL_UPLOAD_OK)
                    process.backoff(self.transport.delay(session, None))  # ends at the signal: Interrupted
                finally:
                    body.close()


MAX_LISTED_TAGS = 1_000_000
"""The most tags :meth:`RegistryClient.list_tags` collects from one repository (a registry whose
pages never end is refused past it). The shipped matrices' largest repository holds a few
thousand variants, each with a handful of tags (variant, content, stages, ``.sig``/``.att``)."""


def client_for(
    registry: str,
    *,
    insecure: Callable[[str], bool],
    auth: DockerCredentials | Credential | None = None,
    cache: dict[str, RegistryClient] | None = None,
    retries: int = DEFAULT_RETRIES,
    backoff: float = DEFAULT_BACKOFF,
    max_delay: float = DEFAULT_MAX_DELAY,
    timeout: float = DEFAULT_TIMEOUT[1],
    endpoint: str | None = None,
    copy_streams: int = COPY_STREAMS,
    environ: Mapping[str, str] | None = None,
) -> RegistryClient:
    """A client for ``registry`` (``insecure`` usually ``Config.is_insecure``), cached in ``cache``
    (registry host -> client) so one client per host is shared. ``retries``, ``backoff`` and
    ``max_delay`` (and ``copy_streams``) as in :class:`RegistryClient`. ``endpoint``: the ``host[:port]`` that serves
    ``registry``'s API when it is another (Docker Hub: ``registry-1.docker.io``); credentials are
    still looked up under ``registry``. ``timeout``: seconds the registry may stay silent (the
    read timeout; connecting may take at most 5 s of it, ``DEFAULT_TIMEOUT``). ``environ``: the
    environment whose proxy, CA and netrc variables apply (the composition root passes the process's)."""
    if cache is not None and registry in cache:
        return cache[registry]
    host = endpoint or registry
    c = RegistryClient(
        host,
        insecure=insecure(host),
        auth=auth,
        retries=retries,
        backoff=backoff,
        max_delay=max_delay,
        timeout=(min(DEFAULT_TIMEOUT[0], timeout), timeout),
        credential_name=registry if host != registry else None,
        copy_streams=copy_streams,
        environ=environ,
    )
    if cache is not None:
        cache[registry] = c
    return c


_INDEX_LOCKS: dict[tuple[str, str, str], threading.Lock] = {}
_INDEX_LOCKS_GUARD = threading.Lock()


def _index_lock(registry: str, repository: str, tag: str) -> threading.Lock:
    """One lock per fallback index in this process: writers in one process never lose each
    other's entries; across processes the re-read after each write detects a lost entry."""
    with _INDEX_LOCKS_GUARD:
        return _INDEX_LOCKS.setdefault((registry, repository, tag), threading.Lock())


_LINK_RE = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


def next_link(header: str | None, current_url: str) -> str | None:
    """The absolute URL of a ``Link: <...>; rel="next"`` header (RFC 8288), or None."""
    if not header:
        return None
    m = _LINK_RE.search(header)
    return urljoin(current_url, m.group(1)) if m else None


def _upload_may_recover(exc: Exception) -> bool:
    """A failed upload PUT worth a HEAD of the blob and a new session: the session is unknown
    (404, e.g. a retry after a lost answer), the registry stayed unreachable or kept answering
    429/5xx. Refusals (401/403) and other 4xx (a digest mismatch) are final."""
    if isinstance(exc, RegistryAuthError):
        return False
    if isinstance(exc, (NotFoundError, RegistryUnavailableError)):
        return True
    return isinstance(exc, RegistryError) and exc.details.get("status") in RETRY_STATUSES


def _file_size(f: IO[bytes]) -> int:
    pos = f.tell()
    f.seek(0, 2)
    n = f.tell()
    f.seek(pos)
    return n
