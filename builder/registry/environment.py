"""The network settings a user gives through the environment, resolved for one ``scheme://host``:
the proxy (``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``ALL_PROXY``, bypassed by ``NO_PROXY``), the CA
certificates to trust (``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE``, else ``SSL_CERT_FILE`` /
``SSL_CERT_DIR``, else certifi's Mozilla bundle) and ``.netrc`` credentials (``NETRC``, else
``$HOME/.netrc``). Pure apart from reading the ``.netrc`` file: the environment is a mapping the
composition root (builder/app.py) hands over; nothing here reads ``os.environ``.

The meanings are those the registry client had through ``requests`` (``trust_env``:
``Session.merge_environment_settings``, ``utils.get_environ_proxies``, ``should_bypass_proxies``,
``select_proxy``, ``get_netrc_auth``; https://requests.readthedocs.io/en/latest/user/advanced/#proxies
and https://github.com/psf/requests/blob/v2.32.3/src/requests/utils.py), which follow Python's
``urllib.request.getproxies_environment`` / ``proxy_bypass_environment``
(https://docs.python.org/3/library/urllib.request.html#urllib.request.getproxies): a lower-case
variable wins over its upper-case twin, an empty one unsets it; upper-case ``HTTP_PROXY`` is
ignored when ``REQUEST_METHOD`` is set (a CGI request, "httpoxy", https://httpoxy.org/);
``NO_PROXY`` is a comma-separated list of host suffixes (``.example.com``: that domain and the
hosts under it; ``example.com``: any name ending so), ``host:port``, IPv4 addresses or CIDR
ranges, or ``*`` for every host. ``localhost`` and
loopback addresses (127.0.0.0/8, ``::1``) are never proxied, whatever ``NO_PROXY`` says: the rule
of Go's ``net/http.ProxyFromEnvironment`` (https://pkg.go.dev/net/http#ProxyFromEnvironment,
``golang.org/x/net/http/httpproxy`` ``useProxy``), so builder agrees with docker, skopeo, oras
and cosign about a registry on this machine (a proxy elsewhere could not reach it anyway). A proxy URL
without a scheme is ``http://``; ``user:password@`` in it is sent as ``Proxy-Authorization``.
``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` mean what they mean to OpenSSL, curl and Go
(https://docs.openssl.org/3.0/man3/SSL_CTX_load_verify_locations/): a PEM bundle, a directory of
hashed certificates; they are new (requests ignored them) and rank below the two above.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, unquote, urlsplit

if TYPE_CHECKING:
    from collections.abc import Mapping

_IPV4_RE = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")

#: The variables naming a CA bundle (file) or certificate directory, in the order they are read.
CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")


@dataclasses.dataclass(frozen=True)
class EnvSettings:
    """The environment's settings for one ``scheme://host``: ``proxy`` (the proxy URL without
    credentials; "" for a direct connection), ``proxy_auth`` (``user:password`` from the proxy
    URL, or None), ``ca`` (a CA bundle file or certificate directory path; None: certifi's
    bundle), ``netrc`` ((user, password) from ``.netrc`` for the host, or None) and
    ``proxy_variable`` (the variable that named the proxy, such as ``HTTPS_PROXY`` or
    ``all_proxy``; "" for a direct connection), ``ca_variable`` (the variable ``ca`` came from;
    "" for certifi's bundle) and ``ca_outranked`` (the other CA variables also set, which it
    outranks and which are therefore not used), for messages."""

    proxy: str = ""
    proxy_auth: str | None = None
    ca: str | None = None
    netrc: tuple[str, str] | None = None
    proxy_variable: str = ""
    ca_variable: str = ""
    ca_outranked: tuple[str, ...] = ()

    @property
    def pool_key(self) -> tuple[str, str | None, str | None]:
        """What decides which connection pools serve a request (everything but ``netrc``)."""
        return (self.proxy, self.proxy_auth, self.ca)


def env_settings(url: str, environ: Mapping[str, str]) -> EnvSettings:
    """The settings for ``url``'s ``scheme://host`` from ``environ`` (see the module text). Reads
    the ``.netrc`` file when there is one; an unreadable or malformed one counts as none (as for
    requests and curl's ``--netrc-optional``). Raises RegistryUnavailableError (exit 5) naming
    the variable and its value (credentials masked) when the proxy URL it names does not parse
    (``HTTPS_PROXY='http://[bad'``), has no host or a port out of range."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    variable = "" if bypasses_proxy(host, parts.port, environ) else proxy_variable(parts.scheme, host, environ)
    proxy = environ[variable] if variable else ""
    auth: str | None = None
    if proxy:
        if "://" not in proxy:
            proxy = "http://" + proxy
        p = _parse_proxy(proxy, variable, environ[variable], host)
        if p.username is not None:
            auth = f"{unquote(p.username)}:{unquote(p.password or '')}"
            netloc = p.netloc.rpartition("@")[2]
            proxy = p._replace(netloc=netloc).geturl()
    set_ca = [name for name in CA_VARIABLES if environ.get(name)]
    ca = environ[set_ca[0]] if set_ca else None
    return EnvSettings(
        proxy=proxy,
        proxy_auth=auth,
        ca=ca,
        netrc=netrc_auth(host, environ),
        proxy_variable=variable,
        ca_variable=set_ca[0] if set_ca else "",
        ca_outranked=tuple(set_ca[1:]),
    )


def _parse_proxy(proxy: str, variable: str, raw: str, host: str) -> SplitResult:
    """``proxy`` (a URL with a scheme) split, or RegistryUnavailableError naming ``variable`` and
    its value ``raw`` (``user:password@`` masked) when it does not parse (``urllib.parse``'s
    ``ValueError``: an unclosed ``[``, a port that is no number or out of 0-65535,
    https://docs.python.org/3/library/urllib.parse.html#urllib.parse.urlsplit) or names no host."""
    from builder.errors import RegistryUnavailableError

    why = ""
    try:
        p = urlsplit(proxy)
        _ = p.port  # parsed on access: raises for a port that is no number or out of range
        if not p.hostname:
            why = "it names no host"
    except ValueError as exc:
        why = str(exc)
    if not why:
        return p
    scheme, sep, rest = raw.partition("://")
    shown = f"{scheme}{sep}***@{rest.rpartition('@')[2]}" if "@" in rest else raw
    raise RegistryUnavailableError(
        f"the proxy URL in {variable} ({shown!r}) cannot be used for {host}: {why}; nothing was sent",
        hint=f"set {variable} to http://HOST:PORT (http://USER:PASSWORD@HOST:PORT with credentials; an IPv6 "
        f"address in brackets, http://[::1]:3128), unset it, or list {host} in NO_PROXY",
        variable=variable,
    )


def environ_proxies(environ: Mapping[str, str]) -> dict[str, str]:
    """``{"http": URL, "https": URL, "all": URL, "no": LIST, ...}`` from ``*_proxy`` variables,
    as ``urllib.request.getproxies_environment`` reads them (lower case wins, empty unsets)."""
    proxies: dict[str, str] = {}
    for name, value in environ.items():
        if value and name.lower().endswith("_proxy"):
            proxies[name[:-6].lower()] = value
    if "REQUEST_METHOD" in environ:
        proxies.pop("http", None)  # httpoxy: a CGI request's Proxy header arrives as HTTP_PROXY
    for name, value in environ.items():
        if name.endswith("_proxy"):  # lower case: wins over the upper-case twin
            if value:
                proxies[name[:-6]] = value
            else:
                proxies.pop(name[:-6], None)
    return proxies


def select_proxy(scheme: str, host: str, environ: Mapping[str, str]) -> str:
    """The proxy URL for ``scheme://host`` ("" for none): the most specific of
    ``scheme://host``, ``scheme``, ``all://host``, ``all`` (requests' ``select_proxy``)."""
    variable = proxy_variable(scheme, host, environ)
    return environ[variable] if variable else ""


def proxy_variable(scheme: str, host: str, environ: Mapping[str, str]) -> str:
    """The name of the variable whose proxy :func:`select_proxy` chooses for ``scheme://host``
    (``https_proxy`` when set, else ``HTTPS_PROXY``, ...); "" when none applies."""
    proxies = environ_proxies(environ)
    for key in (f"{scheme}://{host}", scheme, f"all://{host}", "all"):
        if proxies.get(key):
            lower = f"{key}_proxy"
            return lower if environ.get(lower) else next(n for n in environ if n.lower() == lower and environ[n])
    return ""


def bypasses_proxy(host: str, port: int | None, environ: Mapping[str, str]) -> bool:
    """True when ``NO_PROXY`` (``no_proxy`` first) names ``host`` (with ``port``): ``*``; a
    suffix of the host name or of ``host:port`` (requests' rule: ``.example.com`` names the hosts
    under it, ``example.com`` any name ending so) or that name without its leading dot (urllib's
    rule); for an IPv4 ``host`` only the address itself or a CIDR range containing it. A URL
    without a host, ``localhost`` and a loopback address (:func:`builder.hosts.is_loopback`) never use a
    proxy."""
    from builder.hosts import is_loopback  # imported on the first request, not at start-up (issue 19)

    if not host or is_loopback(host):
        return True
    raw = environ.get("no_proxy") or environ.get("NO_PROXY") or ""
    entries = [e.strip().lower() for e in raw.split(",") if e.strip()]
    if "*" in entries:
        return True
    if _IPV4_RE.match(host):  # an address: only itself or a CIDR range holding it
        return any(entry == host or ("/" in entry and _in_network(host, entry)) for entry in entries)
    host_port = f"{host}:{port}" if port else host
    for entry in entries:
        if host.endswith(entry) or host_port.endswith(entry) or entry.lstrip(".") in (host, host_port):
            return True
    return False


def _in_network(host: str, cidr: str) -> bool:
    """``host`` (an IPv4 address) is inside ``cidr``; False when either is not one."""
    import ipaddress

    try:
        return ipaddress.IPv4Address(host) in ipaddress.IPv4Network(cidr, strict=False)
    except ValueError:
        return False


def netrc_auth(host: str, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """(login, password) for ``host`` from the ``.netrc`` file (``NETRC``, else
    ``$HOME/.netrc``; https://www.gnu.org/software/inetutils/manual/html_node/The-_002enetrc-file.html),
    or None: no file, no entry for the host (nor a ``default`` one), or a file that does not parse."""
    path = environ.get("NETRC") or (environ["HOME"] + "/.netrc" if environ.get("HOME") else "")
    if not host or not path:
        return None
    import os.path

    if not os.path.isfile(path):
        return None
    import netrc  # only with a file to read: most machines have none

    try:
        entry = netrc.netrc(path).authenticators(host)
    except (netrc.NetrcParseError, OSError):
        return None  # as requests: a broken .netrc is not used (curl --netrc-optional does the same)
    if entry is None:
        return None
    login, account, password = entry
    return (login or account or "", password or "")
