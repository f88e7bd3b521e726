"""The YAML shape of a policy file, as pydantic models (https://docs.pydantic.dev/latest/concepts/models/).

Each model checks one mapping of the document (unknown fields are errors); what needs the whole
document (key set names, stage chains, files on disk) is checked by ``builder.policy.loader``.
Field reference: ``docs/policies.md``. Rule bodies are validated one by one (``RULE_MODELS``) so
every problem keeps its own location.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from builder.models import Vendor
from builder.predicates import HardwareKey


class StrictModel(BaseModel):
    """Base: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")


class KeyModel(StrictModel):
    """A key (``file``, optionally pinned by ``fingerprint``) or a keyless identity (``issuer`` + ``subject``)."""

    file: str | None = None
    fingerprint: str | None = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")
    issuer: str | None = None
    subject: str | None = None


class SignatureModel(StrictModel):
    """``signature:``: ``count`` signatures by the key sets ``signers``."""

    signers: list[str] = Field(min_length=1)
    count: int = Field(default=1, ge=1)


class AttestationModel(StrictModel):
    """``attestation:``: predicate ``type`` by ``signers`` with field values ``where``."""

    type: str
    signers: list[str] = Field(min_length=1)
    where: dict[str, Any] = Field(default_factory=dict)


class ProvenanceModel(StrictModel):
    """``provenance:``: SLSA provenance by ``signers`` from ``source`` (glob) by ``builder_id``."""

    signers: list[str] = Field(min_length=1)
    source: str | None = None
    builder_id: str | None = None


class DeviceCheckModel(StrictModel):
    """``device_check:``: passing checks by ``signers`` on ``vendors``/``gpu_models``/``driver_branches``, and
    from each fleet cluster in ``clusters``."""

    signers: list[str] = Field(min_length=1)
    vendors: list[Vendor] = Field(default_factory=list)
    gpu_models: list[str] = Field(default_factory=list)
    driver_branches: list[str] = Field(default_factory=list)
    clusters: list[str] = Field(default_factory=list)

    @field_validator("driver_branches", mode="before")
    @classmethod
    def _str_branches(cls, v: object) -> object:
        return [str(x) for x in v] if isinstance(v, list) else v


class TestsModel(StrictModel):
    """``tests:``: a passing ``test-result/v1`` by ``signers`` (the short form ``tests: passed`` means
    ``signers: [check-runners]``)."""

    __test__ = False  # not a pytest class
    signers: list[str] = Field(min_length=1)


def _fraction(v: object) -> object:
    """``5%`` -> 0.05; a bare number is a fraction (0.05)."""
    if isinstance(v, str) and v.strip().endswith("%"):
        try:
            return float(v.strip()[:-1]) / 100
        except ValueError:
            return v
    return v


class BenchmarkModel(StrictModel):
    """``benchmark:``: one metric of ``benchmark/v1`` by ``signers`` at most ``max_regression`` (``5%`` or
    0.05) worse than ``against`` (``stage``: what the target stage holds, on the same hardware class
    per ``same``; or a number), ``allow_first`` when there is nothing to compare with."""

    signers: list[str] = Field(min_length=1)
    metric: str = Field(min_length=1)
    max_regression: float = Field(ge=0, lt=1)
    against: Literal["stage"] | float = "stage"
    #: hardware-class keys that must be equal (empty: the rule's default, docs/policies.md)
    same: list[HardwareKey] = Field(default_factory=list)
    allow_first: bool = False

    @field_validator("max_regression", mode="before")
    @classmethod
    def _pct(cls, v: object) -> object:
        return _fraction(v)


class CollectiveModel(StrictModel):
    """``collective:``: recorded all-reduce busbw at least ``min_busbw_ratio`` of the link bandwidth."""

    signers: list[str] = Field(min_length=1)
    min_busbw_ratio: float = Field(gt=0, le=1)
    #: a digest checked on fewer than 2 GPUs: ``fail`` (closed, the default) or ``not-applicable`` (passes, says so)
    single_gpu: Literal["fail", "not-applicable"] = "fail"


