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


@pytest.mark.parametrize(
    ("args", "code", "wrong"),
    [
        # a file where a folder is named (`render --out README.md`): Click's own check said 2
        (("render", "--matrix", "matrices/demo.yaml", "--out", "{file}"), 8, "is a file; '--out' names a folder"),
        (("keys", "generate", "--no-password", "--output-dir", "{file}"), 8, "'--output-dir' names a folder"),
        (("-C", "{file}", "matrix", "list"), 8, "names a folder"),
        # a folder where a file is named
        (("policy", "validate", "{dir}"), 8, "is a folder; the argument FILES names a file"),
        (("sbom", "127.0.0.1:5000/ml/jax:x", "-o", "{dir}"), 8, "'--output' / '-o' names a file"),
        (("report", "jax0.7-cpu-py3.11-debian12", "--svg", "{dir}"), 8, "'--svg' names a file"),
        (("verify", "127.0.0.1:5000/ml/jax:x", "--key", "{dir}"), 16, "'--key' names a file"),  # keys: 16
        (("sign", "127.0.0.1:5000/ml/jax:x", "--key", "{dir}"), 16, "'--key' names a file"),
        # a path that must exist and does not
        (("-C", "{missing}", "matrix", "list"), 8, "does not exist (given as '-C' / '--root')"),
    ],
)
def test_a_wrong_path_on_the_command_line_is_its_documented_code_naming_path_and_option(
    cli: Cli, tmp_path: Path, args: tuple[str, ...], code: int, wrong: str
) -> None:
    """docs/exit-codes.md: a path given on the command line that is wrong is 8 (16 for a key)
    naming the path and the option, before any work - never Click's usage error 2."""
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    paths = {"file": tmp_path / "file", "dir": tmp_path / "dir", "missing": tmp_path / "missing"}
    argv = [a.format(**paths) for a in args]
    error = cli(*argv, "--json", code=code, cwd=ROOT).json()["error"]
    assert wrong in error["message"] and str(tmp_path) in error["message"], error
    assert error["details"]["path"].startswith(str(tmp_path))


def test_every_path_parameter_is_checked_by_builder() -> None:
    """Every path option or argument of every command is a PathParam (its checks raise the
    documented builder error), none a bare click.Path whose checks exit 2."""
    import click

    from builder.cli import COMMANDS, cli
    from builder.cli._common import PathParam

    def params(command: click.Command, path: str) -> list[tuple[str, click.Parameter]]:
        found = [(path, p) for p in command.params]
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                found += params(sub, f"{path} {name}")
        return found

    found = params(cli, "builder")
    for name in COMMANDS:
        if COMMANDS[name][0].startswith("builder.cli.check:"):
            continue  # hostinfo/check/diagnose: builder.cli.check (another owner) reads its own files
        command = cli.get_command(click.Context(cli), name)
        assert command is not None
        found += params(command, f"builder {name}")
    bare = [
        f"{where} {p.name}"
        for where, p in found
        if isinstance(p.type, click.Path) and not isinstance(p.type, PathParam)
    ]
    assert bare == []
