"""Terminal tables that never cut or wrap an id.

``fitted_table(columns, rows, width)`` decides, for one terminal width (in character cells), which
columns stay in the table: every ``whole`` column (variant ids, digests, references) is kept at
its full width, never wrapped and never cut with "…"; the other columns are kept in priority order
while they fit (each needs at least ``min(natural width, FLEX_MIN)`` cells); the columns that do
not fit are moved to a second, dimmed line under the row's first cell (``name: value · ...``),
so nothing is lost. A ``whole`` column that does not fit either is moved, to a line of its own
(folded only where it is longer than the first column: give ids a priority that keeps them).

Rich's table geometry (https://rich.readthedocs.io/en/stable/tables.html): each column has
``padding=(0, 1)``; a boxed table draws one border cell between columns and one at each edge; a
table with ``box=None`` and ``pad_edge=False`` has only the two padding cells between columns.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.measure import Measurement
    from rich.segment import Segment

#: the fewest cells a wrappable column is given before it is moved to the second line
FLEX_MIN = 10
#: the longest word a ``words`` column keeps whole (longer ones, a node's DNS name, fold)
WORD_MAX = 24


@dataclasses.dataclass(frozen=True)
class Column:
    """One column: its ``header``; ``priority`` (0: kept first; higher numbers are moved to the
    second line first; the first column of a table is always kept); ``whole``: an id, digest or
    reference, never wrapped or cut; ``words``: wrapped at spaces only, never inside a word of up
    to ``WORD_MAX`` cells (names such as ``slsa-provenance``, ``(promotion)``)."""

    header: str
    priority: int = 0
    whole: bool = False
    words: bool = False


@dataclasses.dataclass(frozen=True)
class Layout:
    """What ``plan_columns`` decided: ``kept`` and ``moved`` column indexes (table order) and the
    ``first`` column's width in cells (wider than its values when a moved whole value needs it)."""

    kept: tuple[int, ...]
    moved: tuple[int, ...]
    first: int


def plain_width(cell: str) -> int:
    """The widest line of ``cell`` in character cells, rich markup removed."""
    from rich.cells import cell_len
    from rich.text import Text

    return max((cell_len(line) for line in Text.from_markup(cell).plain.splitlines()), default=0)


def header_word(column: Column) -> int:
    """The longest word of ``column``'s header in cells: a wrappable column is never narrower, so
    a header is never split mid-word (``attestatio`` / ``ns``)."""
    return max(map(plain_width, column.header.split()), default=0)


def longest_word(cells: Sequence[str]) -> int:
    """The longest space-separated word of ``cells`` (rich markup) in cells, at most ``WORD_MAX``."""
    from rich.cells import cell_len
    from rich.text import Text

    words = (w for c in cells for w in Text.from_markup(c).plain.split())
    return min(WORD_MAX, max(map(cell_len, words), default=0))


def least_width(column: Column, natural: int, values: Sequence[str] = ()) -> int:
    """The fewest cells ``column`` is kept at, ``natural`` being its widest value or header and
    ``values`` its cells: all of them for a ``whole`` column, else ``min(natural, FLEX_MIN)`` but
    never under its header's longest word nor, for a ``words`` column, its values' longest word
    (``longest_word``). ``plan_columns`` counts this and ``fitted_table`` gives rich the same
    floor: where they differed (10 against 12 for "attestations") the table came out wider than
    planned and the terminal cut its right border off."""
    if column.whole:
        return natural
    least = min(natural, max(FLEX_MIN, header_word(column)))
    return max(least, longest_word(values)) if column.words else least


def overhead(columns: int, *, boxed: bool) -> int:
    """Cells a table of ``columns`` columns uses besides its cell contents."""
    if columns == 0:
        return 0
    return 3 * columns + 1 if boxed else 2 * (columns - 1)


