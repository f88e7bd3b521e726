"""Every file a command writes where the user said (``sbom -o``, ``report --svg``, ``keys ...
--output-dir``, ``render --out``) goes through :mod:`builder.outputs`: missing folders are
created (as ``report --svg`` always did), and a path that cannot be written is a clean exit 8
naming the path and the option - never a FileNotFoundError / NotADirectoryError traceback.
The registry-backed commands (sbom, report) are tested in tests/integration/test_newcomer_reports.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from builder.errors import NotFoundError
from builder.outputs import write_output
from tests.conftest import ROOT

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli


def test_missing_folders_are_created(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "sbom.json"
    write_output(target, "{}\n", "--output")
    assert target.read_text() == "{}\n"


def test_a_file_in_the_way_is_exit_8_naming_the_path(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotFoundError) as info:
        write_output(tmp_path / "file" / "sbom.json", "{}", "--output")
    assert str(tmp_path / "file" / "sbom.json") in info.value.message and "--output" in info.value.message
    assert "a file is there where a folder is needed" in info.value.message


@pytest.mark.parametrize(
    "args",
    [
        ("keys", "generate", "--no-password", "--output-dir", "{blocked}/keys"),
        ("render", "--matrix", "matrices/demo.yaml", "--out", "{blocked}/rendered"),
    ],
)
def test_every_output_option_is_a_clean_exit_8(cli: Cli, tmp_path: Path, args: tuple[str, ...]) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    argv = [a.format(blocked=blocked) for a in args]
    result = cli(*argv, code=8, cwd=ROOT, env={"BUILDER_STATE_DIR": str(tmp_path / "state")})
    assert str(blocked) in result.stderr and "Traceback" not in result.stderr
    error = cli(*argv, "--json", code=8, cwd=ROOT, env={"BUILDER_STATE_DIR": str(tmp_path / "state")}).json()["error"]
    assert error["kind"] == "not-found" and str(blocked) in error["details"]["path"]


def test_keys_generate_creates_missing_folders(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "new" / "dir"
    cli("keys", "generate", "--no-password", "--output-dir", str(out), cwd=ROOT)
    assert (out / "builder.key").exists() and (out / "builder.pub").exists()
