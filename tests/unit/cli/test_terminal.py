"""Terminal behaviour: tables that keep ids whole at 80 and 120 columns, help wrapped to the
terminal, colour only where wanted, third-party log lines silenced, shell completion."""

from __future__ import annotations

import io
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from rich.console import Console

from builder.cli.sign import verification_columns
from builder.cli.tables import Column, fitted_table, plan_columns
from tests.conftest import ROOT, Cli

if TYPE_CHECKING:
    from pathlib import Path

LONG_IDS = [
    "torch2.11-cu128-py3.12-ubuntu24.04-linux-amd64-cudnn9",
    "jax0.7-cu128-py3.12-ubuntu24.04",
    "tensorflow2.20-rocm6.4-py3.12-ubuntu24.04",
]
DIGEST = "sha256:0123456789ab"


def _lines_holding(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


@pytest.mark.parametrize("columns", ["80", "120"])
def test_matrix_list_keeps_every_variant_id_whole(cli: Cli, columns: str) -> None:
    ids = [v["id"] for v in cli("matrix", "list", "--json", cwd=ROOT).json()]
    err = cli("matrix", "list", cwd=ROOT, env={"COLUMNS": columns}).stderr
    assert ids
    assert "…" not in err
    assert all(_lines_holding(err, i) for i in ids), [i for i in ids if not _lines_holding(err, i)]
    assert max(len(line) for line in err.splitlines()) <= int(columns)


@pytest.mark.parametrize("width", [80, 120])
def test_status_like_table_keeps_ids_and_digests_whole_and_moves_the_rest(width: int) -> None:
    columns = [
        Column("variant", whole=True),
        Column("stage"),
        Column("digest", whole=True),
        Column("age", 1),
        Column("by", 2),
        Column("sigs", 2),
        Column("attestations", 3),
    ]
    rows = [[i, "staging", DIGEST, "3 d", "ci@example.com", "2", "slsa-provenance, device-check"] for i in LONG_IDS]
    out = io.StringIO()
    Console(file=out, width=width).print(fitted_table(columns, rows, width))
    text = out.getvalue()
    assert "…" not in text
    for i in LONG_IDS:
        assert len(_lines_holding(text, i)) == 1
    assert len(_lines_holding(text, DIGEST)) == len(LONG_IDS)
    assert all(len(line) <= width for line in text.splitlines())
    assert "ci@example.com" in text  # moved or kept, never lost


def test_moved_columns_line_never_splits_a_word() -> None:
    """`builder verify`'s table at 80 columns: a narrow first column (#) that holds the moved
    columns' line gets the room of more moved columns, so "signature (bundle)" wraps by words."""
    columns = verification_columns()
    signer = "k2/builder.pub (SHA256:371044899a64…)"
    rows = [[str(n), "ok", kind, "-", signer, "-"] for n, kind in ((1, "signature"), (2, "signature (bundle)"))]
    out = io.StringIO()
    Console(file=out, width=80).print(fitted_table(columns, rows, 80))
    text = out.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert len(_lines_holding(text, "kind: signature")) == 2 and len(_lines_holding(text, signer)) == 2, text
    assert "when: -" in text  # moved, not lost


def test_plan_moves_lowest_priority_first_and_keeps_all_when_wide() -> None:
    columns = [Column("variant", whole=True), Column("a", 1), Column("b", 2)]
    rows = [["x" * 40, "y" * 20, "z" * 20]]
    assert plan_columns(columns, rows, 200, boxed=True).moved == ()
    assert plan_columns(columns, rows, 60, boxed=True).moved == (2,)
    assert plan_columns(columns, rows, 45, boxed=True).moved == (1, 2)


def test_help_is_wrapped_to_the_terminal_and_capped(cli: Cli) -> None:
    narrow = cli("--help", env={"COLUMNS": "80"}).stdout
    wide = cli("--help", env={"COLUMNS": "200"}).stdout
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert 80 < max(len(line) for line in wide.splitlines()) <= 120


def test_colour_only_when_forced_and_never_with_no_color(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    assert "\x1b[" not in cli("matrix", "list", cwd=ROOT).stderr  # stderr is not a terminal here
    assert "\x1b[" in cli("matrix", "list", cwd=ROOT, env={"FORCE_COLOR": "1"}).stderr
    assert "\x1b[" not in cli("matrix", "list", cwd=ROOT, env={"FORCE_COLOR": "1", "NO_COLOR": "1"}).stderr


@pytest.mark.parametrize("debug", [False, True])
def test_third_party_warnings_silenced_unless_debug(debug: bool) -> None:
    # a fresh interpreter: pytest's own log capture would hide Python's last-resort handler
    program = (
        "import logging, warnings\n"
        "from builder.cli.terminal import quiet_third_parties\n"
        f"quiet_third_parties(debug={debug})\n"
        "logging.getLogger('sigstore._internal.tuf').warning('TUF repository is loaded in offline mode')\n"
        "warnings.warn('a third-party deprecation', DeprecationWarning, stacklevel=1)\n"
    )
    err = subprocess.run(
        [sys.executable, "-W", "default", "-c", program], cwd=ROOT, capture_output=True, text=True, check=True
    ).stderr
    assert ("offline mode" in err) is debug
    assert ("a third-party deprecation" in err) is debug


def test_bash_completion_script_and_command_names(cli: Cli) -> None:
    script = cli(env={"_BUILDER_COMPLETE": "bash_source"}).stdout
    assert "_builder_completion" in script
    assert "complete -o nosort -F _builder_completion builder" in script
    env = {"_BUILDER_COMPLETE": "bash_complete", "COMP_WORDS": "builder sta", "COMP_CWORD": "1"}
    assert cli(env=env).stdout.splitlines() == ["plain,status"]


def _command_paths() -> list[tuple[str, ...]]:
    import click

    from builder.cli import cli as root

    ctx = click.Context(root)
    paths: list[tuple[str, ...]] = []
    for name in root.list_commands(ctx):
        command = root.get_command(ctx, name)
        paths.append((name,))
        if isinstance(command, click.Group):
            paths += [(name, sub) for sub in command.list_commands(ctx)]
    return paths


@pytest.mark.parametrize("path", _command_paths(), ids=" ".join)
def test_every_help_fits_80_columns(cli: Cli, path: tuple[str, ...]) -> None:
    text = cli(*path, "--help", env={"COLUMNS": "80"}, cwd=ROOT).stdout
    assert [line for line in text.splitlines() if len(line) > 80] == []


def test_counts_take_the_number_of_their_noun(cli: Cli, tmp_path: Path) -> None:
    """`rendered 1 variants` read wrong: every count in human output says 1 variant, 2 variants."""
    from builder.cli.terminal import counted

    one = ("--matrix", "matrices/demo.yaml", "--select", "jax0.7-cpu-py3.11-debian12")
    err = cli("render", *one, "--out", str(tmp_path / "r"), cwd=ROOT).stderr
    assert "rendered 1 variant into" in err, err
    err = cli("matrix", "list", *one, cwd=ROOT).stderr
    assert "1 variant from 1 matrix" in err, err
    assert (counted(0, "variant"), counted(2, "matrix", "matrices")) == ("0 variants", "2 matrices")


def test_emoji_codes_in_messages_print_as_written(cli: Cli) -> None:
    """A reference whose tag is followed by a colon (``jax:x: connection refused``) reads like rich's
    emoji codes; messages print as written, never as emoji."""
    err = cli("resolve", "no:smile:here", "--stage", "dev", code=2, cwd=ROOT).stderr
    assert "'no:smile:here'" in err and "\N{SMILING FACE WITH OPEN MOUTH AND SMILING EYES}" not in err


def test_a_squeezed_column_keeps_its_header_words_whole() -> None:
    """A column that folds its cells still shows each word of its header on one line (at 86 columns
    this status-like table printed ``attestatio`` / ``ns``)."""
    columns = [Column(h, whole=True) for h in ("variant", "stage", "digest")]
    columns += [Column("signatures"), Column("attestations")]
    rows = [["jax0.7-cpu-py3.11-debian12", "dev", DIGEST, "-", "-"]]
    out = io.StringIO()
    Console(file=out, width=86).print(fitted_table(columns, rows, 86))
    text = out.getvalue()
    assert "signatures" in text and "attestations" in text, text
