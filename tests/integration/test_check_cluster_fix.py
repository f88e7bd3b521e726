"""A failed check on a fleet cluster names the node in its fix: the engine runner knows the node
(its engine's `docker info` Name), so the fix says `on node NAME:` where a local check says `on the
host:`, in `--json` (the diagnosis, the error's hint) and in the human fleet table's fix line. Real
engine and registry: a CUDA-labelled image asks for `--gpus all` on a host without the NVIDIA
Container Toolkit (container-toolkit-missing, whose fix is for the host)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tests.conftest import ROOT, Cli
from tests.integration.test_check import images, require_no_toolkit

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["images"]  # the module-scoped fixture (real images built and pushed for this module)


def test_the_fix_of_a_cluster_check_names_the_node(cli: Cli, images: dict[str, str], tmp_path: Path) -> None:
    require_no_toolkit()
    fleet = tmp_path / "fleet.yaml"
    cluster = {"name": "local", "vendor": "nvidia", "gpus": ["NVIDIA H100 80GB HBM3"], "drivers": ["550.144.03"]}
    fleet.write_text(json.dumps({"name": "test", "clusters": [{**cluster, "runner": {"kind": "docker"}}]}))
    args = ("check", images["cuda"], "--cluster", "local", "--fleet", str(fleet), "--no-attest")
    err = cli(*args, "--json", code=20, cwd=ROOT).json()["error"]
    result = err["details"]["result"]
    node = result["placement"]["node"]
    assert node and result["placement"]["cluster"] == "local"
    assert err["details"]["diagnosis"] == "container-toolkit-missing"
    fix = result["diagnosis"]["fix"]
    assert f"on node {node}: install the NVIDIA Container Toolkit" in fix and "on the host" not in fix, fix
    assert f"on node {node}:" in err["hint"]

    local = cli("check", images["cuda"], "--no-attest", "--json", code=20, cwd=ROOT).json()["error"]
    assert local["details"]["result"]["diagnosis"]["fix"].startswith("on the host:")  # no node: the host

    human = cli("check", images["cuda"], "--fleet", str(fleet), "--no-attest", code=20, cwd=ROOT)
    fix_line = next(ln for ln in human.stderr.splitlines() if ln.startswith("  fix:"))
    assert fix_line.startswith(f"  fix: on node {node}: "), fix_line
