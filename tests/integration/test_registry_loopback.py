"""A registry on this machine is spoken to over plain HTTP in every spelling of its name
(docs/registry.md): ``LocalHost:5000`` (host names are case-insensitive, RFC 4343) and an IPv6
loopback ``[::1]:PORT`` (RFC 3986 brackets), against real registries; before builder.hosts these
went over TLS and failed with exit 5 (WRONG_VERSION_NUMBER)."""

from __future__ import annotations

import socket
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from tests.registries import _registry_binary

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli


def _registry_item(cli: Cli, registry: str, tmp_path: Path) -> dict[str, object]:
    doc = cli("doctor", "--json", env={"BUILDER_REGISTRY": registry}, cwd=tmp_path).json()
    return next(i for i in doc["items"] if i["name"] == "registry")


@pytest.mark.parametrize("spelling", ["LocalHost", "LOCALHOST"])
def test_localhost_in_any_case_is_plain_http(
    cli: Cli, docker_engine: str, registry_address: str, spelling: str, tmp_path: Path
) -> None:
    registry = f"{spelling}:{registry_address.rsplit(':', 1)[1]}"
    item = _registry_item(cli, registry, tmp_path)
    assert item["ok"] is True, item
    assert str(item["detail"]).startswith(f"http://{registry}/v2/")


def test_ipv6_loopback_in_brackets_is_plain_http(cli: Cli, docker_engine: str, tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET6) as probe:
        probe.bind(("::1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "config.yml").write_text(
        "version: 0.1\nlog:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {tmp_path / 'data'}\n"
        f"http:\n  addr: '[::1]:{port}'\n"
    )
    log = (tmp_path / "registry.log").open("w")
    proc = subprocess.Popen([_registry_binary(), "serve", str(tmp_path / "config.yml")], stdout=log, stderr=log)
    try:
        for _ in range(150):  # until it listens (or exits): not a timing assertion
            try:
                socket.create_connection(("::1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None, (tmp_path / "registry.log").read_text()
                time.sleep(0.1)
        item = _registry_item(cli, f"[::1]:{port}", tmp_path)
        assert item["ok"] is True, item
        assert str(item["detail"]).startswith(f"http://[::1]:{port}/v2/")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
