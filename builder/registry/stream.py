"""A blob read from one registry as the body of an upload to another: the source's GET is piped
into the destination's PUT a piece at a time, so a copy holds one 1 MiB buffer of the blob in
memory (never the blob) and never writes it to disk.

Shape: :class:`BlobStream` is a file-like request body (``read``, ``__len__``, ``__iter__``)
that the transport sends with ``Content-Length`` set to the descriptor's size (a monolithic
upload PUT with known length: distribution-spec v1.1 "Pushing a blob monolithically",
https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pushing-a-blob-monolithically;
urllib3 sends any body with ``read`` a piece at a time:
https://urllib3.readthedocs.io/en/stable/user-guide.html#sending-data-in-the-request-body).
Bytes are received straight into buffers allocated once per pass (``readinto``) and sent from
them (memoryviews passed to ``socket.sendall``), so a piece costs no new object, copy or fresh
memory pages. A copy reads in the uploading thread (``ahead=False``: receive, hash, send, one
buffer; the kernel's socket buffers keep both registries moving meanwhile); a layer summary
has a reader thread receive and hash up to ``AHEAD_CHUNKS`` pieces ahead (``ahead=True``), so
the download overlaps its decompression. Figures: docs/benchmarks.md "#19, round 7 (X)".

Every byte is hashed here although the destination registry is asked to check ``?digest=``
too: the spec leaves that check to the registry ("The server MAY verify none or all of them but
MUST notify the client if the content is rejected", distribution-spec "Completed Upload",
https://github.com/opencontainers/distribution-spec/blob/a6e5b091b1468662730ab1e5be55c61838643ab4/spec.md#completed-upload;
v1.1.0 lists ``DIGEST_INVALID`` among the codes a registry may answer and requires no check,
https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#error-codes). A
destination that does not verify would store a hostile source's bytes under the digest builder
names, so builder's own check is the one that holds (0.30 s of CPU per 512 MiB on the 2-core
benchmark machine; ``oras cp`` does not hash and trusts the registry).
Errors: :class:`BlobSourceError` (a RegistryUnavailableError, exit 5) when the source stops
answering in the middle of a blob; ``builder.process.Interrupted`` at the next piece once a
signal interrupted the process (a 2 GiB copy stops within 1 MiB, not after its last byte);
``RegistryError`` (exit 7) when the bytes read do not have the descriptor's size or digest.
All are raised from ``read`` and so end the upload request before the registry can store
anything: the size and digest are compared before the piece that completes the blob is handed
out, so an upload of unverified bytes stops one piece short of its ``Content-Length`` (the
registry's own check of ``?digest=`` is a second line, not the only one).
"""

from __future__ import annotations

import hashlib
import http.client
import queue
import threading
from typing import TYPE_CHECKING, Protocol

from builder import process
from builder.errors import RegistryError, RegistryUnavailableError

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator

    from builder.registry.manifest import Descriptor
    from builder.registry.response import Response

#: Bytes read from the source (and sent to the destination) at a time.
CHUNK_BYTES = 1 << 20
#: Chunks a reader thread (``ahead=True``) may hold ahead of the caller: its blob memory is
#: ``(AHEAD_CHUNKS + 2) * CHUNK_BYTES``, allocated once (the queue, the chunk being sent, the one
#: being read); a stream read inline holds one chunk. 4 MiB chunks cost no less CPU (within noise,
#: interleaved rounds in rounds 4 and 7).
AHEAD_CHUNKS = 2


class BlobSource(Protocol):
    """Where a streamed blob is read (a :class:`builder.registry.client.RegistryClient`)."""

    registry: str

    def open_blob(self, repository: str, digest: str) -> Response:
        """GET the blob as a stream."""
        ...


class BlobSourceError(RegistryUnavailableError):
    """The source registry's answer broke off while a blob was being streamed (connection reset,
    read timeout, truncated chunked body). The copy may be tried again from the start."""


