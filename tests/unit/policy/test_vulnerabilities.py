"""The ``vulnerabilities`` gate on real recorded scanner outputs (tests/data/scanners/README.md: Trivy
JSON, SARIF, CycloneDX with vulnerabilities, CycloneDX VEX, Trivy's cosign vulnerability record, Grype
JSON), attached as the attestations CI writes (cosign's vuln predicate, SARIF, CycloneDX)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import TYPE_CHECKING, Any

import pytest

from builder.errors import PolicyError
from builder.policy import Policy, evaluate
from builder.policy.scans import (
    COSIGN_VULN,
    CYCLONEDX_BOM,
    CYCLONEDX_VEX,
    OPENVEX,
    SARIF_PREDICATE,
    read_report,
    read_scan,
)
from tests.conftest import DATA
from tests.unit.policy.support import NOW, Keys, att, ev, reasons, staging_policy

if TYPE_CHECKING:
    from pathlib import Path

SCANS = DATA / "scanners"


def _load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((SCANS / name).read_text())
    return doc


def _vuln(
    result: dict[str, Any], finished: str = "2026-11-29T12:00:00Z", uri: str = "pkg:github/aquasecurity/trivy@v0.58.0"
) -> dict[str, Any]:
    """A cosign vulnerability record (COSIGN_VULN_ATTESTATION_SPEC) around a scanner's real report."""
    return {
        "invocation": {"parameters": None, "uri": "", "event_id": "", "builder.id": ""},
        "scanner": {"uri": uri, "version": uri.rsplit("@", 1)[-1], "db": {"uri": "", "version": ""}, "result": result},
        "metadata": {"scanStartedOn": finished, "scanFinishedOn": finished},
    }


def _policy(tmp_path: Path, keys: Keys, gate: str) -> Policy:
    return staging_policy(tmp_path, keys, f"      vulnerabilities: {gate}", runners="ci")


def _decide(policy: Policy, *atts: Any) -> Any:
    return evaluate(policy, "staging", dataclasses.replace(ev(*atts), stage="staging"), NOW)


def test_formats_read_from_real_outputs() -> None:
    trivy = read_report(_load("trivy-debian-buster.json"))
    assert {(f.id, f.severity, f.package) for f in trivy.findings} == {
        ("CVE-2019-18276", "low", "bash"),
        ("CVE-2019-18224", "critical", "libidn2-0"),
    }
    grype = read_report(_load("grype-imgs.json"))
    assert {(f.id, f.severity) for f in grype.findings} == {("CVE-1999-0001", "low"), ("CVE-1999-0002", "critical")}
    sarif = read_report(_load("trivy-alpine-310.sarif.json"))
    assert sarif.scanner == "trivy"
    assert {f.id for f in sarif.findings} >= {"CVE-2019-1549", "CVE-2019-1551"}
    cdx = read_report(_load("trivy-fluentd.cdx.json"))
    assert ("CVE-2019-18224", "critical") in {(f.id, f.severity) for f in cdx.findings}
    vex = read_report(_load("trivy-vex-cyclonedx.json"))
    assert vex.findings == () and vex.not_affected == {"CVE-2021-44228", "CVE-2022-27943"}
    record = read_scan(COSIGN_VULN, _load("trivy-cosign-vuln-alpine-3.10.json"))
    assert record.scanner == "trivy"
    assert record.finished == dt.datetime(2022, 7, 24, 8, 14, 4, 864682, tzinfo=dt.UTC)
    assert [(f.id, f.severity) for f in record.findings] == [("CVE-2021-36159", "critical")]


def test_critical_finding_blocks_and_is_named(tmp_path: Path, keys: Keys) -> None:
    ci = keys["runner"][1]
    policy = _policy(tmp_path, keys, "{signers: [ci], max_severity: high}")
    decision = _decide(policy, att(COSIGN_VULN, _vuln(_load("trivy-debian-buster.json")), ci))
    why = reasons(decision)["vulnerabilities"]
    assert "1 finding(s) above high" in why and "CVE-2019-18224 (critical, libidn2-0)" in why
    assert "CVE-2019-18276" not in why  # LOW is allowed
    relaxed = _policy(tmp_path, keys, "{signers: [ci], max_severity: critical}")
    assert _decide(relaxed, att(COSIGN_VULN, _vuln(_load("trivy-debian-buster.json")), ci)).allowed


def test_ignore_and_vex_clear_findings(tmp_path: Path, keys: Keys) -> None:
    ci = keys["runner"][1]
    ignoring = _policy(tmp_path, keys, "{signers: [ci], max_severity: high, ignore: ['CVE-2019-1822*']}")
    assert _decide(ignoring, att(COSIGN_VULN, _vuln(_load("trivy-debian-buster.json")), ci)).allowed
    policy = _policy(tmp_path, keys, "{signers: [ci], max_severity: high}")
    grype = att(COSIGN_VULN, _vuln(_load("grype-imgs.json"), uri="pkg:github/anchore/grype@v0.87.0"), ci)
    assert "CVE-1999-0002 (critical, package-2)" in reasons(_decide(policy, grype))["vulnerabilities"]
    vex_doc = _load("trivy-vex-cyclonedx.json")
    vex_doc["vulnerabilities"].append({"id": "CVE-1999-0002", "analysis": {"state": "not_affected"}})
    assert _decide(policy, grype, att(CYCLONEDX_VEX, vex_doc, ci)).allowed
    assert not _decide(policy, grype, att(CYCLONEDX_VEX, vex_doc, keys["build"][1])).allowed  # VEX by another key


