"""The environment's proxy, CA and netrc settings mean what they meant through requests (and
Python's urllib): each rule against the values a user sets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.registry.environment import bypasses_proxy, env_settings, environ_proxies, netrc_auth

if TYPE_CHECKING:
    from pathlib import Path


def test_the_scheme_proxy_is_chosen_and_credentials_split_off() -> None:
    env = {"HTTPS_PROXY": "http://u%40corp:p%3Ass@proxy.corp:3128", "HTTP_PROXY": "plain.corp:8080"}
    got = env_settings("https://ghcr.io/v2/", env)
    assert got.proxy == "http://proxy.corp:3128" and got.proxy_auth == "u@corp:p:ss"
    plain = env_settings("http://registry.lan:5000/v2/", env)
    assert plain.proxy == "http://plain.corp:8080" and plain.proxy_auth is None  # no scheme: http://


def test_lower_case_wins_and_an_empty_one_unsets() -> None:
    assert environ_proxies({"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:1"})["https"] == (
        "http://lower:1"
    )
    assert "https" not in environ_proxies({"HTTPS_PROXY": "http://upper:1", "https_proxy": ""})


def test_http_proxy_is_ignored_in_a_cgi_request() -> None:
    """httpoxy: a request's ``Proxy:`` header arrives in a CGI script as HTTP_PROXY."""
    assert "http" not in environ_proxies({"HTTP_PROXY": "http://evil:1", "REQUEST_METHOD": "GET"})
    assert environ_proxies({"http_proxy": "http://ok:1", "REQUEST_METHOD": "GET"})["http"] == "http://ok:1"


def test_all_proxy_applies_when_no_scheme_proxy_does() -> None:
    assert env_settings("https://ghcr.io/", {"ALL_PROXY": "http://all:1"}).proxy == "http://all:1"
    assert env_settings("https://ghcr.io/", {"ALL_PROXY": "http://all:1", "HTTPS_PROXY": "http://s:1"}).proxy == (
        "http://s:1"
    )


def test_no_proxy_names_hosts_by_suffix_port_address_range_or_star() -> None:
    env = {"NO_PROXY": " .corp.example, registry.lan:5000 ,10.0.0.0/8, 192.168.1.7"}
    assert bypasses_proxy("ghcr.corp.example", None, env)
    assert bypasses_proxy("corp.example", None, env)  # a leading dot also names the domain itself
    assert not bypasses_proxy("badcorp.example", None, env)  # ... not every name ending so (requests, urllib)
    assert bypasses_proxy("registry.lan", 5000, env) and not bypasses_proxy("registry.lan", 443, env)
    assert bypasses_proxy("10.1.2.3", None, env) and bypasses_proxy("192.168.1.7", 5000, env)
    assert not bypasses_proxy("110.0.0.1", None, {"NO_PROXY": "10.0.0.1"})  # an address is not a suffix
    assert not bypasses_proxy("ghcr.io", None, env)
    assert bypasses_proxy("anything", None, {"no_proxy": "*"})
    assert env_settings("https://ghcr.corp.example/", {**env, "HTTPS_PROXY": "http://p:1"}).proxy == ""


def test_ca_variables_in_their_order() -> None:
    assert env_settings("https://r/", {}).ca is None  # certifi's bundle
    both = {"CURL_CA_BUNDLE": "/c.pem", "REQUESTS_CA_BUNDLE": "/r.pem", "SSL_CERT_FILE": "/s.pem"}
    assert env_settings("https://r/", both).ca == "/r.pem"
    assert env_settings("https://r/", {"SSL_CERT_DIR": "/certs", "SSL_CERT_FILE": "/s.pem"}).ca == "/s.pem"
    assert env_settings("https://r/", {"SSL_CERT_DIR": "/certs"}).ca == "/certs"


def test_netrc_entries_default_and_a_broken_file(tmp_path: Path) -> None:
    f = tmp_path / "netrc"
    f.write_text("machine registry.lan login alice password s3cret\ndefault login anon password x\n")
    assert netrc_auth("registry.lan", {"NETRC": str(f)}) == ("alice", "s3cret")
    assert netrc_auth("other.lan", {"NETRC": str(f)}) == ("anon", "x")
    (tmp_path / ".netrc").write_text("machine registry.lan login bob password b\n")
    assert netrc_auth("registry.lan", {"HOME": str(tmp_path)}) == ("bob", "b")
    assert netrc_auth("registry.lan", {}) is None
    assert netrc_auth("registry.lan", {"NETRC": str(tmp_path / "no")}) is None
    f.write_text('machine "unterminated')
    assert netrc_auth("registry.lan", {"NETRC": str(f)}) is None  # as requests: a broken file is not used


def test_localhost_and_loopback_addresses_are_never_proxied() -> None:
    """Go's net/http ProxyFromEnvironment (docker, skopeo, oras, cosign) never proxies them,
    whatever NO_PROXY says: https://pkg.go.dev/net/http#ProxyFromEnvironment."""
    env = {"HTTP_PROXY": "http://127.0.0.1:9", "ALL_PROXY": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9"}
    for url in ("http://127.0.0.1:5000/v2/", "http://localhost:5000/", "http://127.1.2.3/", "http://[::1]:5000/"):
        assert env_settings(url, env).proxy == "", url
    assert env_settings("http://registry.lan:5000/", env).proxy == "http://127.0.0.1:9"
    assert env_settings("http://localhost.example:5000/", env).proxy == "http://127.0.0.1:9"  # only the name itself


def test_the_variable_that_named_the_proxy_is_kept_for_messages() -> None:
    assert env_settings("https://ghcr.io/", {"HTTPS_PROXY": "http://p:1"}).proxy_variable == "HTTPS_PROXY"
    assert env_settings("https://ghcr.io/", {"https_proxy": "http://p:1", "HTTPS_PROXY": "x"}).proxy_variable == (
        "https_proxy"
    )
    assert env_settings("https://ghcr.io/", {"ALL_PROXY": "http://p:1"}).proxy_variable == "ALL_PROXY"
    assert env_settings("https://ghcr.io/", {"NO_PROXY": "*", "ALL_PROXY": "http://p:1"}).proxy_variable == ""
