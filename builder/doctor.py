"""Environment report: engine, buildx, registry, cosign. Used by ``builder doctor``."""

from __future__ import annotations

import dataclasses
import shutil
from typing import TYPE_CHECKING

from typing_extensions import TypedDict

from builder.errors import BuilderError

if TYPE_CHECKING:
    from builder.registry import RegistryClient


class ItemDocument(TypedDict):
    """One dependency: ``name`` (engine, buildx, registry, cosign), reachable or not, and what was
    found (version, address) or what is wrong."""

    name: str
    ok: bool
    detail: str


class ReportDocument(TypedDict):
    """``builder doctor --json``: ``ok`` when every dependency is reachable."""

    ok: bool
    items: list[ItemDocument]


@dataclasses.dataclass(frozen=True)
class Item:
    name: str
    ok: bool
    detail: str
    error: BuilderError | None = None


@dataclasses.dataclass(frozen=True)
class Report:
    items: tuple[Item, ...]

    @property
    def ok(self) -> bool:
        return all(i.ok for i in self.items)

    def to_json(self) -> ReportDocument:
        return {
            "ok": self.ok,
            "items": [{"name": i.name, "ok": i.ok, "detail": i.detail} for i in self.items],
        }

    def raise_first_failure(self) -> None:
        for item in self.items:
            if item.error is not None:
                item.error.details.setdefault("report", self.to_json())
                raise item.error


def diagnose_environment(registry: RegistryClient) -> Report:
    """Probe the engine, buildx, ``registry`` (the configured one, with the invocation's
    credentials) and cosign; never raises, the report carries the errors."""
    from builder import engine

    items: list[Item] = []
    try:
        info = engine.ping()
        items.append(Item("engine", True, info))
    except BuilderError as exc:
        items.append(Item("engine", False, exc.message, exc))
    try:
        items.append(Item("buildx", True, engine.buildx_version()))
    except BuilderError as exc:
        items.append(Item("buildx", False, exc.message, exc))
    try:
        items.append(Item("registry", True, _probe_registry(registry)))
    except BuilderError as exc:
        items.append(Item("registry", False, exc.message, exc))
    cosign = shutil.which("cosign")
    items.append(Item("cosign", cosign is not None, cosign or "not on PATH (scripts/setup installs it)"))
    return Report(tuple(items))


def _probe_registry(registry: RegistryClient) -> str:
    """What ``GET /v2/`` says about ``registry``: with credentials configured for it, they must be
    accepted (a 401 after sending them is RegistryAuthError, exit 6, whose hint names where they
    were read from), as :meth:`RegistryClient.check_auth`; without any, a 401 still means the
    registry answers and wants a login (the Distribution spec's version check:
    https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#determining-support).
    Raises RegistryUnavailableError when nothing answers."""
    if registry.credential() is not None:
        registry.check_auth()
        return f"{registry.base}/v2/ answers; the configured credentials are accepted"
    if registry.ping():
        return f"{registry.base}/v2/ answers (no credentials configured for it)"
    return f"{registry.base}/v2/ answers and wants a login (no credentials configured for it)"
