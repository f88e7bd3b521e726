"""GitHub Actions output (builder.cli.github): workflow commands, step outputs and summaries, through
real commands with ``GITHUB_ACTIONS=true`` and the runner's files in a temporary directory."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import pytest

from builder.build.results import BuildRun
from builder.cli.github import (
    escape_data,
    escape_property,
    failure_commands,
    output_lines,
    report_result,
    summary_markdown,
    workflow_command,
)
from builder.models import BuiltImage, SummaryRow
from builder.promote.resolution import Resolved
from tests.conftest import ROOT, Cli

if TYPE_CHECKING:
    from pathlib import Path

BAD_MATRIX = ROOT / "tests" / "data" / "matrices" / "bad.yaml"
DIGEST = "sha256:" + "ab" * 32


def _github(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "output").touch()
    (tmp_path / "summary.md").touch()
    return {
        "GITHUB_ACTIONS": "true",
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }


def _commands(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("::")]


# --------------------------------------------------------------------------------------------- escaping


def test_data_escapes_percent_and_line_breaks() -> None:
    assert escape_data("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext: a,b"


def test_properties_also_escape_colon_and_comma() -> None:
    assert escape_property("C:\\a,b%\n") == "C%3A\\a%2Cb%25%0A"


def test_a_command_escapes_each_part_and_leaves_out_unknown_places() -> None:
    line = workflow_command("error", "bad: 50%\nsee x", file="m,1.yaml", line=3, col=0, title="matrix-invalid")
    assert line == "::error file=m%2C1.yaml,line=3,title=matrix-invalid::bad: 50%25%0Asee x"
    assert workflow_command("error", "plain") == "::error::plain"


def test_a_failure_with_located_problems_annotates_each_then_the_first_line() -> None:
    problems = [
        {"file": "p.yaml", "line": 2, "col": 5, "path": "stages.prod", "message": "m1", "severity": "error"},
        {"file": "p.yaml", "line": 9, "col": 1, "path": "", "message": "m2", "severity": "warning"},
        {"field": "vendor", "problem": "missing"},  # not a located problem: no annotation of its own
    ]
    assert failure_commands("policy-invalid", "2 problems:\n  p.yaml:2:5 ...", problems) == [
        "::error file=p.yaml,line=2,col=5,title=policy-invalid::stages.prod: m1",
        "::warning file=p.yaml,line=9,col=1,title=policy-invalid::m2",
        "::error title=policy-invalid::2 problems:",
    ]


def test_an_output_that_spans_lines_is_a_delimited_block() -> None:
    assert output_lines("digests", '{"a":"b"}') == 'digests={"a":"b"}\n'
    block = output_lines("log", "one\ntwo").splitlines()
    assert block[0].startswith("log<<ghadelimiter_") and block[1:3] == ["one", "two"]
    assert block[3] == block[0].removeprefix("log<<")


def test_summary_cells_cannot_break_the_table() -> None:
    text = summary_markdown("builder run", [SummaryRow("v|1", "", "denied at prod\nsoak", "")])
    row = text.splitlines()[4]
    assert row == "| `v\\|1` | - | denied at prod soak | - |"
    assert row.count(" | ") == 3


# --------------------------------------------------------------------------------------------- commands


def test_matrix_problems_are_annotated_at_their_file_line_and_column(cli: Cli, tmp_path: Path) -> None:
    expected = cli("matrix", "list", "--matrix", str(BAD_MATRIX), "--json", code=10, cwd=ROOT).json()
    problems = expected["error"]["details"]["problems"]
    assert not _commands(cli("matrix", "list", "--matrix", str(BAD_MATRIX), code=10, cwd=ROOT).stderr)

    result = cli("matrix", "list", "--matrix", str(BAD_MATRIX), code=10, cwd=ROOT, env=_github(tmp_path))
    commands = _commands(result.stderr)
    assert "error:" in result.stderr  # the human message is still there
    for p in problems:
        line = f"::error file={p['file']},line={p['line']},col={p['col']},title=matrix-invalid::"
        assert line + escape_data(f"{p['path']}: {p['message']}") in commands
    colour_line = 1 + BAD_MATRIX.read_text().splitlines().index(
        "colour: blue                                 # BAD: unknown key"
    )
    assert any(f",line={colour_line},col=1," in c and "::colour: " in c for c in commands)
    assert commands[-1] == f"::error title=matrix-invalid::{len(problems)} matrix problems:"
    assert len(commands) == len(problems) + 1


def test_policy_problems_are_annotated(cli: Cli, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    text = (ROOT / "policies" / "default.yaml").read_text()
    policy.write_text(text + "surprise: true\n")
    line = len(policy.read_text().splitlines())
    result = cli("policy", "validate", str(policy), code=30, cwd=ROOT, env=_github(tmp_path))
    assert any(c.startswith(f"::error file={policy},line={line},") for c in _commands(result.stderr)), result.stderr


def test_a_usage_error_is_annotated(cli: Cli, tmp_path: Path) -> None:
    result = cli("matrix", "list", "--format", "yaml", code=2, cwd=ROOT, env=_github(tmp_path))
    [command] = _commands(result.stderr)
    assert command.startswith("::error title=usage::") and "yaml" in command


def test_a_listing_writes_no_runner_file(cli: Cli, tmp_path: Path) -> None:
    env = _github(tmp_path)
    cli("matrix", "list", cwd=ROOT, env=env)
    assert (tmp_path / "output").read_text() == "" and (tmp_path / "summary.md").read_text() == ""


# --------------------------------------------------------------------------------------------- results


def _built(variant: str, digest: str, status: str) -> BuiltImage:
    return BuiltImage(variant, "127.0.0.1:5000/test/tiny", digest, "c1", status)  # type: ignore[arg-type]


def test_a_build_writes_digests_and_a_summary_table(tmp_path: Path) -> None:
    run = BuildRun(
        (_built("jax-a", DIGEST, "built"), _built("jax-b", "", "failed"), _built("jax-c", DIGEST, "up-to-date")),
        (),
        1.0,
    )
    env = _github(tmp_path)
    report_result(run, "builder build", env)
    [line] = (tmp_path / "output").read_text().splitlines()
    name, _, value = line.partition("=")
    assert name == "digests" and json.loads(value) == {"jax-a": DIGEST, "jax-c": DIGEST}
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("### builder build\n")
    assert f"| `jax-a` | `{DIGEST}` | built | - |" in summary
    assert "| `jax-b` | - | failed | - |" in summary
    report_result(run, "builder build", env)  # appended, as the runner expects
    assert (tmp_path / "summary.md").read_text() == summary * 2


def test_resolve_writes_the_reference(tmp_path: Path) -> None:
    ref = f"127.0.0.1:5000/test/tiny@{DIGEST}"
    report_result(Resolved("jax-a", "prod", None, ref), "builder resolve", _github(tmp_path))
    assert (tmp_path / "output").read_text() == f"reference={ref}\n"
    assert (tmp_path / "summary.md").read_text() == ""


def test_nothing_is_written_outside_github_actions(tmp_path: Path) -> None:
    env = _github(tmp_path)
    report_result(Resolved("jax-a", "prod", None, "r@" + DIGEST), "builder resolve", {**env, "GITHUB_ACTIONS": "false"})
    assert (tmp_path / "output").read_text() == ""
    assert not re.search(r"\S", (tmp_path / "summary.md").read_text())


def test_fleet_problems_are_annotated(cli: Cli, tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("clusters:\n  - name: x\n    vendor: nvidia\n")  # a cluster needs gpus or hostinfo files
    result = cli("compat", "fleet", str(fleet), "--cuda", "12.8", code=2, cwd=ROOT, env=_github(tmp_path))
    commands = _commands(result.stderr)
    assert commands[0] == f"::error file={fleet},line=2,col=5,title=config::" + escape_data(
        "clusters[0].gpus: a cluster needs gpus (with drivers) or hostinfo files"
    ), result.stderr


def test_an_unwritable_runner_file_is_a_clear_error(tmp_path: Path) -> None:
    from builder.errors import ConfigError

    env = {**_github(tmp_path), "GITHUB_OUTPUT": str(tmp_path / "missing-dir" / "output")}
    ref = f"127.0.0.1:5000/test/tiny@{DIGEST}"
    with pytest.raises(ConfigError, match="cannot write the GitHub Actions file"):
        report_result(Resolved("jax-a", "prod", None, ref), "builder resolve", env)
