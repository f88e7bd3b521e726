"""The errors for answers that stay wrong once the retries are spent, and for a proxy that would
not open a tunnel: imported only on such a failure (a module of its own, so a command that meets
none defines none of it: ``tests/unit/cli/test_import_budget.py``). Pure: builds errors, sends
nothing. Used by :class:`builder.registry.transport.Transport`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from builder.errors import RegistryUnavailableError
from builder.registry.failures import proxy_hint, proxy_note

if TYPE_CHECKING:
    from builder.registry.environment import EnvSettings


#: Statuses that, once the retries are spent, mean the registry is there but cannot serve now:
#: 429 Too Many Requests (RFC 6585 section 4, https://www.rfc-editor.org/rfc/rfc6585#section-4),
#: 502 Bad Gateway, 503 Service Unavailable, 504 Gateway Timeout (RFC 9110 sections 15.6.3-15.6.5,
#: https://www.rfc-editor.org/rfc/rfc9110#section-15.6). 500 is the registry's own error: not here.
UNAVAILABLE_STATUSES = frozenset({429, 502, 503, 504})


@dataclasses.dataclass(frozen=True)
class RetryBudget:
    """What was spent on one request: ``attempts`` sent (the first and each retry), over
    ``seconds`` (wall clock, the waits included), under the settings ``retries`` (extra attempts
    allowed), ``backoff`` and ``max_delay`` (seconds)."""

    attempts: int
    seconds: float
    retries: int
    backoff: float
    max_delay: float

    def spent(self) -> str:
        """``3 attempts over 12.5 s`` (``1 attempt`` alone when nothing was retried)."""
        tries = f"{self.attempts} attempt" + ("s" if self.attempts != 1 else "")
        return f"{tries} over {self.seconds:.1f} s" if self.attempts > 1 else tries

    def settings(self) -> str:
        """The settings that decide the retries, with their values, for hints."""
        return (
            f"builder.toml `registry_retries` (BUILDER_REGISTRY_RETRIES, now {self.retries}) sets how many "
            f"times a request is retried; `registry_backoff_ms` (BUILDER_REGISTRY_BACKOFF_MS, now "
            f"{self.backoff * 1000:.0f}) the first wait, doubled each time; `registry_max_delay_ms` "
            f"(BUILDER_REGISTRY_MAX_DELAY_MS, now {self.max_delay * 1000:.0f}) the longest wait"
        )


def unavailable_status(
    status: int, registry: str, request: str, body: str, budget: RetryBudget, via_proxy: str = ""
) -> RegistryUnavailableError:
    """The error (exit 5, ``registry-unavailable``) for a request still answered ``status`` (one
    of :data:`UNAVAILABLE_STATUSES`) when the retries are spent: 429 says the registry rate-limits
    and that its ``Retry-After`` was honoured; 502/503/504 that it (or a proxy or load balancer in
    front of it, ``via_proxy``: ``PROXY from VARIABLE``) is unavailable. ``request`` is
    ``METHOD where``; the message names the attempts and seconds, the hint the retry settings."""
    answer = f"HTTP {status} {body}".rstrip() if body else f"HTTP {status} (no body)"
    if status == 429:
        return RegistryUnavailableError(
            f"registry {registry} rate-limits: it answered {request} with {answer} on "
            f"{budget.spent()} (its Retry-After waits honoured, each at most {budget.max_delay:g} s)",
            hint="wait a while and run again, or ask the registry's operator for a higher limit (a login often "
            f"has one); {budget.settings()}",
            registry=registry,
            status=status,
            attempts=budget.attempts,
        )
    front = f" or the proxy {via_proxy}" if via_proxy else " or a proxy or load balancer in front of it"
    return RegistryUnavailableError(
        f"registry {registry} is unavailable: it answered {request} with {answer} on {budget.spent()}",
        hint=f"the registry{front} is down, restarting or overloaded: check that it runs (and its logs), then "
        f"run again; {budget.settings()}",
        registry=registry,
        status=status,
        attempts=budget.attempts,
    )


def proxy_tunnel_failed(
    env: EnvSettings, status: str, registry: str, host: str, target: str, attempts: int
) -> RegistryUnavailableError:
    """The error (exit 5) for a proxy that answered a ``CONNECT`` tunnel to ``host`` with
    ``status`` other than a refusal (403/407): a 5xx is the proxy unavailable or unable to reach
    the registry (said after ``attempts``, as it is retried), any other status the proxy not
    opening the tunnel. Names the proxy and its variable; the hint, NO_PROXY."""
    tries = f"{attempts} attempt" + ("s" if attempts != 1 else "")
    if status[:1] == "5":
        why = f"the proxy is unavailable or cannot reach {host} ({tries})"
    else:
        why = f"the proxy did not open the tunnel ({tries})"
    return RegistryUnavailableError(
        f"the proxy {proxy_note(env)} answered HTTP {status} to the tunnel to {target}: {why}; "
        "the answer is the proxy's, not the registry's",
        hint=proxy_hint(env, host),
        registry=registry,
        proxy_status=status,
    )
