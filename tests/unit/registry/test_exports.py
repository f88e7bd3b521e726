"""``builder.registry`` imports its modules on first use (the table of public names:
tests/unit/test_lazy.py): reading a reference's names does not import the client, its transport or
the copy code."""

from __future__ import annotations

import subprocess
import sys


def test_a_name_imports_only_its_module() -> None:
    code = "import sys; from builder.registry import Reference, parse_reference; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert "builder.registry.reference" in out
    for heavy in ("builder.registry.client", "builder.registry.transport", "builder.registry.copy", "urllib3"):
        assert heavy not in out, heavy
