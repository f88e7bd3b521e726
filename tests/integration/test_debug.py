"""``--debug`` shows every external command before it runs (process.py), on stderr."""

from __future__ import annotations

from tests.conftest import ROOT, Cli


def test_debug_doctor_echoes_each_external_command(cli: Cli, docker_engine: str, registry_address: str) -> None:
    out = cli("--debug", "doctor", env={"BUILDER_REGISTRY": registry_address}, cwd=ROOT)
    lines = [line for line in out.stderr.splitlines() if line.startswith("+ ")]
    assert lines[0].startswith("+ docker version"), out.stderr
    assert any(line.startswith("+ docker buildx version") for line in lines), out.stderr
    # each command is echoed before its result is reported
    assert out.stderr.index("+ docker version") < out.stderr.index("engine")


def test_without_debug_nothing_is_echoed(cli: Cli, docker_engine: str, registry_address: str) -> None:
    out = cli("doctor", env={"BUILDER_REGISTRY": registry_address}, cwd=ROOT)
    assert "+ docker" not in out.stderr
