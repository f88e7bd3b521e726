"""OS (distribution release) facts: the Python each release ships and its glibc.

The one owner of distro facts (``ubuntu24.04``, ``debian12`` ...); matrices, base images and locks ask here.

- ``SYSTEM_PYTHON``: the ``python3`` of each release (https://packages.ubuntu.com/noble/python3,
  https://packages.ubuntu.com/jammy/python3, https://packages.debian.org/bookworm/python3,
  https://packages.debian.org/trixie/python3). Other Pythons on Ubuntu come from the deadsnakes PPA; Debian
  images support only their system Python.
- ``OS_GLIBC``: the manylinux tag wheels for the release may carry, from its ``libc6``
  (https://packages.ubuntu.com/noble/libc6: 2.39, jammy 2.35; https://packages.debian.org/bookworm/libc6:
  2.36, trixie 2.41, capped at 2_40: the newest manylinux tag uv knows).
"""

from __future__ import annotations

import re

#: An OS release as matrices name it: ``ubuntu24.04``, ``debian12`` (groups ``name``, ``version``).
OS_RE = re.compile(r"^(?P<name>[a-z]+)(?P<version>\d+(?:\.\d+)?)$")

SYSTEM_PYTHON: dict[str, str] = {
    "ubuntu22.04": "3.10",
    "ubuntu24.04": "3.12",
    "debian12": "3.11",
    "debian13": "3.13",
}

OS_GLIBC: dict[str, str] = {
    "ubuntu22.04": "2_35",
    "ubuntu24.04": "2_39",
    "debian12": "2_36",
    "debian13": "2_40",
}


def split_os(os: str) -> tuple[str, str]:
    """``ubuntu24.04`` -> ``("ubuntu", "24.04")``; a name that is not ``<name><version>`` -> ``(os, "")``."""
    m = OS_RE.match(os)
    return (m.group("name"), m.group("version")) if m else (os, "")


def manylinux_tag(os_release: str, *, default: str = "2_28") -> str:
    """``"ubuntu24.04"`` -> ``"2_39"``: the glibc tag of an OS release, ``default`` when not listed."""
    return OS_GLIBC.get(os_release, default)


__all__ = ["OS_GLIBC", "OS_RE", "SYSTEM_PYTHON", "manylinux_tag", "split_os"]