class BlobStream:
    """``src/repository@desc.digest`` as an upload body of exactly ``desc.size`` bytes.

    The GET is opened on the first ``read``, so a body that is never sent opens nothing;
    ``seek(0)`` (what a sender does before sending a body again) starts over with a new GET when
    bytes were already taken. The size and digest are checked before the piece that completes the
    blob is handed out, so a sender never sends a blob's last byte unverified. One stream feeds one
    request: ``read`` is called from one thread.

    ``ahead``: True (the default): a reader thread receives and hashes up to ``AHEAD_CHUNKS``
    chunks in front of the caller, in ``AHEAD_CHUNKS + 2`` buffers (what a layer summary wants:
    the download overlaps its decompression). False: each ``read`` receives and hashes the next
    piece in the caller's thread into one buffer (what a copy wants: the kernel's socket buffers
    already let the source and the destination move while builder hashes, and a copy streams
    ``copy_streams`` blobs at once; no thread, queue or hand-off per chunk: 0.70 instead of 0.84 s
    of copy CPU per 512 MiB, peak RSS 40 instead of 52 MiB, docs/benchmarks.md "#19, round 7")."""

    def __init__(
        self,
        src: BlobSource,
        repository: str,
        desc: Descriptor,
        *,
        chunk: int = CHUNK_BYTES,
        ahead: bool = True,
    ) -> None:
        self.src = src
        self.repository = repository
        self.desc = desc
        self.chunk = chunk
        self.ahead = ahead
        self.sent = 0  # bytes handed out since the last (re)start
        self._pass: _Pass | None = None  # ahead: the reader thread
        self._inline: Generator[memoryview] | None = None  # not ahead: the pieces, read on demand
        self._done = False  # b"" was handed out (the blob is complete)

    def __len__(self) -> int:
        return self.desc.size

    def __iter__(self) -> Iterator[memoryview | bytes]:
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
        if self._pass is not None or self._inline is not None:
            self.close()
            self.sent = 0
            self._done = False
        return 0

    def read(self, size: int = -1) -> memoryview | bytes:
        """The next piece of the blob: up to ``chunk`` bytes whatever ``size`` asks (senders read
        until ``b""``), as a memoryview over one of the stream's buffers, valid until the next
        ``read`` (a sender writes it out before asking again: urllib3 passes each piece to
        ``socket.sendall``); ``b""`` at the end, once the size and digest were checked. Raises
        BlobSourceError or RegistryError (see the module)."""
        del size
        if self._done:
            return b""
        item: memoryview | bytes | BaseException
        if not self.ahead:
            if self._inline is None:
                self._inline = _inline(self)
            item = next(self._inline, b"")
        else:
            if self._pass is None:
                self._pass = _Pass(self)
                self._pass.start()
            item = self._pass.take()
            if isinstance(item, BaseException):
                raise item
        self.sent += len(item)
        self._done = not item
        return item

    def close(self) -> None:
        """Stop reading and close the source response (a reader thread blocked in a receive ends
        with it; it never hands anything on after this)."""
        if self._pass is not None:
            self._pass.cancel()
        self._pass = None
        if self._inline is not None:
            self._inline.close()  # its ``finally`` closes the response
        self._inline = None


