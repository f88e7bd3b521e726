"""``builder.registry`` imports its modules on first use: the table of public names matches
``__all__`` and the typed imports, each name is the defining module's object, and reading a
reference's names does not import the client, its transport or the copy code."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from builder import registry

INIT = Path(registry.__file__)


def test_the_table_names_every_public_name_and_its_module() -> None:
    typed: dict[str, str] = {}
    for node in ast.walk(ast.parse(INIT.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("builder.registry."):
            typed.update({a.asname or a.name: node.module.rsplit(".", 1)[1] for a in node.names})
    assert typed == registry._EXPORTS
    assert set(registry.__all__) == set(registry._EXPORTS)
    for name, module in registry._EXPORTS.items():
        assert getattr(registry, name) is getattr(importlib.import_module(f"builder.registry.{module}"), name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        registry.no_such_name  # noqa: B018


def test_a_name_imports_only_its_module() -> None:
    code = "import sys; from builder.registry import Reference, parse_reference; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert "builder.registry.reference" in out
    for heavy in ("builder.registry.client", "builder.registry.transport", "builder.registry.copy", "urllib3"):
        assert heavy not in out, heavy
