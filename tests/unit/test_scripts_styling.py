"""scripts/setup and scripts/slurm style their log lines (bold, dim) only for a person at a terminal:
stderr (where those lines go) must be a terminal and NO_COLOR unset or empty (https://no-color.org/:
"when present and not an empty string, [it] prevents the addition of ANSI color"). A log file, a pipe
or NO_COLOR=1 gets plain text with no escape codes."""

from __future__ import annotations

import os
import pty
import subprocess

from tests.conftest import ROOT

ESC = "\x1b["
# every step but the venv check, which is quick when .venv is up to date and says so through log()
SKIP_ALL = "engine registry mirror gpu-data slurm"


def _setup_to_file(extra: dict[str, str]) -> str:
    env = {**os.environ, "BUILDER_SETUP_SKIP": SKIP_ALL, **extra}
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup")], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def _setup_on_terminal(extra: dict[str, str]) -> str:
    """Run scripts/setup with stderr (and stdout) on a real pseudo-terminal; return what it wrote."""
    env = {**os.environ, "BUILDER_SETUP_SKIP": SKIP_ALL, **extra}
    if "NO_COLOR" not in extra:
        env.pop("NO_COLOR", None)
    main, sub = pty.openpty()
    proc = subprocess.Popen(["bash", str(ROOT / "scripts" / "setup")], stdout=sub, stderr=sub, env=env)
    os.close(sub)
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:  # EIO: the child closed its end of the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    assert proc.wait(timeout=120) == 0
    return b"".join(chunks).decode()


def test_setup_writes_plain_text_to_a_file() -> None:
    out = _setup_to_file({})
    assert "setup:" in out and "venv: .venv" in out
    assert ESC not in out


def test_setup_honours_no_color_even_on_a_terminal() -> None:
    out = _setup_on_terminal({"NO_COLOR": "1"})
    assert "setup:" in out and "venv: .venv" in out
    assert ESC not in out


def test_setup_styles_on_a_terminal_without_no_color() -> None:
    # the same run on a terminal is bold: the check above is the styling switched off, not absent
    assert ESC + "1msetup:" in _setup_on_terminal({})
    # an empty NO_COLOR does not count as set (no-color.org)
    assert ESC + "1msetup:" in _setup_on_terminal({"NO_COLOR": ""})


def test_no_script_styles_unconditionally() -> None:
    for script in sorted((ROOT / "scripts").iterdir()):
        if not script.is_file():
            continue
        for number, line in enumerate(script.read_text(errors="replace").splitlines(), 1):
            if "\\033[" in line or "\\e[" in line:
                assert "-t 2" in line and "NO_COLOR" in line, f"{script.name}:{number} styles unconditionally"
