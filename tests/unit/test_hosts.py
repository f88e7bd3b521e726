"""builder.hosts: the one definition of "this machine" for every registry setting (RFC 4343 case,
RFC 6890 loopback ranges, RFC 3986 brackets)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from builder.checks.runners.engines import loopback
from builder.config import load_config
from builder.errors import RegistryUnavailableError
from builder.hosts import is_loopback, split_authority
from builder.registry.environment import bypasses_proxy

if TYPE_CHECKING:
    from pathlib import Path

LOOPBACK = [
    "localhost",
    "LocalHost:5000",
    "LOCALHOST:5000",
    "localhost.",
    "a.LOCALHOST:1",
    "127.0.0.1:5000",
    "127.8.9.10",
    "[::1]:5094",
    "[::1]",
    "::1",
    "[::ffff:127.0.0.1]:80",
    "[0:0:0:0:0:0:0:1]:5000",
]
REMOTE = [
    "registry.example:443",
    "localhost.example.com:5000",
    "128.0.0.1:5000",
    "[::2]:5000",
    "[fe80::1]",
    "10.0.0.1",
    "notlocalhost:5000",
    "",
    "[",
    "[::1",
]


@pytest.mark.parametrize("authority", LOOPBACK)
def test_loopback_in_every_spelling_is_this_machine_everywhere(authority: str, tmp_path: Path) -> None:
    assert is_loopback(authority)
    assert load_config(tmp_path, environ={}).is_insecure(authority), "plain HTTP for every loopback spelling"
    assert loopback(f"{authority}/demo/jax:tag"), "Podman's --tls-verify=false too"
    host, _ = split_authority(authority)
    assert bypasses_proxy(host, None, {"NO_PROXY": ""}), "never proxied"
    assert "scripts/setup" in RegistryUnavailableError("down", registry=authority).hint


@pytest.mark.parametrize("authority", REMOTE)
def test_other_hosts_are_not(authority: str, tmp_path: Path) -> None:
    assert not is_loopback(authority)
    assert not load_config(tmp_path, environ={}).is_insecure(authority)
    assert not loopback(f"{authority}/demo/jax:tag")


def test_split_authority() -> None:
    assert split_authority("[::1]:5094") == ("::1", "5094")
    assert split_authority("LocalHost:5000") == ("localhost", "5000")
    assert split_authority("::1") == ("::1", "")
    assert split_authority("reg.example") == ("reg.example", "")


def test_an_explicitly_insecure_registry_stays_insecure(tmp_path: Path) -> None:
    cfg = load_config(tmp_path, environ={"BUILDER_INSECURE_REGISTRIES": "reg.lan:5000"})
    assert cfg.is_insecure("reg.lan:5000") and not cfg.is_insecure("reg.lan:5001")
