"""builder.checks.script_bundle: a declared check script and the project modules it imports, sent as one
program on stdin (``python -``, as ``builder check`` runs it in the image), run here by this python."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from builder.checks.script_bundle import bundle_script

ROOT = Path(__file__).resolve().parents[3]


def _run(program: bytes, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python - ARGS`` with ``program`` on stdin, in ``cwd`` (where no project module is importable)."""
    return subprocess.run(
        [sys.executable, "-", *args], input=program.decode(), capture_output=True, text=True, cwd=cwd, check=False
    )


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "evidence" / "fw").mkdir(parents=True)
    (root / "evidence" / "support.py").write_text(
        "import json\nimport helper\n\ndef shout(s):\n    return helper.up(s) + '!'\n"
    )
    (root / "evidence" / "helper.py").write_text("def up(s):\n    return s.upper()\n")
    (root / "evidence" / "fw" / "check.py").write_text(
        "import sys\nfrom support import shout\n\nprint(shout(sys.argv[1]), __name__)\n"
        "if sys.argv[2:]:\n    raise SystemExit(3)\n"
    )
    return root


def test_a_script_runs_with_the_modules_it_imports_from_directories_above_it(tmp_path: Path) -> None:
    root = _project(tmp_path)
    program = bundle_script(root, "evidence/fw/check.py")
    assert b"evidence/support.py" in program and b"evidence/helper.py" in program
    ok = _run(program, "hello", cwd=tmp_path)
    assert (ok.returncode, ok.stdout) == (0, "HELLO! __main__\n"), ok.stderr
    failed = _run(program, "hello", "fail", cwd=tmp_path)
    assert failed.returncode == 3


def test_a_traceback_names_the_project_file_and_line(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "evidence" / "helper.py").write_text("def up(s):\n    raise ValueError('broken helper')\n")
    r = _run(bundle_script(root, "evidence/fw/check.py"), "x", cwd=tmp_path)
    assert r.returncode == 1
    assert 'File "evidence/helper.py", line 2, in up' in r.stderr
    assert 'File "evidence/fw/check.py", line 4' in r.stderr


def test_the_nearest_module_wins_and_nothing_above_the_root_is_sent(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "evidence" / "fw" / "helper.py").write_text("def up(s):\n    return 'near'\n")
    (tmp_path / "outside.py").write_text("X = 1\n")
    (root / "evidence" / "fw" / "check.py").write_text("import helper\nprint(helper.up('a'))\n")
    program = bundle_script(root, "evidence/fw/check.py")
    assert b"evidence/fw/helper.py" in program and b"'evidence/helper.py'" not in program
    assert _run(program, cwd=tmp_path).stdout == "near\n"
    (root / "evidence" / "fw" / "check.py").write_text("import outside\n")
    assert bundle_script(root, "evidence/fw/check.py") == b"import outside\n"


def test_a_script_without_project_imports_or_that_does_not_parse_is_sent_unchanged(tmp_path: Path) -> None:
    root = _project(tmp_path)
    for text in ("import json\nprint(json.dumps(1))\n", "def broken(:\n"):
        (root / "evidence" / "fw" / "plain.py").write_text(text)
        assert bundle_script(root, "evidence/fw/plain.py") == text.encode()
    collective = ROOT / "evidence" / "jax" / "collective.py"
    assert bundle_script(ROOT, "evidence/jax/collective.py") == collective.read_bytes()


def test_the_declared_programs_carry_the_shared_evidence_module() -> None:
    for family in ("jax", "pytorch", "tensorflow"):
        for name in ("smoke_test.py", "benchmark.py"):
            program = bundle_script(ROOT, f"evidence/{family}/{name}")
            assert b"_builder_module('evidence_support', 'evidence/evidence_support.py'" in program
            compile(program, name, "exec")
