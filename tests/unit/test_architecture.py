"""The structure the project keeps (docs/architecture.md): small modules, no silent exception
swallowing, and project files that cite public sources rather than paths outside the repository.
Import layers and cycles are checked by import-linter (`lint-imports`, contracts in pyproject.toml)."""

from __future__ import annotations

import ast
import re
import subprocess
from typing import TYPE_CHECKING

from tests.conftest import ROOT

if TYPE_CHECKING:
    from pathlib import Path

MAX_MODULE_LINES = 1000
# Spelled in pieces so that this file, which must name what it forbids, does not match itself.
OUTSIDE_PATH = re.compile(
    r"(?:\.\./|/work/)?\b" + "shared" + r"/(?:docs|cases)/|/work/" + "shared|" + "DEVELOPERS" + r"\.md"
)


def _modules() -> list[Path]:
    return sorted((ROOT / "builder").rglob("*.py"))


def test_no_module_over_the_size_limit() -> None:
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines()) for p in _modules()}
    assert sizes, "no modules found"
    too_big = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not too_big, f"split these by concern (limit {MAX_MODULE_LINES} lines): {too_big}"


def _swallowed(tree: ast.AST) -> list[int]:
    """Lines of ``except ...: pass`` handlers (the exception vanishes without a trace)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.ExceptHandler) and all(isinstance(s, ast.Pass) for s in node.body)
    ]


def test_the_swallow_detector_finds_a_swallowed_exception() -> None:
    code = "try:\n    x = 1\nexcept ValueError:\n    pass\ntry:\n    y = 2\nexcept OSError:\n    y = 3\n"
    assert _swallowed(ast.parse(code)) == [3]


def test_no_exception_is_swallowed() -> None:
    found = {
        p.relative_to(ROOT).as_posix(): lines for p in _modules() if (lines := _swallowed(ast.parse(p.read_text())))
    }
    assert not found, f"`except ...: pass` hides failures; handle or let it propagate: {found}"


def test_project_files_cite_no_path_outside_the_repository() -> None:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert files, "git ls-files listed nothing"
    offenders: list[str] = []
    for name in files:
        path = ROOT / name
        if not path.is_file() or path.suffix in {".png", ".gz", ".tar", ".so", ".bin"}:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        offenders += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if OUTSIDE_PATH.search(line)]
    assert not offenders, "cite a public source (URL) instead of a path outside the repository:\n" + "\n".join(
        offenders
    )


def test_the_outside_path_pattern_matches_the_kinds_it_must() -> None:
    shared = "shared"
    assert OUTSIDE_PATH.search(f"see ../{shared}/docs/signing-formats.md")
    assert OUTSIDE_PATH.search(f"copied from {shared}/cases/compat/x.csv")
    assert OUTSIDE_PATH.search(f"/work/{shared}/anything") and OUTSIDE_PATH.search("DEVELOPERS" + ".md")
    assert not OUTSIDE_PATH.search(f"SIF=/{shared}/images/pytorch.sif")  # a cluster's path in an example


def _vendor_literals(tree: ast.AST) -> list[int]:
    """Lines of a ``Literal[...]`` that spells the GPU vendors (``"nvidia"`` and ``"amd"`` among its strings)
    instead of naming ``builder.models.GpuVendor`` / ``Vendor``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and getattr(node.value, "id", getattr(node.value, "attr", "")) == "Literal":
            elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            values = {e.value for e in elements if isinstance(e, ast.Constant)}
            if {"nvidia", "amd"} <= values:
                lines.append(node.lineno)
    return lines


def test_the_vendor_literal_detector_finds_a_second_spelling() -> None:
    code = 'A = Literal["amd", "nvidia", "none"]\nB = Literal[A, "cpu"]\nC = typing.Literal["nvidia", "amd"]\n'
    assert _vendor_literals(ast.parse(code)) == [1, 3]


def test_the_gpu_vendors_are_spelled_once() -> None:
    found = {
        p.relative_to(ROOT).as_posix(): lines
        for p in _modules()
        if (lines := _vendor_literals(ast.parse(p.read_text())))
    }
    # the one definition: builder.models.GpuVendor (Vendor adds "none")
    assert list(found) == ["builder/models/__init__.py"], f"name builder.models.GpuVendor / Vendor instead: {found}"
    assert len(found["builder/models/__init__.py"]) == 1, found
