"""builder.lazy: the one PEP 562 ``__getattr__`` of the packages that import their modules on first use."""

import subprocess
import sys

import pytest

from builder.lazy import lazy_exports


def test_a_name_is_imported_on_first_read_then_kept_in_the_namespace() -> None:
    namespace: dict[str, object] = {}
    getattr_ = lazy_exports("builder.matrix", {"variant_id": "expand"}, namespace)
    from builder.matrix.expand import variant_id

    assert getattr_("variant_id") is variant_id
    assert namespace == {"variant_id": variant_id}


def test_an_unknown_name_is_the_attribute_error_python_gives() -> None:
    getattr_ = lazy_exports("builder.matrix", {}, {})
    with pytest.raises(AttributeError, match=r"module 'builder\.matrix' has no attribute 'nope'"):
        getattr_("nope")
    import builder.matrix

    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        builder.matrix.nope  # noqa: B018


def test_packages_do_not_import_their_modules_until_a_name_is_read() -> None:
    code = (
        "import sys, builder.matrix, builder.checks.diagnosis as d\n"
        "assert 'builder.matrix.load' not in sys.modules\n"
        "assert 'builder.checks.diagnosis.rules' not in sys.modules\n"
        "d.RULES\n"
        "assert 'builder.checks.diagnosis.rules' in sys.modules\n"
        "assert 'RULES' in vars(d)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


LAZY_PACKAGES = (
    "builder.checks.diagnosis",
    "builder.compat",
    "builder.matrix",
    "builder.policy",
    "builder.promote",
    "builder.registry",
)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_the_table_names_every_public_name_and_its_module(package: str) -> None:
    """Each lazy package's ``_EXPORTS`` table matches ``__all__`` and its typed imports (the names
    mypy and readers see), and each name read through the package is the defining module's object."""
    import ast
    import importlib
    from pathlib import Path

    module = importlib.import_module(package)
    assert module.__file__ is not None
    typed: dict[str, str] = {}
    for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package + "."):
            typed.update({a.asname or a.name: node.module.rsplit(".", 1)[1] for a in node.names})
    exports = module._EXPORTS
    assert typed == exports
    assert set(module.__all__) == set(exports)
    for name, defining in exports.items():
        assert getattr(module, name) is getattr(importlib.import_module(f"{package}.{defining}"), name)
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018
