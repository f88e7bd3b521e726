"""A request that went through a proxy and failed names the proxy, the variable that set it and
NO_PROXY (never "start the registry"), and a proxy refusing the tunnel (403/407 to CONNECT, as an
egress proxy does) is said to be the proxy's refusal, not a registry login problem: real sockets
on this machine, the proxies speaking HTTP/1.1 (RFC 9110 section 9.3.6)."""

from __future__ import annotations

import socket
import threading
from typing import TYPE_CHECKING

import pytest

from builder.errors import RegistryUnavailableError
from builder.registry import RegistryClient

if TYPE_CHECKING:
    from collections.abc import Iterator


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def refusing_proxy(request: pytest.FixtureRequest) -> Iterator[int]:
    """A proxy on 127.0.0.1 answering every request (CONNECT included) with the status line
    ``request.param`` and closing the connection."""
    status: str = request.param
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return  # closed: the test is over
            with conn:
                conn.recv(65536)
                conn.sendall(f"HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    server.shutdown(socket.SHUT_RDWR)  # wakes the accept() (Linux); close() alone would not
    server.close()
    thread.join(5)


def test_a_dead_proxy_is_named_with_its_variable_and_no_proxy() -> None:
    env = {"HTTPS_PROXY": f"http://127.0.0.1:{_closed_port()}"}
    client = RegistryClient("registry.example:443", retries=0, environ=env)
    with pytest.raises(RegistryUnavailableError) as info:
        client.try_resolve("demo/jax", "latest")
    err = info.value
    assert f"through the proxy {env['HTTPS_PROXY']} from HTTPS_PROXY" in err.message, err.message
    assert "HTTPS_PROXY" in (err.hint or "") and "NO_PROXY" in (err.hint or ""), err.hint
    assert "start the registry" not in (err.hint or "")


def test_a_registry_on_this_machine_is_reached_without_the_proxy() -> None:
    port = _closed_port()  # nothing listens: the error is the registry's own, not the proxy's
    env = {"HTTP_PROXY": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9", "ALL_PROXY": "http://127.0.0.1:9"}
    with pytest.raises(RegistryUnavailableError) as info:
        RegistryClient(f"127.0.0.1:{port}", insecure=True, retries=0, environ=env).try_resolve("demo/jax", "1")
    assert f"127.0.0.1:{port}" in info.value.message and "proxy" not in info.value.message, info.value.message


@pytest.mark.parametrize(
    ("refusing_proxy", "advice"),
    [("403 Forbidden", "administrator"), ("407 Proxy Authentication Required", "USER:PASSWORD")],
    indirect=["refusing_proxy"],
)
def test_a_proxy_refusing_the_tunnel_is_named_as_the_refuser(refusing_proxy: int, advice: str) -> None:
    env = {"HTTPS_PROXY": f"http://127.0.0.1:{refusing_proxy}"}
    client = RegistryClient("registry.example:443", retries=3, environ=env)
    with pytest.raises(RegistryUnavailableError) as info:
        client.try_resolve("demo/jax", "latest")
    err = info.value
    assert err.message.startswith(f"the proxy {env['HTTPS_PROXY']} from HTTPS_PROXY refused"), err.message
    assert "not the registry" in err.message
    assert advice in (err.hint or "") and "NO_PROXY" in (err.hint or ""), err.hint
    assert "docker login" not in (err.hint or "")
    assert client.transport.requests_sent == 1  # a refusal is not retried


@pytest.mark.parametrize(
    "refusing_proxy", ["503 Service Unavailable", "502 Bad Gateway", "504 Gateway Timeout"], indirect=True
)
def test_a_proxy_answering_the_tunnel_with_5xx_is_unavailable_and_retried(refusing_proxy: int) -> None:
    """A 5xx to CONNECT is the proxy being unavailable (or unable to reach the registry), not a
    refusal: retried like a lost connection, then exit 5 naming the proxy and its variable."""
    env = {"HTTPS_PROXY": f"http://127.0.0.1:{refusing_proxy}"}
    client = RegistryClient("registry.example:443", retries=2, backoff=0.01, environ=env)
    with pytest.raises(RegistryUnavailableError) as info:
        client.try_resolve("demo/jax", "latest")
    err = info.value
    assert err.exit_code == 5
    assert err.message.startswith(f"the proxy {env['HTTPS_PROXY']} from HTTPS_PROXY answered HTTP 5"), err.message
    assert "unavailable or cannot reach registry.example (3 attempts)" in err.message, err.message
    assert "not the registry's" in err.message and "refused" not in err.message
    assert "administrator" not in (err.hint or "") and "NO_PROXY" in (err.hint or ""), err.hint
    assert client.transport.requests_sent == 3  # the first attempt and 2 retries


@pytest.mark.parametrize("refusing_proxy", ["400 Bad Request"], indirect=True)
def test_a_proxy_answering_the_tunnel_otherwise_is_named_not_retried(refusing_proxy: int) -> None:
    env = {"HTTPS_PROXY": f"http://127.0.0.1:{refusing_proxy}"}
    client = RegistryClient("registry.example:443", retries=2, backoff=0.01, environ=env)
    with pytest.raises(RegistryUnavailableError) as info:
        client.try_resolve("demo/jax", "latest")
    assert "answered HTTP 400 Bad Request to the tunnel" in info.value.message, info.value.message
    assert "did not open the tunnel (1 attempt)" in info.value.message
    assert client.transport.requests_sent == 1


@pytest.mark.parametrize("refusing_proxy", ["407 Proxy Authentication Required"], indirect=True)
def test_a_plain_http_proxy_asking_for_credentials_is_named(refusing_proxy: int) -> None:
    env = {"HTTP_PROXY": f"http://127.0.0.1:{refusing_proxy}"}
    client = RegistryClient("registry.example:5000", insecure=True, retries=0, environ=env)
    with pytest.raises(RegistryUnavailableError) as info:
        client.try_resolve("demo/jax", "latest")
    assert "refused" in info.value.message and "HTTP_PROXY" in info.value.message, info.value.message
    assert "USER:PASSWORD" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("http://[bad", "Invalid IPv6 URL"),
        ("http://proxy.example:99999", "out of range"),
        ("http://proxy.example:port", "Port could not be cast"),
        ("http://", "names no host"),
        ("http://user:s3cret@[bad", "Invalid IPv6 URL"),
    ],
)
def test_a_proxy_url_that_does_not_parse_names_the_variable_not_the_registry(value: str, why: str) -> None:
    client = RegistryClient("registry.example:443", retries=0, environ={"HTTPS_PROXY": value})
    with pytest.raises(RegistryUnavailableError) as info:
        client.ping()
    err = info.value
    assert err.exit_code == 5 and err.message.startswith("the proxy URL in HTTPS_PROXY ("), err.message
    assert why in err.message and "nothing was sent" in err.message
    assert "s3cret" not in err.message and "s3cret" not in (err.hint or "")  # credentials masked
    assert "HTTPS_PROXY" in (err.hint or "") and "registry name" not in (err.hint or "")
    assert client.transport.requests_sent == 0
