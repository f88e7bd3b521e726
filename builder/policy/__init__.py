"""Promotion policies: load ``policies/*.yaml``, validate them, evaluate a promotion against evidence.

A policy names key sets and approvers, then stages (``dev -> staging -> prod``); each stage says
where it takes digests from (``from: build`` or another stage), which repository/registry holds
its pointer tag, what must hold for a digest to enter it (``require``: composable rules, all-of /
any-of) and who may roll it back. Reference and examples: ``docs/policies.md``.

Modules: ``schema`` (the YAML shape), ``loader`` (load + validate, every problem with its
location), ``model`` (``Policy``, ``Stage``), ``signers`` (keys, key sets, approvers), ``rules``
(the ``Rule`` base and groups), ``rules_signature`` / ``rules_evidence`` / ``rules_change`` (the rule kinds),
``evidence`` (what a decision looks at), ``results`` (``RuleResult``, ``Decision``),
``evaluation`` (``evaluate``), ``durations`` (durations, times, weekdays), ``validation``
(``builder policy validate``: every problem of every file), ``approvals`` (judging an approval
before it is written).

Errors: ``PolicyError`` (exit 30) with ``details['problems']`` listing every problem
(``builder.yamldoc.Problem.to_json()``); ``NotFoundError`` for an unknown stage or a missing file.

Names are imported on first use (``builder.lazy.lazy_exports``): ``from builder.policy import
BUILD_STAGE`` loads ``builder.policy.model`` alone, not the loader's pydantic schema, YAML
parser and key files, which a command reading a cached policy (``builder.policy.cache``) never needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.lazy import lazy_exports

if TYPE_CHECKING:  # the names below are imported on first use (``__getattr__``)
    from builder.policy.durations import format_duration, parse_duration, parse_time, weekday_index
    from builder.policy.evaluation import evaluate
    from builder.policy.evidence import (
        AttestationEvidence,
        Context,
        Evidence,
        FleetEvidence,
        SignatureEvidence,
    )
    from builder.policy.loader import check_policy, load_policy
    from builder.policy.model import BUILD_STAGE, Policy, Retention, RollbackRule, Stage
    from builder.policy.results import Decision, RuleResult
    from builder.policy.rules import Rule
    from builder.policy.rules_change import (
        ApprovalRule,
        ChangeTicketRule,
        FreezeRule,
        FreezeWindow,
        SoakRule,
        freeze_ends,
    )
    from builder.policy.rules_evidence import (
        AttestationRule,
        DeviceCheckFacts,
        DeviceCheckRule,
        FleetRule,
        ProvenanceRule,
        device_check_facts,
        driver_branch,
    )
    from builder.policy.rules_groups import AllOf, AnyOf, Unconditional
    from builder.policy.rules_signature import SignatureRule
    from builder.policy.schema import RULE_KINDS
    from builder.policy.signers import Approver, KeyRef, KeySet

#: Public name -> the module of this package that defines it (PEP 562 module ``__getattr__``:
#: https://peps.python.org/pep-0562/). ``tests/unit/policy/test_exports.py`` keeps it equal to
#: ``__all__`` and the imports above.
_EXPORTS: dict[str, str] = {
    "AllOf": "rules_groups",
    "AnyOf": "rules_groups",
    "ApprovalRule": "rules_change",
    "Approver": "signers",
    "AttestationEvidence": "evidence",
    "AttestationRule": "rules_evidence",
    "BUILD_STAGE": "model",
    "ChangeTicketRule": "rules_change",
    "Context": "evidence",
    "Decision": "results",
    "DeviceCheckFacts": "rules_evidence",
    "DeviceCheckRule": "rules_evidence",
    "Evidence": "evidence",
    "FleetEvidence": "evidence",
    "FleetRule": "rules_evidence",
    "FreezeRule": "rules_change",
    "FreezeWindow": "rules_change",
    "KeyRef": "signers",
    "KeySet": "signers",
    "Policy": "model",
    "ProvenanceRule": "rules_evidence",
    "RULE_KINDS": "schema",
    "Retention": "model",
    "RollbackRule": "model",
    "Rule": "rules",
    "RuleResult": "results",
    "SignatureEvidence": "evidence",
    "SignatureRule": "rules_signature",
    "SoakRule": "rules_change",
    "Stage": "model",
    "Unconditional": "rules_groups",
    "check_policy": "loader",
    "device_check_facts": "rules_evidence",
    "driver_branch": "rules_evidence",
    "evaluate": "evaluation",
    "format_duration": "durations",
    "freeze_ends": "rules_change",
    "load_policy": "loader",
    "parse_duration": "durations",
    "parse_time": "durations",
    "weekday_index": "durations",
}

#: Import the module that defines a name on first use; AttributeError for other names.
__getattr__ = lazy_exports(__name__, _EXPORTS, globals())

__all__ = [
    "BUILD_STAGE",
    "RULE_KINDS",
    "AllOf",
    "AnyOf",
    "ApprovalRule",
    "Approver",
    "AttestationEvidence",
    "AttestationRule",
    "ChangeTicketRule",
    "Context",
    "Decision",
    "DeviceCheckFacts",
    "DeviceCheckRule",
    "Evidence",
    "FleetEvidence",
    "FleetRule",
    "FreezeRule",
    "FreezeWindow",
    "KeyRef",
    "KeySet",
    "Policy",
    "ProvenanceRule",
    "Retention",
    "RollbackRule",
    "Rule",
    "RuleResult",
    "SignatureEvidence",
    "SignatureRule",
    "SoakRule",
    "Stage",
    "Unconditional",
    "check_policy",
    "device_check_facts",
    "driver_branch",
    "evaluate",
    "format_duration",
    "freeze_ends",
    "load_policy",
    "parse_duration",
    "parse_time",
    "weekday_index",
]
