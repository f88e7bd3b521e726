"""The OCI distribution client (distribution-spec 1.1) for one registry: tags and digests,
manifests and indexes byte for byte, blob reads. :func:`client_for` is the public way to get one.
Its other operations live in modules of their own, one concern each, reached through its
methods: blob writes (upload, cross-repository mount, copy from another registry:
:mod:`builder.registry.uploads`), tag listing (:mod:`builder.registry.tag_list`) and referrers
(the API and the ``sha256-<hex>`` fallback tag index: :mod:`builder.registry.referrers`).

Sources: OCI distribution-spec v1.1 (endpoints, "Pulling manifests", "Pushing manifests";
https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md).

Errors (from :mod:`builder.registry.transport`): ``RegistryUnavailableError`` (exit 5),
``RegistryAuthError`` (exit 6), ``NotFoundError`` (exit 8), ``RegistryError`` (exit 7, also a
digest mismatch or a document that is not JSON).
"""

from __future__ import annotations

import threading
from typing import IO, TYPE_CHECKING, Unpack

from builder.errors import NotFoundError, RegistryAuthError, RegistryError
from builder.registry.auth import Authenticator, Credential, DockerCredentials
from builder.registry.cache import ContentCache
from builder.registry.media import ACCEPT, MANIFEST_TYPES, parse_json_object
from builder.registry.reference import is_digest, is_sha256_digest, join_reference, sha256_digest
from builder.registry.transport import DEFAULT_BACKOFF, DEFAULT_MAX_DELAY, DEFAULT_RETRIES, DEFAULT_TIMEOUT, Transport

if TYPE_CHECKING:
    import concurrent.futures  # imported where a pool is made (start-up, issue 19)
    from collections.abc import Callable, Mapping
    from pathlib import Path

    # the content model's classes: made where a manifest or referrers list is read (start-up, issue 19)
    from builder.registry.manifest import Descriptor, Manifest
    from builder.registry.response import Response
    from builder.registry.transport import RequestOptions
    from builder.registry.uploads import BlobUploads

#: Blob copies (:meth:`RegistryClient.copy_blob_from`) one client streams at once (``copy_streams``).
COPY_STREAMS = 4


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
        self.copy_streams = copy_streams
        self._lock = threading.Lock()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._uploads: BlobUploads | None = None  # made on the first blob write (:attr:`uploads`)
        self.content = ContentCache()  # blobs read by digest, once per client

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

    def ping(self) -> bool:
        """GET /v2/: True when the registry answers 200, False when it answers but wants a login we
        have no credentials for (401, or a challenge that anonymous credentials cannot answer: the
        Distribution spec's version check,
        https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#determining-support).
        RegistryUnavailableError when nothing answers; RegistryAuthError when credentials configured
        for it are refused (use :meth:`check_auth` to insist on a login)."""
        try:
            return self.request("GET", "/v2/", ok=(200, 401)).status_code == 200
        except RegistryAuthError:
            if self.credential() is not None:
                raise
            return False

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

    # -- blob writes (builder.registry.uploads) -------------------------------------------------

    @property
    def uploads(self) -> BlobUploads:
        """This client's blob writes (:class:`builder.registry.uploads.BlobUploads`), made on first
        use: the mounts made so far and the bound of ``copy_streams`` blobs streamed in at once."""
        with self._lock:
            if self._uploads is None:
                from builder.registry.uploads import BlobUploads

                self._uploads = BlobUploads(self, self.copy_streams)
            return self._uploads

    def put_blob(self, repository: str, data: bytes | IO[bytes], digest: str | None = None) -> str:
        """Upload a blob monolithically; returns its digest (``data``: bytes, or a seekable binary
        file with ``digest``). See :meth:`builder.registry.uploads.BlobUploads.put_blob`."""
        return self.uploads.put_blob(repository, data, digest)

    def mount_blob(self, repository: str, digest: str, from_repository: str) -> bool:
        """Cross-repository mount (same registry), once per client: True when mounted, False when
        the registry started an upload instead (cancelled). See
        :meth:`builder.registry.uploads.BlobUploads.mount_blob`."""
        return self.uploads.mount_blob(repository, digest, from_repository)

    def copy_blob_from(self, src: RegistryClient, src_repo: str, dst_repo: str, desc: Descriptor) -> int:
        """Stream one blob from ``src`` (any registry) into ``dst_repo`` here; returns the bytes
        sent (``desc.size``, or 0 when it turned out to be there). Raises the registry errors and
        ``process.Interrupted``; see :meth:`builder.registry.uploads.BlobUploads.copy_blob_from`."""
        return self.uploads.copy_blob_from(src, src_repo, dst_repo, desc)

    # -- tags and referrers (builder.registry.tag_list, builder.registry.referrers) -------------

    def list_tags(self, repository: str, *, page_size: int = 1000) -> list[str]:
        """Every tag of ``repository`` (none: empty list), page by page; RegistryError for a list
        that never ends. See :func:`builder.registry.tag_list.list_tags`."""
        from builder.registry.tag_list import list_tags

        return list_tags(self, repository, page_size=page_size)

    def referrers(self, repository: str, digest: str, artifact_type: str | None = None) -> list[Descriptor]:
        """Manifests whose ``subject`` is ``digest`` (the referrers API, else the fallback tag
        index), filtered by ``artifact_type``. See :func:`builder.registry.referrers.referrers`."""
        from builder.registry.referrers import referrers

        return referrers(self, repository, digest, artifact_type)

    def referrers_api(self, repository: str, digest: str, artifact_type: str | None = None) -> list[Descriptor] | None:
        """One GET of the referrers API; None when the registry has none. See
        :func:`builder.registry.referrers.referrers_api`."""
        from builder.registry.referrers import referrers_api

        return referrers_api(self, repository, digest, artifact_type)

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
        """Add ``descriptor`` to the ``sha256-<hex>`` fallback index of ``subject_digest``; returns
        the index digest. See :func:`builder.registry.referrers.add_referrer_to_fallback_index`."""
        from builder.registry.referrers import add_referrer_to_fallback_index

        return add_referrer_to_fallback_index(
            self,
            repository,
            subject_digest,
            descriptor,
            attempts=attempts,
            lock_dir=lock_dir,
            lock_timeout=lock_timeout,
        )


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
