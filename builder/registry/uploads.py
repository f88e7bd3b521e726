"""Blob writes of one registry client: monolithic uploads, cross-repository mounts (each blob
mounted once per client) and blobs streamed in from another registry, each retried in a new
upload session when the registry loses one. :class:`BlobUploads` is reached through
:class:`builder.registry.client.RegistryClient` (``put_blob``, ``mount_blob``, ``copy_blob_from``).

Sources: OCI distribution-spec v1.1, "Pushing blobs" (POST then PUT ``?digest=``, monolithic
upload) and "Mounting a blob from another repository" (``?mount=&from=``, 201 mounted or 202 an
upload session; https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pushing-blobs);
an upload session cancelled with ``DELETE`` (Docker Registry HTTP API V2, "Canceling an Upload":
https://github.com/docker/distribution/blob/5cb406d511b7b9163bff9b6439072e4892e5ae3b/docs/spec/api.md#canceling-an-upload).

Errors (from :mod:`builder.registry.transport`): ``RegistryUnavailableError`` (exit 5),
``RegistryAuthError`` (exit 6), ``NotFoundError`` (exit 8), ``RegistryError`` (exit 7; also an
upload answer without ``Location``); ``process.Interrupted`` at SIGTERM/SIGINT during a copy.
"""

from __future__ import annotations

import threading
from typing import IO, TYPE_CHECKING
from urllib.parse import urlencode, urljoin

from builder import process
from builder.errors import NotFoundError, RegistryAuthError, RegistryError, RegistryUnavailableError
from builder.registry.reference import sha256_digest
from builder.registry.transport import RETRY_STATUSES

if TYPE_CHECKING:
    import concurrent.futures

    from builder.registry.api import RegistryApi
    from builder.registry.manifest import Descriptor
    from builder.registry.response import Response
    from builder.registry.stream import BlobSource

#: Upload sessions one :meth:`BlobUploads.put_blob` may start (each PUT retried by the transport).
UPLOAD_SESSIONS = 3
#: Answers to cancelling an upload session: cancelled, already gone, or cancelling not supported.
_CANCEL_UPLOAD_OK = (200, 202, 204, 400, 404, 405, 501)


class BlobUploads:
    """The blob writes of ``client`` (thread-safe): at most ``copy_streams`` blobs streamed in
    from other registries at once (:meth:`copy_blob_from`), and the cross-repository mounts made
    (or in flight), so each ``(repository, digest)`` is mounted once (:meth:`mount_blob`)."""

    def __init__(self, client: RegistryApi, copy_streams: int) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._streams = threading.BoundedSemaphore(max(1, copy_streams))
        # cross-repository mounts made (or in flight): (repository, digest) -> mounted
        self._mounts: dict[tuple[str, str], concurrent.futures.Future[bool]] = {}

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
            resp = self.client.request("POST", f"/v2/{repository}/blobs/uploads/", ref=where, ok=(202,))
            location = self._location(resp, where)
            sep = "&" if "?" in location else "?"
            try:
                self.client.request(
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
                if self.client.blob_exists(repository, digest):
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
        resp = self.client.request(
            "POST",
            f"/v2/{repository}/blobs/uploads/?{urlencode({'mount': digest, 'from': from_repository})}",
            ref=where,
            ok=(201, 202),
            scopes=(f"repository:{from_repository}:pull",),
        )
        if resp.status_code == 201:
            known = self.client.content.blob(from_repository, digest)
            if known is not None:
                self.client.content.keep_blob(repository, digest, known)
            return True
        loc = resp.headers.get("Location")
        if loc:
            self.client.request("DELETE", urljoin(resp.url, loc), ref=where, ok=_CANCEL_UPLOAD_OK)
        return False

    def _location(self, resp: Response, where: str) -> str:
        loc = resp.headers.get("Location")
        if not loc:
            raise RegistryError(f"registry {self.client.registry} sent no upload Location for {where}")
        return urljoin(resp.url, loc)

    def copy_blob_from(self, src: BlobSource, src_repo: str, dst_repo: str, desc: Descriptor) -> int:
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
        from builder.registry.stream import BlobStream

        where = f"{dst_repo}@{desc.digest}"
        with self._streams:
            session = 0
            while True:
                if (signum := process.interrupted()) is not None:  # SIGTERM/SIGINT: no new session
                    raise process.Interrupted(signum)
                session += 1
                resp = self.client.request("POST", f"/v2/{dst_repo}/blobs/uploads/", ref=where, ok=(202,))
                location = self._location(resp, where)
                sep = "&" if "?" in location else "?"
                body = BlobStream(src, src_repo, desc, ahead=False)  # read in this thread: no hand-offs
                try:
                    self.client.transport.request(
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
                    if self.client.blob_exists(dst_repo, desc.digest):
                        return 0
                    if session >= UPLOAD_SESSIONS:
                        raise
                    self.client.request("DELETE", location, ref=where, ok=_CANCEL_UPLOAD_OK)
                    process.backoff(self.client.transport.delay(session, None))  # ends at the signal: Interrupted
                finally:
                    body.close()


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
