"""Input files named on the command line: a missing one is not-found (exit 8) whatever the
option, refused before any work; an invalid fleet file is refused up front too (config error,
exit 2), and a policy whose ``fleet`` rule names an invalid fleet file is invalid (exit 30, the
problem at the rule's line). docs/exit-codes.md documents the codes."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.conftest import ROOT

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli

# A fleet file that parses but fails validation (a cluster needs gpus or hostinfo files).
BAD_FLEET = "clusters:\n  - name: x\n    vendor: nvidia\n"

MISSING = "no-such-file.yaml"


@pytest.mark.parametrize(
    ("args", "missing"),
    [
        (("matrix", "list", "--matrix", MISSING), MISSING),
        (("run", "--matrix", "matrices/demo.yaml", "--fleet", MISSING), MISSING),
        (("run", "--matrix", MISSING, "--policy", "policies/default.yaml"), MISSING),
        (("run", "--matrix", "matrices/demo.yaml", "--policy", MISSING), MISSING),
        (("check", "jax0.7-cpu-py3.11-debian12", "--static", "--fleet", "no-such-fleet"), "no-such-fleet"),
        (("status", "--policy", MISSING), MISSING),
        (("promote", "variant", "--to", "dev", "--policy", MISSING), MISSING),
        (("resolve", "variant", "--stage", "dev", "--trust-root", MISSING), MISSING),
        (("check", "jax0.7-cpu-py3.11-debian12", "--static", "--host", MISSING), MISSING),
        (("diagnose", "--host", MISSING, "-"), MISSING),
        (("diagnose", MISSING), MISSING),
        (("attest", "ref", "--predicate-type", "https://x/y/v1", "--predicate", MISSING), MISSING),
    ],
)
def test_a_missing_input_file_is_not_found_whatever_the_option(cli: Cli, args: tuple[str, ...], missing: str) -> None:
    result = cli(*args, code=8, cwd=ROOT, stdin="")
    assert missing in result.stderr and "Traceback" not in result.stderr
    error = cli(*args, "--json", code=8, cwd=ROOT, stdin="").json()["error"]
    assert error["kind"] == "not-found" and missing in error["message"]


def test_a_missing_fleet_name_names_the_known_fleets(cli: Cli) -> None:
    err = cli("run", "--matrix", "matrices/demo.yaml", "--fleet", "nope", code=8, cwd=ROOT).stderr
    assert "no fleet named 'nope'" in err and "demo" in err


@pytest.mark.parametrize(
    "args",
    [
        ("run", "--matrix", "matrices/demo.yaml", "--select", "no-such-variant*"),
        ("check", "no-such-variant", "--static"),
    ],
)
def test_an_invalid_fleet_file_is_refused_before_any_work(cli: Cli, tmp_path: Path, args: tuple[str, ...]) -> None:
    """With a valid fleet the same command gets further (exit 8: the variant selects nothing);
    with an invalid fleet it stops at the option, a config error listing the problem."""
    fleet = tmp_path / "bad.yaml"
    fleet.write_text(BAD_FLEET)
    cli(*args, "--fleet", "demo", code=8, cwd=ROOT)
    result = cli(*args, "--fleet", str(fleet), "--json", code=2, cwd=ROOT)
    error = result.json()["error"]
    assert error["exit_code"] == 2
    [problem] = error["details"]["problems"]
    assert problem["line"] == 2 and "needs gpus" in problem["message"]


def test_policy_validate_reports_an_invalid_fleet_file_at_the_rule(cli: Cli, tmp_path: Path) -> None:
    fleet = tmp_path / "bad.yaml"
    fleet.write_text(BAD_FLEET)
    text = (ROOT / "policies" / "default.yaml").read_text()
    assert "file: ../fleets/demo.yaml" in text
    policy = tmp_path / "policy.yaml"
    policy.write_text(text.replace("file: ../fleets/demo.yaml", f"file: {fleet}"))
    rule_line = 1 + policy.read_text().splitlines().index(f"            file: {fleet}")

    cli("policy", "validate", str(ROOT / "policies" / "default.yaml"), cwd=ROOT)
    result = cli("policy", "validate", str(policy), "--json", code=30, cwd=ROOT)
    [checked] = json.loads(result.stdout)["error"]["details"]["files"]
    problems = [p for p in checked["problems"] if p["severity"] == "error"]
    [problem] = problems
    assert problem["line"] == rule_line and problem["path"].endswith("fleet.file")
    assert f"fleet file {fleet} is invalid" in problem["message"] and "needs gpus" in problem["message"]


HOST_PROBLEMS = [
    ({"vendor": "nvidia", "driver_version": "banana"}, "driver_version", "'banana' is not a driver version"),
    ({"vendor": "nvidia", "driver_version": "550.54.15", "cuda_version": "twelve"}, "cuda_version", "'twelve'"),
    ({"vendor": "amd", "driver_version": "banana"}, "driver_version", "not an amdgpu driver version"),
    ({"vendor": "amd", "rocm_version": "six"}, "rocm_version", "'six' is not a ROCm version"),
]


@pytest.mark.parametrize(("doc", "field", "said"), HOST_PROBLEMS)
@pytest.mark.parametrize(
    "args",
    [
        ("hostinfo", "--from", "{file}"),
        ("diagnose", "-", "--host", "{file}"),
        ("check", "jax0.7-cpu-py3.11-debian12", "--static", "--host", "{file}"),
    ],
)
def test_a_host_file_with_a_bad_field_is_one_error_for_every_command(
    cli: Cli, tmp_path: Path, args: tuple[str, ...], doc: dict[str, str], field: str, said: str
) -> None:
    """One validation of host files (builder.checks.host.schema) for hostinfo --from, diagnose --host and
    check --static --host: exit 21 naming the file and the field. diagnose blamed `--driver` (exit 2) for a
    host file's driver and the two others accepted it (exit 0)."""
    host = tmp_path / "host.json"
    host.write_text(json.dumps(doc))
    argv = [a.format(file=host) for a in args]
    error = cli(*argv, "--json", code=21, cwd=ROOT, stdin="CUDA error: no kernel image is available\n").json()["error"]
    assert error["kind"] == "host-probe" and str(host) in error["message"]
    assert f"{field}: " in error["message"] and said in error["message"] and "--driver" not in error["message"]


