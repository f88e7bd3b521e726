"""Shared values and builders for the policy tests: a policy text, evidence builders and a reader
of a decision's failed rules."""

from __future__ import annotations

import datetime as dt
import textwrap
from pathlib import Path
from typing import Any

from builder.policy import (
    AttestationEvidence,
    Decision,
    Evidence,
    FleetEvidence,
    Policy,
    SignatureEvidence,
    load_policy,
)
from builder.predicates import APPROVAL_V1, DEVICE_CHECK_V1, PROMOTION_V1

ROOT = Path(__file__).resolve().parents[3]
DIGEST = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64
NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)

Keys = dict[str, tuple[Path, str]]
"""name -> (public key file, fingerprint)."""

POLICY = """\
version: 1
keys:
  build: [{{file: {build}}}]
  runners: [{{file: {runner}}}]
approvers:
  alice: {{file: {alice}}}
  bob: {{file: {bob}}}
  carol: {{file: {carol}}}
promoters: [build]
stages:
  dev:
    from: build
    require: {{unconditional: every build}}
    rollback: {{allowed: [build]}}
  staging:
    from: dev
    require:
      all_of:
        - signature: {{signers: [build]}}
        - device_check: {{signers: [runners], vendors: [none, nvidia]}}
    rollback: {{allowed: [alice]}}
  prod:
    from: staging
    repository: "prod/{{repository}}"
    require:
      all_of:
        - approvals: {{count: 2, approvers: [alice, bob, carol]}}
        - device_check:
            signers: [runners]
            vendors: [nvidia]
            gpu_models: ["NVIDIA H100*", "NVIDIA H200*"]
            driver_branches: ["570", "580"]
        - change_ticket: {{pattern: "CHG-[0-9]{{4,8}}"}}
        - soak: {{min: 24h, signers: [build]}}
        - any_of:
            - attestation:
                type: {slsa}
                signers: [build]
                where: {{buildDefinition.externalParameters.source.ref: refs/heads/main}}
            - unconditional: provenance optional while the build migrates
    rollback: {{allowed: [alice, bob]}}
"""


def write(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def staging_policy(tmp_path: Path, keys: Keys, require: str, *, runners: str = "runners") -> Policy:
    """A policy where dev takes every build and staging requires ``require`` (YAML lines indented by six
    spaces, as under ``require:``); key groups ``build`` and ``runners`` (the name of the runner's group)."""
    text = f"""\
    version: 1
    keys:
      {runners}: [{{file: {keys["runner"][0]}}}]
      build: [{{file: {keys["build"][0]}}}]
    promoters: [build]
    stages:
      dev: {{from: build, require: {{unconditional: all}}, rollback: {{allowed: [build]}}}}
      staging:
        from: dev
        require:
    {require}
        rollback: {{allowed: [build]}}
    """
    return load_policy(write(tmp_path, text))


def att(
    ptype: str, predicate: dict[str, Any], signer: str, *, ok: bool = True, subject: str = DIGEST, reason: str = ""
) -> AttestationEvidence:
    return AttestationEvidence(ptype, predicate, signer, ok, reason, None, (subject,))


def dc(vendor: str, gpus: tuple[str, ...] = (), driver: str = "", passed: bool = True) -> dict[str, Any]:
    return {
        "result": "passed" if passed else "failed",
        "host": {"vendor": vendor, "driver_version": driver, "gpus": [{"name": g} for g in gpus]},
    }


def approval(fp: str, *, digest: str = DIGEST, stage: str = "prod") -> dict[str, Any]:
    return {
        "approver": {"fingerprint": fp, "name": None},
        "stage": stage,
        "digest": digest,
        "ticket": "CHG-1234",
        "time": "2026-11-30T10:00:00Z",
    }


def promo(stage: str, when: str, digest: str = DIGEST) -> dict[str, Any]:
    return {"action": "promote", "stage": stage, "digest": digest, "time": when, "decision": {"allowed": True}}


def ev(
    *atts: AttestationEvidence,
    sigs: tuple[SignatureEvidence, ...] = (),
    ticket: str | None = None,
    stage: str = "prod",
    problems: tuple[str, ...] = (),
    fleet: tuple[FleetEvidence, ...] = (),
) -> Evidence:
    return Evidence("reg/repo", DIGEST, stage, sigs, atts, fleet, ticket, problems)


def prod_evidence(
    keys: Keys,
    *extra: AttestationEvidence,
    ticket: str = "CHG-1234",
    approvers: tuple[str, ...] = ("alice", "bob"),
) -> Evidence:
    """Evidence that passes every prod rule of ``POLICY`` (plus ``extra``)."""
    runner, build = keys["runner"][1], keys["build"][1]
    items = [att(APPROVAL_V1, approval(keys[a][1]), keys[a][1]) for a in approvers]
    items.append(att(DEVICE_CHECK_V1, dc("nvidia", ("NVIDIA H100 80GB HBM3",), "580.65.06"), runner))
    items.append(att(DEVICE_CHECK_V1, dc("nvidia", ("NVIDIA H200",), "570.124.06"), runner))
    items.append(att(PROMOTION_V1, promo("staging", "2026-11-28T12:00:00Z"), build))
    return ev(*items, *extra, ticket=ticket)


def reasons(decision: Decision) -> dict[str, str]:
    """Failed leaf rule kind -> its reason."""
    return {r.rule.split()[0]: r.reason for r in decision.failed()}
