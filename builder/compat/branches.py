"""The driver branch of a driver version, defined once for what builder records and compares.

NVIDIA's data-center drivers come in branches, each major feature release "indicated by a new branch
X number" (https://docs.nvidia.com/datacenter/tesla/drivers/driver-lifecycle.html): the major number
of the version, R580 for 580.65.06 and 580.82.07. This module imports nothing (a policy evaluation
reads it without loading the compatibility tables).
"""

from __future__ import annotations


def driver_branch(version: str) -> str:
    """The driver branch of a driver version as builder records and compares it: the major number as
    text (``"580.65.06"`` -> ``"580"``, NVIDIA's branch R580; the same rule for an AMD release). Every
    recorded or compared branch is this one: a ``benchmark/v1``'s ``hardware.driver_branch``
    (``builder.checks.evidence.hardware_class``), a policy's ``device_check.driver_branches`` and
    ``benchmark.same: [driver_branch]``. Lenient - evidence read back is compared, never parsed: text
    that is no version matches no branch a policy names. :func:`builder.compat.drivers.branch` is the
    validated number (for the tables)."""
    return version.strip().split(".", 1)[0]


__all__ = ["driver_branch"]
