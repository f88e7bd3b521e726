"""A blob read from one registry as the body of an upload to another: the source's GET is piped
into the destination's PUT one chunk at a time, so a copy holds at most one chunk of the blob in
memory and never writes it to disk.

Shape: :class:`BlobStream` is a file-like request body (``read``, ``__len__``, ``__iter__``)
that ``requests`` sends with ``Content-Length`` set to the descriptor's size (a monolithic
upload PUT with known length: distribution-spec v1.1 "Pushing a blob monolithically",
https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pushing-a-blob-monolithically;
``requests`` streams any body with ``read`` and sizes it with ``len()``:
https://requests.readthedocs.io/en/latest/user/advanced/#streaming-uploads).
Errors: :class:`BlobSourceError` (a RegistryUnavailableError, exit 5) when the source stops
answering in the middle of a blob; ``RegistryError`` (exit 7) when the bytes read do not have
the descriptor's size or digest. Both are raised from ``read`` and so end the upload request
before the registry can store anything.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Protocol

from builder.errors import RegistryError, RegistryUnavailableError

if TYPE_CHECKING:
    from collections.abc import Iterator

    import requests

    from builder.registry.manifest import Descriptor

#: Bytes read from the source (and sent to the destination) at a time: one of these per stream is
#: the whole of a copy's blob memory.
CHUNK_BYTES = 1 << 20


class BlobSource(Protocol):
    """Where a streamed blob is read (a :class:`builder.registry.client.RegistryClient`)."""

    registry: str

    def open_blob(self, repository: str, digest: str) -> requests.Response:
        """GET the blob as a stream."""
        ...


class BlobSourceError(RegistryUnavailableError):
    """The source registry's answer broke off while a blob was being streamed (connection reset,
    read timeout, truncated chunked body). The copy may be tried again from the start."""


class BlobStream:
    """``src/repository@desc.digest`` as an upload body of exactly ``desc.size`` bytes.

    The GET is opened on the first ``read`` (so a body that is never sent opens nothing);
    ``seek(0)`` (what a sender does before sending a body again) starts the read over with a new
    GET when bytes were already taken. ``sha256`` is checked as the last byte passes. Not
    thread-safe: one stream feeds one request."""

    def __init__(self, src: BlobSource, repository: str, desc: Descriptor, *, chunk: int = CHUNK_BYTES) -> None:
        self.src = src
        self.repository = repository
        self.desc = desc
        self.chunk = chunk
        self.sent = 0  # bytes handed out since the last (re)start
        self._resp: requests.Response | None = None
        self._chunks: Iterator[bytes] | None = None
        self._hash = hashlib.sha256()

    def __len__(self) -> int:
        return self.desc.size

    def __iter__(self) -> Iterator[bytes]:
        while data := self.read():
            yield data

    @property
    def where(self) -> str:
        """``registry/repository@digest`` of the source, for messages."""
        return f"{self.src.registry}/{self.repository}@{self.desc.digest}"

    def seek(self, offset: int, whence: int = 0) -> int:
        """Only ``seek(0)``: the next ``read`` starts at the first byte (with a new GET if any
        byte was read). Raises ValueError for any other position."""
        if offset != 0 or whence != 0:
            raise ValueError("a streamed blob can only be restarted from its first byte")
        if self.sent or self._resp is not None:
            self.close()
            self.sent = 0
            self._hash = hashlib.sha256()
        return 0

    def read(self, size: int = -1) -> bytes:
        """The next piece of the blob: up to ``chunk`` bytes whatever ``size`` asks (senders read
        until ``b""``; handing on the pieces as they came avoids copying them); ``b""`` at the
        end, once the size and digest were checked."""
        import requests

        del size
        if self._chunks is None:
            self._resp = self.src.open_blob(self.repository, self.desc.digest)
            self._chunks = self._resp.iter_content(chunk_size=self.chunk)
        try:
            data = next(self._chunks, b"")
        except (requests.RequestException, OSError) as exc:
            raise BlobSourceError(
                f"registry {self.src.registry} stopped sending {self.where} after {self.sent} of "
                f"{self.desc.size} bytes: {type(exc).__name__}",
                hint="the copy is tried again from the start; if it keeps failing, check the source registry",
                registry=self.src.registry,
            ) from exc
        if not data:
            self._finish()
            return b""
        self.sent += len(data)
        if self.sent > self.desc.size:
            raise self._mismatch(f"is longer than the {self.desc.size} bytes its descriptor says")
        self._hash.update(data)
        return data

    def _finish(self) -> None:
        if self.sent != self.desc.size:
            raise self._mismatch(f"ended after {self.sent} of the {self.desc.size} bytes its descriptor says")
        got = "sha256:" + self._hash.hexdigest()
        if self.desc.digest.startswith("sha256:") and got != self.desc.digest:
            raise self._mismatch(f"hashes to {got}")

    def _mismatch(self, what: str) -> RegistryError:
        return RegistryError(
            f"blob {self.where} {what} when read",
            hint="the source registry serves other bytes than the digest names; do not copy from it",
            registry=self.src.registry,
        )

    def close(self) -> None:
        """Close the source response (its connection returns to the pool only when fully read)."""
        if self._resp is not None:
            self._resp.close()
        self._resp = None
        self._chunks = None
