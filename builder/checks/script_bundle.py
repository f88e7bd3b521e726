"""A check script and the project modules it imports, as one Python program for the image's python.

A ``script`` check is sent on stdin (``python -``, :data:`builder.checks.device.PYTHON_SHIM`): only one
file reaches the container. So that the declared programs (``evidence/<family>/*.py``) can share a
module (``evidence/evidence_support.py``: the JUnit report, the metric lines, the timing loop), the
program sent is the script plus every module it imports, directly or through another, that is a file
``NAME.py`` of the project: looked for in the script's own directory, then each directory above it up
to the project root (the nearest wins), as ``python evidence/jax/x.py`` with those directories on
``sys.path`` would find them. Each module is registered in ``sys.modules`` under its name before the
script runs (``types.ModuleType`` + ``exec`` of its compiled source:
https://docs.python.org/3/library/types.html#types.ModuleType,
https://docs.python.org/3/reference/import.html#the-module-cache), compiled under its project path so
a traceback names the real file and line. A script that imports no project module is sent unchanged,
byte for byte; one that does not parse is sent unchanged too (the image's python reports the error).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

#: defines the loader the bundle calls, then removes it (names the script cannot collide with)
_PRELUDE = """\
# builder check: {script} with the project modules it imports ({modules})
import sys as _builder_sys, types as _builder_types


def _builder_module(name, filename, source):
    module = _builder_types.ModuleType(name)
    module.__file__ = filename
    _builder_sys.modules[name] = module
    exec(compile(source, filename, "exec"), module.__dict__)


"""

_SCRIPT = """
_builder_main = {{"__name__": "__main__", "__file__": {path!r}, "__builtins__": __builtins__}}
del _builder_module, _builder_sys, _builder_types
exec(compile({source!r}, {path!r}, "exec"), _builder_main)
"""


def _imported_names(source: bytes) -> list[str] | None:
    """The top-level names ``source`` imports absolutely (``import a.b`` -> ``a``), in order; None when
    it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module.split(".")[0])
    return names


def _find(root: Path, start: Path, name: str) -> Path | None:
    """``NAME.py`` in ``start`` or the nearest directory above it, not above ``root``; None if none."""
    directory = start
    while True:
        candidate = directory / f"{name}.py"
        if candidate.is_file():
            return candidate
        if directory == root or root not in directory.parents:
            return None
        directory = directory.parent


def bundle_script(root: Path, script: str) -> bytes:
    """The program to send for ``script`` (a path relative to the project ``root``): its bytes when it
    imports no project module, else a prelude registering each such module (dependencies first) and
    the script compiled as ``__main__`` under its own path. Raises OSError when a file cannot be read;
    a module that is not UTF-8 raises UnicodeDecodeError (a ValueError)."""
    root = root.resolve()
    path = (root / script).resolve()
    source = path.read_bytes()
    modules: dict[str, tuple[str, str]] = {}  # name -> (project path, source), dependencies first

    def visit(text: bytes, start: Path, seen: frozenset[str]) -> None:
        for name in _imported_names(text) or ():
            if name in modules or name in seen:
                continue
            found = _find(root, start, name)
            if found is None or found == path:
                continue
            data = found.read_bytes()
            visit(data, found.parent, seen | {name})
            modules[name] = (found.relative_to(root).as_posix(), data.decode())

    visit(source, path.parent, frozenset())
    if not modules:
        return source
    parts = [_PRELUDE.format(script=script, modules=", ".join(p for p, _ in modules.values()))]
    parts += [f"_builder_module({name!r}, {p!r}, {text!r})\n" for name, (p, text) in modules.items()]
    parts.append(_SCRIPT.format(path=script, source=source.decode()))
    return "".join(parts).encode()
