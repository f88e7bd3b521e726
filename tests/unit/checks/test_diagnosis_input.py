"""`builder diagnose` on inputs that are not error text: a missing, unreadable or directory path is
NotFoundError (exit 8, the file named, a hint to stdin and the samples), never a traceback; an empty
input says so; the driver-too-old fix names the minimum driver when the image's CUDA is known and
says what to pass when it is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.checks.diagnosis import Context, diagnose, read_input
from builder.errors import NotFoundError
from tests.conftest import ROOT, Cli

DATA = ROOT / "tests" / "data" / "errors"


def test_missing_file_is_not_found_exit_8(tmp_path: Path, cli: Cli) -> None:
    missing = tmp_path / "error.txt"
    res = cli("diagnose", str(missing), code=8)
    assert "Traceback" not in res.stderr
    assert str(missing) in res.stderr and "does not exist" in res.stderr
    assert "builder diagnose -" in res.stderr and "tests/data/errors" in res.stderr
    doc = cli("diagnose", str(missing), "--json", code=8).json()["error"]
    assert doc["kind"] == "not-found" and doc["exit_code"] == 8 and doc["details"]["path"] == str(missing)


def test_directory_is_not_found_exit_8(tmp_path: Path, cli: Cli) -> None:
    res = cli("diagnose", str(tmp_path), code=8)
    assert "is a directory" in res.stderr and str(tmp_path) in res.stderr and "Traceback" not in res.stderr


def test_unreadable_file_is_not_found(cli: Cli) -> None:
    # /proc/sys/vm/compact_memory is write-only: reading it fails with EACCES even for root
    p = Path("/proc/sys/vm/compact_memory")
    if not p.exists():
        pytest.skip("no /proc/sys/vm/compact_memory on this kernel")
    with pytest.raises(NotFoundError) as exc:
        read_input(p)
    assert "cannot be read" in exc.value.message and str(p) in exc.value.message
    res = cli("diagnose", str(p), code=8)
    assert "Traceback" not in res.stderr, res.stderr


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_empty_input_says_so(text: str, cli: Cli) -> None:
    r = diagnose(text)
    assert r.key == "unknown"
    assert "the input was empty" in r.summary
    assert "[]" not in r.summary + r.fix
    res = cli("diagnose", "-", stdin=text)  # exit 0, documented: the diagnosis is the output
    assert "the input was empty" in res.stderr + res.stdout
    assert "[]" not in res.stderr + res.stdout


def test_unknown_quotes_lines_not_a_python_list(tmp_path: Path, cli: Cli) -> None:
    p = tmp_path / "e.txt"
    p.write_text("something odd happened\nfatal: the frobnicator failed\n")
    res = cli("diagnose", str(p))
    out = res.stderr + res.stdout
    assert "    fatal: the frobnicator failed" in out and "['" not in out


TORCH_TOO_OLD = (
    "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU "
    "driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx\n"
)


def test_driver_too_old_without_image_cuda_says_what_to_pass() -> None:
    r = diagnose(TORCH_TOO_OLD)
    assert r.key == "driver-too-old-for-image"
    assert r.facts["driver_cuda"] == "11.4"
    assert "min_driver" not in r.fix  # no placeholder for a fact that is not there
    assert "--image-cuda X.Y" in r.fix and "--require-cuda" in r.fix and "11.4" in r.fix


def test_driver_too_old_with_image_cuda_names_the_minimum(cli: Cli) -> None:
    r = diagnose(TORCH_TOO_OLD, Context(image_cuda="12.4"))
    assert r.facts["min_driver"] == "550.54.14"
    assert ">= 550.54.14" in r.fix and "min_driver" not in r.fix
    doc = cli("diagnose", "-", "--image-cuda", "12.4", "--json", stdin=TORCH_TOO_OLD).json()
    assert doc["facts"]["min_driver"] == "550.54.14" and "550.54.14" in doc["fix"]
    assert (doc["diagnosis"], doc["at_fault"]) == (r.key, r.at_fault)


def test_driver_too_old_with_require_cuda_names_the_minimum() -> None:
    r = diagnose(TORCH_TOO_OLD, Context(require_cuda="cuda>=12.8 brand=tesla,driver>=535,driver<536"))
    assert r.facts["min_driver"] == "570.26" and "570.26" in r.fix


def test_forward_compat_fix_has_no_placeholder() -> None:
    text = (DATA / "forward-compat-unsupported-01.txt").read_text()
    assert "see min_driver" not in diagnose(text).fix
    with_cuda = diagnose(text, Context(image_cuda="12.8"))
    assert "570.26" in with_cuda.fix


def test_missing_device_node_recorded_here() -> None:
    """The real engine's answer to `--device /dev/kfd` on a host without it (builder check --mode amd here)."""
    r = diagnose(read_input(DATA / "gpu-device-node-missing-local.txt"))
    assert (r.key, r.at_fault, r.noticed_by) == ("gpu-device-node-missing", "kernel-driver", "container-engine")
    assert r.facts["device"] == "/dev/kfd"
    assert "on the host" in r.fix and "modprobe amdgpu" in r.fix
    # a permission problem on an existing node is still the run options' fault
    perm = diagnose("rocminfo\nUnable to open /dev/kfd read-write: Permission denied\n")
    assert perm.key == "device-permission-denied"


def test_probe_python_missing_recorded_here() -> None:
    """The probe shim's own message when the image has no python3 (recorded with the mirrored Debian base)."""
    r = diagnose(read_input(DATA / "probe-python-missing-local.txt"))
    assert (r.key, r.at_fault) == ("probe-python-missing", "image-user-space")
    assert "python3" in r.fix and r.evidence