def test_openvex_clears_findings_and_is_never_a_scan(tmp_path: Path, keys: Keys) -> None:
    """Trivy's recorded OpenVEX v0.2.0 document; statements added to it for the Grype finding: only
    ``not_affected`` / ``fixed`` clear (name and aliases), ``affected`` does not, and a VEX document alone
    (or newer than the scan) is not taken as a scan with no findings."""
    doc = _load("trivy-openvex-oci.json")
    vex = read_scan(OPENVEX, doc)
    assert vex.vex and vex.findings == () and vex.not_affected == {"CVE-2022-3715"}
    assert vex.finished == dt.datetime(2023, 1, 17, 1, 7, 16, 853479, tzinfo=dt.UTC)
    ci = keys["runner"][1]
    policy = _policy(tmp_path, keys, "{signers: [ci], max_severity: high}")
    grype = att(COSIGN_VULN, _vuln(_load("grype-imgs.json"), uri="pkg:github/anchore/grype@v0.87.0"), ci)
    is_affected = {"vulnerability": {"name": "CVE-1999-0002"}, "status": "affected"}
    affected = {**doc, "statements": [*doc["statements"], is_affected]}
    assert "CVE-1999-0002 (critical" in reasons(_decide(policy, grype, att(OPENVEX, affected, ci)))["vulnerabilities"]
    by_alias = {"vulnerability": {"name": "GHSA-xxxx", "aliases": ["CVE-1999-0002"]}, "status": "fixed"}
    cleared = {**doc, "statements": [*doc["statements"], by_alias]}
    assert _decide(policy, grype, att(OPENVEX, cleared, ci)).allowed
    assert not _decide(policy, grype, att(OPENVEX, cleared, keys["build"][1])).allowed  # VEX by another key
    for only in (cleared, {**doc, "statements": [is_affected]}):  # no scan: VEX statements never stand for one
        why = reasons(_decide(policy, att(OPENVEX, only, ci)))["vulnerabilities"]
        assert "no vulnerability scan attestation" in why
    legacy = {**doc, "statements": [{"vulnerability": "CVE-1999-0002", "status": "not_affected"}]}  # v0.0.x
    assert read_report(legacy).not_affected == {"CVE-1999-0002"}


@pytest.mark.parametrize(
    ("ptype", "name", "allowed"),
    [
        (SARIF_PREDICATE, "trivy-alpine-310.sarif.json", True),  # MEDIUM only
        (CYCLONEDX_BOM, "trivy-fluentd.cdx.json", False),  # CVE-2019-18224 critical
    ],
)
def test_sarif_and_cyclonedx_attestations(tmp_path: Path, keys: Keys, ptype: str, name: str, allowed: bool) -> None:
    policy = _policy(tmp_path, keys, "{signers: [ci], max_severity: high}")
    assert _decide(policy, att(ptype, _load(name), keys["runner"][1])).allowed is allowed


def test_age_unsigned_and_missing_scans_fail_closed(tmp_path: Path, keys: Keys) -> None:
    ci = keys["runner"][1]
    policy = _policy(tmp_path, keys, "{signers: [ci], max_severity: critical, max_age: 7d}")
    old = att(COSIGN_VULN, _load("trivy-cosign-vuln-alpine-3.10.json"), ci)  # scanned 2022-07-24
    assert "old, more than 7d" in reasons(_decide(policy, old))["vulnerabilities"]
    fresh = att(COSIGN_VULN, _vuln(_load("trivy-debian-buster.json"), finished="2026-11-29T12:00:00Z"), ci)
    assert _decide(policy, old, fresh).allowed  # the newest scan decides
    assert "no vulnerability scan attestation" in reasons(_decide(policy))["vulnerabilities"]
    stranger = att(COSIGN_VULN, _vuln(_load("trivy-debian-buster.json")), keys["build"][1])
    assert not _decide(policy, stranger).allowed
    bad = att(COSIGN_VULN, _vuln(_load("trivy-debian-buster.json")), ci, ok=False, reason="bad signature")
    assert "does not verify" in reasons(_decide(policy, bad))["vulnerabilities"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("{signers: [ci], max_severity: severe}", "max_severity"),
        ("{signers: [ci], max_age: soon}", "max_age"),
        ("{signers: [nobody]}", "nobody"),
        ("{max_severity: high}", "signers"),
    ],
)
def test_mistakes_are_located(tmp_path: Path, keys: Keys, body: str, says: str) -> None:
    with pytest.raises(PolicyError) as err:
        _policy(tmp_path, keys, body)
    problems = err.value.details["problems"]
    assert any("vulnerabilities" in p["path"] and says in p["path"] + p["message"] for p in problems), problems