def plan_columns(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int, *, boxed: bool) -> Layout:
    """Which columns fit in ``width`` cells: the first column always; then the others by
    ``priority`` (ties in table order), each at its ``least_width``; what does not fit is moved."""
    natural = [max([plain_width(c.header)] + [plain_width(r[i]) for r in rows]) for i, c in enumerate(columns)]

    def need(i: int) -> int:
        return least_width(columns[i], natural[i], [r[i] for r in rows])

    def moved_line(i: int) -> int:  # a moved whole value, on its own line under the first cell
        return plain_width(columns[i].header) + 2 + max((plain_width(r[i]) for r in rows), default=0)

    first = need(0)
    while True:  # widen the first column until every moved whole value fits on its line
        kept, used = [0], first
        for i in sorted(range(1, len(columns)), key=lambda i: (columns[i].priority, i)):
            if used + need(i) + overhead(len(kept) + 1, boxed=boxed) <= width:
                kept.append(i)
                used += need(i)
        moved = tuple(i for i in range(len(columns)) if i not in kept)
        wanted = max([first] + [moved_line(i) for i in moved if columns[i].whole])
        wanted = min(wanted, width - overhead(1, boxed=boxed))
        if wanted <= first:
            return Layout(tuple(sorted(kept)), moved, first)
        first = wanted


def _first_width(layout: Layout, natural: Sequence[int], width: int, *, boxed: bool) -> int:
    """The first column's width when columns were moved: what the kept ones leave of ``width``."""
    others = sum(natural[i] for i in layout.kept[1:])
    return max(layout.first, width - overhead(len(layout.kept), boxed=boxed) - others)


def room_for_words(
    layout: Layout, columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int, *, boxed: bool
) -> Layout:
    """``layout`` with more columns moved (lowest priority first) while the first cell, which holds
    the moved columns' ``name: value`` line, is narrower than the longest word of that line: words
    there wrap whole, never split in the middle (``signatur`` / ``e``). A ``whole`` column is moved
    only when its own line then fits the first cell."""
    from rich.cells import cell_len
    from rich.text import Text

    natural = [max([plain_width(c.header)] + [plain_width(r[i]) for r in rows]) for i, c in enumerate(columns)]

    def longest_word(moved: Sequence[int]) -> int:
        words = [
            w
            for i in moved
            if not columns[i].whole
            for r in rows
            for w in f"{columns[i].header}: {Text.from_markup(r[i]).plain}".split()
        ]
        return max((cell_len(w) for w in words), default=0)

    def whole_line(i: int) -> int:
        return plain_width(columns[i].header) + 2 + max((plain_width(r[i]) for r in rows), default=0)

    while layout.moved:
        first = _first_width(layout, natural, width, boxed=boxed)
        if first >= longest_word(layout.moved):
            return layout
        for i in sorted(layout.kept[1:], key=lambda i: (-columns[i].priority, -i)):
            kept = tuple(k for k in layout.kept if k != i)
            trial = Layout(kept, tuple(sorted((*layout.moved, i))), layout.first)
            if not columns[i].whole or whole_line(i) <= _first_width(trial, natural, width, boxed=boxed):
                layout = trial
                break
        else:
            return layout
    return layout


def column_widths(
    layout: Layout,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    width: int,
    *,
    first: int,
    fixed: bool,
    boxed: bool,
) -> list[int]:
    """The cells of each kept column (``layout.kept`` order): its natural width, the widest
    wrappable ones narrowed one cell at a time, never under ``least_width``, until the table fits
    ``width``; the first column is ``first`` cells (exactly, when ``fixed``: it holds moved
    columns). Rich's own shrinking (``Table._collapse_widths``) narrows the widest wrappable
    column without regard to ``min_width`` and then widens it back, so a table could come out
    wider than ``width`` and be cut by the terminal."""
    natural = [max([plain_width(c.header)] + [plain_width(r[i]) for r in rows]) for i, c in enumerate(columns)]
    floors, widths = [], []
    for i in layout.kept:
        if i == 0:
            floors.append(first)
            widths.append(first if fixed or columns[0].whole else max(first, natural[0]))
        else:
            floors.append(least_width(columns[i], natural[i], [r[i] for r in rows]))
            widths.append(natural[i])
    excess = sum(widths) + overhead(len(widths), boxed=boxed) - width
    while excess > 0:
        k = max(range(len(widths)), key=lambda k: widths[k] - floors[k])
        if widths[k] <= floors[k]:
            break  # nothing left to narrow (the plan leaves room: never reached)
        widths[k] -= 1
        excess -= 1
    return widths


