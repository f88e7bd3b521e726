"""The errors for a request the registry transport cannot send, stopped following or stopped
reading, the registry being reachable: a header value HTTP cannot carry (:class:`BadHeader`,
named with where it came from, the value itself never shown: it may be a token), a redirect
loop, an answer refused by its limits (:class:`builder.registry.response.BodyLimit`), and a URL
that cannot be used.

Shapes: each function takes the registry's name (``host[:port]``) and the request in words and
returns a :class:`builder.errors.RegistryError` (exit 7, docs/exit-codes.md). Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.errors import RegistryError

if TYPE_CHECKING:
    from builder.registry.connections import BadHeader
    from builder.registry.exchange import TooManyRedirects
    from builder.registry.response import BodyLimit


def unsendable_error(
    registry: str, cause: TooManyRedirects | BadHeader | BodyLimit, request: str, authorization: str | None
) -> RegistryError:
    """The error for ``cause``: :func:`body_limit_error`, :func:`header_error` or
    :func:`redirect_loop_error`; ``request``: the request in words (``"GET <where>"``; for a body
    limit, where alone), ``authorization``: the ``Authorization`` value sent (or None)."""
    from builder.registry.connections import BadHeader
    from builder.registry.exchange import MAX_REDIRECTS
    from builder.registry.response import BodyLimit

    if isinstance(cause, BodyLimit):
        return body_limit_error(registry, cause, request.removeprefix("GET "))
    if isinstance(cause, BadHeader):
        return header_error(registry, cause, request, authorization)
    return redirect_loop_error(registry, request, MAX_REDIRECTS)


def unusable_url_error(registry: str, url: str, exc: ValueError) -> RegistryError:
    """The error for a URL no request can be sent to (``exc`` says why): the registry's own name
    (a port out of range) or a URL its answer named (an upload location, a token realm)."""
    return RegistryError(
        f"registry {registry}: the URL {url} cannot be used ({exc}); nothing was sent",
        hint="check the registry name (host[:port], port 1-65535) in builder.toml `registry`, "
        "BUILDER_REGISTRY or the image reference; a URL the registry sent back means the registry "
        "(or a proxy in front of it) is misconfigured",
        registry=registry,
    )


def header_error(registry: str, exc: BadHeader, request: str, authorization: str | None) -> RegistryError:
    """The error for ``request`` (``"GET <where>"``, ``"the token request to <realm>"``) whose
    header ``exc.field`` http.client cannot send (a line break, characters outside Latin-1: RFC
    9110 section 5.5, https://www.rfc-editor.org/rfc/rfc9110#section-5.5), naming its source:
    ``authorization`` (the ``Authorization`` value sent) ``Bearer ...`` came from the registry's
    token service (or an identity token of the Docker config), another one from the credentials
    (the Docker config or ``.netrc``); any other header from what the caller was given."""
    if exc.field.lower() == "authorization" and authorization and authorization.startswith("Bearer "):
        source = (
            "the token the registry's token service issued (or the identity token in the Docker config "
            "under DOCKER_CONFIG)"
        )
        hint = "the token service (or the Docker config) sends a broken token: check it, or log in again"
    elif exc.field.lower() == "authorization":
        source = "the credentials for it (the Docker config under DOCKER_CONFIG, or ~/.netrc)"
        hint = "fix the credentials for this registry (docker login, or the .netrc entry)"
    else:
        source = "a value builder was given for it (a media type or digest from a manifest, document or option)"
        hint = "check the manifest or document this request was made for"
    return RegistryError(
        f"registry {registry}: {request} was not sent: the {exc.field} header holds {exc.problem}, "
        f"which HTTP cannot carry; it came from {source}",
        hint=hint,
        registry=registry,
    )


def redirect_loop_error(registry: str, request: str, hops: int) -> RegistryError:
    """The error for ``request`` (``"GET <where>"``) redirected more than ``hops`` times."""
    return RegistryError(
        f"registry {registry} redirected {request} more than {hops} times",
        hint="the registry or its storage redirects in a loop; check the registry's storage settings",
        registry=registry,
    )


def body_limit_error(registry: str, exc: BodyLimit, where: str) -> RegistryError:
    """The error for the answer to ``where`` refused by its limits (:class:`BodyLimit`): a
    declared ``Content-Length`` over the limit (not read), more decoded bytes than the limit, or
    more seconds than the limit to arrive."""
    mib = int(exc.limit) // (1024 * 1024)
    if exc.kind == "declared":
        return RegistryError(
            f"registry {registry} answered {where} with {exc.size} bytes, over the {mib} MiB limit for a "
            "manifest or document; not read",
            hint="a registry or proxy that sends oversized documents is broken or hostile",
            registry=registry,
        )
    if exc.kind == "bytes":
        return RegistryError(
            f"registry {registry} sent more than {mib} MiB for {where}; stopped reading",
            hint="a registry or proxy that sends oversized documents is broken or hostile",
            registry=registry,
        )
    return RegistryError(
        f"registry {registry} took over {exc.limit:.0f} s to send {where} ({exc.size} bytes so far); stopped waiting",
        hint="the registry or a proxy stalls responses; retry later or check it",
        registry=registry,
    )
