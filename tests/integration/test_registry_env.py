"""The registry client resolves the environment's proxy settings once per host yet still honours
them, and its threads share one keep-alive connection pool."""

from __future__ import annotations

import os
import threading

import pytest

from builder.errors import RegistryUnavailableError
from builder.registry import RegistryClient
from builder.registry.connections import Pool
from tests.conftest import ROOT, Cli


def _refused_proxy() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # closed again: connections are refused


def test_proxy_from_environment_is_used(registry_address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", _refused_proxy())
    client = RegistryClient("registry.test:5000", insecure=True, retries=0, environ=os.environ)
    with pytest.raises(RegistryUnavailableError, match=r"through the proxy .* from HTTP_PROXY"):
        client.ping()  # through the (refusing) proxy, as requests with trust_env would go
    # a registry on this machine is never proxied (Go's ProxyFromEnvironment: docker, skopeo, oras)
    RegistryClient(registry_address, insecure=True, retries=0, environ=os.environ).ping()


def test_no_proxy_bypasses_it(registry_address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("no_proxy", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", _refused_proxy())
    monkeypatch.setenv("NO_PROXY", "registry.test")
    client = RegistryClient("registry.test:5000", insecure=True, retries=0, environ=os.environ)
    with pytest.raises(RegistryUnavailableError, match="does not resolve") as info:
        client.ping()  # straight to the name (.test never resolves: RFC 2606), not to the proxy
    assert "proxy" not in info.value.message
    # resolved once per host: a later change of the environment is not looked up per request
    monkeypatch.delenv("NO_PROXY")
    with pytest.raises(RegistryUnavailableError, match="does not resolve"):
        client.ping()


def test_threads_share_keep_alive_connections(registry_address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    client = RegistryClient(registry_address, insecure=True, environ=os.environ)
    client.ping()
    threads = [threading.Thread(target=client.ping) for _ in range(4)]
    for t in threads:
        t.start()
        t.join()  # one after the other: each new thread finds the previous connection idle
    pool = client.transport.route(client.base + "/v2/")
    assert isinstance(pool, Pool)  # reached directly: builder.registry.connections
    assert pool.opened == 1, pool.opened  # one TCP connection for 5 requests on 5 threads


def test_resolve_reaches_the_registry_on_this_machine_past_a_dead_proxy(cli: Cli, registry_address: str) -> None:
    """The newcomer's report: with HTTP_PROXY / ALL_PROXY / http_proxy set to a proxy that is not
    running, `builder resolve` against 127.0.0.1:5000 failed with exit 5 "through the proxy";
    skopeo and oras (Go) go straight to a loopback registry, and so does builder now."""
    dead = "http://127.0.0.1:9"
    env = {"HTTP_PROXY": dead, "ALL_PROXY": dead, "http_proxy": dead, "NO_PROXY": "", "no_proxy": ""}
    env["BUILDER_REGISTRY"] = registry_address
    variant = "jax0.7-cpu-py3.11-debian12"
    out = cli("resolve", variant, "--stage", "staging", "--no-verify", code=None, cwd=ROOT, env=env)
    assert out.code in (0, 8), out.stderr  # a digest, or none promoted there yet: the registry answered
    assert "proxy" not in out.stderr, out.stderr


def test_resolve_with_a_proxy_url_that_does_not_parse_names_the_variable(cli: Cli) -> None:
    """The newcomer's report: HTTPS_PROXY='http://[bad' was blamed on the registry's URL (exit 7,
    "check the registry name"); it is the variable that is wrong, and the message says so."""
    env = {"HTTPS_PROXY": "http://[bad", "NO_PROXY": "", "no_proxy": ""}
    env["BUILDER_REGISTRY"] = "registry.example:443"
    out = cli("resolve", "jax0.7-cpu-py3.11-debian12", "--stage", "staging", "--no-verify", code=5, cwd=ROOT, env=env)
    flat = " ".join(out.stderr.split())
    assert "the proxy URL in HTTPS_PROXY ('http://[bad') cannot be used" in flat, out.stderr
    assert "registry name" not in flat and "Traceback" not in out.stderr
