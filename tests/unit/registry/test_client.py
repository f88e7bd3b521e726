"""Pure parts of the client: pagination links, the per-host client cache."""

from __future__ import annotations

from builder.registry.client import RegistryClient, client_for
from builder.registry.tag_list import next_link


def test_next_link() -> None:
    url = "http://r/v2/x/tags/list?n=2"
    assert next_link('</v2/x/tags/list?last=b&n=2>; rel="next"', url) == "http://r/v2/x/tags/list?last=b&n=2"
    assert next_link(None, url) is None
    assert next_link('</other>; rel="prev"', url) is None


def test_client_for_caches_one_client_per_host() -> None:
    cache: dict[str, RegistryClient] = {}
    a = client_for("127.0.0.1:5000", insecure=lambda host: host.startswith("127."), cache=cache)
    assert client_for("127.0.0.1:5000", insecure=lambda host: False, cache=cache) is a
    assert a.scheme == "http" and a.base == "http://127.0.0.1:5000"
    hub = client_for("docker.io", insecure=lambda host: False, cache=cache)
    assert hub.base == "https://registry-1.docker.io" and set(cache) == {"127.0.0.1:5000", "docker.io"}
    assert client_for("docker.io", insecure=lambda host: False) is not hub  # no cache: a new client
