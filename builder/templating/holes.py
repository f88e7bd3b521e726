"""Which sections of a template can be cached *with holes* (:mod:`builder.templating`): a static
check of a section's syntax tree that its volatile values (the variant id, the label list) are only
printed as they are, never tested, filtered, passed to a call or captured.

A value printed by ``{{ path }}`` is a hole of kind -1; a ``{% for a, b in path %}`` loop (no
``if`` filter, not recursive, items unpacked into names that are only printed, ``loop`` read only
by position: ``first``, ``last``, ``index``, ``length`` and the like) makes ``path`` a hole of kind
0 (a list of strings) or k (a list of k-string lists). Jinja's syntax tree
(https://jinja.palletsprojects.com/en/3.1.x/api/#the-meta-api, ``jinja2.nodes``) is walked with
``Node.iter_child_nodes``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jinja2 import nodes

if TYPE_CHECKING:
    import jinja2

#: A variable path: the variable's name, then (is_attribute, name) steps (``a.b`` / ``a["b"]``).
Path = tuple[Any, ...]

#: ``loop`` attributes that depend only on the number of items and the position (not on an item)
_LOOP_SHAPE = frozenset({"first", "last", "index", "index0", "revindex", "revindex0", "length"})
#: Statements whose output goes to the section's text as it is (others, such as ``filter``,
#: ``set`` blocks, macros and ``call``, capture or transform it)
_PASS_THROUGH = (nodes.Output, nodes.If, nodes.For, nodes.Block)


def verbatim_output(env: jinja2.Environment) -> bool:
    """Whether ``{{ s }}`` prints a string ``s`` as it is (no ``finalize``, no autoescaping)."""
    return env.finalize is None and env.autoescape is False


def lookups(node: nodes.Node) -> tuple[nodes.Node, tuple[tuple[bool, str], ...]]:
    """``node`` split into what it looks up in and its constant lookups, first one first:
    ``a.b["c"]`` -> (the node ``a``, ((True, "b"), (False, "c"))); (``node``, ()) for no lookup."""
    steps: list[tuple[bool, str]] = []
    while True:
        if isinstance(node, nodes.Getattr):
            steps.append((True, node.attr))
            node = node.node
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
            steps.append((False, node.arg.value))
            node = node.node
        else:
            return node, tuple(reversed(steps))


def _path_of(node: nodes.Node) -> Path | None:
    """The variable path an expression reads (``a.b["c"]``), or None when it is not one."""
    base, steps = lookups(node)
    return (base.name, *steps) if isinstance(base, nodes.Name) and base.ctx == "load" else None


def holes(
    body: list[nodes.Node], paths: frozenset[Path], volatile: frozenset[Path]
) -> tuple[tuple[Path, int], ...] | None:
    """The holes of a section whose volatile ``paths`` it only prints (module docstring), each
    ``(path, kind)`` in the order :meth:`_Section.fill` reads them; None when a volatile value is
    used any other way (the section then renders every time)."""
    if not paths <= volatile:
        return None  # a part or a container of a volatile value is read
    planner = _HolePlanner(paths)
    if not all(planner.visit(n, True, frozenset(), False) for n in body):
        return None
    return tuple(sorted(planner.kinds.items(), key=repr))


class _HolePlanner:
    """Walks a section's syntax tree (see :func:`holes`). In :meth:`visit`, ``verbatim``: an output
    there reaches the section's text as it is; ``printed``: the loop variables holding a hole's
    strings; ``in_loop``: inside a loop over a volatile list (whose ``loop`` may be read by position
    only)."""

    def __init__(self, paths: frozenset[Path]) -> None:
        self.paths = paths
        self.kinds: dict[Path, int] = {}

    def _plan(self, path: Path, kind: int) -> bool:
        return self.kinds.setdefault(path, kind) == kind

    def visit(self, node: nodes.Node, verbatim: bool, printed: frozenset[str], in_loop: bool) -> bool:
        if isinstance(node, nodes.For) and _path_of(node.iter) in self.paths:
            return verbatim and not in_loop and self._volatile_loop(node)
        path = _path_of(node) if isinstance(node, nodes.Expr) else None
        if path is not None:
            return self._read(path, printed, in_loop)
        if isinstance(node, nodes.Output):
            return all(self._printed(child, verbatim, printed, in_loop) for child in node.nodes)
        inner = verbatim and isinstance(node, _PASS_THROUGH) if isinstance(node, nodes.Stmt) else verbatim
        return all(self.visit(child, inner, printed, in_loop) for child in node.iter_child_nodes())

    def _read(self, path: Path, printed: frozenset[str], in_loop: bool) -> bool:
        """A read that is not printed as it is: never a volatile value or a loop's item."""
        if path in self.paths or path[0] in printed:
            return False
        if path[0] == "loop" and in_loop:
            return len(path) == 2 and path[1][0] and path[1][1] in _LOOP_SHAPE
        return True

    def _printed(self, child: nodes.Node, verbatim: bool, printed: frozenset[str], in_loop: bool) -> bool:
        """One expression of an output (``{{ ... }}``)."""
        path = _path_of(child)
        if path is not None and path in self.paths:
            return verbatim and self._plan(path, -1)
        if path is not None and len(path) == 1 and path[0] in printed:
            return verbatim
        return self.visit(child, verbatim, printed, in_loop)

    def _volatile_loop(self, node: nodes.For) -> bool:
        """A ``{% for %}`` over a volatile list: no filter, not recursive, items unpacked into names."""
        target = node.target
        names = [target] if isinstance(target, nodes.Name) else list(getattr(target, "items", []))
        if node.test is not None or node.recursive or not names:
            return False
        if not all(isinstance(n, nodes.Name) for n in names):
            return False
        path = _path_of(node.iter)
        assert path is not None
        if not self._plan(path, 0 if isinstance(target, nodes.Name) else len(names)):
            return False
        loop_names = frozenset(n.name for n in names if isinstance(n, nodes.Name))
        return all(self.visit(n, True, loop_names, True) for n in (*node.body, *node.else_))
