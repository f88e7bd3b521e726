"""One request to a registry's token service (:class:`TokenRequest`), built by
:class:`builder.registry.auth.Authenticator` when a registry answers with a Bearer challenge
(https://distribution.github.io/distribution/spec/auth/token/: ``GET realm?service=..&scope=..``
with Basic credentials or anonymously; an identity token is exchanged with ``POST realm`` and
``grant_type=refresh_token``, https://distribution.github.io/distribution/spec/auth/oauth/) and
sent by the transport.

A module of its own: a registry without token authentication (a Basic one, loopback) never
needs it, and each frozen dataclass costs about 1 ms of start-up (issue 19).
"""

from __future__ import annotations

import dataclasses
from urllib.parse import urlencode


@dataclasses.dataclass(frozen=True)
class TokenRequest:
    """One request to a token service: ``GET realm?query`` with ``basic`` (user, password) or
    anonymously, or, for an identity token, ``POST realm`` with the ``form`` fields."""

    realm: str
    query: tuple[tuple[str, str], ...] = ()
    form: tuple[tuple[str, str], ...] = ()
    basic: tuple[str, str] | None = None

    @property
    def method(self) -> str:
        """``POST`` for a refresh-token exchange, else ``GET``."""
        return "POST" if self.form else "GET"

    @property
    def url(self) -> str:
        """The realm, with the query for a GET."""
        return f"{self.realm}?{urlencode(self.query)}" if self.query and not self.form else self.realm
