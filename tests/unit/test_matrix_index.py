"""The matrices' variants validated once per content (issue 19 item 3: ``resolve`` finds its
variant without validating every matrix): the cache answers exactly what loading does, a changed
matrix is loaded again, an invalid one is never cached, and a broken cache file is rebuilt."""

from __future__ import annotations

import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from builder.errors import MatrixError
from builder.matrix import load as matrix_load
from builder.matrix import load_matrices, matrix_paths
from builder.matrix.index import cached_variants, matrix_index
from tests.conftest import ROOT

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def matrices(tmp_path: Path) -> Path:
    d = tmp_path / "matrices"
    shutil.copytree(ROOT / "matrices", d)
    return d


def loaded(d: Path) -> tuple[object, ...]:
    return tuple(v for m in load_matrices(matrix_paths(d)) for v in m.variants)


def test_the_cache_answers_what_loading_does_without_loading(
    matrices: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    first = cached_variants(matrix_paths(matrices), cache)
    assert first == loaded(matrices) and len(first) > 10
    assert len(list(cache.glob("variants-*.json"))) == 1

    def refuse(*_args: object, **_kw: object) -> None:
        raise AssertionError("the matrices were parsed and validated again")

    monkeypatch.setattr(matrix_load, "load_matrices", refuse)
    assert cached_variants(matrix_paths(matrices), cache) == first


def test_a_changed_matrix_is_loaded_again(matrices: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    before = cached_variants(matrix_paths(matrices), cache)
    demo = matrices / "demo.yaml"
    text = demo.read_text()
    assert "repository: demo/jax" in text
    demo.write_text(text.replace("repository: demo/jax", "repository: demo/jax-renamed"))
    after = cached_variants(matrix_paths(matrices), cache)
    assert after == loaded(matrices) != before
    assert {v.repository for v in after if v.matrix == "demo"} == {"demo/jax-renamed"}


def test_an_invalid_matrix_is_an_error_and_never_cached(matrices: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (matrices / "broken.yaml").write_text("family: jax\nrepository: x/y\naxes: {python: [3.11]}\n")
    with pytest.raises(MatrixError):
        cached_variants(matrix_paths(matrices), cache, skip_broken=False)
    assert not list(cache.glob("variants-*.json"))
    # the project's lookups leave it out (a warning; tests/unit/test_matrix_broken.py), never cache it
    others = [p for p in matrix_paths(matrices) if p.name != "broken.yaml"]
    assert cached_variants(matrix_paths(matrices), cache) == tuple(v for m in load_matrices(others) for v in m.variants)


def test_a_broken_cache_file_is_rebuilt(matrices: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = cached_variants(matrix_paths(matrices), cache)
    (file,) = cache.glob("variants-*.json")
    file.write_text('{"schema": 1, "variants": [{"id": "truncated"')
    assert cached_variants(matrix_paths(matrices), cache) == first
    file.write_text('{"schema": 1, "variants": [{"id": 3}]}')
    assert cached_variants(matrix_paths(matrices), cache) == first


def test_an_unwritable_cache_directory_only_costs_the_speed_up(matrices: Path, tmp_path: Path) -> None:
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    assert cached_variants(matrix_paths(matrices), blocked / "cache") == loaded(matrices)


def test_a_hit_imports_neither_parser_nor_validators(matrices: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cached_variants(matrix_paths(matrices), cache)
    code = (
        "import sys\nfrom pathlib import Path\n"
        "from builder.matrix.files import matrix_paths\nfrom builder.matrix.index import cached_variants\n"
        f"vs = cached_variants(matrix_paths(Path({str(matrices)!r})), Path({str(cache)!r}))\n"
        "assert vs\n"
        "print(' '.join(m for m in sys.modules if m.startswith(('builder.matrix', 'ruamel', 'pydantic'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert set(out.stdout.split()) <= {"builder.matrix", "builder.matrix.files", "builder.matrix.index"}


def test_what_each_matrix_names_is_kept_too(matrices: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The policy and fleet each matrix names (what promotion commands default to) come from the
    same cache entry."""
    cache = tmp_path / "cache"
    want = tuple((m.path, m.policy, m.fleet) for m in load_matrices(matrix_paths(matrices)))
    assert any(p is not None for _, p, _ in want)
    first = matrix_index(matrix_paths(matrices), cache)
    monkeypatch.setattr(matrix_load, "load_matrices", lambda *_a, **_k: pytest.fail("loaded again"))
    again = matrix_index(matrix_paths(matrices), cache)
    assert again == first
    assert tuple((m.path, m.policy, m.fleet) for m in again.matrices) == want


def test_the_project_index_puts_every_repository_under_the_prefix(matrices: Path, tmp_path: Path) -> None:
    """``builder check VARIANT`` finds the variant's image and declared checks through
    ``project_index``: the variants loading gives, each repository under ``repository_prefix``."""
    from builder.config import Config
    from builder.matrix.index import project_index

    plain = project_index(Config(root=tmp_path, matrices_dir=matrices, state_dir=tmp_path / "state"))
    assert plain.variants == loaded(matrices)
    cfg = Config(root=tmp_path, matrices_dir=matrices, state_dir=tmp_path / "state", repository_prefix="acme/images")
    prefixed = project_index(cfg)
    assert [v.repository for v in prefixed.variants] == [f"acme/images/{v.repository}" for v in plain.variants]
    assert [v.tests for v in prefixed.variants] == [v.tests for v in plain.variants]
    assert any(v.tests is not None for v in prefixed.variants)  # the shipped matrices declare tests


def test_an_edit_while_loading_is_never_stored_under_the_old_key(
    matrices: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bytes the cache key is taken from are the bytes parsed: a matrix edited (then undone)
    while the index loads never binds the edit's ``policy:`` to the original text."""
    cache = tmp_path / "cache"
    demo = matrices / "demo.yaml"
    original = demo.read_text()
    assert "policy: default\n" in original
    load = matrix_load.load_matrices

    def edited_meanwhile(*args: object, **kw: object) -> object:
        demo.write_text(original.replace("policy: default\n", "policy: lax\n"))
        try:
            return load(*args, **kw)  # type: ignore[arg-type]
        finally:
            demo.write_text(original)  # undone (an editor's undo, a git checkout)

    monkeypatch.setattr(matrix_load, "load_matrices", edited_meanwhile)
    matrix_index(matrix_paths(matrices), cache)
    monkeypatch.undo()
    names = {m.path.name: m.policy for m in matrix_index(matrix_paths(matrices), cache).matrices}
    assert names["demo.yaml"] == "default"


def test_a_matrix_over_the_size_limit_is_refused_before_it_is_read_whole(tmp_path: Path) -> None:
    """The cache key reads a matrix with the loader's limit (``yamldoc.MAX_BYTES``) and refuses a
    larger one with the loader's error: an endless file (a FIFO fed without end, like /dev/zero)
    is not read past the limit."""
    import contextlib
    import os
    import select
    import threading

    from builder.errors import ConfigError
    from builder.textfiles import MAX_BYTES

    fifo = tmp_path / "endless.yaml"
    os.mkfifo(fifo)
    cap, chunk = 4 * MAX_BYTES, b"# " + b"x" * 65533 + b"\n"
    written: list[int] = []
    stop = threading.Event()

    def feed() -> None:
        # Non-blocking writes, polled: a write blocked on a full pipe would wait for ever if a
        # second reader (the release below) opened before the kernel woke it with EPIPE.
        while not stop.is_set():
            fd = os.open(fifo, os.O_WRONLY)  # blocks until a reader opens it
            os.set_blocking(fd, False)
            n = 0
            try:
                while n < cap and not stop.is_set():
                    if select.select([], [fd], [], 0.1)[1]:
                        with contextlib.suppress(BlockingIOError):
                            n += os.write(fd, chunk)
            except BrokenPipeError:
                pass  # the reader stopped reading
            finally:
                written.append(n)
                os.close(fd)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        with pytest.raises(ConfigError, match="larger than"):
            matrix_index([fifo], tmp_path / "cache")
    finally:
        stop.set()
        release = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a writer waiting to open: let it end
        writer.join(timeout=30)
        os.close(release)
    assert written and written[0] < 2 * MAX_BYTES
