"""``builder.policy`` imports its modules on first use (the table of public names:
tests/unit/test_lazy.py): reading the build stage's name does not import the loader, its pydantic
schema or the YAML parser."""

from __future__ import annotations

import subprocess
import sys


def test_a_name_imports_only_its_module() -> None:
    code = "import sys; from builder.policy import BUILD_STAGE, Policy; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert "builder.policy.model" in out
    for heavy in ("builder.policy.loader", "builder.policy.schema", "pydantic", "ruamel.yaml", "builder.compat.fleets"):
        assert heavy not in out, heavy
