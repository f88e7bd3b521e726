"""Human (non-JSON) output of `builder check` prints the engine's words as written: rich markup must not
eat docker's ``capabilities: [[gpu]]`` (it printed ``capabilities: []`` before the text was escaped)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from builder.registry import RegistryClient
from tests.conftest import ROOT, Cli
from tests.integration.test_check import images, require_no_toolkit
from tests.integration.test_sign import push_tiny_image

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["images"]  # the module-scoped fixture (real images built and pushed for this module)


def test_failed_gpus_all_check_prints_engine_stderr_verbatim(cli: Cli, images: dict[str, str]) -> None:
    require_no_toolkit()
    out = cli("check", images["cuda"], "--no-attest", code=20, env={"COLUMNS": "400"}, cwd=ROOT).stderr
    assert "could not select device driver" in out, out  # the real engine error, in the step line
    assert "capabilities: [[gpu]]" in out, out[-3000:]
    assert "capabilities: []" not in out
    # the final error line (printed by builder.cli.main) is escaped too
    error_line = next(line for line in out.splitlines() if line.startswith("error:"))
    assert "container-toolkit-missing" in error_line


def test_static_fleet_same_header_and_exit_as_compat_fleet(cli: Cli, images: dict[str, str]) -> None:
    """`builder check REF --static --fleet` and `builder compat fleet` (given the image's NVIDIA_REQUIRE_CUDA
    and architectures) print the same fleet line and exit the same way (11): one summary (compat.fleets)."""
    wide = {"COLUMNS": "400"}
    static = cli("check", images["cuda"], "--static", "--fleet", "fleets/demo.yaml", code=11, env=wide, cwd=ROOT)
    facts = cli("check", images["cpu"], "--static", "--fleet", "fleets/demo.yaml", "--json", cwd=ROOT).json()
    assert facts["verdict"] == "ok" and facts["not_applicable"] == []  # a CPU image applies to every cluster
    require = "cuda>=12.8 brand=tesla,driver>=550,driver<551 brand=nvidia,driver>=550,driver<551"  # the image's
    compat = cli(
        "compat",
        "fleet",
        "fleets/demo.yaml",
        "--require",
        require,
        "--arch-list",
        "sm_80,sm_90,sm_120",
        code=11,
        env=wide,
        cwd=ROOT,
    )
    line = (
        "fleet demo: blocked  runs on: h100-train, a100-inference  blocked on: ws-4090  "
        "not applicable (nvidia image): mi300x"
    )
    assert line in static.stderr.splitlines()
    assert line in compat.stderr.splitlines()


def test_check_takes_a_variant_id(cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str) -> None:
    """`builder check VARIANT-ID` checks <registry>/<repository>:<variant-id> (the moving tag a build writes);
    an unknown id is exit 8 naming the close ids."""
    proj = tmp_path / "proj"
    (proj / "matrices").mkdir(parents=True)
    text = (ROOT / "tests" / "data" / "matrices" / "tiny.yaml").read_text()
    (proj / "matrices" / "tiny.yaml").write_text(text.replace("repository: test/tiny", f"repository: {unique_repo}"))
    (proj / "builder.toml").write_text(f'registry = "{registry_address}"\n')
    client = RegistryClient(registry_address, insecure=True)
    digest = push_tiny_image(client, unique_repo, "tiny-cpu-py3.11-debian12", os.urandom(8))
    fleet = str(ROOT / "fleets" / "demo.yaml")
    res = cli("-C", str(proj), "check", "tiny-cpu-py3.11-debian12", "--static", "--fleet", fleet, "--json")
    assert res.json()["reference"] == f"{registry_address}/{unique_repo}@{digest}"
    bad = cli("-C", str(proj), "check", "tiny-cpu-py3.11-debian11", "--static", "--fleet", fleet, code=8)
    assert "close matches: tiny-cpu-py3.11-debian12" in bad.stderr