def _pieces(s: BlobStream, resp: Response, buffer: Callable[[], memoryview | None]) -> Generator[memoryview]:
    """The bytes of ``resp`` (the source's answer for ``s``) received into the buffers ``buffer``
    gives (None: stop, nothing more is handed on), one memoryview per buffer, each hashed; the piece
    that completes the blob only once the size, the digest and the end of the source's body were
    checked. Closes ``resp`` when it ends (or is closed). Raises BlobSourceError when the source's
    answer breaks off, RegistryError when its bytes are not the descriptor's, and
    ``process.Interrupted`` before the next piece once the process was interrupted (SIGTERM,
    SIGINT, SIGHUP): an upload stops short of its ``Content-Length``, so nothing is stored and
    the stage pointer a promotion would move stays where it was."""
    n = 0
    readinto = _reader(resp)
    length = resp.headers.get("Content-Length", "")
    try:
        h = _hasher(s)
        if s.desc.size == 0:
            _check_complete(s, h, readinto)
            return
        while (buf := buffer()) is not None:
            if (signum := process.interrupted()) is not None:  # SIGTERM/SIGINT: stop within a piece
                raise process.Interrupted(signum)
            got = _fill(readinto, buf)
            if not got:
                if length.isdigit() and n < int(length):  # the connection ended early
                    raise http.client.IncompleteRead(b"", int(length) - n)
                break
            n += got
            if n > s.desc.size:
                raise _mismatch(s, f"is longer than the {s.desc.size} bytes its descriptor says")
            piece = buf[:got]
            h.update(piece)  # hashlib releases the GIL for a piece this large
            if n == s.desc.size:  # the last piece: checked before the sender may send it
                _check_complete(s, h, readinto)
                yield piece
                return
            yield piece
        else:
            return  # stopped
    except (http.client.HTTPException, OSError, ValueError) as exc:  # ReadError is an OSError
        raise BlobSourceError(
            f"registry {s.src.registry} stopped sending {s.where} after {n} of {s.desc.size} bytes: "
            f"{type(exc).__name__}",
            hint="the copy is tried again from the start; if it keeps failing, check the source registry",
            registry=s.src.registry,
        ) from exc
    finally:
        resp.close()  # after the last piece, on an error, or when the consumer stops
    raise _mismatch(s, f"ended after {n} of the {s.desc.size} bytes its descriptor says")


def _inline(s: BlobStream) -> Generator[memoryview]:
    """``s``'s pieces read in the caller's thread into one buffer (the caller has written a piece
    out before it asks for the next)."""
    resp = s.src.open_blob(s.repository, s.desc.digest)
    buf = memoryview(bytearray(max(1, min(s.chunk, s.desc.size))))
    yield from _pieces(s, resp, lambda: buf)


class _Pass(threading.Thread):
    """One read of the blob from its first byte, ``AHEAD_CHUNKS`` chunks in front of the sender: each
    chunk (the last one only once the size, the digest and the end of the source's body were
    checked), then ``b""``, or the error that ended it.

    The bytes are received straight into a ring of ``AHEAD_CHUNKS + 2`` buffers allocated once
    (``readinto``: no new object, no copy, no fresh pages per chunk) and hashed there (hashlib
    releases the GIL while it hashes); the sender gets memoryviews over them and gives each buffer
    back by asking for the next piece."""

    def __init__(self, stream: BlobStream) -> None:
        super().__init__(name=f"blob-read-{stream.desc.digest[7:19]}", daemon=True)
        self.stream = stream
        self.items: queue.Queue[memoryview | bytes | BaseException] = queue.Queue(maxsize=AHEAD_CHUNKS)
        self.free: queue.SimpleQueue[memoryview] = queue.SimpleQueue()
        size = max(1, min(stream.chunk, stream.desc.size))
        for _ in range(AHEAD_CHUNKS + 2):
            self.free.put(memoryview(bytearray(size)))
        self.lent: memoryview | None = None  # the buffer the sender holds
        self.stopped = threading.Event()
        self.resp: Response | None = None
        self.guard = threading.Lock()

    def take(self) -> memoryview | bytes | BaseException:
        if self.lent is not None:
            self.free.put(self.lent)  # the sender wrote it out before asking again
            self.lent = None
        item = self.items.get()
        if isinstance(item, memoryview):
            self.lent = item.obj if isinstance(item.obj, memoryview) else memoryview(item.obj)
        return item

    def cancel(self) -> None:
        self.stopped.set()
        with self.guard:
            resp, self.resp = self.resp, None
        if resp is not None:
            resp.close()

    def run(self) -> None:
        try:
            self._read()
        except BaseException as exc:  # handed to the sender's read(), which raises it
            if not self.stopped.is_set():  # a receive ended by cancel() is no error
                self._put(exc)

    def _read(self) -> None:
        s = self.stream
        resp = s.src.open_blob(s.repository, s.desc.digest)
        with self.guard:
            if self.stopped.is_set():
                resp.close()
                return
            self.resp = resp
        for piece in _pieces(s, resp, self._free):
            if not self._put(piece):
                return
        if not self.stopped.is_set():
            self._put(b"")

    def _free(self) -> memoryview | None:
        """A buffer the sender is done with, waiting for one; None once cancelled."""
        while not self.stopped.is_set():
            try:
                return self.free.get(timeout=0.2)
            except queue.Empty:
                continue
        return None

    def _put(self, item: memoryview | bytes | BaseException) -> bool:
        """Hand ``item`` on, waiting while the queue is full; False once cancelled."""
        while not self.stopped.is_set():
            try:
                self.items.put(item, timeout=0.2)
            except queue.Full:
                continue
            return True
        return False


