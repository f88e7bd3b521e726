"""A matrix names its policy (and fleet): every command without ``--policy`` uses it and says so;
matrices naming different policies are a clear error (exit 2) asking for ``--policy``; a named file
that is missing is exit 8 naming the matrix."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from builder.app import App
from builder.config import load_config
from tests.conftest import ROOT, Cli
from tests.integration.test_promote_support import make_keys, write_policy
from tests.projects import cpu_matrix

if TYPE_CHECKING:
    from pathlib import Path


def project(root: Path, registry: str, repo: str) -> Path:
    (root / "matrices").mkdir(parents=True)
    (root / "policies").mkdir()
    (root / "images").mkdir()
    shutil.copytree(ROOT / "images" / "tiny", root / "images" / "tiny")
    shutil.copytree(ROOT / "images" / "_common", root / "images" / "_common")
    keys = make_keys(root / "state")
    write_policy(root / "policies" / "default.yaml", keys)
    # a second policy whose stages differ: qa -> release
    text = (root / "policies" / "default.yaml").read_text()
    text = text.replace("  dev:\n", "  qa:\n").replace("from: dev", "from: qa").replace("  staging:\n", "  release:\n")
    text = text.replace("from: staging", "from: release")
    (root / "policies" / "strict.yaml").write_text(text)
    (root / "matrices" / "tiny.yaml").write_text("policy: strict\nfleet: demo\n" + cpu_matrix("tiny", repo))
    (root / "fleets").mkdir()
    shutil.copy(ROOT / "fleets" / "demo.yaml", root / "fleets" / "demo.yaml")
    (root / "builder.toml").write_text(f'registry = "{registry}"\nstate_dir = "state"\n')
    return root


def test_the_matrix_names_the_policy(cli: Cli, registry_address: str, unique_repo: str, tmp_path: Path) -> None:
    root = project(tmp_path / "p", registry_address, unique_repo)
    out = cli("status", "--json", cwd=root, code=None)
    stages = {r["stage"] for r in out.json()["rows"]}
    assert {"qa", "release", "prod"} <= stages and "dev" not in stages, stages
    assert "policy " in out.stderr and "strict.yaml (named by matrices/tiny.yaml" in out.stderr
    # --policy still chooses, and then nothing is said
    chosen = cli("status", "--json", "--policy", str(root / "policies" / "default.yaml"), cwd=root, code=None)
    assert "dev" in {r["stage"] for r in chosen.json()["rows"]} and "named by" not in chosen.stderr

    # the fleet the matrix names is what `builder run` gives static verdicts for without --fleet
    notes: list[str] = []
    app = App(load_config(root, {}), root / "docker", on_note=notes.append)
    assert app.bound("fleet", None) == (root / "fleets" / "demo.yaml").resolve()
    assert notes == [
        f"fleet {(root / 'fleets' / 'demo.yaml').resolve()} (named by matrices/tiny.yaml; --fleet chooses another)"
    ]
    assert app.bound("fleet", root / "x.yaml") == root / "x.yaml"

    # a second matrix judged by the default policy: the two disagree
    (root / "matrices" / "other.yaml").write_text(cpu_matrix("tinyb", unique_repo + "-b"))
    err = cli("status", cwd=root, code=2)
    assert "the matrices name different policy files" in err.stderr
    assert "matrices/other.yaml: policies/default.yaml" in err.stderr and "--policy" in err.stderr
    (root / "matrices" / "other.yaml").unlink()

    # a policy that does not exist: exit 8 naming the matrix and the field
    text = (root / "matrices" / "tiny.yaml").read_text().replace("policy: strict", "policy: nightly")
    (root / "matrices" / "tiny.yaml").write_text(text)
    missing = cli("status", cwd=root, code=8)
    assert "tiny.yaml" in missing.stderr and "`policy: nightly`" in missing.stderr and "Traceback" not in missing.stderr
