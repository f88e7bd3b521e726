"""Jinja templates rendered in memoized sections: byte-identical output, each section rendered once
per distinct value of what it reads.

A Dockerfile template is mostly made of sections that depend on a few axes (the Python step on
Python and OS, the accelerator environment on the accelerator); only a few lines name the variant
itself. :class:`SectionLoader` splits a template's top level into *sections* when it loads it:
consecutive top-level statements are wrapped into synthetic Jinja blocks (names starting with
``_builder_section_``), grouped so that statements reading the same variables share a section.
The template's source, its file and its hash are unchanged; Jinja's own block machinery
(template inheritance, a family's block overrides, ``super()``) renders the result, so the text is
the same as ``Template.render`` gives.

:class:`SectionedTemplate` then renders a template with one section cache per run: before a section
is rendered, the values it can read (each variable *path*, such as ``accelerator.kind``, found in
the section's syntax tree; a whole variable when the template uses it other than by a constant
attribute or key) are looked up, and a section already rendered with the same values is reused.
A section is rendered every time (never cached) when it reads something that is not a template
variable or a Jinja global (``self``, ``super()``, a macro), and a template is not split at all
when it assigns, imports or includes anything, or extends a template whose name is not a constant.
Paths named ``volatile`` (different for every render, such as the variant id) are never part of a
key. A section that reads them only to print them verbatim (``{{ variant.id }}``, or a ``{% for %}``
over a volatile list whose items it only prints, reading nothing of ``loop`` but its position) is
cached *with holes*: rendered once per key and shape (the lists' lengths) with a unique marker
string in place of each volatile string, kept as a format string, and filled with the render's
strings (``str.format``: the text Jinja would print, since ``{{ s }}`` of a ``str`` is ``s`` when
there is no ``finalize`` and no autoescaping). Any other use (a test, a filter, a call, an output
captured by ``{% filter %}``, ``{% set %}`` or a macro) makes the section render every time.

Jinja API used (https://jinja.palletsprojects.com/en/3.1.x/api/): ``Environment.parse`` and
``Environment.compile`` (which "can compile a node or template source"), ``Template.from_code``
(what ``BaseLoader.load`` itself calls), ``Template.new_context``, ``Template.blocks`` /
``Template.root_render_func`` (block render functions, as ``Template.render`` uses them) and
``jinja2.meta.find_undeclared_variables``. Tested against jinja2 3.1 (pyproject pin ``>=3.1,<4``):
tests/unit/test_templating.py compares every section-rendered text with ``Template.render``.
"""

from __future__ import annotations

import dataclasses
import operator
import os
import re
from typing import TYPE_CHECKING, Any

import jinja2
from jinja2 import meta, nodes

from builder.templating.holes import Path, lookups, verbatim_output
from builder.templating.holes import holes as find_holes

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping

    from jinja2.runtime import Context

#: Prefix of the synthetic block names (a template's own block with such a name disables splitting).
SECTION_PREFIX = "_builder_section_"


#: Statements a template may have at its top level and still be split (no names assigned, nothing
#: imported or included: a section reads only the render's variables and Jinja's globals).
_SPLITTABLE = (nodes.Output, nodes.If, nodes.For, nodes.Block)
_SCOPE_CHANGING = (
    nodes.Assign,
    nodes.AssignBlock,
    nodes.Macro,
    nodes.CallBlock,
    nodes.Import,
    nodes.FromImport,
    nodes.Include,
    nodes.Scope,
    nodes.With,
    nodes.ExprStmt,
    nodes.OverlayScope,
    nodes.ScopedEvalContextModifier,
)


def _free_names(body: list[nodes.Node], env: jinja2.Environment) -> frozenset[str]:
    """Names ``body`` looks up in the render context (loop variables and the like excluded)."""
    tree = nodes.Template(body)
    tree.set_environment(env)
    return frozenset(meta.find_undeclared_variables(tree))


def variable_paths(body: Iterable[nodes.Node], names: frozenset[str]) -> frozenset[Path]:
    """Every path of the variables ``names`` that ``body`` reads: ``accelerator.kind`` ->
    ``("accelerator", (True, "kind"))``, ``labels["x"]`` -> ``("labels", (False, "x"))``; a
    variable used other than through constant attributes or keys is the bare ``(name,)``."""
    found: set[Path] = set()

    def visit(node: nodes.Node) -> None:
        cur, steps = lookups(node)
        if isinstance(cur, nodes.Name):
            if cur.ctx == "load" and cur.name in names:
                found.add((cur.name, *steps))
            return
        for child in cur.iter_child_nodes():
            visit(child)

    for n in body:
        visit(n)
    return frozenset(found)


