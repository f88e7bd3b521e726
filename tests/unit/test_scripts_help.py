"""README's commands explain themselves: `bash scripts/test --help` prints its own usage (what it runs,
that extra arguments go to pytest) and runs nothing - no set-up, no linters, no tests."""

from __future__ import annotations

import subprocess

from tests.conftest import ROOT


def test_scripts_test_help_prints_usage_and_runs_nothing() -> None:
    for flag in ("--help", "-h"):
        done = subprocess.run(
            ["bash", str(ROOT / "scripts" / "test"), flag], capture_output=True, text=True, timeout=60, cwd="/"
        )
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert out.startswith("usage: bash scripts/test [PYTEST ARGS...]")
        assert "Extra arguments go to pytest" in out and "scripts/setup" in out and "ruff" in out
        assert "==" not in done.stderr and done.stderr == ""  # no stage of the run started
        assert max(len(line) for line in out.splitlines()) <= 80


def test_readme_says_how_to_keep_a_namespace_and_what_the_demo_passes_on() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "BUILDER_REPOSITORY_PREFIX" in readme and "repository_prefix" in readme
    assert "Extra arguments to `bash scripts/demo` go to `builder run`" in readme
    demo = (ROOT / "scripts" / "demo").read_text()
    # what the README says is what the script does
    assert 'builder run --matrix matrices/demo.yaml --to prod --fleet fleets/demo.yaml "$@"' in demo
    assert "Pick a prefix no other checkout has used" in readme  # reusing one shares its images
