"""Which host a registry name or URL host names, and whether it is this machine (loopback): the one
definition every module uses (plain HTTP for loopback in builder/config.py, the unavailable
registry's hint in builder/errors.py, the proxy bypass in builder/registry/environment.py, Podman's
``--tls-verify=false`` in builder/checks/runners/engines.py). Pure: no I/O.

Facts:

* Host names compare case-insensitively (RFC 4343, https://www.rfc-editor.org/rfc/rfc4343):
  ``LocalHost:5000`` is ``localhost:5000``.
* ``localhost`` and names under ``.localhost`` are this machine (RFC 6761 section 6.3,
  https://www.rfc-editor.org/rfc/rfc6761#section-6.3).
* Loopback addresses are 127.0.0.0/8 and ``::1`` (RFC 6890, https://www.rfc-editor.org/rfc/rfc6890),
  as :attr:`ipaddress.IPv4Address.is_loopback` says
  (https://docs.python.org/3/library/ipaddress.html#ipaddress.IPv4Address.is_loopback).
* An IPv6 address in a ``host:port`` authority is written in brackets, ``[::1]:5000``
  (RFC 3986 section 3.2.2, https://www.rfc-editor.org/rfc/rfc3986#section-3.2.2).
"""

from __future__ import annotations


def split_authority(authority: str) -> tuple[str, str]:
    """``(host, port)`` of ``authority`` (``host[:port]``; an IPv6 address in brackets with or
    without a port, ``[::1]:5094``, ``[::1]``; a bare IPv6 address, ``::1``, is all host). The host
    comes back lower-case, without brackets and without a trailing dot; the port as written ("" when
    there is none). Never raises: a malformed authority gives its best reading."""
    text = authority.strip()
    if text.startswith("[") and "]" in text:  # an unclosed bracket is no address: all host
        inside, _, rest = text[1:].partition("]")
        host, port = inside, rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:  # no port, or a bare IPv6 address
        host, port = text, ""
    return host.lower().rstrip("."), port


def is_loopback(authority: str) -> bool:
    """Whether ``authority`` (a registry's ``host[:port]``, or a URL's bare host; any case, IPv6 in
    brackets or not) names this machine: ``localhost``, a name under ``.localhost``, an address in
    127.0.0.0/8 or ``::1`` (an IPv4-mapped ``::ffff:127.0.0.1`` too). Never raises."""
    host, _ = split_authority(authority)
    if host == "localhost" or host.endswith(".localhost"):
        return True
    if not host[:1].isdigit() and ":" not in host:
        return False  # a host name: no address to parse (ipaddress is not imported for it)
    import ipaddress

    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])  # an IPv6 zone ("%eth0") is no part of it
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


__all__ = ["is_loopback", "split_authority"]
