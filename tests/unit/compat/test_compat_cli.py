"""``builder compat check`` / ``builder compat fleet``: the docs/compat.md decisions through the real CLI entry
point (in process through the ``cli`` fixture, which checks every ``--json`` document against its schema, and
once as a subprocess of the installed script)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, Cli

DATA = ROOT / "tests" / "data" / "compat"


def _real(release: str) -> str:
    for line in (DATA / "require-cuda-real.txt").read_text().splitlines():
        if line.startswith(release + " "):
            return line.split(" ", 1)[1]
    raise AssertionError(release)


def run(cli: Cli, *args: str) -> tuple[int, str, str]:
    """``builder ARGS``: exit code, stdout, stderr (any exit code)."""
    r = cli(*args, code=None)
    return r.code, r.stdout, r.stderr


def check_json(cli: Cli, *args: str) -> tuple[int, dict[str, Any]]:
    r = cli("compat", "check", "--json", *args, code=None)
    return r.code, r.json()  # exactly one JSON document on stdout


def test_geforce_4090_r550_vs_1281_string_blocked(cli: Cli) -> None:
    code, doc = check_json(
        cli, "--driver", "550.144.03", "--gpu", "NVIDIA GeForce RTX 4090", "--require", _real("12.8.1")
    )
    assert code == 11
    assert doc["verdict"] == "blocked" and doc["min_driver"] == "570.26"
    assert isinstance(doc["reasons"], list) and any(">= 570.26" in r for r in doc["reasons"])


@pytest.mark.parametrize(("gpu", "brand"), [("NVIDIA H100 80GB HBM3", "NVIDIA"), ("Tesla T4", None)])
def test_datacenter_r550_vs_1281_string_forward_compat(cli: Cli, gpu: str, brand: str | None) -> None:
    extra = ["--brand", brand] if brand else []
    code, doc = check_json(cli, "--driver", "550.144.03", "--gpu", gpu, *extra, "--require", _real("12.8.1"))
    assert code == 0
    assert doc["verdict"] == "forward-compat" and doc["min_driver"] == "570.26"
    assert doc["needs_cuda_compat"] is True


def test_official_image_shortcut_matches_the_real_string(cli: Cli) -> None:
    code, doc = check_json(cli, "--driver", "550.144.03", "--gpu", "Tesla T4", "--image-cuda", "12.8.1")
    assert code == 0 and doc["verdict"] == "forward-compat"
    assert doc["matched_term"] == "brand=tesla,driver>=550,driver<551"


def test_h100_r535_cuda_124_app_minor_version_compat(cli: Cli) -> None:
    code, doc = check_json(cli, "--driver", "535.161.08", "--gpu", "NVIDIA H100 80GB HBM3", "--cuda", "12.4")
    assert code == 0 and doc["verdict"] == "minor-version-compat"


@pytest.mark.parametrize("gpu", ["NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090", "Tesla T4"])
def test_cuda_130_r580_ok_r525_blocked(cli: Cli, gpu: str) -> None:
    code, doc = check_json(cli, "--driver", "580.65.06", "--gpu", gpu, "--cuda", "13.0")
    assert code == 0 and doc["verdict"] == "ok"
    code, doc = check_json(cli, "--driver", "525.60.13", "--gpu", gpu, "--cuda", "13.0")
    assert code == 11 and doc["verdict"] == "blocked" and doc["min_driver"] == "580.65.06"
    assert any("needs driver >= 580" in r for r in doc["reasons"])


@pytest.mark.parametrize(
    ("driver", "gpu", "cuda", "code", "verdict", "phrase"),
    [
        ("570.86.15", "Tesla K80", "12.8", 11, "blocked", "the last branch supporting it is R470"),
        ("535.0", "NVIDIA GeForce RTX 5090", "12.4", 11, "blocked", "first supported by CUDA 12.8"),
        ("535.161.08", "NVIDIA H100 80GB HBM3", "12.2", 0, "ok", "Hopper (sm_90) is supported by driver branch R535"),
        ("580.65.06", "NVIDIA A100-SXM4-40GB", "13.0", 0, "ok", "and CUDA 13.0 (CUDA 11.0 and newer)"),
        ("580.65.06", "Tesla P100-PCIE-16GB", "13.0", 11, "blocked", "CUDA 13.0 dropped Pascal (sm_60)"),
    ],
)
def test_gpu_generation_decisions(
    cli: Cli, driver: str, gpu: str, cuda: str, code: int, verdict: str, phrase: str
) -> None:
    got, doc = check_json(cli, "--driver", driver, "--gpu", gpu, "--cuda", cuda)
    assert (got, doc["verdict"]) == (code, verdict)
    assert any(phrase in r and "gpu-archs.csv line" in r for r in doc["reasons"])


def test_arch_list_option(cli: Cli) -> None:
    code, doc = check_json(
        cli,
        "--driver",
        "575.64.03",
        "--gpu",
        "NVIDIA GeForce RTX 5070",
        "--cuda",
        "12.6",
        "--arch-list",
        "sm_50,sm_60,sm_70,sm_75,sm_80,sm_86,sm_90",
    )
    assert code == 11 and doc["arch_covered"] is False


def test_human_output_and_error(cli: Cli) -> None:
    code, out, err = run(
        cli,
        "compat",
        "check",
        "--driver",
        "550.144.03",
        "--gpu",
        "NVIDIA GeForce RTX 4090",
        "--image-cuda",
        "12.8.1",
    )
    assert code == 11 and out == ""
    assert "blocked" in err and "570.26" in err and "error:" in err
    code, out, err = run(cli, "compat", "check", "--driver", "580.65.06", "--gpu", "Tesla T4", "--cuda", "13.0")
    assert code == 0 and "ok" in err


def test_usage_errors(cli: Cli) -> None:
    code, _, err = run(cli, "compat", "check", "--driver", "550.144.03", "--gpu", "Tesla T4")
    assert code == 2 and "--cuda" in err
    code, _, _ = run(cli, "compat", "check", "--driver", "550.144.03", "--require", "cuda>=12.8 colour=blue")
    assert code == 2  # ConfigError: the bad constraint is named


def test_fleet_command(cli: Cli) -> None:
    code, out, _ = run(cli, "compat", "fleet", str(ROOT / "fleets" / "demo.yaml"), "--image-cuda", "12.8.1", "--json")
    doc = json.loads(out)
    assert code == 11
    verdicts = {c["cluster"]: c["verdict"] for c in doc["clusters"]}
    assert verdicts == {
        "h100-train": "forward-compat",
        "a100-inference": "ok",
        "ws-4090": "blocked",
        "mi300x": "blocked",
    }
    # the fleet document `builder check --static --fleet` prints too: summary line, vendors, host rows
    assert doc["header"].startswith("fleet demo: blocked") and doc["blocked_on"] == ["ws-4090"]
    assert [c["cluster"] for c in doc["clusters"] if not c["applies"]] == doc["not_applicable"] == ["mi300x"]
    assert all(h["host"]["driver"] for c in doc["clusters"] for h in c["hosts"])
    code, out, _ = run(
        cli, "compat", "fleet", str(ROOT / "fleets" / "demo.yaml"), "--cuda", "12.8", "--cluster", "a100-inference"
    )
    assert code == 0


def test_installed_script_exit_code() -> None:
    exe = Path(sys.executable).parent / "builder"
    proc = subprocess.run(
        [
            str(exe),
            "--json",
            "compat",
            "check",
            "--driver",
            "525.60.13",
            "--gpu",
            "NVIDIA H100 80GB HBM3",
            "--cuda",
            "13.0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 11, proc.stderr
    assert json.loads(proc.stdout)["verdict"] == "blocked"


def test_cuda_info_command(cli: Cli) -> None:
    code, out, _ = run(cli, "compat", "cuda", "12.8.1", "--json")
    doc = json.loads(out)
    assert code == 0
    assert doc["min_driver"] == "570.26" and doc["branch"] == "R570"
    assert doc["require_cuda"] == _real("12.8.1") and doc["require_cuda_constructed"] is False
    assert doc["forward_compat_branches"] == ["R470", "R535", "R550", "R560", "R565"]
    code, out, _ = run(cli, "compat", "cuda", "11.0", "--json")
    assert json.loads(out)["min_driver"] == "450.36.06"
    code, _, err = run(cli, "compat", "cuda", "14.9")
    assert code == 8 and "cuda-driver.csv" in err


def test_wheels_command(cli: Cli) -> None:
    code, out, _ = run(cli, "compat", "wheels", "torch", "2.9", "--json")
    rows = json.loads(out)
    assert code == 0
    assert [r["wheel"] for r in rows] == ["cu126", "cu128", "cu130", "rocm6.4", "cpu"]
    assert "sm_120" in rows[1]["archs"] and rows[2]["status"] == "experimental"
    code, _, _ = run(cli, "compat", "wheels", "torch", "3.0")
    assert code == 8


def test_fleet_by_name(cli: Cli) -> None:
    code, out, _ = run(
        cli, "-C", str(ROOT), "compat", "fleet", "demo", "--cuda", "12.8", "--cluster", "a100-inference", "--json"
    )
    assert code == 0 and json.loads(out)["fleet"] == "demo"
    code, _, err = run(cli, "-C", str(ROOT), "compat", "fleet", "prod", "--cuda", "12.8")
    assert code == 8 and "demo" in err


def test_an_unknown_cuda_release_gets_no_verdict(cli: Cli) -> None:
    """A CUDA line no table knows is an error (as `compat cuda` says), not a verdict made of guesses."""
    out = cli("compat", "check", "--driver", "580.65.06", "--gpu", "NVIDIA H100", "--cuda", "99.9", "--json", code=8)
    assert "CUDA 99.9 is not in" in out.json()["error"]["message"]
    assert "None" not in out.stderr