class ApprovalsModel(StrictModel):
    """``approvals:``: ``count`` distinct ``approvers`` (names), optionally for the ``same_ticket``."""

    count: int = Field(ge=1)
    approvers: list[str] = Field(min_length=1)
    same_ticket: bool = False


class TicketModel(StrictModel):
    """``change_ticket:``: the ticket must fully match ``pattern`` (a regular expression)."""

    pattern: str


class WindowModel(StrictModel):
    """One freeze window: absolute (``start``/``end``) or weekly (``days`` + ``from``/``to`` HH:MM)."""

    reason: str = "freeze"
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    days: list[str] = Field(default_factory=list)
    from_: str | None = Field(default=None, alias="from")
    to: str | None = None


class FreezeModel(StrictModel):
    """``freeze:``: ``windows`` in ``timezone`` (IANA name)."""

    timezone: str = "UTC"
    windows: list[WindowModel] = Field(min_length=1)


class SoakModel(StrictModel):
    """``soak:``: at least ``min`` (``24h``, seconds) in the previous stage, per records by ``signers``."""

    min: str | int
    signers: list[str] = Field(min_length=1)


class FleetModel(StrictModel):
    """``fleet:``: the image runs on the fleet ``file``'s ``clusters`` with a verdict in ``allow``."""

    file: str
    clusters: list[str] = Field(default_factory=list)
    allow: list[Literal["ok", "minor-version-compat", "forward-compat"]] = ["ok", "minor-version-compat"]
    match_vendor: bool = True


class VulnerabilitiesModel(StrictModel):
    """``vulnerabilities:``: the newest scan by ``signers`` lists nothing above ``max_severity`` (except
    ``ignore``) and is at most ``max_age`` old (docs/policies.md)."""

    signers: list[str] = Field(min_length=1)
    max_severity: Literal["none", "negligible", "low", "medium", "high", "critical"] = "high"
    max_age: str | None = None
    ignore: list[str] = Field(default_factory=list)


class RollbackModel(StrictModel):
    """``rollback:``: approvers or key sets ``allowed`` to roll the stage back."""

    allowed: list[str] = Field(min_length=1)


class StageModel(StrictModel):
    """One stage: ``from``, ``repository`` template, ``registry``; ``require``/``rollback`` are
    checked by the loader (raw YAML here)."""

    from_: str = Field(alias="from")
    repository: str = "{repository}"
    registry: str | None = None
    require: Any = None
    rollback: Any = None


class RetentionModel(StrictModel):
    """``retention:`` (``builder gc``): minimum ages (``30d``, ``1h``, seconds) of ``content_tags``
    in no stage and of ``pending_tags`` before they may be deleted; absent fields take the defaults
    of ``builder.policy.model.Retention``."""

    content_tags: str | int | None = None
    pending_tags: str | int | None = None


class PolicyModel(StrictModel):
    """The document: ``version: 1``, key sets, approvers, promoters, at least one stage (raw
    entries, each checked by the loader) and an optional ``retention:`` (raw, checked by the loader)."""

    version: Literal[1] = 1
    description: str = ""
    keys: dict[str, list[Any]] = Field(default_factory=dict)
    approvers: dict[str, Any] = Field(default_factory=dict)
    promoters: list[str] = Field(default_factory=list)
    stages: dict[str, Any] = Field(min_length=1)
    retention: Any = None


RULE_MODELS: dict[str, type[StrictModel]] = {
    "signature": SignatureModel,
    "attestation": AttestationModel,
    "provenance": ProvenanceModel,
    "device_check": DeviceCheckModel,
    "approvals": ApprovalsModel,
    "change_ticket": TicketModel,
    "freeze": FreezeModel,
    "soak": SoakModel,
    "fleet": FleetModel,
    "vulnerabilities": VulnerabilitiesModel,
    "tests": TestsModel,
    "benchmark": BenchmarkModel,
    "collective": CollectiveModel,
}
"""The model of each rule kind that has a body of fields."""

RULE_KINDS = ("all_of", "any_of", "unconditional", *RULE_MODELS)
"""Every rule name a policy may use."""
