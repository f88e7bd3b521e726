"""The driver branch, defined once (builder.compat.branches): what a benchmark records, what a policy's
device_check compares and the number the compatibility tables use agree on every driver of the tables."""

from __future__ import annotations

from builder.compat._data import cuda_driver_rows
from builder.compat.branches import driver_branch
from builder.compat.drivers import branch


def test_the_recorded_branch_is_the_tables_number_for_every_driver_they_name() -> None:
    drivers = {r.min_driver for r in cuda_driver_rows()} | {r.minor_floor for r in cuda_driver_rows() if r.minor_floor}
    assert len(drivers) > 5
    for d in sorted(drivers):
        assert int(driver_branch(d)) == branch(d), d


def test_branch_text_as_nvidia_smi_and_amd_smi_report_it() -> None:
    assert driver_branch("580.65.06") == "580" and driver_branch(" 550.144.03\n") == "550"
    assert driver_branch("580") == "580"
    assert driver_branch("6.3") == "6"  # an AMD host's ROCm release: the same rule
    assert driver_branch("N/A") == "N/A"  # read back, not parsed: matches no branch a policy names
