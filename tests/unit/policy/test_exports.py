"""``builder.policy`` imports its modules on first use: the table of public names matches
``__all__`` and the typed imports, each name is the defining module's object, and reading the
build stage's name does not import the loader, its pydantic schema or the YAML parser."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from builder import policy

INIT = Path(policy.__file__)


def test_the_table_names_every_public_name_and_its_module() -> None:
    typed: dict[str, str] = {}
    for node in ast.walk(ast.parse(INIT.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("builder.policy."):
            typed.update({a.asname or a.name: node.module.rsplit(".", 1)[1] for a in node.names})
    assert typed == policy._EXPORTS
    assert set(policy.__all__) == set(policy._EXPORTS)
    for name, module in policy._EXPORTS.items():
        assert getattr(policy, name) is getattr(importlib.import_module(f"builder.policy.{module}"), name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        policy.no_such_name  # noqa: B018


def test_a_name_imports_only_its_module() -> None:
    code = "import sys; from builder.policy import BUILD_STAGE, Policy; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert "builder.policy.model" in out
    for heavy in ("builder.policy.loader", "builder.policy.schema", "pydantic", "ruamel.yaml", "builder.compat.fleets"):
        assert heavy not in out, heavy
