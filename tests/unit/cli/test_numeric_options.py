"""Numeric options refuse values that mean nothing (click ranges, exit 2 naming the option) before
any work: ``report --limit 0`` said "not recorded" with exit 0; every count, worker number,
timeout and epoch is checked the same way."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.conftest import ROOT

if TYPE_CHECKING:
    from tests.conftest import Cli


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("report", "v", "--limit", "0"), "--limit"),
        (("report", "v", "--limit", "-3"), "--limit"),
        (("history", "v", "--limit", "0"), "--limit"),
        (("promote", "v", "--to", "dev", "--workers", "0"), "--workers"),
        (("build", "--workers", "0"), "--workers"),
        (("check", "v", "--timeout", "0"), "--timeout"),
        (("check", "v", "--timeout", "-1"), "--timeout"),
        (("lock", "--timeout", "0"), "--timeout"),
        (("build", "--source-date-epoch", "-5"), "--source-date-epoch"),
    ],
)
def test_a_meaningless_number_is_a_usage_error(cli: Cli, args: tuple[str, ...], option: str) -> None:
    err = cli(*args, code=2, cwd=ROOT).stderr
    assert f"Invalid value for '{option}'" in err and "is not in the range" in err
