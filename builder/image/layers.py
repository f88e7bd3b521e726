"""Image layers streamed from the registry and read once: each layer blob is fetched through the
registry client (the invocation's credentials), its digest checked while it streams, decompressed
(gzip with ISA-L through ``isal``, about three times zlib's speed; zstd with ``zstandard``; detected
by magic, not media type) and walked as a tar stream;
ELF members are scanned for GPU code (:mod:`builder.image.elf`) and the few small files the stack is
read from are kept (:mod:`builder.image.stack`). Nothing is written to disk but the summary.

A layer's summary (:class:`LayerSummary`: every path, its whiteouts, its GPU code, its stack files) is
cached by layer digest (:class:`LayerCache`), so an image that shares layers with one inspected before
reads only its new layers. :func:`merge` applies the layers in order with the OCI whiteout rules
(``.wh.<name>`` deletes, ``.wh..wh..opq`` empties a directory of the layers below;
https://github.com/opencontainers/image-spec/blob/v1.1.0/layer.md#whiteouts).

Memory: one read chunk (1 MiB) per stream, a tar block, and the summaries; never a whole layer or file.
Errors: RegistryError (a blob that does not match its size or digest, or is not a tar stream),
BlobSourceError (a download broken off), the registry client's errors (auth, not found, unavailable).
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import queue
import tarfile
import threading
from typing import IO, TYPE_CHECKING, Any, cast

import zstandard
from isal import isal_zlib

from builder import process
from builder.cachefile import code_digest, read_private, write_json
from builder.errors import RegistryError
from builder.image.elf import GpuCode, scan_stream
from builder.image.stack import is_stack_file
from builder.registry.stream import BlobStream

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from builder.registry.client import RegistryClient
    from builder.registry.manifest import Descriptor

CHUNK = 1 << 20
#: decompressed chunks a layer's inflate thread may hold ahead of the tar walk (memory: this many MiB)
PREFETCH = 4
#: tarfile's stream buffer: it re-slices this buffer on every header read, so it stays small
TAR_BUFFER = 64 << 10
#: files the stack is read from are kept up to this size (a dpkg status database can be a few MiB)
STACK_FILE_MAX = 8 << 20
CACHE_FORMAT = 2  # 2: AMDGPU code object files
#: builder's sources that shape a layer's summary (``builder.cachefile.code_stamp`` names): the tar
#: walk, the ELF/fatbin/offload/AMDGPU readers and kernel names, the stack files kept, the blob reader.
LAYER_CODE = (
    "image/layers.py",
    "image/elf.py",
    "image/fatbin.py",
    "image/offload.py",
    "image/amdgpu.py",
    "image/cursor.py",
    "image/stack.py",
    "compat/kernels.py",
    "compat/_data.py",
    "compat/data/ptx-isa.csv",
    "registry/stream.py",
)
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


@dataclasses.dataclass(frozen=True)
class LayerSummary:
    """What one layer holds, as far as inspection needs it: ``paths`` (absolute, regular files and
    links), ``deleted`` (whiteouts: absolute paths removed from the layers below), ``opaque``
    (directories emptied of the layers below), ``code`` (ELF files with GPU code), ``files`` (stack
    files: path -> text), ``size`` (compressed bytes)."""

    digest: str
    size: int
    paths: tuple[str, ...]
    deleted: tuple[str, ...] = ()
    opaque: tuple[str, ...] = ()
    code: tuple[GpuCode, ...] = ()
    files: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "format": CACHE_FORMAT,
            "digest": self.digest,
            "size": self.size,
            "paths": list(self.paths),
            "deleted": list(self.deleted),
            "opaque": list(self.opaque),
            "code": [c.to_json() for c in self.code],
            "files": dict(self.files),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> LayerSummary:
        return cls(
            digest=str(d["digest"]),
            size=int(d["size"]),
            paths=tuple(d["paths"]),
            deleted=tuple(d["deleted"]),
            opaque=tuple(d["opaque"]),
            code=tuple(GpuCode.from_json(c) for c in d["code"]),
            files=tuple(sorted(d["files"].items())),
        )


class LayerCache:
    """Layer summaries on disk, one JSON file per layer digest under ``directory``, each stamped with
    the sha256 of builder's :data:`LAYER_CODE` and the libraries' versions
    (``builder.cachefile.code_digest``). A file that does not parse, has another format or code
    stamp, or is not private (``builder.cachefile.read_private``: owned by another user or writable
    by others) is read as a miss (and rewritten)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @staticmethod
    def _code() -> str | None:
        """The code stamp's digest; None when a source vanished while read (a reinstall: no hits)."""
        try:
            return code_digest(LAYER_CODE)
        except OSError:
            return None

    def _path(self, digest: str) -> Path:
        algo, _, hexpart = digest.partition(":")
        return self.directory / f"{algo}-{hexpart}.json"

    def get(self, digest: str) -> LayerSummary | None:
        raw = read_private(self._path(digest), self.directory)  # others could have written it: a miss
        try:
            data = json.loads(raw) if raw is not None else None
        except ValueError:
            return None  # missing, unreadable or torn: read the layer again, the write replaces it
        if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT or data.get("digest") != digest:
            return None
        code = self._code()
        if code is None or data.get("stamp") != code:  # written by another builder or library version
            return None
        return LayerSummary.from_json(data)

    def put(self, summary: LayerSummary) -> None:
        """Write the summary atomically (directories created 0700); a directory that cannot be
        written only costs the next read of the layer."""
        code = self._code()
        if code is not None:
            write_json(self._path(summary.digest), summary.to_json() | {"stamp": code})


