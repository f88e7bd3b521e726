"""`builder run` end to end on real parts: BuildKit, the registry, the device check containers,
signatures verified by real cosign, promotion under the shipped policy.

Uses the tiny test matrix in a repository of its own and a fresh state directory (fresh keys),
so earlier runs and other tests cannot interfere.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, Cli


@pytest.fixture
def tiny_matrix(tmp_path: Path, unique_repo: str) -> Path:
    text = (ROOT / "tests" / "data" / "matrices" / "tiny.yaml").read_text()
    path = tmp_path / "tiny.yaml"
    path.write_text(text.replace("repository: test/tiny", f"repository: {unique_repo}"))
    return path


@pytest.fixture
def run_env(tmp_path: Path, registry_address: str, mirror_base: str) -> dict[str, str]:
    state = tmp_path / "state"
    state.mkdir()
    shutil.copy(ROOT / ".builder" / "mirror.json", state / "mirror.json")
    return {"BUILDER_STATE_DIR": str(state), "BUILDER_REGISTRY": registry_address}


def test_run_builds_signs_checks_and_promotes(
    cli: Cli, docker_engine: str, cosign_bin: str, tiny_matrix: Path, run_env: dict[str, str]
) -> None:
    fleet = str(ROOT / "fleets" / "demo.yaml")
    report = cli(
        "run", "--json", "--matrix", str(tiny_matrix), "--to", "prod", "--fleet", fleet, env=run_env, cwd=ROOT
    ).json()
    by_id = {v["variant"]: v for v in report["variants"]}
    cpu, cuda = by_id["tiny-cpu-py3.11-debian12"], by_id["tiny-cu128-py3.11-debian12"]

    assert cpu["build"]["status"] == "built"
    assert cpu["check"]["status"] == "passed"
    # dev and staging allowed (signed by the build key, device check signed by the check runner)
    assert [s["stage"] for s in cpu["stages"] if s["status"] == "promoted"] == ["dev", "staging"]
    assert cpu["reached"] == "staging"
    prod = cpu["stages"][-1]
    assert prod["stage"] == "prod" and prod["status"] == "denied"
    assert any(r.startswith("approvals") for r in prod["reasons"]), prod["reasons"]
    assert any(r.startswith("change_ticket") for r in prod["reasons"]), prod["reasons"]

    # no GPU runtime on this host: the real docker error, diagnosed at the toolkit layer
    assert cuda["check"]["status"] == "failed"
    assert cuda["check"]["diagnosis"] == "container-toolkit-missing"
    assert cuda["check"]["at_fault"] == "container-toolkit"
    assert cuda["check"]["static"]["clusters"]["ws-4090"] == "blocked"
    assert cuda["reached"] == "dev"
    assert cuda["stages"][-1]["status"] == "denied"

    # an independent verifier accepts what the run signed
    state = Path(run_env["BUILDER_STATE_DIR"])
    ref = cpu["build"]["pinned"]
    for argv in (
        ["verify", "--key", str(state / "keys" / "builder.pub"), "--insecure-ignore-tlog", ref],
        [
            "verify-attestation",
            "--key",
            str(state / "keys" / "check-runner" / "builder.pub"),
            "--insecure-ignore-tlog",
            "--type",
            "https://builder-project.github.io/attestations/device-check/v1",
            ref,
        ],
    ):
        proc = subprocess.run([cosign_bin, *argv], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr

    # nothing changed: a no-op (nothing rebuilt, the passing check reused, stages left as they are)
    report2 = cli("run", "--json", "--matrix", str(tiny_matrix), "--to", "staging", env=run_env, cwd=ROOT).json()
    for v in report2["variants"]:
        assert v["build"]["status"] == "up-to-date"
        assert v["build"]["digest"] == by_id[v["variant"]]["build"]["digest"]
    cpu2 = {v["variant"]: v for v in report2["variants"]}["tiny-cpu-py3.11-debian12"]
    assert cpu2["check"]["status"] == "reused"
    assert [s["status"] for s in cpu2["stages"]] == ["already", "already"]

    # the human table keeps every variant id whole on a line, at 80 and 120 columns
    for columns in ("80", "120"):
        env = {**run_env, "COLUMNS": columns}
        lines = cli("run", "--matrix", str(tiny_matrix), "--to", "staging", env=env, cwd=ROOT).stderr.splitlines()
        table = [line for line in lines if any(c in line for c in "│┃─━")]  # commands stay whole to copy
        assert table and all(len(line) <= int(columns) for line in table), "\n".join(table)
        for variant in by_id:
            assert any(variant in line for line in lines), f"{variant} cut at {columns} columns"


def test_run_unknown_stage_is_a_clear_error(
    cli: Cli, tiny_matrix: Path, run_env: dict[str, str], docker_engine: str
) -> None:
    err = cli("run", "--matrix", str(tiny_matrix), "--to", "production", code=8, env=run_env, cwd=ROOT).stderr
    assert "production" in err and "staging" in err


def test_run_bundle_writes_cosign3_bundles_for_provenance_and_device_check(
    cli: Cli, docker_engine: str, cosign_bin: str, tiny_matrix: Path, run_env: dict[str, str], tmp_path: Path
) -> None:
    """`builder run --bundle` (the option build, sign and attest share): the provenance (build key)
    and the device-check result (check-runner key) are also Sigstore bundle referrers, which real
    cosign verifies with --new-bundle-format; the legacy tags stay for cosign 2 readers."""
    from builder.predicates import DEVICE_CHECK_V1, SLSA_PROVENANCE_V1

    args = ("run", "--json", "--bundle", "--matrix", str(tiny_matrix), "--select", "tiny-cpu*", "--to", "dev")
    [cpu] = cli(*args, env=run_env, cwd=ROOT).json()["variants"]
    assert cpu["build"]["status"] == "built" and cpu["check"]["status"] == "passed"
    ref = cpu["build"]["pinned"]
    state = Path(run_env["BUILDER_STATE_DIR"])
    root = tmp_path / "trusted_root.json"  # key-pair bundles need no Sigstore authority (no network here)
    root.write_text('{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}')
    for key, ptype in (
        (state / "keys" / "builder.pub", SLSA_PROVENANCE_V1),
        (state / "keys" / "check-runner" / "builder.pub", DEVICE_CHECK_V1),
    ):
        for bundle in (True, False):  # cosign 3's format and the legacy .att tag
            fmt = ["--new-bundle-format", "--trusted-root", str(root)] if bundle else []
            argv = [cosign_bin, "verify-attestation", *fmt, "--insecure-ignore-tlog", "--key", str(key)]
            proc = subprocess.run([*argv, "--type", ptype, ref], capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, (ptype, bundle, proc.stderr)
    pub = str(state / "keys" / "builder.pub")
    items = cli("verify", ref, "--key", pub, "--json", env=run_env, cwd=ROOT).json()["items"]
    assert any("->" in i["tag"] and i["predicate_type"] == SLSA_PROVENANCE_V1 and i["ok"] for i in items), items
