"""The ``vulnerabilities`` policy rule: a gate on the vulnerability scans CI scanners attached to the
digest (cosign vulnerability records from Trivy or Grype, SARIF, CycloneDX BOMs with vulnerabilities and
CycloneDX VEX; formats in :mod:`builder.policy.scans`).

```yaml
- vulnerabilities: {signers: [ci], max_severity: high, max_age: 7d, ignore: [CVE-2019-18276]}
```

The newest verified scan by ``signers`` decides (its time from the record; a scan without a time counts
as new only when ``max_age`` is not set): it must be at most ``max_age`` old and list no finding above
``max_severity`` (``critical`` > ``high`` > ``medium`` > ``low`` > ...), except ids in ``ignore`` (exact
or glob) and ids a verified CycloneDX VEX statement by ``signers`` marks ``not_affected`` /
``false_positive`` / ``resolved`` or a verified OpenVEX statement marks ``not_affected`` / ``fixed``
(a VEX document is never the deciding scan). No scan is a denial that says what to attach.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import fnmatch
from typing import TYPE_CHECKING, Any

from builder.policy.durations import format_duration, parse_duration
from builder.policy.rules import Notes, Rule, evidence_problems, signed_by
from builder.policy.scans import SCAN_TYPES, SEVERITIES, Finding, Scan, read_scan, severity_rank
from builder.policy.signers import KeySet, key_problems, sets_names

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from builder.policy.evidence import Context
    from builder.policy.results import RuleResult
    from builder.yamldoc import FieldPath

#: findings named in a denial (the rest are counted)
SHOWN = 5


@dataclasses.dataclass(frozen=True)
class VulnerabilitiesRule(Rule):
    """See the module docstring. ``max_severity``: one of :data:`builder.policy.scans.SEVERITIES`;
    ``max_age``: None for no limit; ``ignore``: vulnerability ids or globs."""

    signers: tuple[KeySet, ...] = ()
    max_severity: str = "high"
    max_age: dt.timedelta | None = None
    ignore: tuple[str, ...] = ()
    kind: str = dataclasses.field(default="vulnerabilities", init=False)

    def _scans(self, ctx: Context, notes: Notes) -> list[tuple[Scan, str]]:
        out: list[tuple[Scan, str]] = []
        unlisted = "vulnerability scan by {who} is not from a listed signer"
        for predicate_type in SCAN_TYPES:
            for a, who in signed_by(ctx, predicate_type, self.signers, "vulnerability scan", unlisted, notes):
                out.append((read_scan(a.predicate_type, a.predicate), who))
        return out

    def _ignored(self, finding: Finding, cleared: set[str]) -> bool:
        return finding.id in cleared or any(fnmatch.fnmatchcase(finding.id, pattern) for pattern in self.ignore)

    def evaluate(self, ctx: Context) -> RuleResult:
        age = f", at most {format_duration(self.max_age)} old" if self.max_age else ""
        summary = f"none above {self.max_severity}{age}, scanned by {sets_names(self.signers)}"
        notes = Notes(self.signers, "vulnerability scan")
        scans = self._scans(ctx, notes)
        cleared = {vid for scan, _ in scans for vid in scan.not_affected}
        # VEX documents (OpenVEX, CycloneDX VEX-only) only clear findings: never the scan that decides
        reports = [(s, who) for s, who in scans if not s.vex and (s.findings or not s.not_affected)]
        if not reports:
            found = (
                notes.text()
                if notes
                else (
                    "no vulnerability scan attestation on the digest (attach one: `trivy image --format cosign-vuln` "
                    "+ `cosign attest --type vuln`, or `builder attest --predicate-type "
                    "https://cosign.sigstore.dev/attestation/vuln/v1`)"
                )
            )
            return self.result(False, found + key_problems(self.signers) + evidence_problems(ctx), summary, notes=notes)
        oldest = dt.datetime.min.replace(tzinfo=dt.UTC)
        scan, who = max(reports, key=lambda sw: sw[0].finished or oldest)
        if self.max_age is not None:
            if scan.finished is None:
                return self.result(
                    False, f"the newest scan ({scan.scanner}, by {who}) has no scan time", summary, notes=notes
                )
            elapsed = ctx.now - scan.finished
            if elapsed > self.max_age:
                return self.result(
                    False,
                    f"the newest scan ({scan.scanner}, by {who}, {scan.finished:%Y-%m-%d %H:%M} UTC) is "
                    f"{format_duration(elapsed)} old, more than {format_duration(self.max_age)}: scan again",
                    summary,
                    notes=notes,
                )
        limit = severity_rank(self.max_severity)
        over = [f for f in scan.findings if severity_rank(f.severity) > limit and not self._ignored(f, cleared)]
        if over:
            worst = sorted(over, key=lambda f: (-severity_rank(f.severity), f.id))
            shown = ", ".join(f"{f.id} ({f.severity}{', ' + f.package if f.package else ''})" for f in worst[:SHOWN])
            more = f" and {len(over) - SHOWN} more" if len(over) > SHOWN else ""
            head = f"{len(over)} finding(s) above {self.max_severity} in the scan by {who} ({scan.scanner})"
            return self.result(False, f"{head}: {shown}{more}", summary, notes=notes)
        ignored = sum(1 for f in scan.findings if severity_rank(f.severity) > limit)
        extra = f", {ignored} above it ignored or cleared by VEX" if ignored else ""
        return self.result(
            True,
            f"scan by {who} ({scan.scanner}): {len(scan.findings)} finding(s), none above {self.max_severity}{extra}",
            summary,
            notes=notes,
        )


def vulnerability_rule_builders(
    model: Callable[[type[Any], object, FieldPath], Any],
    keysets: Callable[[Sequence[str], FieldPath], tuple[KeySet, ...]],
    problem: Callable[[FieldPath, str], None],
) -> dict[str, Callable[[object, FieldPath, str], Rule | None]]:
    """The loader's builder of ``vulnerabilities`` from its YAML body: ``model`` validates (None and a
    located problem when invalid), ``keysets`` resolves signer names, ``problem`` records a located
    problem (an unparsable ``max_age``)."""
    from builder.policy.schema import VulnerabilitiesModel

    def vulnerabilities(body: object, p: FieldPath, location: str) -> Rule | None:
        m = model(VulnerabilitiesModel, body, p)
        if m is None:
            return None
        max_age = None
        if m.max_age is not None:
            try:
                max_age = parse_duration(m.max_age)
            except ValueError as exc:
                problem((*p, "max_age"), str(exc))
                return None
        signers = keysets(m.signers, (*p, "signers"))
        return VulnerabilitiesRule(location, signers, m.max_severity, max_age, tuple(m.ignore))

    return {"vulnerabilities": vulnerabilities}


__all__ = ["SEVERITIES", "VulnerabilitiesRule", "vulnerability_rule_builders"]
