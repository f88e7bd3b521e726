"""Vulnerability findings read from the attestations CI scanners write today (pure; no policy here).

Formats and their public definitions:

- cosign's vulnerability scan record, predicate type ``https://cosign.sigstore.dev/attestation/vuln/v1``
  (also the legacy ``cosign.sigstore.dev/attestation/vuln/v1``):
  ``{invocation, scanner: {uri, version, db, result}, metadata: {scanStartedOn, scanFinishedOn}}``
  (https://github.com/sigstore/cosign/blob/main/specs/COSIGN_VULN_ATTESTATION_SPEC.md), written by
  ``trivy --format cosign-vuln`` and ``grype -o ...`` + ``cosign attest --type vuln``; ``scanner.result``
  holds the scanner's own report, read here in every format below;
- Trivy JSON (``SchemaVersion: 2``; ``Results[].Vulnerabilities[]`` with ``VulnerabilityID``, ``PkgName``,
  ``Severity``; https://trivy.dev/latest/docs/configuration/reporting/#json);
- Grype JSON (``matches[].vulnerability.{id, severity}``, ``matches[].artifact.name``;
  https://github.com/anchore/grype#supported-output-formats);
- SARIF 2.1.0 (``runs[].results[]`` with ``ruleId``; the severity from the rule's
  ``properties.security-severity`` (a CVSS score, GitHub's convention,
  https://docs.github.com/en/code-security/code-scanning/integrating-with-code-scanning/sarif-support-for-code-scanning#reportingdescriptor-object),
  else a severity tag in ``properties.tags`` (Trivy), else the result's ``level``;
  https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html); as a cosign ``scanner.result`` or as a
  predicate of type :data:`SARIF_PREDICATE`;
- CycloneDX ``vulnerabilities[]`` (a BOM with vulnerabilities, or a VEX document; predicate type
  ``https://cyclonedx.org/bom`` or ``https://cyclonedx.org/vex``): ``ratings[].severity`` (the highest), and
  ``analysis.state`` ``not_affected`` / ``false_positive`` / ``resolved`` marks a statement that the
  vulnerability does not apply (https://cyclonedx.org/docs/1.6/json/#vulnerabilities_items_analysis_state);
- OpenVEX (``@context`` ``https://openvex.dev/ns[/vX.Y.Z]``; predicate type :data:`OPENVEX`, what
  ``cosign attest --type openvex`` and ``vexctl attest`` write): ``statements[]`` with
  ``vulnerability`` (v0.2.0: ``{name, aliases}``; v0.0.x: the id as a string) and ``status``;
  ``not_affected`` and ``fixed`` clear the vulnerability (its name and aliases), ``affected`` and
  ``under_investigation`` clear nothing (https://github.com/openvex/spec/blob/main/OPENVEX-SPEC.md#status-labels).
  A VEX document is never a scan: it only clears findings of one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from builder.predicates import (
    COSIGN_VULN,
    COSIGN_VULN_LEGACY,
    CYCLONEDX_BOM,
    CYCLONEDX_VEX,
    OPENVEX,
    SARIF_PREDICATE,
)

#: predicate types whose predicate is (or carries) scan findings or VEX statements
SCAN_TYPES = (COSIGN_VULN, COSIGN_VULN_LEGACY, SARIF_PREDICATE, CYCLONEDX_BOM, CYCLONEDX_VEX, OPENVEX)
#: OpenVEX statuses that say the vulnerability does not affect the product
OPENVEX_CLEARED = frozenset({"not_affected", "fixed"})
#: severities, lowest first (the names Trivy, Grype and CycloneDX use, lower case)
SEVERITIES = ("unknown", "none", "negligible", "info", "low", "medium", "high", "critical")
#: CycloneDX analysis states that say a vulnerability does not affect the image
NOT_AFFECTED = frozenset({"not_affected", "false_positive", "resolved", "resolved_with_pedigree"})


@dataclasses.dataclass(frozen=True)
class Finding:
    """One vulnerability in one package: ``id`` (``CVE-2019-18224``), ``severity`` (one of
    :data:`SEVERITIES`), ``package`` (name, may be empty)."""

    id: str
    severity: str
    package: str = ""


@dataclasses.dataclass(frozen=True)
class Scan:
    """What one attestation says: ``findings``, ``not_affected`` (ids a VEX statement clears),
    ``scanner`` (``trivy``, ``grype``, ... or the format), ``finished`` (scan time, None when the
    format has none); ``vex``: a VEX document (OpenVEX), which only clears findings and is never
    taken as a scan."""

    findings: tuple[Finding, ...] = ()
    not_affected: frozenset[str] = frozenset()
    scanner: str = ""
    finished: dt.datetime | None = None
    vex: bool = False


def severity_rank(name: str) -> int:
    """Position of ``name`` in :data:`SEVERITIES` (unknown names rank as ``unknown``)."""
    n = name.strip().lower()
    return SEVERITIES.index(n) if n in SEVERITIES else 0


def _cvss_severity(score: float) -> str:
    """CVSS v3 qualitative rating (https://www.first.org/cvss/v3.1/specification-document#Qualitative-Severity-Rating-Scale)."""
    if score >= 9.0:
        return "critical"
    if score >= 7.0:
        return "high"
    if score >= 4.0:
        return "medium"
    return "low" if score > 0 else "none"


def _time(value: object) -> dt.datetime | None:
    if isinstance(value, str) and value:
        try:
            t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return t if t.tzinfo else t.replace(tzinfo=dt.UTC)
    return None


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _trivy(report: Mapping[str, Any]) -> list[Finding]:
    out = []
    for result in _list(report.get("Results")):
        for item in _list(_map(result).get("Vulnerabilities")):
            v = _map(item)
            if v.get("VulnerabilityID"):
                out.append(
                    Finding(
                        str(v["VulnerabilityID"]), str(v.get("Severity", "unknown")).lower(), str(v.get("PkgName", ""))
                    )
                )
    return out


def _grype(report: Mapping[str, Any]) -> list[Finding]:
    out = []
    for m in _list(report.get("matches")):
        vuln, artifact = _map(_map(m).get("vulnerability")), _map(_map(m).get("artifact"))
        if vuln.get("id"):
            out.append(
                Finding(str(vuln["id"]), str(vuln.get("severity", "unknown")).lower(), str(artifact.get("name", "")))
            )
    return out


def _sarif_rule_severity(rule: Mapping[str, Any]) -> str | None:
    props = _map(rule.get("properties"))
    score = props.get("security-severity")
    if score is not None:
        try:
            return _cvss_severity(float(score))
        except (TypeError, ValueError):
            return None
    for tag in _list(props.get("tags")):
        if isinstance(tag, str) and tag.lower() in SEVERITIES:
            return tag.lower()
    return None


_SARIF_LEVELS = {"error": "high", "warning": "medium", "note": "low", "none": "none"}


def _sarif(report: Mapping[str, Any]) -> list[Finding]:
    out = []
    for run_item in _list(report.get("runs")):
        run = _map(run_item)
        rules = _list(_map(_map(run.get("tool")).get("driver")).get("rules"))
        by_id = {str(_map(r).get("id")): _map(r) for r in rules}
        for res_item in _list(run.get("results")):
            res = _map(res_item)
            rule_id = str(res.get("ruleId", ""))
            if not rule_id:
                continue
            rule = by_id.get(rule_id)
            if rule is None and isinstance(res.get("ruleIndex"), int) and 0 <= res["ruleIndex"] < len(rules):
                rule = _map(rules[res["ruleIndex"]])
            severity = (_sarif_rule_severity(rule) if rule else None) or _SARIF_LEVELS.get(
                str(res.get("level", "")), "unknown"
            )
            out.append(Finding(rule_id, severity))
    return out


def _cyclonedx(report: Mapping[str, Any]) -> tuple[list[Finding], set[str]]:
    findings, cleared = [], set()
    for item in _list(report.get("vulnerabilities")):
        v = _map(item)
        vid = str(v.get("id", ""))
        if not vid:
            continue
        state = str(_map(v.get("analysis")).get("state", ""))
        if state in NOT_AFFECTED:
            cleared.add(vid)
            continue
        ratings = [str(_map(r).get("severity", "unknown")).lower() for r in _list(v.get("ratings"))]
        findings.append(Finding(vid, max(ratings, key=severity_rank) if ratings else "unknown"))
    return findings, cleared


def _openvex(report: Mapping[str, Any]) -> frozenset[str]:
    cleared: set[str] = set()
    for item in _list(report.get("statements")):
        statement = _map(item)
        if str(statement.get("status", "")) not in OPENVEX_CLEARED:
            continue
        vuln = statement.get("vulnerability")
        names = [vuln] if isinstance(vuln, str) else [_map(vuln).get("name"), *_list(_map(vuln).get("aliases"))]
        cleared.update(str(n) for n in names if n)
    return frozenset(cleared)


def read_report(report: Mapping[str, Any]) -> Scan:
    """The findings of one scanner report in any supported format (detected by its shape)."""
    if str(report.get("@context", "")).startswith(OPENVEX):
        when = _time(report.get("last_updated")) or _time(report.get("timestamp"))
        return Scan((), _openvex(report), scanner="openvex", finished=when, vex=True)
    if "SchemaVersion" in report and "Results" in report:
        return Scan(tuple(_trivy(report)), scanner="trivy", finished=_time(report.get("CreatedAt")))
    if "matches" in report:
        descriptor = _map(report.get("descriptor"))
        return Scan(
            tuple(_grype(report)),
            scanner=str(descriptor.get("name") or "grype"),
            finished=_time(descriptor.get("timestamp")),
        )
    if "runs" in report:
        tool = _map(
            _map(_map(_list(report.get("runs"))[0] if _list(report.get("runs")) else {}).get("tool")).get("driver")
        )
        return Scan(tuple(_sarif(report)), scanner=str(tool.get("name") or "sarif").lower())
    if report.get("bomFormat") == "CycloneDX" or "vulnerabilities" in report:
        findings, cleared = _cyclonedx(report)
        return Scan(
            tuple(findings),
            frozenset(cleared),
            scanner="cyclonedx",
            finished=_time(_map(report.get("metadata")).get("timestamp")),
        )
    return Scan(scanner="unknown format")


def read_scan(predicate_type: str, predicate: Mapping[str, Any]) -> Scan:
    """The findings of one attestation of a :data:`SCAN_TYPES` type: a cosign vulnerability record (its
    ``scanner.result`` read by :func:`read_report`, the time from ``metadata.scanFinishedOn``, the scanner
    from ``scanner.uri``) or a SARIF / CycloneDX document itself."""
    if predicate_type in (COSIGN_VULN, COSIGN_VULN_LEGACY):
        scanner = _map(predicate.get("scanner"))
        inner = read_report(_map(scanner.get("result")))
        uri = str(scanner.get("uri", ""))
        name = uri.rsplit("/", 1)[-1].split("@", 1)[0] if uri else inner.scanner
        finished = _time(_map(predicate.get("metadata")).get("scanFinishedOn")) or inner.finished
        return dataclasses.replace(inner, scanner=name or inner.scanner, finished=finished)
    return read_report(predicate)


__all__ = [
    "COSIGN_VULN",
    "COSIGN_VULN_LEGACY",
    "CYCLONEDX_BOM",
    "CYCLONEDX_VEX",
    "OPENVEX",
    "SARIF_PREDICATE",
    "SCAN_TYPES",
    "SEVERITIES",
    "Finding",
    "Scan",
    "read_report",
    "read_scan",
    "severity_rank",
]
