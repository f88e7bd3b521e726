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
