"""The CLI skeleton (builder.cli): help, version, lazy imports, error mapping, exit-code documentation."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import TYPE_CHECKING

from builder import __version__, errors
from builder.cli import COMMANDS, cli
from tests.conftest import ROOT, Cli

if TYPE_CHECKING:
    from pathlib import Path


def test_version(cli: Cli) -> None:
    assert cli("--version").stdout.strip() == f"builder, version {__version__}"


def test_help_lists_every_available_command_with_one_line(cli: Cli) -> None:
    out = cli("--help").stdout
    listed = re.findall(r"^  (\w[\w-]*)\s{2,}(.+)$", out.split("Commands:")[1], re.M)
    names = [n for n, _ in listed]
    assert "doctor" in names
    for name, summary in listed:
        assert name in COMMANDS
        assert summary.strip(), name


def test_every_registered_command_imports_and_is_a_click_command() -> None:
    ctx = cli.make_context("builder", ["--help"], resilient_parsing=True)
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None, name
        assert cmd.help or cmd.short_help or cmd.callback.__doc__, f"{name} has no help text"


def test_every_command_runs_through_the_process_entry_point() -> None:
    """``builder NAME --help`` for every command, through ``builder.__main__.run`` (what the
    console script and ``python -m builder`` run), in one process: the start-up path that pauses
    and resumes the garbage collector. (Before: loading the ``gc`` command module replaced
    ``builder.cli``'s ``gc`` name, and ``builder gc`` died with an AttributeError.)"""
    script = (
        "import sys\n"
        "from builder.__main__ import run\n"
        "from builder.cli import COMMANDS\n"
        "for name in COMMANDS:\n"
        "    sys.argv = ['builder', name, '--help']\n"
        "    try:\n"
        "        run()\n"
        "    except SystemExit as stop:\n"
        "        assert stop.code in (0, None), (name, stop.code)\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=False)
    assert proc.returncode == 0 and proc.stdout.rstrip().endswith("ok"), proc.stderr[-2000:]


def test_help_imports_no_heavy_module() -> None:
    """`builder --help` must not import the engine client, HTTP stack, sigstore or rich (a fresh
    interpreter: what this test process already imported does not count)."""
    code = (
        "import sys\n"
        "from builder.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('requests', 'sigstore', 'rich', 'docker', "
        "'cryptography', 'jinja2', 'pydantic') if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY=\n" in proc.stderr or proc.stderr.strip().endswith("HEAVY="), proc.stderr


def test_unknown_command_is_usage_error_exit_2(cli: Cli) -> None:
    assert "No such command" in cli("no-such-command", code=2, cwd=ROOT).stderr


def test_exit_codes_unique_and_documented() -> None:
    codes = [cls.exit_code for cls in errors.ALL_ERRORS]
    assert len(codes) == len(set(codes)), "every failure kind has its own exit code"
    assert all(c >= 2 for c in codes)
    doc = (ROOT / "docs" / "exit-codes.md").read_text()
    rows = dict(re.findall(r"^\| (\d+) \| `?([\w-]+)`? \|", doc, re.M))
    for cls in errors.ALL_ERRORS:
        if cls is errors.ConfigError:
            continue  # shares 2 with Click usage errors, documented in the 2 row
        assert rows.get(str(cls.exit_code)) == cls.kind, f"docs/exit-codes.md row for {cls.__name__}"
    assert rows.get("0") and rows.get("1") and rows.get("2")


def test_builder_error_is_mapped_to_its_exit_code_and_json(cli: Cli) -> None:
    doc = cli("--json", "doctor", code=errors.ConfigError.exit_code, env={"BUILDER_WORKERS": "zero"}).json()
    assert doc["error"]["kind"] == "config"
    assert "BUILDER_WORKERS" in doc["error"]["message"]


def test_errors_carry_hints() -> None:
    for cls in errors.ALL_ERRORS:
        exc = cls("something failed")
        assert exc.hint, cls.__name__
        assert "hint:" in exc.diagnostics()


def test_json_usage_error_is_one_json_document(cli: Cli) -> None:
    doc = cli("--json", "no-such-command", code=2, cwd=ROOT).json()
    assert doc["error"]["kind"] == "usage" and "no-such-command" in doc["error"]["message"]


def test_outside_a_checkout_warns_where_it_looked(cli: Cli, tmp_path: Path) -> None:
    err = cli("matrix", "list", code=2, cwd=tmp_path).stderr
    assert "matrices directory" in err and "-C DIR" in err


def test_an_error_document_into_a_closed_pipe_is_no_traceback(tmp_path: Path) -> None:
    """`builder verify REF --json | head` where the reader is gone before the error document is
    written: the command's own exit code and message, no BrokenPipeError traceback."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader went away
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "builder", "--json", "verify", "127.0.0.1:5000/ml/jax", "--key", "k.pub"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 16, proc.stderr  # the command's own error (no such key file), not a crash
    assert "Traceback" not in proc.stderr and "public key k.pub cannot be read" in proc.stderr


def _into_closed_pipes(args: list[str], *, stdout: bool, stderr: bool) -> int:
    """Exit status of ``builder ARGS`` (a process, in the checkout) whose stdout and/or stderr is a
    pipe whose reader already went away (``builder ... 2>&1 | head -2`` once head has exited)."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "builder", *args],
            stdout=write_end if stdout else subprocess.DEVNULL,
            stderr=write_end if stderr else subprocess.DEVNULL,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    return proc.returncode


def test_a_reader_gone_from_either_stream_stops_builder_with_141() -> None:
    """docs/exit-codes.md: a closed reader is 141 (quietly), never 1 (a bug) and never 120 (the
    interpreter's failed closing flush): human output on stderr (rich tables), the `--json`
    document and `--help` on stdout (click.echo), and both streams into one pipe (`2>&1 | head`)."""
    assert _into_closed_pipes(["matrix", "list"], stdout=False, stderr=True) == 141
    assert _into_closed_pipes(["matrix", "list"], stdout=True, stderr=True) == 141
    assert _into_closed_pipes(["--json", "matrix", "list"], stdout=True, stderr=False) == 141
    assert _into_closed_pipes(["--help"], stdout=True, stderr=True) == 141
    # a failing command keeps its own exit code when its error message cannot be written
    assert _into_closed_pipes(["resolve", "no-such-variant", "--stage", "dev"], stdout=True, stderr=True) == 8


def test_the_process_skips_the_closing_garbage_collection_and_in_process_runs_do_not(cli: Cli) -> None:
    """``builder`` as a process freezes its objects at exit (the interpreter's closing cyclic
    collection only walks memory the OS frees anyway); its atexit handlers still run. ``main`` called
    in-process (this fixture, a library caller) leaves the caller's garbage collector alone."""
    import gc

    probe = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count() > 0, flush=True))\n"
        "sys.argv = ['builder', '--version']\n"
        "from builder.cli import main\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"builder, version {__version__}" in proc.stdout
    assert "frozen at exit: True" in proc.stdout
    before = gc.get_freeze_count()
    cli("--version")
    assert gc.get_freeze_count() == before
