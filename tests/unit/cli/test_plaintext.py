"""builder.cli.plaintext: the lines builder writes itself when stderr is no terminal are the bytes
rich writes for the same call (markup, escapes, control characters, options), compared on text
generated to hit tags, backslashes and brackets; anything else goes to rich itself."""

from __future__ import annotations

import contextlib
import io
import sys
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.errors import MarkupError
from rich.markup import escape as rich_escape

from builder.cli.plaintext import HumanConsole, escape, markup_text
from builder.cli.terminal import make_console

if TYPE_CHECKING:
    from collections.abc import Callable

#: pieces that make tags, escapes and near-tags likely; plus controls, tabs, wide characters
PIECES = st.sampled_from(
    ["[", "]", "/", "\\", "@", "=", "#", " ", "a", "b", "red", "bold", "dim", "[/]", "[red]", "[/red]",
     "[b]", "[/b]", "[Bold]", "[/bold ]", "[@click]", "[link=https://x.y/]", "[#ff0000]", "[on blue]",
     "\t", "\n", "\r", "\x1b", "\x7f", "é", "界", "x86_64", "[[gpu]]", "sha256:ab", ":smile:"]
)  # fmt: skip
TEXT = st.lists(PIECES, max_size=12).map("".join)
NOT_A_TERMINAL = {"NO_COLOR": "1", "TTY_COMPATIBLE": "0"}


def _stderr_of(call: Callable[[], None]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stderr(out):
        call()
    return out.getvalue()


def _rich_line(text: str, **options: object) -> str | None:
    """What rich's console (builder's settings) writes for ``print(text, **options)``; None when
    rich refuses the markup."""
    con = make_console(NOT_A_TERMINAL)
    try:
        return _stderr_of(lambda: con.print(text, **options))  # type: ignore[arg-type]
    except MarkupError:
        return None


@settings(max_examples=400, deadline=None)
@given(TEXT)
def test_markup_prints_as_rich_prints_it(text: str) -> None:
    ours = markup_text(text)
    theirs = _rich_line(text)
    if theirs is None:
        assert ours is None, f"rich refuses {text!r}; the plain path must leave it to rich"
    else:
        printed = _stderr_of(lambda: HumanConsole(NOT_A_TERMINAL).print(text))
        assert printed == theirs


@settings(max_examples=200, deadline=None)
@given(TEXT, st.sampled_from([{}, {"markup": False}, {"highlight": False}, {"style": "dim"}, {"end": ""}]))
def test_options_and_escaped_text_print_as_rich_prints_them(text: str, options: dict[str, object]) -> None:
    line = f"[green]ok[/] {escape(text)}"
    assert escape(text) == rich_escape(text)
    for shown in (line, text):
        theirs = _rich_line(shown, **options)
        if theirs is not None:
            assert _stderr_of(lambda s=shown: HumanConsole(NOT_A_TERMINAL).print(s, **options)) == theirs  # type: ignore[misc]


def test_plain_lines_do_not_import_rich_and_the_rest_does() -> None:
    """In a fresh interpreter: text lines leave rich unimported; a table makes the rich console."""
    program = (
        "import sys\n"
        "from builder.cli.plaintext import HumanConsole\n"
        "con = HumanConsole({})\n"
        "con.print('[green]promoted[/] x -> y', highlight=False)\n"
        "con.print('  [pass] source', markup=False)\n"
        "print(any(m == 'rich' or m.startswith('rich.') for m in sys.modules), con.width)\n"
        "from rich.table import Table\n"
        "con.print(Table('a'))\n"
        "print(any(m == 'rich.console' for m in sys.modules))\n"
    )
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "160", "True"]
    assert proc.stderr.startswith("promoted x -> y\n  [pass] source\n")


@pytest.mark.parametrize(
    ("environ", "terminal"),
    [
        ({"TTY_COMPATIBLE": "1"}, True),
        ({"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"}, True),  # builder's console forces it
        ({"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, True),
        ({"FORCE_COLOR": "1"}, True),
        ({"FORCE_COLOR": ""}, False),
        ({}, False),  # pytest's captured stderr is no terminal
    ],
)
def test_what_is_a_terminal_is_riches_answer(environ: dict[str, str], terminal: bool) -> None:
    assert HumanConsole(environ).is_terminal is terminal
    assert make_console(environ).is_terminal is terminal


def test_a_terminal_gets_riches_styles() -> None:
    con = HumanConsole({"FORCE_COLOR": "1", "COLUMNS": "100"})
    printed = _stderr_of(lambda: con.print("[green]promoted[/] x"))
    assert "\x1b[" in printed and printed.endswith("promoted\x1b[0m x\n")
    assert con.width == 100


def test_quiet_prints_nothing_either_way() -> None:
    con = HumanConsole(NOT_A_TERMINAL)
    con.quiet = True
    assert _stderr_of(lambda: con.print("plain")) == ""
    assert con.rich.quiet
