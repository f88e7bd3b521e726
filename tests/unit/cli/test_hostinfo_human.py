"""`builder hostinfo --from FILE` for people at 80 columns: the GPUs are a fitted table (builder.cli.tables),
every line within the width, names whole (the GPU lines were about 100 characters)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.conftest import ROOT

if TYPE_CHECKING:
    from tests.conftest import Cli

# real recorded outputs (each file names its public source): an H200 host's nvidia-smi -q, and
# rocm-smi of an 8 x MI300X host
RECORDED = ["tests/data/h200/nvidia-smi-q.txt", "tests/data/rocm-smi/rocm-smi-05.txt"]


@pytest.mark.parametrize("path", RECORDED)
def test_gpu_table_fits_80_columns(cli: Cli, path: str) -> None:
    doc = cli("hostinfo", "--from", str(ROOT / path), "--json").json()
    human = cli("hostinfo", "--from", str(ROOT / path), env={"COLUMNS": "80"}).stderr
    lines = human.splitlines()
    table = [line for line in lines if not line.startswith(("vendor:", "note:", "engine:", "container toolkit"))]
    assert table and max(len(line.rstrip()) for line in table) <= 80, human
    for gpu in doc["gpus"]:
        assert any(gpu["name"] in line for line in table), human  # whole, never cut
    assert any(line.split()[:2] == ["GPU", "name"] for line in table)  # one header, not a line per GPU
