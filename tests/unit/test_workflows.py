"""The GitHub workflows validate against the GitHub workflow schema (check-jsonschema ships it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def _load(name: str) -> dict[str, Any]:
    from ruamel.yaml import YAML

    doc: dict[str, Any] = YAML(typ="safe").load((WORKFLOWS[0].parent / name).read_text())
    return doc


def test_images_runs_once_per_workflow_and_ref_and_cancels_only_pull_requests() -> None:
    group = _load("images.yml")["concurrency"]
    assert "github.workflow" in group["group"] and "github.ref" in group["group"]
    assert group["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"


def test_promotions_are_never_cancelled_mid_way() -> None:
    """Every job that runs `builder promote` (or whose workflow does) is in a concurrency group
    that never cancels the promotion in progress."""
    promoting = 0
    for wf in WORKFLOWS:
        doc = _load(wf.name)
        for name, job in doc["jobs"].items():
            if not any("builder promote" in step.get("run", "") for step in job.get("steps", [])):
                continue
            promoting += 1
            group = job.get("concurrency") or doc.get("concurrency")
            assert isinstance(group, dict), f"{wf.name} job {name}: promotes outside a concurrency group"
            assert group["cancel-in-progress"] is False, f"{wf.name} job {name}: a promotion may be cancelled"
            assert group["group"].startswith("promote-"), f"{wf.name} job {name}: not in a stage's promote group"
    assert promoting >= 2


def test_build_digests_reach_the_later_jobs() -> None:
    jobs = _load("images.yml")["jobs"]
    [step] = [s for s in jobs["build"]["steps"] if s.get("id") == "build"]
    assert re.search(r"\bbuilder (--json )?build\b", step["run"])
    assert jobs["build"]["outputs"]["digests"] == "${{ steps.build.outputs.digests }}"
    assert jobs["digests"]["outputs"]["digests"] == "${{ steps.merge.outputs.digests }}"
    for name in ("promote-dev", "check-cpu", "check-nvidia", "check-amd"):
        assert "fromJSON(needs.digests.outputs.digests)[matrix.id]" in str(jobs[name]["steps"]), name


def test_every_output_reference_names_a_declared_output() -> None:
    """`steps.ID.outputs` in a job's outputs name a step of that job; `needs.JOB.outputs.NAME`
    name a job in `needs` that declares NAME (what actionlint checks, for the outputs we wire)."""
    for wf in WORKFLOWS:
        jobs = _load(wf.name)["jobs"]
        for name, job in jobs.items():
            ids = {s["id"] for s in job.get("steps", []) if "id" in s}
            for value in (job.get("outputs") or {}).values():
                for step in re.findall(r"steps\.([\w-]+)\.outputs", value):
                    assert step in ids, f"{wf.name} job {name}: output from unknown step {step}"
            needs = job.get("needs", [])
            needs = [needs] if isinstance(needs, str) else needs
            for other, output in re.findall(r"needs\.([\w-]+)\.outputs\.([\w-]+)", str(job)):
                assert other in needs, f"{wf.name} job {name}: reads {other} without needing it"
                assert output in (jobs[other].get("outputs") or {}), f"{wf.name} job {name}: {other} has no {output}"