def _reader(resp: Response) -> Callable[[memoryview], int]:
    """What receives ``resp``'s body into a buffer: the ``readinto`` of the standard library's
    ``http.client.HTTPResponse`` (a direct connection's, or the one under urllib3's through a
    proxy: straight from the socket into the buffer,
    https://docs.python.org/3/library/http.client.html#http.client.HTTPResponse.readinto), when the
    body has no ``Content-Encoding`` to decode (a blob's bytes are sent as stored); else a copy
    of each decoded piece (``Response.read1``)."""
    raw = resp.body.raw_readinto()  # a direct connection's, or the one under urllib3's through a proxy
    if raw is not None:
        return raw

    def decoded(buf: memoryview) -> int:
        data = resp.read1(len(buf))
        buf[: len(data)] = data
        return len(data)

    return decoded


def _fill(readinto: Callable[[memoryview], int], buf: memoryview) -> int:
    """Receive into ``buf`` until it is full or the body ends; the bytes received."""
    got = 0
    while got < len(buf) and (n := readinto(buf[got:])):
        got += n
    return got


def _check_complete(s: BlobStream, h: hashlib._Hash, readinto: Callable[[memoryview], int]) -> None:
    """All ``s.desc.size`` bytes were received and hashed into ``h``: raise RegistryError unless they
    hash to the descriptor's digest and the source's body ends there.
    Called before the piece that completes the blob is handed to the sender: an upload whose
    ``Content-Length`` is the blob's size is then cut off one piece short of it, so the
    destination never receives, let alone commits, a blob builder has not verified (the registry's
    own check of ``?digest=`` is a second line)."""
    got_digest = f"{h.name}:{h.hexdigest()}"
    if got_digest != s.desc.digest:
        raise _mismatch(s, f"hashes to {got_digest}")
    if _fill(readinto, memoryview(bytearray(1))):
        raise _mismatch(s, f"is longer than the {s.desc.size} bytes its descriptor says")


#: The digest algorithms a streamed blob is checked with: those the OCI image specification
#: registers (sha256, sha512: https://github.com/opencontainers/image-spec/blob/v1.1.0/descriptor.md#registered-algorithms)
#: and sha384, which the go-digest library registries use also accepts
#: (https://github.com/opencontainers/go-digest/blob/master/algorithm.go).
VERIFIABLE_ALGORITHMS = frozenset({"sha256", "sha384", "sha512"})


def _hasher(s: BlobStream) -> hashlib._Hash:
    """A new hash of the algorithm ``s``'s digest names. Raises RegistryError (7) for any other
    algorithm: a blob builder cannot verify is never handed on."""
    algorithm = s.desc.digest.partition(":")[0]
    if algorithm not in VERIFIABLE_ALGORITHMS:
        raise RegistryError(
            f"blob {s.where} has a digest of algorithm {algorithm!r}, which builder cannot verify; not copied",
            hint="copy images whose blobs have sha256 or sha512 digests (the OCI image specification's registered "
            "algorithms)",
            registry=s.src.registry,
        )
    return hashlib.new(algorithm)


def _mismatch(s: BlobStream, what: str) -> RegistryError:
    return RegistryError(
        f"blob {s.where} {what} when read",
        hint="the source registry serves other bytes than the digest names; do not copy from it",
        registry=s.src.registry,
    )
