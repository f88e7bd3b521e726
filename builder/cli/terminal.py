"""Terminal behaviour of the command line: the console's colour and width, the help width, and
which third-party log lines and warnings reach the user.

Colour follows https://no-color.org/ (``NO_COLOR`` set and not empty: no colour and no other
ANSI styling, whatever else is set) and the ``FORCE_COLOR`` convention
(https://force-color.org/: set and not empty: styled output even when stderr is not a terminal);
otherwise styling only when stderr is a terminal. Width (of tables): ``COLUMNS`` when set (as rich
and ``shutil.get_terminal_size`` read it), else the terminal's, else ``LOG_WIDTH`` for logs and
pipes. Prose (reasons, details) is folded at spaces to that width by :func:`fold`, never inside
a word: a reference, path or digest stays one token to copy, on a line of its own if it is longer.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from rich.console import Console

#: width of human output written to a file or pipe (CI logs) when ``COLUMNS`` is not set
LOG_WIDTH = 160
#: the widest ``--help`` text, in character cells, however wide the terminal (readability)
HELP_MAX_WIDTH = 120


def _set(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "") != ""


CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters other than newline and tab: in text that came from input (a fleet or
cluster name, a registry's error message, a label) they would reach the terminal as escape
sequences (colours, window titles, cursor moves, a carriage return that overwrites the line)."""


def escape_controls(text: str) -> str:
    """``text`` with every :data:`CONTROL_RE` character written visibly (``\x1b`` as ``\\x1b``)."""
    return CONTROL_RE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun`` in the number it takes: ``1 variant``, ``2 variants``, ``0 variants``;
    ``plural`` when it is not ``noun`` + ``s`` (``counted(1, "matrix", "matrices")``)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def fold(text: str, width: int, *, indent: str = "", hang: int = 2) -> str:
    """``text`` folded at spaces into lines of at most ``width`` cells (``width`` at least 40), the
    first after ``indent``, the others after ``indent`` and ``hang`` more spaces; words, hyphenated
    ones included, are never split (a word longer than the line stands alone on its line). Print
    the result with ``soft_wrap=True`` so that rich does not fold it again. Python's textwrap:
    https://docs.python.org/3/library/textwrap.html#textwrap.TextWrapper.break_long_words"""
    import textwrap

    return textwrap.fill(
        text,
        max(40, width),
        initial_indent=indent,
        subsequent_indent=indent + " " * hang,
        break_long_words=False,
        break_on_hyphens=False,
    )


def make_console(environ: Mapping[str, str]) -> Console:
    """The rich console for human output on stderr, configured from ``environ`` (see the module).
    Every piece of text it writes has its control characters escaped (:func:`escape_controls`);
    the escape sequences rich itself emits for styles are kept."""
    from rich.console import Console
    from rich.segment import Segment

    class SafeConsole(Console):
        def _render_buffer(self, buffer: Iterable[Segment]) -> str:
            # rich >= 13: the one place text segments become output; control segments are rich's own
            return super()._render_buffer(
                s if s.control else Segment(escape_controls(s.text), s.style, s.control) for s in buffer
            )

        def on_broken_pipe(self) -> None:
            # the reader of stderr went away (`builder status 2>&1 | head`): raise it on to
            # builder.cli.main, the one place a closed reader is handled (rich's default exits 1);
            # every later write raises too (a write from a progress thread must not silence the
            # main thread's), until main points stderr at /dev/null
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    no_color = _set(environ, "NO_COLOR")
    force = _set(environ, "FORCE_COLOR") and not no_color
    con = SafeConsole(
        stderr=True,
        highlight=False,
        # `:smile:` in text is text: a tag followed by a colon (`jax:x: connection refused`) would
        # otherwise print as an emoji (rich replaces emoji codes wherever markup is rendered)
        emoji=False,
        # lines of text are written whole (the terminal folds them), so a reference or digest is
        # never split into pieces that cannot be copied; tables still fit the width
        soft_wrap=True,
        force_terminal=True if force else None,
        no_color=no_color,
        color_system=None if no_color else "auto",
        _environ=environ,
    )
    if not con.is_terminal and not environ.get("COLUMNS", "").isdigit():
        con.width = LOG_WIDTH
    return con


class _DropHandler(logging.Handler):
    """Swallows records: installed on the root logger so Python's last-resort handler does not
    print third-party warnings (sigstore's "TUF repository is loaded in offline mode", urllib3's
    retries) on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        del record


def quiet_third_parties(debug: bool) -> None:
    """Without ``debug``: third-party log records and Python warnings are not shown; with it,
    Python's defaults (warnings and last-resort WARNING lines on stderr). Idempotent: several
    invocations may share one process (the tests)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _DropHandler)]:
        root.removeHandler(handler)
    if not debug:
        root.addHandler(_DropHandler())
        warnings.filterwarnings("ignore")


__all__ = ["HELP_MAX_WIDTH", "LOG_WIDTH", "counted", "make_console", "quiet_third_parties"]
