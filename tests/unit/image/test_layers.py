"""Layer streams: tar layers compressed as registries serve them (gzip, several gzip members, zstd,
plain), read by the streaming reader; OCI whiteouts and opaque directories applied by ``merge``; the
layer cache round trip. Layers are real tar streams written by Python's tarfile (the same format
``docker buildx`` pushes)."""

from __future__ import annotations

import gzip
import io
import tarfile
from typing import TYPE_CHECKING, cast

import pytest
import zstandard

from builder.image import layers
from builder.image.layers import LayerCache, merge, summarize_tar
from tests import gpu_code

if TYPE_CHECKING:
    from pathlib import Path

    from builder.registry.stream import BlobStream


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class _Pieces:
    """A blob handed out in odd-sized pieces, as ``builder.registry.stream.BlobStream.read`` does."""

    def __init__(self, blob: bytes, chunk: int) -> None:
        self._pieces = iter([blob[i : i + chunk] for i in range(0, len(blob), chunk)])

    def read(self, size: int = -1) -> bytes:
        del size
        return next(self._pieces, b"")


def _summary(blob: bytes, digest: str = "sha256:x", chunk: int = 7919) -> layers.LayerSummary:
    raw = layers._Chunks(cast("BlobStream", _Pieces(blob, chunk)))
    return summarize_tar(digest, len(blob), layers._Decompressed(raw))


@pytest.fixture(scope="module")
def cuda_lib() -> bytes:
    return gpu_code.bitsandbytes_lib("libbitsandbytes_cuda126.so").read_bytes()


@pytest.mark.parametrize("compression", ["gzip", "gzip-members", "zstd", "none"])
def test_compressed_layers_stream(compression: str, cuda_lib: bytes) -> None:
    raw = _tar({"./usr/lib/libk.so": cuda_lib, "./.bashrc": b"x" * 100, "etc/os-release": b'PRETTY_NAME="Debian"\n'})
    if compression == "gzip":
        blob = gzip.compress(raw, compresslevel=1)
    elif compression == "gzip-members":  # pigz / concatenated members
        half = len(raw) // 2
        blob = gzip.compress(raw[:half], compresslevel=1) + gzip.compress(raw[half:], compresslevel=1)
    elif compression == "zstd":
        blob = zstandard.ZstdCompressor().compress(raw)
    else:
        blob = raw
    s = _summary(blob)
    assert set(s.paths) == {"/usr/lib/libk.so", "/.bashrc", "/etc/os-release"}
    [code] = s.code
    assert code.path == "/usr/lib/libk.so"
    assert code.sass[-1] == "sm_90"
    assert dict(s.files) == {"/etc/os-release": 'PRETTY_NAME="Debian"\n'}


def test_not_a_tar_stream_is_a_registry_error() -> None:
    from builder.errors import RegistryError

    with pytest.raises(RegistryError, match="not a tar stream"):
        _summary(gzip.compress(b"this is no tar archive" * 100))


def test_whiteouts_and_opaque_directories() -> None:
    base = _summary(_tar({"opt/a/lib1.so": b"1" * 80, "opt/a/sub/lib2.so": b"2" * 80, "opt/b/keep": b"3" * 80}))
    upper = _summary(_tar({"opt/a/.wh..wh..opq": b"", "opt/a/new": b"4" * 80, "opt/b/.wh.keep": b""}))
    fs = merge([base, upper])
    assert fs.paths == frozenset({"/opt/a/new"})


def test_a_file_written_again_replaces_its_gpu_code(cuda_lib: bytes) -> None:
    first = _summary(_tar({"usr/lib/libk.so": cuda_lib}))
    second = _summary(_tar({"usr/lib/libk.so": b"not elf any more" * 10}))
    assert merge([first]).code[0].path == "/usr/lib/libk.so"
    assert merge([first, second]).code == ()


def test_cache_round_trip_and_torn_files(tmp_path: Path, cuda_lib: bytes) -> None:
    cache = LayerCache(tmp_path)
    s = _summary(_tar({"usr/lib/libk.so": cuda_lib}), digest="sha256:" + "a" * 64)
    cache.put(s)
    assert cache.get(s.digest) == s
    (tmp_path / f"sha256-{'a' * 64}.json").write_text("{torn")
    assert cache.get(s.digest) is None  # read again, never trusted
    assert cache.get("sha256:" + "b" * 64) is None