def _overlaps(path: Path, others: Iterable[Path]) -> bool:
    """Whether ``path`` is a prefix of one of ``others`` or one of them is a prefix of it."""
    return any(path[: len(o)] == o[: len(path)] for o in others)


class SectionLoader(jinja2.FileSystemLoader):
    """A file system loader that splits each template's top level into synthetic blocks (see the
    module docstring). ``volatile``: paths that differ on every render (their statements are
    grouped apart from the others, so the rest stays cacheable). Templates that cannot be split
    load unchanged. Same arguments as :class:`jinja2.FileSystemLoader` otherwise."""

    def __init__(self, searchpath: str, volatile: frozenset[Path] = frozenset()) -> None:
        super().__init__(searchpath)
        self.volatile = volatile
        #: template name -> its syntax tree after splitting (what was compiled)
        self.trees: dict[str, nodes.Template] = {}

    def load(
        self,
        environment: jinja2.Environment,
        name: str,
        globals: MutableMapping[str, Any] | None = None,
    ) -> jinja2.Template:
        source, filename, uptodate = self.get_source(environment, name)
        tree = environment.parse(source, name, filename)
        if _splittable(tree):
            tree.body = self._sections(tree.body)
        self.trees[name] = tree
        code = environment.compile(tree, name, filename)
        return environment.template_class.from_code(environment, code, globals or {}, uptodate)

    def _sections(self, body: list[nodes.Node]) -> list[nodes.Node]:
        """Consecutive statements grouped (same or nested variable paths, or all volatile) and
        wrapped into synthetic blocks; the template's own blocks stay where they are."""
        groups: list[tuple[list[nodes.Node], frozenset[Path], bool]] = []
        for node in body:
            if isinstance(node, nodes.Block):
                groups.append(([node], frozenset(), False))
                continue
            # grouping only (what is cached is decided by SectionedTemplate): every name read counts,
            # without Jinja's scope analysis (a loop variable is a name too), which costs a compile
            names = frozenset(n.name for n in node.find_all(nodes.Name) if n.ctx == "load")
            paths = variable_paths([node], names)
            volatile = any(_overlaps(p, self.volatile) for p in paths)
            if groups and not isinstance(groups[-1][0][0], nodes.Block):
                members, group_paths, group_volatile = groups[-1]
                if volatile == group_volatile and (volatile or paths <= group_paths or group_paths <= paths):
                    groups[-1] = ([*members, node], group_paths | paths, volatile)
                    continue
            groups.append(([node], paths, volatile))
        out: list[nodes.Node] = []
        for i, (members, _, _) in enumerate(groups):
            if isinstance(members[0], nodes.Block):
                out.append(members[0])
            else:
                out.append(nodes.Block(f"{SECTION_PREFIX}{i}", members, False, False, lineno=members[0].lineno))
        return out


def _splittable(tree: nodes.Template) -> bool:
    if not all(isinstance(n, _SPLITTABLE) for n in tree.body):
        return False
    if any(True for _ in tree.find_all(_SCOPE_CHANGING)) or tree.find(nodes.Extends) is not None:
        return False
    return not any(b.name.startswith(SECTION_PREFIX) for b in tree.find_all(nodes.Block))


_MISSING = object()
#: Public attribute names of a plain ``dict`` (``a.items`` is the method, never the key; names
#: starting with ``_`` always take :func:`_value_at`).
_DICT_ATTRS = frozenset(dir(dict))


def _value_at(variables: Mapping[str, Any], path: Path) -> object:
    """The value a path reads, or the whole value of its longest prefix that plain data holds
    (Jinja looks ``a.b`` up as an attribute first: ``labels.items`` is the dict's method, so the
    key is the whole dict)."""
    value: object = variables.get(path[0], _MISSING)
    for is_attr, name in path[1:]:
        if not isinstance(value, dict) or name not in value or (is_attr and hasattr(value, name)):
            break
        value = value[name]
    return value


def _exact(variables: Mapping[str, Any], path: Path) -> object:
    """The value at exactly ``path`` through plain dicts, as Jinja reads it (``a.b``: the key ``b``
    of a dict that has no attribute ``b``), or ``_MISSING``."""
    value: object = variables.get(path[0], _MISSING)
    for is_attr, name in path[1:]:
        if type(value) is not dict or name not in value or (is_attr and hasattr(value, name)):
            return _MISSING
        value = value[name]
    return value


#: How a path's value is looked up (see :func:`_key_values`): ``(kind, first name, attribute, path)``.
_Lookup = tuple[int, str, str, Path]


