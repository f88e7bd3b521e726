"""``dcgmi diag`` tables on real recorded outputs (tests/data/dcgm, each with its public URL)."""

from __future__ import annotations

from pathlib import Path

from builder.checks.dcgm import parse_dcgm_diag

DATA = Path(__file__).resolve().parents[2] / "data" / "dcgm"
BORDER = "+---------------------------+------------------------------------------------+\n"


def _read(name: str) -> str:
    text = (DATA / name).read_text()
    assert text.startswith("# Source: https://github.com/")
    return text


def test_deployment_section_of_a_level_3_run() -> None:
    d = parse_dcgm_diag(_read("dcgmi-diag-01-r3-deployment.txt"))
    assert [t.test for t in d.tests][:3] == ["Denylist", "NVML Library", "CUDA Main Library"]
    assert (
        len(d.tests) == 9
        and {t.category for t in d.tests} == {"Deployment"}
        and {t.result for t in d.tests} == {"pass"}
    )
    # the recording stops at the Integration header: a cut table proves nothing
    assert not d.complete and not d.passed and "no closing line" in d.notes[0]


def test_metadata_dcgm_and_driver_versions_and_device_ids() -> None:
    d = parse_dcgm_diag(_read("dcgmi-diag-02-r2-metadata.txt"))
    assert dict(d.metadata) == {
        "DCGM Version": "3.3.1",
        "Driver Version Detected": "535.129.03",
        "GPU Device IDs Detected": "1eb8",
    }
    assert len(d.tests) == 7 and d.tests[-1].test == "Page Retirement/Row Remap"
    two = parse_dcgm_diag(_read("dcgmi-diag-03-r2-two-gpus.txt"))
    assert dict(two.metadata)["GPU Device IDs Detected"] == "2321,2321"
    # its last row has no closing `|` (cut mid-line): still read
    assert [t.test for t in two.tests] == ["Denylist", "NVML Library"]


def test_a_closed_table_passes_and_a_failing_row_with_its_continuation_fails() -> None:
    # the recording of #55 closed with a border (as dcgmi prints it after the last section)
    closed = _read("dcgmi-diag-01-r3-deployment.txt").rsplit("+-----  Integration", 1)[0] + BORDER
    d = parse_dcgm_diag(closed)
    assert d.complete and d.passed and not d.notes
    # the same with a failing row and a continuation line (the layout of Warning/Error detail rows)
    failing = closed.replace(
        "| Persistence Mode          | Pass                                           |",
        "| Persistence Mode          | Fail - GPU: 0                                  |\n"
        "|                           | Persistence mode for GPU 0 is disabled.        |",
    )
    f = parse_dcgm_diag(failing)
    [bad] = f.failed()
    assert (bad.test, bad.result) == ("Persistence Mode", "fail") and not f.passed
    assert bad.detail == "GPU: 0; Persistence mode for GPU 0 is disabled."


def test_not_a_diag_table() -> None:
    d = parse_dcgm_diag("Error: unable to establish a connection to the specified host: localhost\n")
    assert d.tests == () and not d.passed and d.notes == ("no `| Diagnostic | Result |` table",)


def test_probe_runs_the_short_diagnostic_and_knows_when_dcgm_is_absent() -> None:
    from builder.checks.dcgm import probe_dcgm

    seen: list[list[str]] = []

    def recorded(argv: object) -> tuple[int, str]:
        seen.append(list(argv))  # type: ignore[call-overload]
        return 0, _read("dcgmi-diag-02-r2-metadata.txt")

    diag = probe_dcgm(recorded)
    assert seen == [["dcgmi", "diag", "-r", "1"]] and diag is not None and len(diag.tests) == 7
    assert probe_dcgm(lambda _argv: (127, "")) is None  # not installed
    down = probe_dcgm(lambda _argv: (255, "Error: unable to establish a connection to the specified host: localhost"))
    assert down is not None and not down.passed and "exited with 255" in down.notes[0]
