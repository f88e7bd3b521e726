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


def test_no_expression_is_interpolated_into_a_shell_script() -> None:
    """Workflow inputs and event data reach `run:` scripts only through `env:` (no script injection)."""
    from ruamel.yaml import YAML

    for wf in WORKFLOWS:
        doc = YAML(typ="safe").load(wf.read_text())
        for name, job in doc["jobs"].items():
            for step in job.get("steps", []):
                script = step.get("run", "")
                assert "${{" not in script, f"{wf.name} job {name}: `${{{{ }}}}` inside run: {script!r}"


def test_pull_requests_never_reach_signing_or_gpu_jobs() -> None:
    from ruamel.yaml import YAML

    doc = YAML(typ="safe").load((WORKFLOWS[0].parent / "images.yml").read_text())
    for name, job in doc["jobs"].items():
        uses_secrets = "secrets." in str(job) or "id-token" in str(job.get("permissions", {}))
        if uses_secrets or "self-hosted" in str(job.get("runs-on")):
            assert "github.event_name == 'push'" in str(job.get("if")), f"job {name} may run on pull requests"
