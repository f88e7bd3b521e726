"""Build steps during builds: the BuildKit step parser and the --progress modes."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from builder.build.variant import buildkit_step
from builder.cli.progress import BuildSteps
from tests.conftest import ROOT, Cli


@pytest.mark.parametrize(
    ("line", "step"),
    [
        ("#5 [builder 2/4] RUN pip install numpy\n", "#5 [builder 2/4] RUN pip install numpy"),
        ("#1 [internal] load build definition from Dockerfile", "#1 [internal] load build definition from Dockerfile"),
        ("#5 0.512 Collecting numpy", None),
        ("#5 DONE 0.3s", None),
        ("#7 exporting to image", None),
        ("plain output", None),
    ],
)
def test_buildkit_step(line: str, step: str | None) -> None:
    assert buildkit_step(line) == step


def _console(*, terminal: bool = False) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200, force_terminal=terminal, color_system=None), out


def test_plain_mode_prints_the_current_step_of_each_variant_being_built() -> None:
    con, out = _console()
    steps = BuildSteps("auto", con)  # not a terminal: plain
    assert steps.mode == "plain"
    assert steps.event("torch2.11-cu128-py3.12-ubuntu24.04", "building", "log")
    assert not steps.event("torch2.11-cu128-py3.12-ubuntu24.04", "build:step", "#5 [2/4] RUN pip install torch")
    assert steps.event("jax0.7-cpu-py3.11-debian12", "build:building", "log")
    steps.tick()
    lines = out.getvalue().splitlines()
    assert any("torch2.11-cu128-py3.12-ubuntu24.04  #5 [2/4] RUN pip install torch" in line for line in lines)
    assert any("jax0.7-cpu-py3.11-debian12  starting" in line for line in lines)
    assert steps.event("torch2.11-cu128-py3.12-ubuntu24.04", "built", "sha256:00")
    assert steps.event("jax0.7-cpu-py3.11-debian12", "failed", "boom")
    out.truncate(0)
    out.seek(0)
    steps.tick()
    assert out.getvalue() == ""  # nothing is being built


def test_quiet_mode_keeps_only_failures() -> None:
    con, out = _console()
    steps = BuildSteps("quiet", con)
    assert not steps.event("v", "building", "log")
    assert not steps.event("v", "build:pushed", "sha256:00")
    assert steps.event("v", "build:failed", "boom")
    assert out.getvalue() == ""


def test_tty_mode_shows_a_live_display_on_a_terminal() -> None:
    con, _ = _console(terminal=True)
    steps = BuildSteps("auto", con)
    assert steps.mode == "tty"
    with steps:
        steps.event("v", "building", "log")
        steps.event("v", "step", "#3 [1/2] RUN echo hi")
        assert steps.shown == ["#3 [1/2] RUN echo hi"]
        steps.event("v", "built", "sha256:00")
        assert steps.shown == []


@pytest.mark.parametrize("command", ["build", "run"])
def test_progress_option(cli: Cli, command: str) -> None:
    assert "--progress [auto|tty|plain|quiet]" in cli(command, "--help", cwd=ROOT).stdout
    assert "Invalid value for '--progress'" in cli(command, "--progress", "loud", code=2, cwd=ROOT).stderr
