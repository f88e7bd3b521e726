"""What the direct ``http.client`` path does with URLs and header values it cannot send as they
are, against real servers on 127.0.0.1 (the raw socket server of test_connections, bytes on the
wire): a ``Location`` (an upload location, a redirect, a token realm) with a space or non-ASCII
letters is percent-encoded as urllib3 encoded it (RFC 3986 section 2.1), an existing ``%XX`` kept;
a host name that cannot be encoded is a URL that cannot be used (exit 7, no traceback); a token
or header value holding a line break or characters outside Latin-1 is named with where it came
from (exit 7), nothing sent."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from builder.errors import RegistryError
from builder.registry.auth import Authenticator
from builder.registry.exchange import encode_target, split_url
from builder.registry.token import TokenRequest
from tests.unit.registry.test_connections import RawServer, _pool, _transport, ok, serve

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["serve"]  # the fixture, imported for its name


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("http://h/v2/x/blobs/uploads/a b?_state=c d", "/v2/x/blobs/uploads/a%20b?_state=c%20d"),
        ("http://h/v2/x/blobs/uploads/ü?q=é", "/v2/x/blobs/uploads/%C3%BC?q=%C3%A9"),
        ("http://h/u?_state=abc%3D%3D&x=%zz", "/u?_state=abc%3D%3D&x=%25zz"),  # %XX kept, a stray % encoded
        ('http://h/a"<>\\^`{|}\x7f\x01', "/a%22%3C%3E%5C%5E%60%7B%7C%7D%7F%01"),
        ("http://h/v2/x/manifests/sha256:ab?n=1&last=a~b_c.d-e!$'()*+,;=:@/", None),  # all allowed: as is
    ],
)
def test_a_request_target_is_percent_encoded_where_rfc_3986_asks(url: str, target: str | None) -> None:
    assert split_url(url)[1] == (target or url[len("http://h") :])
    assert encode_target(split_url(url)[1]) == split_url(url)[1]  # encoding twice changes nothing


@pytest.mark.parametrize("location", ["/v2/x/blobs/uploads/a b?_state=ü", "/v2/x/blobs/uploads/ärger"])
def test_an_upload_location_with_a_space_or_non_ascii_letters_is_sent_percent_encoded(
    serve: Callable[..., RawServer], location: str
) -> None:
    """The registry's POST answers 202 with such a ``Location``; the PUT to it goes out with the
    location percent-encoded (as urllib3 sent it), and succeeds."""

    def answer(line: bytes, body: bytes, n: int) -> bytes:
        if line.startswith(b"POST"):
            return ok(b"", {"Location": location}, "202 Accepted")
        return ok(b"", {"Docker-Content-Digest": "sha256:" + "a" * 64}, "201 Created")

    server = serve(answer)
    t = _transport(server)
    upload = t.request("POST", "/v2/x/blobs/uploads/", ok=(202,)).headers["Location"]
    t.request("PUT", t.base + upload + "&digest=sha256:1", data=b"", ok=(201,))
    sent = server.requests[-1].decode("ascii")
    assert sent.startswith("PUT /v2/x/blobs/uploads/") and " " not in sent.split(" ")[1]
    assert sent.split(" ")[1] == split_url(t.base + upload + "&digest=sha256:1")[1]
    assert _pool(t).in_use == 0


def test_a_redirect_to_non_ascii_and_spaces_is_followed_percent_encoded(serve: Callable[..., RawServer]) -> None:
    server = serve(
        lambda line, body, n: ok(b"blob")
        if b"%C3%A9" in line
        else ok(b"", {"Location": "/storage/é t?sig=1%2B2"}, "307 Temporary Redirect")
    )
    t = _transport(server)
    assert t.request("GET", "/v2/x/blobs/sha256:1").content == b"blob"
    assert server.requests[-1] == b"GET /storage/%C3%A9%20t?sig=1%2B2 HTTP/1.1"


def test_a_redirect_to_a_host_that_cannot_be_encoded_is_an_unusable_answer(serve: Callable[..., RawServer]) -> None:
    """A host label over 63 characters is no IDNA name (``UnicodeError`` from the ``idna`` codec,
    RFC 5890): named as a URL that cannot be used, exit 7, not a traceback."""
    host = "ü" + "x" * 70 + ".example"
    server = serve(lambda line, body, n: ok(b"", {"Location": f"http://{host}/b"}, "307 Temporary Redirect"))
    t = _transport(server, retries=2)
    with pytest.raises(RegistryError) as info:
        t.request("GET", "/v2/x/blobs/sha256:1")
    assert info.value.exit_code == 7
    assert "with a URL that cannot be used (" in info.value.message and "not retried" in info.value.message
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("token", "problem"),
    [("abc\ndef", "a line break"), ("abc\r\nX-Evil: 1", "a line break"), ("tökén✓", "characters outside Latin-1")],
)
def test_a_token_that_http_cannot_carry_is_named_with_its_source(
    serve: Callable[..., RawServer], token: str, problem: str
) -> None:
    """The registry asks for a bearer token; its token service answers one holding a line break
    (a header injection) or characters outside Latin-1: the request is not sent, the error says
    the token service's token is at fault (exit 7), and never shows the token."""

    def answer(line: bytes, body: bytes, n: int) -> bytes:
        if line.startswith(b"GET /token"):
            return ok(json.dumps({"token": token}).encode(), {"Content-Type": "application/json"})
        realm = f'Bearer realm="http://127.0.0.1:{server.port}/token",service="s"'
        return ok(b"{}", {"WWW-Authenticate": realm}, "401 Unauthorized")

    server = serve(answer)
    address = f"127.0.0.1:{server.port}"
    t = _transport(server)
    t.auth = Authenticator(address, None)
    with pytest.raises(RegistryError) as info:
        t.request("GET", "/v2/x/manifests/latest")
    message = info.value.message
    assert info.value.exit_code == 7
    assert f"the Authorization header holds {problem}" in message and "token service issued" in message
    assert "abc" not in message and "tök" not in message
    assert [r.split(b" ")[1][:6] for r in server.requests] == [b"/v2/x/", b"/token"]  # not sent again
    assert _pool(t).in_use == 0


