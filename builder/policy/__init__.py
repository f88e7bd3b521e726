"""Promotion policies: load ``policies/*.yaml``, validate them, evaluate a promotion against evidence.

A policy names key sets and approvers, then stages (``dev -> staging -> prod``); each stage says
where it takes digests from (``from: build`` or another stage), which repository/registry holds
its pointer tag, what must hold for a digest to enter it (``require``: composable rules, all-of /
any-of) and who may roll it back. Reference and examples: ``docs/policies.md``.

Modules: ``schema`` (the YAML shape), ``loader`` (load + validate, every problem with its
location), ``model`` (``Policy``, ``Stage``), ``signers`` (keys, key sets, approvers), ``rules``
(the ``Rule`` base and groups), ``rules_evidence`` / ``rules_change`` (the rule kinds),
``evidence`` (what a decision looks at), ``results`` (``RuleResult``, ``Decision``),
``evaluation`` (``evaluate``), ``durations`` (durations, times, weekdays), ``validation``
(``builder policy validate``: every problem of every file), ``approvals`` (judging an approval
before it is written).

Errors: ``PolicyError`` (exit 30) with ``details['problems']`` listing every problem
(``builder.yamldoc.Problem.to_json()``); ``NotFoundError`` for an unknown stage or a missing file.
"""

from builder.policy.durations import format_duration, parse_duration, parse_time, weekday_index
from builder.policy.evaluation import evaluate
from builder.policy.evidence import (
    BUILD_STAGE,
    AttestationEvidence,
    Context,
    Evidence,
    FleetEvidence,
    SignatureEvidence,
)
from builder.policy.loader import check_policy, load_policy
from builder.policy.model import Policy, Retention, RollbackRule, Stage
from builder.policy.results import Decision, RuleResult
from builder.policy.rules import AllOf, AnyOf, Rule, Unconditional
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
    SignatureRule,
    device_check_facts,
    driver_branch,
)
from builder.policy.schema import RULE_KINDS
from builder.policy.signers import Approver, KeyRef, KeySet

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
