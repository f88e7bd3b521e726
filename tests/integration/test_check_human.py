"""Human (non-JSON) output of `builder check` prints the engine's words as written: rich markup must not
eat docker's ``capabilities: [[gpu]]`` (it printed ``capabilities: []`` before the text was escaped)."""

from __future__ import annotations

import pytest

from tests.integration.test_check import _no_toolkit, builder, images

pytestmark = pytest.mark.integration

__all__ = ["images"]  # the module-scoped fixture (real images built and pushed for this module)


def test_failed_gpus_all_check_prints_engine_stderr_verbatim(images: dict[str, str]) -> None:
    _no_toolkit()
    res = builder("check", images["cuda"], "--no-attest", env={"COLUMNS": "400"})
    assert res.returncode == 20, res.stdout + res.stderr
    out = res.stderr
    assert "could not select device driver" in out, out  # the real engine error, in the step line
    assert "capabilities: [[gpu]]" in out, out[-3000:]
    assert "capabilities: []" not in out
    # the final error line (builder.cli._report) is escaped too
    error_line = next(line for line in out.splitlines() if line.startswith("error:"))
    assert "container-toolkit-missing" in error_line
