"""A matrix that does not load must not stop the commands that only look variants up in the
others (``builder resolve jax...`` while someone else's ``pytorch.yaml`` is broken): the lookups
of the project's matrices (``matrix_names``, ``variant_names``, ``cached_variants``) leave it out
and record it for a warning; files given explicitly, a single file and problems between files
still fail as before."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import pytest

from builder.errors import ConfigError, MatrixError
from builder.matrix import index as matrix_index_module
from builder.matrix import load_matrices, matrix_paths
from builder.matrix.index import cached_variants, matrix_names, take_skipped_matrices, variant_names
from tests.conftest import ROOT

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    """Each test as a new process: nothing read or skipped yet."""
    matrix_index_module._READ.clear()
    matrix_index_module._SKIPPED.clear()
    yield
    matrix_index_module._READ.clear()
    matrix_index_module._SKIPPED.clear()


@pytest.fixture
def matrices(tmp_path: Path) -> Path:
    d = tmp_path / "matrices"
    shutil.copytree(ROOT / "matrices", d)
    return d


BREAKAGES = {
    "yaml": "  bad: [unclosed\n",  # appended: the YAML parser's error
    "schema": "unknown_top_level_field: 1\n",  # appended: the schema's
}


@pytest.mark.parametrize("breakage", [*BREAKAGES, "not utf-8", "folder"])
def test_a_broken_matrix_is_left_out_of_lookups_in_the_others(matrices: Path, tmp_path: Path, breakage: str) -> None:
    broken = matrices / "pytorch.yaml"
    if breakage == "not utf-8":
        broken.write_bytes(broken.read_bytes() + b"# \xff\n")
    elif breakage == "folder":
        broken.unlink()
        broken.mkdir()
    else:
        broken.write_text(broken.read_text() + BREAKAGES[breakage])
    paths = matrix_paths(matrices)
    with pytest.raises((MatrixError, ConfigError)):
        load_matrices(paths)  # what every lookup did: exit 10 (or 2) for everyone
    others = [p for p in paths if p != broken]
    expected = [v for m in load_matrices(others) for v in m.variants]
    cache = tmp_path / "cache"

    names = variant_names(paths, cache)
    assert [n.id for n in names] == [v.id for v in expected]
    assert "jax0.7-cpu-py3.11-debian12" in {n.id for n in names}
    assert not any(n.id.startswith("pytorch") for n in names)
    assert [m.path for m in matrix_names(paths, cache)] == others
    assert [v.id for v in cached_variants(paths, cache)] == [v.id for v in expected]
    ((path, why),) = take_skipped_matrices()
    assert path == broken and why  # said once, with its first problem
    assert take_skipped_matrices() == ()  # taken: the next command says it again only if it skips it again
    if breakage == "folder":
        assert why == f"matrix file {broken} is a folder, not a file"
    if breakage == "yaml":
        assert why.startswith("55:1: not valid YAML") or "not valid YAML" in why


def test_files_given_one_file_and_problems_between_files_still_fail(matrices: Path, tmp_path: Path) -> None:
    broken = matrices / "pytorch.yaml"
    broken.write_text(broken.read_text() + BREAKAGES["yaml"])
    paths = matrix_paths(matrices)
    cache = tmp_path / "cache"
    with pytest.raises(MatrixError, match=r"pytorch\.yaml"):
        variant_names(paths, cache, skip_broken=False)  # --matrix FILE...: each must load
    with pytest.raises(MatrixError, match=r"pytorch\.yaml"):
        matrix_names([broken], cache)  # nothing else to answer from
    assert take_skipped_matrices() == ()
    # one variant id in two readable files: a problem of the set, not of one file
    broken.unlink()
    (matrices / "jax-copy.yaml").write_text((matrices / "jax.yaml").read_text())
    with pytest.raises(MatrixError, match="also produced by"):
        variant_names(matrix_paths(matrices), cache)
    assert take_skipped_matrices() == ()
