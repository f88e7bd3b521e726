"""The project's YAML documents (matrices, policies, fleets): read with locations, and their
validation problems, each defined once.

:func:`parse` reads a document round-trip (ruamel.yaml keeps the line and column of every key and
item); :meth:`Document.position` finds the place of a field path and :meth:`Document.plain` gives
the plain data that the pydantic schemas validate.

Every loader collects all problems of a document before it fails (promo-tools style), each with
its place: the file, the 1-based line and column (0 when unknown), and the path of the field in
the document (``stages.prod.approvals.count``). Commands print them as ``file:line:col: path:
message`` and ``--json`` as :meth:`Problem.to_json`, the same shape for every kind of document.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from builder.textfiles import MAX_BYTES  # the read limit; a longer text is refused by parse too

if TYPE_CHECKING:
    # the JSON shape (typing_extensions): not imported to read a file or report a problem (issue 19)
    from builder.error_documents import ProblemDocument, Severity


@dataclasses.dataclass(frozen=True)
class Problem:
    """One validation problem.

    ``file``: the document as the user named it; ``line``/``col``: 1-based, 0 when unknown;
    ``path``: dotted field path in the document (empty for the document itself); ``message``:
    what is wrong and what to do; ``severity``: ``error`` fails the load, ``warning`` does not.
    """

    file: str
    line: int
    col: int
    path: str
    message: str
    severity: Severity = "error"

    @property
    def location(self) -> str:
        """``file:line:col`` (``file:line`` without a column, ``file`` without a line)."""
        if not self.line:
            return self.file
        return f"{self.file}:{self.line}:{self.col}" if self.col else f"{self.file}:{self.line}"

    def to_json(self) -> ProblemDocument:
        """The one JSON shape of a problem (``docs/schemas/problem.json``)."""
        return {
            "file": self.file,
            "line": self.line,
            "col": self.col,
            "path": self.path,
            "message": self.message,
            "severity": self.severity,
        }

    def __str__(self) -> str:
        where = f"{self.location}: {self.path}" if self.path else self.location
        return f"{where}: {self.message}" + (" (warning)" if self.severity == "warning" else "")


def errors(problems: list[Problem] | tuple[Problem, ...]) -> list[Problem]:
    """Only the problems that fail a load (severity ``error``)."""
    return [p for p in problems if p.severity == "error"]


#: A field's path in a document: keys and list indices from the root (``("axes", "python", 1)``).
FieldPath = tuple[str | int, ...]


def path_text(path: Sequence[str | int]) -> str:
    """``("axes", "accelerator", 0, "version")`` -> ``axes.accelerator[0].version`` (``""``: the document)."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out


class InvalidYaml(Exception):
    """The text is not YAML; ``problem`` says where (the parser's mark) and why."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(str(problem))
        self.problem = problem


@dataclasses.dataclass(frozen=True)
class Document:
    """One YAML document: ``file`` as the user named it, ``root`` the round-trip tree."""

    file: str
    root: object

    def position(self, path: Sequence[str | int], default: tuple[int, int] = (1, 0)) -> tuple[int, int]:
        """1-based ``(line, col)`` of the deepest node of ``path`` that exists (its key in a
        mapping, its item in a list); ``default`` when not even the first part exists."""
        node, best = self.root, default
        for part in path:
            child = _child(node, part)
            if child is _MISSING:
                break
            best = _mark(node, part) or best
            node = child
        return best

    def problem(
        self,
        path: Sequence[str | int],
        message: str,
        severity: Severity = "error",
        *,
        default: tuple[int, int] = (1, 0),
    ) -> Problem:
        """A problem at ``path`` of this document (``default``: its place when no node of the path exists)."""
        line, col = self.position(path, default)
        return Problem(self.file, line, col, path_text(path), message, severity)

    def plain(self) -> object:
        """The document as plain dicts (string keys), lists and scalars (bool, int, float, str, None)."""
        return plain(self.root)


_MISSING = object()


def _child(node: object, part: str | int) -> object:
    """``node[part]`` for a mapping key or an in-range list index; ``_MISSING`` otherwise."""
    if isinstance(node, Mapping):
        return node.get(part, _MISSING)
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return _MISSING


def _mark(node: object, part: str | int) -> tuple[int, int] | None:
    """1-based (line, col) ruamel recorded for ``part`` of ``node`` (None: not recorded)."""
    lc = getattr(node, "lc", None)  # ruamel's line/column record of a CommentedMap / CommentedSeq
    if lc is None:
        return None
    try:
        line, col = lc.item(part) if isinstance(node, list) else lc.key(part)
    except (KeyError, IndexError, TypeError, AttributeError):  # merged keys, tags: no record
        return None
    return int(line) + 1, int(col) + 1


def plain(node: object) -> object:
    """A round-trip (sub)tree as plain dicts (string keys), lists and scalars (bool, int, float, str, None)."""
    if isinstance(node, Mapping):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    for kind in (int, float, str):  # ruamel's ScalarInt, ScalarFloat, quoted strings: plain values
        if isinstance(node, kind):
            return kind(node)
    return node


MAX_NODES = 200_000
"""The most nodes a document may have with every alias expanded (its size as plain data). A
"billion laughs" alias bomb (https://en.wikipedia.org/wiki/Billion_laughs_attack) is a few hundred
bytes whose expansion has billions of nodes: refused before anything walks it."""


def expanded_size(root: object, limit: int = MAX_NODES) -> int | None:
    """Nodes of ``root`` with every alias expanded (shared subtrees counted once per reference),
    in time linear in the distinct nodes; None when the tree refers to itself (a recursive alias)
    or the count exceeds ``limit`` (counting stops there)."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: object) -> int | None:
        if not isinstance(node, (Mapping, list)):
            return 1
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            return None
        active.add(key)
        total = 1
        children = [*node.keys(), *node.values()] if isinstance(node, Mapping) else node
        for child in children:
            n = size(child)
            if n is None:
                return None
            total += n
            if total > limit:
                return None
        active.discard(key)
        sizes[key] = total
        return total

    try:
        return size(root)
    except RecursionError:  # nesting deeper than Python's stack: as unusable as a bomb
        return None


def parse(text: str, file: str) -> Document:
    """``text`` read round-trip. Raises :class:`InvalidYaml` with the parser's line and column, or
    for a text over :data:`MAX_BYTES` or one whose aliases expand past :data:`MAX_NODES` nodes (or
    refer to themselves)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    if len(text) > MAX_BYTES:
        raise InvalidYaml(Problem(file, 0, 0, "", f"larger than the {MAX_BYTES // (1024 * 1024)} MiB limit"))
    try:
        root = YAML(typ="rt", pure=True).load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        raise InvalidYaml(Problem(file, line, col, "", f"not valid YAML: {getattr(exc, 'problem', exc)}")) from exc
    except RecursionError as exc:
        raise InvalidYaml(Problem(file, 0, 0, "", "nested too deeply to read")) from exc
    if expanded_size(root) is None:
        raise InvalidYaml(
            Problem(
                file,
                0,
                0,
                "",
                f"its aliases expand to more than {MAX_NODES} nodes or refer to themselves "
                "(a YAML alias bomb?): write the values out or use fewer aliases",
            )
        )
    return Document(file, root)
