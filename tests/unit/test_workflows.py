"""The GitHub workflows validate against the GitHub workflow schema (check-jsonschema ships it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from builder.cli import COMMANDS

WORKFLOWS = sorted((Path(__file__).resolve().parents[2] / ".github" / "workflows").glob("*.yml"))


def test_there_are_workflows() -> None:
    names = {p.name for p in WORKFLOWS}
    assert {"test.yml", "images.yml", "promote.yml"} <= names


def test_workflows_match_github_schema() -> None:
    exe = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent)) or "check-jsonschema"
    proc = subprocess.run(
        [exe, "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_workflows_only_call_existing_commands() -> None:
    for wf in WORKFLOWS:
        for cmd in re.findall(r"\bbuilder (?:--json )?([a-z][a-z-]+)", wf.read_text()):
            assert cmd in COMMANDS, f"{wf.name} calls unknown command `builder {cmd}`"