def _plan_of(paths: Iterable[Path]) -> tuple[_Lookup, ...]:
    """Each path as ``(kind, first name, attribute, path)``, worked out once: kind 1 a top-level
    name, 2 ``name.attr`` looked up inline on a plain dict, 0 :func:`_value_at`."""
    plan: list[_Lookup] = []
    for p in paths:
        if len(p) == 1:
            plan.append((1, p[0], "", p))
        elif len(p) == 2 and p[1][0] and p[1][1] not in _DICT_ATTRS and p[1][1][:1] != "_":
            plan.append((2, p[0], p[1][1], p))
        else:
            plan.append((0, "", "", p))
    return tuple(plan)


def _key_values(plan: Iterable[_Lookup], variables: Mapping[str, Any]) -> list[object]:
    """The values the paths of ``plan`` read, as parts of a dictionary key: strings as they are,
    other values as a 1-tuple of their ``repr`` (so ``"True"``, ``True`` and ``1`` differ, and
    lists and dicts, whose ``repr`` is deterministic for the plain JSON values templates get, can be
    keys). The value of ``(name, (True, attr))`` on a plain ``dict`` is looked up inline (the same
    as :func:`_value_at`, without a call)."""
    out: list[object] = []
    get = variables.get
    for kind, name, attr, p in plan:
        if kind == 1:
            v = get(name, _MISSING)
        elif kind == 2:
            v = get(name, _MISSING)
            # a missing key: the whole dict, as _value_at gives
            v = v.get(attr, v) if type(v) is dict else _value_at(variables, p)
        else:
            v = _value_at(variables, p)
        out.append(v if type(v) is str else (repr(v),))
    return out


def _picker(indexes: list[int]) -> Callable[[list[object]], tuple[object, ...]]:
    """A function giving the tuple of the values at ``indexes`` of a list (one C call for two or more)."""
    if not indexes:
        return lambda _values: ()
    if len(indexes) == 1:
        i = indexes[0]
        return lambda values: (values[i],)
    return operator.itemgetter(*indexes)


@dataclasses.dataclass(frozen=True)
class _Section:
    """A top-level block of the base template: its name, and when it is cached, the render
    function of its active implementation, the paths its text depends on and its cache."""

    name: str
    render: Callable[[Context], Iterator[str]] | None = None
    paths: tuple[Path, ...] = ()
    cache: dict[tuple[object, ...], str] = dataclasses.field(default_factory=dict)
    #: volatile paths printed verbatim (:func:`builder.templating.holes.holes`): ``(path, kind)``,
    #: kind -1 a string printed, 0 a list of strings a loop prints, k > 0 a list of k-string lists a
    #: loop unpacks and prints;
    #: when set, the cache holds format strings keyed by the key plus the lists' lengths
    holes: tuple[tuple[Path, int], ...] = ()
    #: how each path is looked up (:func:`_plan_of`)
    plan: tuple[_Lookup, ...] = dataclasses.field(init=False, default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "plan", _plan_of(self.paths))

    def key(self, variables: Mapping[str, Any]) -> tuple[object, ...]:
        """The values this section reads, as a dictionary key (:func:`_key_values`)."""
        return tuple(_key_values(self.plan, variables))

    def fill(self, variables: Mapping[str, Any]) -> tuple[tuple[int, ...], list[str]] | None:
        """The lengths of the hole lists and the strings that fill the holes, in marker order;
        None when a value is not of the kind the holes were planned for (a non-string, a missing
        key): then the section is rendered by Jinja."""
        shape: list[int] = []
        leaves: list[str] = []
        for path, kind in self.holes:
            v = _exact(variables, path)
            if kind < 0:
                if type(v) is not str:
                    return None
                leaves.append(v)
                continue
            if type(v) is not list and type(v) is not tuple:
                return None
            for item in v:
                if kind == 0:
                    if type(item) is not str:
                        return None
                    leaves.append(item)
                elif (type(item) is list or type(item) is tuple) and len(item) == kind:
                    for x in item:
                        if type(x) is not str:
                            return None
                    leaves.extend(item)
                else:
                    return None
            shape.append(len(v))
        return tuple(shape), leaves


