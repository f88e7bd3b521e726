"""``builder.promote`` imports its modules on first use (the table of public names:
tests/unit/test_lazy.py): importing one query does not import the promotion, rollback or signing
modules."""

from __future__ import annotations

import subprocess
import sys


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
