"""A registry that accepts connections and never answers ends the command, bounded and named:
a timed-out request is retried at most once whatever `registry_retries` allows, and builder.toml
`registry_timeout_s` / BUILDER_REGISTRY_TIMEOUT_S shortens the wait. A real socket server on this
machine that accepts (its listen backlog) and never sends a byte; no timing is asserted."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import pytest

from builder.config import load_config
from builder.errors import ConfigError
from tests.conftest import ROOT

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli


def test_resolve_against_a_silent_registry_ends_and_names_it(cli: Cli) -> None:
    with socket.socket() as server:  # accepts connections (backlog) and never answers
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        registry = f"127.0.0.1:{server.getsockname()[1]}"
        env = {"BUILDER_REGISTRY": registry, "BUILDER_REGISTRY_TIMEOUT_S": "1", "BUILDER_REGISTRY_BACKOFF_MS": "0"}
        out = cli(
            "resolve",
            "jax0.7-cpu-py3.11-debian12",
            "--stage",
            "dev",
            "--no-verify",
            "--json",
            code=5,
            cwd=ROOT,
            env=env,
        )
    err = out.json()["error"]
    assert err["message"].startswith(f"registry {registry} timed out (http) on "), err["message"]
    assert f"{registry}/" in err["message"]  # the request: the reference or path asked for
    assert "no answer within 1 s (2 attempts)" in err["message"], err["message"]  # 4 retries allowed, 1 used
    assert "registry_timeout_s" in err["hint"] and "BUILDER_REGISTRY_TIMEOUT_S" in err["hint"], err["hint"]
    assert "start the registry" not in err["hint"]


def test_the_timeout_setting_is_read_and_checked(tmp_path: Path) -> None:
    (tmp_path / "builder.toml").write_text("registry_timeout_s = 15\n")
    assert load_config(tmp_path, {}).registry_timeout_s == 15
    assert load_config(tmp_path, {"BUILDER_REGISTRY_TIMEOUT_S": "3"}).registry_timeout_s == 3
    assert load_config(tmp_path / "none", {}).registry_timeout_s == 60
    with pytest.raises(ConfigError, match="registry_timeout_s"):
        load_config(tmp_path, {"BUILDER_REGISTRY_TIMEOUT_S": "0"})