def test_real_driver_versions_of_both_vendors_are_accepted(cli: Cli, tmp_path: Path) -> None:
    host = tmp_path / "host.json"
    for doc in (
        {"vendor": "nvidia", "driver_version": "550.144.03", "cuda_version": "12.4"},
        {"vendor": "amd", "driver_version": "6.10.5", "rocm_version": "6.3.1"},
        {"vendor": "amd", "driver_version": "6.8.0-45-generic"},  # an inbox amdgpu: the kernel's release
    ):
        host.write_text(json.dumps(doc))
        assert cli("hostinfo", "--from", str(host), "--json").json()["driver_version"] == doc["driver_version"]


@pytest.mark.parametrize(
    ("option", "value"),
    [("--image-cuda", "xyz"), ("--require-cuda", "cuda>=abc"), ("--require-cuda", "xyz"), ("--driver", "banana")],
)
def test_diagnose_refuses_an_option_value_that_is_no_version(cli: Cli, option: str, value: str) -> None:
    """`diagnose --image-cuda xyz` was taken silently (and decided nothing): exit 2 naming the option."""
    error = cli("diagnose", "-", option, value, "--json", code=2, stdin="CUDA error: unknown error\n").json()["error"]
    assert error["message"].startswith(option) and repr(value) in error["message"] and error["hint"]
    cli("diagnose", "-", "--image-cuda", "12.8", "--require-cuda", "cuda>=12.8 brand=tesla,driver>=535", stdin="x\n")
