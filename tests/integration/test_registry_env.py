"""The registry client resolves the environment's proxy settings once per host yet still honours
them, and its threads share one keep-alive connection pool."""

from __future__ import annotations

import os
import threading

import pytest

from builder.errors import RegistryUnavailableError
from builder.registry import RegistryClient


def _refused_proxy() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # closed again: connections are refused


def test_proxy_from_environment_is_used(registry_address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", _refused_proxy())
    client = RegistryClient(registry_address, insecure=True, retries=0, environ=os.environ)
    with pytest.raises(RegistryUnavailableError):
        client.ping()  # through the (refusing) proxy, as requests with trust_env would go


def test_no_proxy_bypasses_it(registry_address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("no_proxy", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", _refused_proxy())
    monkeypatch.setenv("NO_PROXY", registry_address.split(":", maxsplit=1)[0])
    client = RegistryClient(registry_address, insecure=True, retries=0, environ=os.environ)
    client.ping()
    # resolved once per host: a later change of the environment is not looked up per request
    monkeypatch.delenv("NO_PROXY")
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
    pools = client.transport.manager(client.base + "/v2/").pools
    assert len(pools) == 1
    pool = pools[next(iter(pools.keys()))]
    assert pool.num_connections == 1, pool.num_connections  # one TCP connection for 5 requests on 5 threads
