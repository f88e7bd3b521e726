"""A registry that cannot be reached is named with why, in words (the innermost socket error
under requests and urllib3), and the attempts counted: real sockets, no network needed."""

from __future__ import annotations

import socket

import pytest

from builder.errors import RegistryUnavailableError
from builder.registry import RegistryClient


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connection_refused_is_said() -> None:
    port = _closed_port()
    client = RegistryClient(f"127.0.0.1:{port}", insecure=True, retries=0)
    with pytest.raises(RegistryUnavailableError) as info:
        client.try_resolve("demo/jax", "latest")
    message = info.value.message
    assert message.endswith(": connection refused (1 attempt)"), message
    assert "ConnectionError" not in message


def test_a_name_that_does_not_resolve_is_said() -> None:
    client = RegistryClient("registry.invalid", retries=0)  # .invalid never resolves (RFC 2606)
    with pytest.raises(RegistryUnavailableError) as info:
        client.try_resolve("library/ubuntu", "24.04")
    assert "the host name does not resolve (DNS)" in info.value.message
    assert info.value.details["registry"] == "registry.invalid"


def test_no_answer_in_time_is_said() -> None:
    with socket.socket() as server:  # accepts the connection (backlog) and never answers
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = RegistryClient(f"127.0.0.1:{port}", insecure=True, retries=1, backoff=0.0, timeout=(2.0, 0.2))
        with pytest.raises(RegistryUnavailableError) as info:
            client.try_resolve("demo/jax", "latest")
    assert "timed out" in info.value.message and info.value.message.endswith("(2 attempts)"), info.value.message