class _Chunks:
    """``read(n)`` (at most ``n`` bytes) over :class:`builder.registry.stream.BlobStream`, which hands out
    the blob in chunks and checks its size and sha256 as the last byte passes (RegistryError, exit 7) and
    turns a broken download into BlobSourceError (exit 5)."""

    def __init__(self, blob: BlobStream) -> None:
        self._blob = blob
        self._buf = b""
        self._pos = 0

    def read(self, n: int = -1) -> bytes:
        if self._pos >= len(self._buf):
            signum = process.interrupted()
            if signum is not None:  # SIGTERM/SIGINT: stop within a chunk, not after the layer
                raise process.Interrupted(signum)
            self._buf, self._pos = bytes(self._blob.read()), 0  # a view valid until the next read
        end = len(self._buf) if n < 0 else self._pos + n
        out = self._buf[self._pos : end]
        self._pos += len(out)
        return out

    def drain(self) -> None:
        """Read to the end (padding after the compressed stream): the digest check happens there."""
        while self.read(CHUNK):
            pass


class _Decompressed:
    """``read(n)`` of the decompressed layer: gzip (every member), zstd, or plain tar."""

    def __init__(self, raw: _Chunks) -> None:
        self._raw = raw
        head = raw.read(4)
        self._pending = b""
        self._pos = 0
        self._tail = b""
        self._gzip: Any = None
        self._zstd: Any = None
        self._eof = False
        if head[:2] == b"\x1f\x8b":
            self._gzip = isal_zlib.decompressobj(31)
            self._pending = self._gzip.decompress(head)
        elif head == b"\x28\xb5\x2f\xfd":
            self._zstd = zstandard.ZstdDecompressor().stream_reader(
                cast("IO[bytes]", _Prefixed(head, raw)), read_across_frames=True
            )
        else:
            self._pending = head

    def _more(self) -> bytes:
        """The next decompressed bytes (at most a chunk: highly compressed data never balloons); b"" only
        at the end of the layer."""
        if self._zstd is not None:
            return bytes(self._zstd.read(CHUNK))
        while True:
            data = self._tail or self._raw.read(CHUNK)
            self._tail = b""
            if self._gzip is None or not data:
                return data if self._gzip is None else self._gzip.flush()
            out = self._gzip.decompress(data, CHUNK)
            self._tail = self._gzip.unconsumed_tail
            if self._gzip.eof:  # a following gzip member starts in the unused bytes
                self._tail = self._gzip.unused_data
                self._gzip = isal_zlib.decompressobj(31)
            if out:
                return bytes(out)

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` decompressed bytes (fewer only at a chunk boundary or the end); never copies more
        than it returns."""
        if self._pos >= len(self._pending):
            self._pending, self._pos = b"", 0
            while not self._eof and not self._pending:
                self._pending = self._more()
                if not self._pending:
                    self._eof = True
        end = len(self._pending) if n < 0 else self._pos + n
        out = self._pending[self._pos : end]
        self._pos += len(out)
        return out


class _Prefetched:
    """``read(n)`` of a decompressed layer inflated ahead by a thread (download, sha256 and inflate
    release the GIL, so they overlap the tar walk and the ELF scan on another core). Bounded: at most
    :data:`PREFETCH` chunks wait. An error of the thread is raised by the next ``read``."""

    def __init__(self, source: _Decompressed) -> None:
        self._queue: queue.Queue[bytes | BaseException] = queue.Queue(maxsize=PREFETCH)
        self._stop = threading.Event()
        self._buf = b""
        self._pos = 0
        self._done = False
        self._thread = threading.Thread(target=self._run, args=(source,), name="layer-inflate", daemon=True)
        self._thread.start()

    def _run(self, source: _Decompressed) -> None:
        try:
            while not self._stop.is_set():
                chunk = source.read(CHUNK)
                self._put(chunk)
                if not chunk:
                    return
        except BaseException as exc:  # an interruption too: handed to the reader, which raises it
            self._put(exc)

    def _put(self, item: bytes | BaseException) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.2)
            except queue.Full:
                continue
            return

    def read(self, n: int = -1) -> bytes:
        if self._pos >= len(self._buf):
            if self._done:
                return b""
            item = self._next()
            if isinstance(item, BaseException):
                self._done = True
                raise item
            if not item:
                self._done = True
                return b""
            self._buf, self._pos = item, 0
        end = len(self._buf) if n < 0 else self._pos + n
        out = self._buf[self._pos : end]
        self._pos += len(out)
        return out

    def _next(self) -> bytes | BaseException:
        """The next chunk or error; never waits on a thread that is gone."""
        while True:
            try:
                return self._queue.get(timeout=0.5)
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    return RegistryError("the layer's inflate thread stopped without an answer")

    def finish(self) -> None:
        """Read what is left (the tar end blocks: they count for the digest) and wait for the thread."""
        while self.read(CHUNK):
            pass
        self._thread.join()

    def stop(self) -> None:
        """Stop the thread early (an error); it ends at its next chunk."""
        self._stop.set()


class _Prefixed:
    """A stream with bytes already read put back in front (for the zstd reader)."""

    def __init__(self, head: bytes, raw: _Chunks) -> None:
        self._head = head
        self._raw = raw

    def read(self, n: int = -1) -> bytes:
        if self._head:
            out, self._head = self._head, b""
            return out
        return self._raw.read(n)


def _abs(name: str) -> str:
    """A tar member name (``./usr/lib/x``, ``usr/lib/x``) as an absolute path (``/usr/lib/x``)."""
    while name.startswith("./"):
        name = name[2:]
    name = name.strip("/")
    return "/" if name in ("", ".") else posixpath.normpath("/" + name)


def summarize_tar(digest: str, size: int, stream: IO[bytes] | _Decompressed | _Prefetched) -> LayerSummary:
    """Walk one decompressed layer (``stream.read(n)``) as a tar stream and summarize it. Raises
    RegistryError when it is not a tar stream."""
    paths: list[str] = []
    deleted: list[str] = []
    opaque: list[str] = []
    code: list[GpuCode] = []
    files: dict[str, str] = {}
    try:
        with tarfile.open(fileobj=cast("IO[bytes]", stream), mode="r|", bufsize=TAR_BUFFER) as tar:
            for member in tar:
                path = _abs(member.name)
                parent, _, name = path.rpartition("/")
                if name == OPAQUE:
                    opaque.append(parent or "/")
                    continue
                if name.startswith(WHITEOUT):
                    deleted.append(f"{parent}/{name[len(WHITEOUT) :]}")
                    continue
                if member.isdir():
                    continue
                paths.append(path)
                if member.issym() or member.islnk():
                    continue
                if not member.isreg():
                    continue
                keep = is_stack_file(path) and member.size <= STACK_FILE_MAX
                if member.size < 64 and not keep:
                    continue
                f = tar.extractfile(member)
                if f is None:
                    continue
                if keep:
                    files[path] = f.read().decode("utf-8", "replace")
                    continue
                found = scan_stream(path, f.read)
                if found is not None:
                    code.append(found)
    except tarfile.TarError as exc:
        raise RegistryError(f"layer {digest} is not a tar stream: {exc}") from exc
    return LayerSummary(
        digest=digest,
        size=size,
        paths=tuple(paths),
        deleted=tuple(deleted),
        opaque=tuple(opaque),
        code=tuple(code),
        files=tuple(sorted(files.items())),
    )


def read_layer(client: RegistryClient, repository: str, layer: Descriptor) -> LayerSummary:
    """Stream the layer blob ``layer`` of ``repository`` and summarize it. Its size and sha256 are
    checked as it streams (RegistryError, exit 7, so nothing wrong is cached); a download that breaks
    off is BlobSourceError (exit 5)."""
    blob = BlobStream(client, repository, layer, chunk=CHUNK)
    try:
        raw = _Chunks(blob)
        stream = _Prefetched(_Decompressed(raw))
        try:
            summary = summarize_tar(layer.digest, layer.size, stream)
            stream.finish()
        finally:
            stream.stop()
        raw.drain()  # padding after the compressed stream counts for the digest too
        return summary
    finally:
        blob.close()


@dataclasses.dataclass(frozen=True)
class Filesystem:
    """The image's files after every layer: ``paths`` present, ``code`` by path, stack ``files``."""

    paths: frozenset[str]
    code: tuple[GpuCode, ...]
    files: dict[str, str]


def _ancestors(path: str) -> list[str]:
    """``/a/b/c`` -> ``["/", "/a", "/a/b"]`` (string work: this runs for every path of an image)."""
    out = ["/"]
    i = path.find("/", 1)
    while i != -1:
        out.append(path[:i])
        i = path.find("/", i + 1)
    return out


def merge(layers: Iterable[LayerSummary]) -> Filesystem:
    """Apply the layers bottom to top: whiteouts and opaque directories remove what the layers below
    put there, a path written again replaces the earlier file (its GPU code and stack text too)."""
    present: set[str] = set()
    code: dict[str, GpuCode] = {}
    files: dict[str, str] = {}
    for layer in layers:
        gone = set(layer.deleted)
        emptied = set(layer.opaque)
        if gone or emptied:
            for p in list(present):
                parents = _ancestors(p)
                if p in gone or any(a in gone or a in emptied for a in parents):
                    present.discard(p)
                    code.pop(p, None)
                    files.pop(p, None)
        for p in layer.paths:
            present.add(p)
            code.pop(p, None)
            files.pop(p, None)
        for c in layer.code:
            code[c.path] = c
        for p, text in layer.files:
            files[p] = text
    return Filesystem(frozenset(present), tuple(sorted(code.values(), key=lambda c: c.path)), files)


__all__ = ["Filesystem", "LayerCache", "LayerSummary", "merge", "read_layer", "summarize_tar"]
