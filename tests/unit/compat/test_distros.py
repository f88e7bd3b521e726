"""builder.compat.distros: the one owner of OS-release facts."""

from __future__ import annotations

from builder.compat import distros


def test_split_os() -> None:
    assert distros.split_os("ubuntu24.04") == ("ubuntu", "24.04")
    assert distros.split_os("debian12") == ("debian", "12")
    assert distros.split_os("weird") == ("weird", "")


def test_every_release_has_its_python_and_glibc() -> None:
    assert set(distros.SYSTEM_PYTHON) == set(distros.OS_GLIBC)
    assert distros.manylinux_tag("ubuntu24.04") == "2_39"
    assert distros.manylinux_tag("alpine3.20") == "2_28"  # not listed: the default
