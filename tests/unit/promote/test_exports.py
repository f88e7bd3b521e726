"""``builder.promote`` imports its modules on first use: the table of public names matches
``__all__`` and the typed imports, each name is the defining module's object, and importing
one query does not import the promotion, rollback or signing modules."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

from builder import promote

INIT = Path(promote.__file__)


def test_the_table_names_every_public_name_and_its_module() -> None:
    typed: dict[str, str] = {}
    for node in ast.walk(ast.parse(INIT.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("builder.promote."):
            typed.update({a.asname or a.name: node.module.rsplit(".", 1)[1] for a in node.names})
    assert typed == promote._EXPORTS
    assert set(promote.__all__) == set(promote._EXPORTS)
    for name, module in promote._EXPORTS.items():
        assert getattr(promote, name) is getattr(importlib.import_module(f"builder.promote.{module}"), name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        promote.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def test_a_query_does_not_import_the_promotion_modules() -> None:
    code = "import sys; from builder.promote import resolve_variant; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert "builder.promote.resolution" in out
    for heavy in (
        # resolve imports the record check only to verify (not for --no-verify)
        "builder.promote.records",
        "builder.promote.evidence",
        "builder.signing.verify",
        "builder.promote.apply",
        "builder.promote.rollback",
        "builder.promote.transfer",
        "builder.signing.sign",
    ):
        assert heavy not in out, heavy


def test_a_public_name_wins_over_its_module_of_the_same_name() -> None:
    code = (
        "import types, builder.promote.rollback\n"
        "from builder.promote import rollback\n"
        "assert not isinstance(rollback, types.ModuleType), rollback\n"
        "assert rollback.__module__ == 'builder.promote.rollback'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