class SectionedTemplate:
    """A template rendered section by section with a cache (one instance per run: the cache grows
    with the distinct values seen). ``variable_names``: the names every render passes; a section
    reading any other name (besides Jinja's globals) is rendered every time. A template whose base
    could not be split renders as ``Template.render`` does, without a cache."""

    def __init__(self, env: jinja2.Environment, name: str, variable_names: frozenset[str]) -> None:
        self.env = env
        self.template = env.get_template(name)
        #: the template's globals (Jinja's and the environment's), merged once: ``new_context``
        #: otherwise copies its ChainMap of them for every render
        self._globals: dict[str, Any] = dict(self.template.globals)
        #: the base template's top-level blocks in order (its whole output); empty: not split
        self.sections: tuple[_Section, ...] = ()
        self._plan: tuple[_Lookup, ...] = ()
        self._pickers: tuple[Callable[[list[object]], tuple[object, ...]], ...] = ()
        #: every block's implementations, the active one first (``super()`` takes the next)
        self._blocks: dict[str, list[Callable[[Context], Iterator[str]]]] = {}
        loader = env.loader
        if not isinstance(loader, SectionLoader):
            return
        chain = _chain(name, loader.trees, env)
        if chain is None:
            return
        trees = [loader.trees[t] for t in chain]
        if not all(isinstance(n, nodes.Block) for n in trees[-1].body) or not all(map(_only_overrides, trees[:-1])):
            return  # the output is not just the base's top-level blocks in order, read from the variables alone
        known = variable_names | frozenset(env.globals)
        # the active implementation of each block: the first template of the chain that defines it
        impls: dict[str, tuple[jinja2.Template, nodes.Block]] = {}
        for tname, tree in zip(chain, trees, strict=True):
            for block in tree.find_all(nodes.Block):
                impls.setdefault(block.name, (env.get_template(tname), block))
        sections: list[_Section] = []
        for top in trees[-1].body:
            assert isinstance(top, nodes.Block)  # checked above
            tpl, block = impls[top.name]
            body = _with_nested(block, impls)
            names = _free_names(body, env)
            paths = variable_paths(body, names)
            volatile = frozenset(p for p in paths if _overlaps(p, loader.volatile))
            # no volatile value: no holes; volatile values printed through autoescape or finalize: no
            # caching at all (None), as the filled-in text would skip what those do to each value
            holes = (find_holes(body, volatile, loader.volatile) if verbatim_output(env) else None) if volatile else ()
            if not names <= known or _reads_other_blocks(body) or holes is None:
                sections.append(_Section(top.name))
            else:
                stable = tuple(sorted(paths - volatile, key=repr))
                sections.append(_Section(top.name, tpl.blocks[top.name], stable, holes=holes))
        self.sections = tuple(sections)
        # every path any section reads, looked up once a render; each section's key picked from them
        distinct: dict[Path, int] = {}
        for section in sections:
            for path in section.paths:
                distinct.setdefault(path, len(distinct))
        self._plan = _plan_of(distinct)
        self._pickers = tuple(_picker([distinct[p] for p in s.paths]) for s in sections)
        blocks = {bname: [func] for bname, func in self.template.blocks.items()}
        for parent in chain[1:]:
            for bname, func in env.get_template(parent).blocks.items():
                blocks.setdefault(bname, []).append(func)
        self._blocks = blocks

    def render(self, variables: Mapping[str, Any]) -> str:
        """The text ``Template.render(**variables)`` gives. Raises what Jinja raises (TemplateError)."""
        if not self.sections:
            return self.template.render(variables)
        ctx: Context | None = None
        parts: list[str] = []
        values = _key_values(self._plan, variables)
        try:
            for section, pick in zip(self.sections, self._pickers, strict=True):
                if section.render is None:
                    ctx = ctx or self._context(variables)
                    text = "".join(ctx.blocks[section.name][0](ctx))
                elif not section.holes:
                    key = pick(values)
                    cached = section.cache.get(key)
                    if cached is None:
                        ctx = ctx or self._context(variables)
                        cached = section.cache[key] = "".join(section.render(ctx))
                    text = cached
                elif (filled := section.fill(variables)) is None:
                    ctx = ctx or self._context(variables)
                    text = "".join(section.render(ctx))
                else:
                    shape, leaves = filled
                    key = pick(values) + shape
                    fmt = section.cache.get(key)
                    if fmt is None:
                        fmt = section.cache[key] = self._format(section, variables, shape)
                    text = fmt.format(*leaves)
                parts.append(text)
        except Exception:
            self.env.handle_exception()
        return "".join(parts)

    def _format(self, section: _Section, variables: Mapping[str, Any], shape: tuple[int, ...]) -> str:
        """The section rendered with a marker in place of each hole's string, as a format string
        (``{n}``: the n-th string :meth:`_Section.fill` gives; the text's braces doubled)."""
        assert section.render is not None
        marked = dict(variables)
        n = 0
        lengths = iter(shape)
        for path, kind in section.holes:
            value: object
            if kind < 0:
                value, n = _MARK.format(n), n + 1
            elif kind == 0:
                count = next(lengths)
                value, n = [_MARK.format(n + i) for i in range(count)], n + count
            else:
                count = next(lengths)
                value = [[_MARK.format(n + i * kind + j) for j in range(kind)] for i in range(count)]
                n += count * kind
            _put(marked, path, value)
        pieces = _MARK_RE.split("".join(section.render(self._context(marked))))
        # split() alternates text and the captured hole numbers: text at even positions
        out = [
            piece.replace("{", "{{").replace("}", "}}") if i % 2 == 0 else f"{{{piece}}}"
            for i, piece in enumerate(pieces)
        ]
        return "".join(out)

    def _context(self, variables: Mapping[str, Any]) -> Context:
        """A render context with every template's blocks registered, child first, as the
        generated code of ``{% extends %}`` registers them (so ``super()`` finds the parent's);
        one registry for every render: only the root of a child template adds to it, and that
        root is not run."""
        # what new_context(variables) builds (globals, then the variables over them), from the merged globals
        ctx = self.template.new_context({**self._globals, **variables}, shared=True)
        ctx.blocks = self._blocks  # read-only while blocks render (only an `extends` adds to it)
        return ctx