def test_a_header_value_that_http_cannot_carry_is_named(serve: Callable[..., RawServer]) -> None:
    """A media type read from a document with a line break (``Accept``): named, nothing sent."""
    server = serve(lambda line, body, n: ok())
    t = _transport(server)
    with pytest.raises(RegistryError) as info:
        t.request("GET", "/v2/x/manifests/latest", headers={"Accept": "application/json\nX-Evil: 1"})
    assert "the Accept header holds a line break" in info.value.message and "manifest" in info.value.message
    assert server.requests == [] and _pool(t).in_use == 0


def test_a_token_realm_with_spaces_and_non_ascii_is_sent_percent_encoded(serve: Callable[..., RawServer]) -> None:
    server = serve(lambda line, body, n: ok(b'{"token":"t"}'))
    t = _transport(server)
    realm = f"http://127.0.0.1:{server.port}/tok en/ß"
    resp = t.send_token_request(TokenRequest(realm, query=(("scope", "repository:x:pull"),)))
    assert resp.status_code == 200 and server.requests[0].startswith(b"GET /tok%20en/%C3%9F?scope=")


def test_through_a_proxy_a_header_value_that_http_cannot_carry_is_named_too(serve: Callable[..., RawServer]) -> None:
    """The proxy path (urllib3 on http.client) raises the same ``putheader`` errors: named the same."""
    from builder.registry.transport import Transport

    proxy = serve(lambda line, body, n: ok())
    t = Transport(
        "registry.example",
        Authenticator("registry.example", None),
        insecure=True,
        retries=2,
        environ={"HTTP_PROXY": f"http://127.0.0.1:{proxy.port}"},
    )
    for value, problem in (("a\nb", "a line break"), ("☃", "characters outside Latin-1")):
        with pytest.raises(RegistryError) as info:
            t.request("GET", "/v2/x/manifests/latest", headers={"Accept": value})
        assert f"the Accept header holds {problem}" in info.value.message, info.value.message
    assert proxy.requests == []
