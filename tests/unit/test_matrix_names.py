"""What ``builder resolve VARIANT`` and the promotion commands' default policy need of the
matrices, read from the matrix index without decoding a variant (issue 19: no work per variant
of the project at start-up): the same ids, repositories and names a full load gives, the index
filled on a miss, and a stored variant without string names answered as the decoded index answers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from builder.matrix import index as matrix_index_module
from builder.matrix import load_matrices, matrix_paths
from builder.matrix.index import IndexedVariant, matrix_index, matrix_names, variant_names
from tests.conftest import ROOT

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def matrices(tmp_path: Path) -> Path:
    d = tmp_path / "matrices"
    shutil.copytree(ROOT / "matrices", d)
    return d


def test_names_are_what_loading_gives(matrices: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    loaded = load_matrices(matrix_paths(matrices))
    expected = tuple(IndexedVariant(v.id, v.repository) for m in loaded for v in m.variants)
    assert len(expected) > 10
    assert variant_names(matrix_paths(matrices), cache) == expected  # a miss: the index is built
    assert len(list(cache.glob("variants-*.json"))) == 1
    matrix_index_module._READ.clear()  # a new process: nothing read yet
    assert variant_names(matrix_paths(matrices), cache) == expected  # a hit: read back
    assert matrix_names(matrix_paths(matrices), cache) == matrix_index(matrix_paths(matrices), cache).matrices
    assert variant_names(matrix_paths(matrices), None) == expected  # no cache: loaded


def test_a_hit_decodes_no_variant(matrices: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    matrix_index(matrix_paths(matrices), cache)
    program = (
        "import sys\n"
        "from pathlib import Path\n"
        "from builder.matrix import matrix_paths\n"
        "from builder.matrix.index import matrix_names, variant_names\n"
        f"d, c = Path({str(matrices)!r}), Path({str(cache)!r})\n"
        "print(len(variant_names(matrix_paths(d), c)), len(matrix_names(matrix_paths(d), c)))\n"
        "print('builder.models' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, check=True)
    counts, decoded = out.stdout.split("\n")[:2]
    assert int(counts.split()[0]) > 10
    assert decoded == "False", "a variant was decoded to name it"


def test_a_stored_variant_without_string_names_is_answered_as_the_decoded_index(matrices: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    variant_names(matrix_paths(matrices), cache)
    [file] = cache.glob("variants-*.json")
    doc = json.loads(file.read_text())
    doc["variants"][0]["id"] = 7  # not a string: a cache written by something else
    file.write_text(json.dumps(doc))
    matrix_index_module._READ.clear()  # a new process: nothing read yet
    names = variant_names(matrix_paths(matrices), cache)
    decoded = matrix_index(matrix_paths(matrices), cache).variants
    assert names == tuple(IndexedVariant(v.id, v.repository) for v in decoded)  # one answer, either way
    assert names[0].id == 7
