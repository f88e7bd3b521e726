"""A forward-only window over a byte stream (one file inside a layer being streamed): find a magic, peek a
header at an absolute offset, never hold more than a few chunks. The fat-binary readers walk container
headers with it and skip payloads without reading them into memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

CHUNK = 1 << 20  # bytes read from the stream at a time


class Cursor:
    """Absolute-offset access to a stream read by ``read(n)``: :meth:`find` and :meth:`peek` only move
    forward (an offset before the window raises ValueError); the window keeps about one chunk plus what
    the peeks since the last release asked for."""

    def __init__(self, read: Callable[[int], bytes], *, chunk: int = CHUNK, prefix: bytes = b"") -> None:
        self._read = read
        self._chunk = chunk
        self._buf = bytearray(prefix)
        self._base = 0  # absolute offset of _buf[0]
        self._eof = False

    @property
    def eof(self) -> bool:
        return self._eof

    def _fill(self) -> bool:
        if self._eof:
            return False
        data = self._read(self._chunk)
        if not data:
            self._eof = True
            return False
        self._buf += data
        return True

    def _drop_before(self, pos: int) -> None:
        if pos < self._base:
            raise ValueError(f"offset {pos} is behind the stream window (at {self._base})")
        cut = pos - self._base
        if cut >= len(self._buf):  # skip forward without keeping anything
            skip = cut - len(self._buf)
            self._base += len(self._buf)
            self._buf.clear()
            while skip > 0 and not self._eof:
                data = self._read(min(self._chunk, skip))
                if not data:
                    self._eof = True
                    break
                self._base += len(data)
                skip -= len(data)
            return
        del self._buf[:cut]
        self._base = pos

    def find(self, start: int, needles: tuple[bytes, ...]) -> tuple[int, bytes] | None:
        """The first offset >= ``start`` where one of ``needles`` begins, and which; None at the end of
        the stream. Bytes before ``start`` are dropped."""
        self._drop_before(start)
        overlap = max(len(n) for n in needles) - 1
        searched = 0  # offset into _buf from which no needle can start any more
        while True:
            best: tuple[int, bytes] | None = None
            for n in needles:
                i = self._buf.find(n, searched)
                if i >= 0 and (best is None or i < best[0]):
                    best = (i, n)
            if best is not None:
                return self._base + best[0], best[1]
            searched = max(0, len(self._buf) - overlap)
            if searched > self._chunk:  # keep the window small: drop what was searched
                self._drop_before(self._base + searched)
                searched = 0
            if not self._fill():
                return None

    @property
    def base(self) -> int:
        """The lowest offset still in the window."""
        return self._base

    def peek(self, pos: int, size: int, *, release: bool = False) -> bytes:
        """``size`` bytes at absolute offset ``pos`` (fewer at the end of the stream). The window keeps
        the bytes before ``pos`` (a parser that gives up can be resumed right after its start) unless
        ``release`` is set or ``pos`` lies beyond the window (then the stream is skipped up to it)."""
        if release or pos > self._base + len(self._buf):
            self._drop_before(pos)
        elif pos < self._base:
            raise ValueError(f"offset {pos} is behind the stream window (at {self._base})")
        start = pos - self._base
        while len(self._buf) < start + size and self._fill():
            pass
        return bytes(self._buf[start : start + size])


__all__ = ["CHUNK", "Cursor"]