def _chain(name: str, trees: Mapping[str, nodes.Template], env: jinja2.Environment) -> list[str] | None:
    """The template and the templates it extends (child first), loaded; None when one was not
    loaded by a SectionLoader or names its parent by an expression."""
    chain: list[str] = []
    while True:
        if name not in trees:
            env.get_template(name)  # a parent is loaded on first render otherwise
        tree = trees.get(name)
        if tree is None or name in chain:
            return None
        chain.append(name)
        ext = tree.find(nodes.Extends)
        if ext is None:
            return chain
        if not isinstance(ext.template, nodes.Const) or not isinstance(ext.template.value, str):
            return None
        name = ext.template.value


def _only_overrides(tree: nodes.Template) -> bool:
    """Whether a child template only extends and overrides blocks: its ``{% extends %}`` first, then
    blocks and text (never output after ``extends``). A name it assigns or imports at its top level
    reaches the blocks of the render that runs it, never a section rendered alone."""
    body = tree.body
    if not body or not isinstance(body[0], nodes.Extends):
        return False
    return all(isinstance(n, (nodes.Block, nodes.Output)) for n in body[1:])


def _with_nested(block: nodes.Block, impls: Mapping[str, tuple[jinja2.Template, nodes.Block]]) -> list[nodes.Node]:
    """A block's body plus the active implementation of every block nested in it (recursively): a
    family's override of a block inside a section changes that section's text."""
    body: list[nodes.Node] = list(block.body)
    seen = {block.name}
    todo = _nested_blocks(block.body)
    while todo:
        bname = todo.pop()
        if bname in seen or bname not in impls:
            continue
        seen.add(bname)
        nested = impls[bname][1]
        body.extend(nested.body)
        todo.extend(_nested_blocks(nested.body))
    return body


def _nested_blocks(body: Iterable[nodes.Node]) -> list[str]:
    """The names of the blocks in ``body``, at any depth."""
    names: list[str] = []
    for n in body:
        if isinstance(n, nodes.Block):
            names.append(n.name)
        names.extend(b.name for b in n.find_all(nodes.Block))
    return names


def _reads_other_blocks(body: Iterable[nodes.Node]) -> bool:
    """Whether ``body`` calls ``super()`` or uses ``self`` (another block's text)."""
    return any(
        isinstance(x, nodes.Name) and x.name in {"super", "self"} for n in body for x in (n, *n.find_all(nodes.Name))
    )


#: The marker printed in place of a hole's string while a section with holes is rendered once: NUL
#: and a random token of this process (no template text or variable holds it), then its number.
_TOKEN = os.urandom(8).hex()  # (not `secrets`: its imports, for the same 8 random bytes)
_MARK = "\x00" + _TOKEN + "{}\x00"
_MARK_RE = re.compile("\x00" + _TOKEN + "([0-9]+)\x00")


def _put(variables: dict[str, Any], path: Path, value: object) -> None:
    """Set ``path`` (plain dicts, as :func:`_exact` reads it) to ``value`` in ``variables``,
    copying each dict on the way (the caller's values are not changed)."""
    if len(path) == 1:
        variables[path[0]] = value
        return
    parent = variables[path[0]] = dict(variables[path[0]])
    for _, name in path[1:-1]:
        parent[name] = dict(parent[name])
        parent = parent[name]
    parent[path[-1][1]] = value