def fitted_table(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    width: int,
    *,
    title: str | None = None,
    show_lines: bool = False,
    boxed: bool = True,
    indent: int = 0,
) -> Trimmed:
    """A rich ``Table`` of ``rows`` (cells are rich markup) laid out for ``width`` cells by
    ``plan_columns``, with ``title``, lines between rows or not, a box or none (``boxed=False``:
    no borders, no edge padding), each line after ``indent`` spaces and without trailing spaces
    (:class:`Trimmed`)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    natural = [max([plain_width(c.header)] + [plain_width(r[i]) for r in rows]) for i, c in enumerate(columns)]
    layout = room_for_words(plan_columns(columns, rows, width, boxed=boxed), columns, rows, width, boxed=boxed)
    first = layout.first
    if layout.moved:  # the first cell holds the moved columns: give it what the others leave
        first = _first_width(layout, natural, width, boxed=boxed)
    widths = column_widths(layout, columns, rows, width, first=first, fixed=bool(layout.moved), boxed=boxed)
    options: dict[str, Any] = {} if boxed else {"box": None, "pad_edge": False}
    table = Table(title=title, show_lines=show_lines, **options)
    for i, cells_wide in zip(layout.kept, widths, strict=True):  # widths given: rich's own collapse ignores min_width
        c = columns[i]
        if c.whole:
            table.add_column(c.header, no_wrap=True, overflow="ignore", width=cells_wide)
        else:
            table.add_column(c.header, overflow="fold", width=cells_wide)
    for row in rows:
        cells: list[Any] = []
        for i in layout.kept:
            text = Text.from_markup(row[i])
            if columns[i].whole:
                text.no_wrap, text.overflow = True, "ignore"
            cells.append(text)
        moved = [i for i in layout.moved if Text.from_markup(row[i]).plain.strip()]
        short = " · ".join(
            f"{columns[i].header}: {row[i].replace(chr(10), '; ')}" for i in moved if not columns[i].whole
        )
        lines = [short] if short else []
        lines += [f"{columns[i].header}: {row[i]}" for i in moved if columns[i].whole]  # one line each
        if lines:
            second = Text.from_markup("[dim]" + "\n".join(lines) + "[/]")
            second.no_wrap, second.overflow = False, "fold"
            cells[0] = Group(cells[0], second)
        table.add_row(*cells)
    return Trimmed(table, indent)


@dataclasses.dataclass(frozen=True)
class Trimmed:
    """A rich renderable printed line by line, each line after ``indent`` spaces and cut after its
    last visible character: rich pads every table cell to its column's width (and ``Padding`` pads
    lines to the terminal's), which left trailing spaces on every unboxed row (``builder history``).
    Rich's render protocol: https://rich.readthedocs.io/en/stable/protocol.html"""

    renderable: RenderableType
    indent: int = 0

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        from rich.segment import Segment

        inner = options.update_width(max(1, options.max_width - self.indent))
        for line in console.render_lines(self.renderable, inner, pad=False):
            kept = list(line)
            while kept and not kept[-1].control and not kept[-1].text.rstrip():
                kept.pop()
            if kept and not kept[-1].control:
                last = kept[-1]
                kept[-1] = Segment(last.text.rstrip(), last.style, last.control)
            if kept and self.indent:
                yield Segment(" " * self.indent)
            yield from kept
            yield Segment.line()

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        from rich.measure import Measurement

        inner = Measurement.get(console, options.update_width(max(1, options.max_width - self.indent)), self.renderable)
        return Measurement(inner.minimum + self.indent, inner.maximum + self.indent)


def to_seconds(time: str) -> str:
    """An RFC 3339 UTC time for a table cell, to the second: ``2026-12-02T01:13:45.123456Z`` ->
    ``2026-12-02T01:13:45Z`` (20 cells; ``--json`` keeps the full value); other text unchanged."""
    head, dot, rest = time.partition(".")
    return f"{head}Z" if dot and rest.endswith("Z") and rest[:-1].isdigit() else time


__all__ = [
    "FLEX_MIN",
    "WORD_MAX",
    "Column",
    "Layout",
    "column_widths",
    "fitted_table",
    "header_word",
    "least_width",
    "longest_word",
    "overhead",
    "plain_width",
    "plan_columns",
    "room_for_words",
    "to_seconds",
]
