"""Human output on stderr without importing rich when nothing would be styled.

rich (https://rich.readthedocs.io/en/stable/console.html) costs about 30 ms of CPU to import
(``rich.console`` and the text, style, segment and colour modules it pulls in), more than all of
builder's own promotion logic in ``builder promote --confirm`` (issue 19). Most human output is
lines of text with console markup (``[green]promoted[/] ...``), and when stderr is a pipe or a
file (CI logs, scripts, the benchmarks) rich writes them with every tag removed and no escape
sequence. :class:`HumanConsole` writes such lines itself and builds the rich console
(:func:`builder.cli.terminal.make_console`) only for what needs it: a terminal (colour, live
progress, terminal width), a renderable that is not a string (tables), an option it does not
handle, or markup it does not parse the way rich does (an ``@`` meta tag, a closing tag that does
not plainly match an open one: rich then raises its ``MarkupError``).

What counts as a terminal is the rich console's answer: ``FORCE_COLOR`` not empty without
``NO_COLOR`` forces one (``make_console``), else rich's own rule (``Console.is_terminal``, rich
13-15: https://github.com/Textualize/rich/blob/master/rich/console.py): ``TTY_COMPATIBLE``
``1``/``0`` first, then ``FORCE_COLOR`` set (a terminal unless empty, https://force-color.org/),
else ``isatty()`` of stderr. Markup is parsed as ``rich.markup`` does
(https://rich.readthedocs.io/en/stable/markup.html): a tag is ``[`` + a letter, ``#``, ``/`` or
``@`` + text without ``[`` + ``]``; an odd number of backslashes before it escapes it (printed
without one backslash), an even number prints half of them; ``\\[`` elsewhere is ``[``.
``tests/unit/cli/test_plaintext.py`` compares this output with rich's on generated text.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from typing import TYPE_CHECKING

from builder.cli.terminal import LOG_WIDTH, escape_controls

if TYPE_CHECKING:
    from collections.abc import Mapping

    from rich.console import Console

#: rich.markup's tag pattern (``RE_TAGS``): backslashes, then ``[name]``/``[name=value]``
_TAG = re.compile(r"((\\*)\[([a-z#/@][^[]*?)])")

#: rich.markup's pattern of what ``escape`` protects: backslashes, then a tag
_ESCAPABLE = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")

#: what rich's ``Text`` drops from any text it holds (``rich.control.STRIP_CONTROL_CODES``: bell,
#: backspace, vertical tab, form feed, carriage return) before builder's console escapes the rest
_STRIPPED = dict.fromkeys((7, 8, 11, 12, 13))

#: ``print`` options the plain path takes: they change nothing in unstyled, soft-wrapped text
#: (``highlight`` and ``style`` only add colour; ``soft_wrap=True`` is the console's default)
_PLAIN_OPTIONS = frozenset({"markup", "highlight", "style", "soft_wrap", "sep", "end"})


def escape(text: str) -> str:
    """``text`` with every ``[...]`` that markup would read as a tag escaped (and the backslashes
    before it doubled, a trailing single backslash too), so it prints as written: rich's
    ``rich.markup.escape`` (https://rich.readthedocs.io/en/stable/markup.html#escaping), without
    importing rich."""
    text = _ESCAPABLE.sub(lambda m: f"{m.group(1)}{m.group(1)}\\{m.group(2)}", text)
    if text.endswith("\\") and not text.endswith("\\\\"):
        return text + "\\"
    return text


def markup_text(markup: str) -> str | None:
    """The text rich prints for console ``markup`` with every style dropped: tags removed, escapes
    resolved; None when the markup holds what only rich decides (an ``@`` meta tag, a closing tag
    that matches no open tag by its lower-cased name: rich may match it after normalizing the
    style, or raise ``MarkupError``)."""
    if "[" not in markup:
        return markup
    out: list[str] = []
    opened: list[str] = []
    position = 0
    for match in _TAG.finditer(markup):
        full, escapes, tag = match.groups()
        start, end = match.span()
        if start > position:
            out.append(markup[position:start].replace("\\[", "["))
        position = end
        if escapes:
            backslashes, escaped = divmod(len(escapes), 2)
            out.append("\\" * backslashes)
            if escaped:
                out.append(full[len(escapes) :].replace("\\[", "["))
                continue
        name = tag.partition("=")[0]
        if name.startswith("@"):
            return None
        if not name.startswith("/"):
            opened.append(name.strip().lower())
            continue
        closing = name[1:].strip().lower()
        if not closing:
            if not opened:
                return None
            opened.pop()
        elif closing in opened:
            del opened[len(opened) - 1 - opened[::-1].index(closing)]
        else:
            return None
    if position < len(markup):
        out.append(markup[position:].replace("\\[", "["))
    return "".join(out)


class HumanConsole:
    """The console of builder's human output (stderr, :func:`builder.cli._common.console`): plain
    lines written directly while stderr is no terminal, everything else by the rich console it
    makes on first need (:attr:`rich`). ``environ``: where colour and width come from (read at each
    call, as rich reads it). Text is written with its control characters escaped
    (:func:`builder.cli.terminal.escape_controls`), as the rich console writes it."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        self._rich: Console | None = None
        self._quiet = False
        self._lock = threading.Lock()  # one line at a time from the progress threads (as rich's lock)

    @property
    def rich(self) -> Console:
        """The rich console (made on first use, with this console's ``quiet``)."""
        if self._rich is None:
            from builder.cli.terminal import make_console

            self._rich = make_console(self._environ)
            self._rich.quiet = self._quiet
        return self._rich

    @property
    def quiet(self) -> bool:
        """True: print nothing (stderr's reader went away)."""
        return self._quiet

    @quiet.setter
    def quiet(self, value: bool) -> None:
        self._quiet = value
        if self._rich is not None:
            self._rich.quiet = value

    @property
    def is_terminal(self) -> bool:
        """Whether stderr is a terminal, as the rich console answers it: ``FORCE_COLOR`` set and
        ``NO_COLOR`` not (``make_console`` forces a terminal), else rich's rule (the module's docstring)."""
        if self._environ.get("FORCE_COLOR", "") != "" and self._environ.get("NO_COLOR", "") == "":
            return True
        tty = self._environ.get("TTY_COMPATIBLE", "")
        if tty in ("0", "1"):
            return tty == "1"
        force = self._environ.get("FORCE_COLOR")
        if force is not None:
            return force != ""
        isatty = getattr(sys.stderr, "isatty", None)
        try:
            return bool(isatty is not None and isatty())
        except ValueError:  # closed at interpreter exit (rich answers False too)
            return False

    @property
    def width(self) -> int:
        """Character cells per line: ``COLUMNS`` when it is a number, else :data:`LOG_WIDTH` when
        stderr is no terminal (:func:`builder.cli.terminal.make_console`), else the terminal's."""
        if self._rich is None and not self.is_terminal:
            columns = self._environ.get("COLUMNS", "")
            return int(columns) if columns.isdigit() else LOG_WIDTH
        return self.rich.width

    def print(self, *objects: object, **options: object) -> None:
        """``rich.console.Console.print``: strings in plain text when stderr is no terminal (the
        options in ``_PLAIN_OPTIONS``, ``soft_wrap`` not False), else through :attr:`rich`.
        Raises rich's ``MarkupError`` for markup rich refuses, BrokenPipeError when stderr's reader
        went away."""
        if self._quiet:
            return
        text = self._plain(objects, options)
        if text is None:
            self.rich.print(*objects, **options)  # type: ignore[arg-type]  # rich's own keywords
            return
        end = options.get("end", "\n")
        line = escape_controls(text.translate(_STRIPPED)) + (end if isinstance(end, str) else "\n")
        with self._lock:
            sys.stderr.write(line)
            sys.stderr.flush()  # as rich's console does after each print (a line without its end too)

    def _plain(self, objects: tuple[object, ...], options: Mapping[str, object]) -> str | None:
        """The plain text of ``objects`` (None: rich must print them)."""
        if not options.keys() <= _PLAIN_OPTIONS or options.get("soft_wrap", True) is False:
            return None
        if not all(isinstance(o, str) for o in objects) or self.is_terminal:
            return None
        sep = options.get("sep", " ")
        if not isinstance(sep, str) or not isinstance(options.get("end", "\n"), str):
            return None
        texts: list[str] = []
        for o in objects:
            assert isinstance(o, str)
            text = o if options.get("markup") is False else markup_text(o)
            if text is None:
                return None
            texts.append(text)
        joined = sep.join(texts)
        return None if "\t" in joined else joined  # rich expands tabs to cell positions


def human_console() -> HumanConsole:
    """A :class:`HumanConsole` on this process's environment."""
    return HumanConsole(os.environ)
