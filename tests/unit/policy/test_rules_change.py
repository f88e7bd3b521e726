"""Rules about the change: approvals, change tickets, soak, freeze windows."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import pytest

from builder.policy import (
    Policy,
    evaluate,
    load_policy,
)
from builder.predicates import APPROVAL_V1, PROMOTION_V1
from tests.unit.policy.support import (
    NOW,
    OTHER,
    Keys,
    approval,
    att,
    ev,
    prod_evidence,
    promo,
    reasons,
    write,
)

if TYPE_CHECKING:
    from pathlib import Path


def test_approvals_count_distinct_listed_approvers_for_this_digest_and_stage(policy: Policy, keys: Keys) -> None:
    alice, bob, build = keys["alice"][1], keys["bob"][1], keys["build"][1]
    cases = {
        "replayed onto another digest": att(APPROVAL_V1, approval(bob, digest=OTHER), bob),
        "statement about another digest": att(APPROVAL_V1, approval(bob), bob, subject=OTHER),
        "for another stage": att(APPROVAL_V1, approval(bob, stage="staging"), bob),
        "by a non-approver": att(APPROVAL_V1, approval(build), build),
        "claiming another key": att(APPROVAL_V1, approval(alice), bob),
        "unverifiable": att(APPROVAL_V1, approval(bob), bob, ok=False, reason="wrong key"),
    }
    expect = {
        "replayed onto another digest": "names digest " + OTHER,
        "statement about another digest": "is for another digest",
        "for another stage": "is for stage 'staging'",
        "by a non-approver": "who is not a listed approver",
        "claiming another key": "claims another approver key",
        "unverifiable": "does not verify (wrong key)",
    }
    for name, bad in cases.items():
        d = evaluate(policy, "prod", prod_evidence(keys, bad, approvers=("alice", "alice")), NOW)
        r = reasons(d)
        assert list(r) == ["approvals"], (name, r)
        assert "has 1 (alice)" in r["approvals"] and expect[name] in r["approvals"], (name, r["approvals"])
    # the same bad approval copied four times (four layers) is one note, not four
    copied = [att(APPROVAL_V1, approval(bob), bob, ok=False, reason="wrong key")] * 4
    said = reasons(evaluate(policy, "prod", prod_evidence(keys, *copied, approvers=("alice",)), NOW))["approvals"]
    assert said.count("does not verify (wrong key)") == 1, said


def test_ticket_and_soak(policy: Policy, keys: Keys) -> None:
    assert "no change ticket" in reasons(evaluate(policy, "prod", prod_evidence(keys, ticket=""), NOW))["change_ticket"]
    assert (
        "does not match"
        in reasons(evaluate(policy, "prod", prod_evidence(keys, ticket="CHG-12"), NOW))["change_ticket"]
    )
    early = dt.datetime(2026, 11, 29, 2, 0, tzinfo=dt.UTC)  # 14h after entering staging
    r = reasons(evaluate(policy, "prod", prod_evidence(keys), early))
    assert list(r) == ["soak"] and "14h" in r["soak"] and "10h to go" in r["soak"]
    # a promotion record signed by someone else does not count for soak
    base = [a for a in prod_evidence(keys).attestations if a.predicate_type != PROMOTION_V1]
    forged = att(PROMOTION_V1, promo("staging", "2026-11-01T00:00:00Z"), keys["mallory"][1])
    r = reasons(evaluate(policy, "prod", ev(*base, forged, ticket="CHG-1234"), NOW))
    assert "not a listed promoter" in r["soak"]


def test_freeze_windows_in_time_zones(tmp_path: Path) -> None:
    text = """\
    stages:
      prod:
        from: build
        require:
          freeze:
            timezone: Europe/Berlin
            windows:
              - {reason: year end, start: 2026-12-18T18:00:00, end: 2027-01-04T08:00:00}
              - {reason: friday evening, days: [fri], from: "16:00"}
              - {reason: weekend, days: [sat, sun]}
              - {reason: nightly maintenance, days: [mon], from: "23:00", to: "02:00"}
    """
    policy = load_policy(write(tmp_path, text))

    def frozen(when: dt.datetime) -> str | None:
        d = evaluate(policy, "prod", ev(stage="prod"), when)
        return None if d.allowed else d.failed()[0].reason

    utc = dt.UTC
    assert frozen(dt.datetime(2026, 12, 18, 16, 59, tzinfo=utc)) is not None  # Fri 17:59 Berlin: friday evening
    assert "year end" in (frozen(dt.datetime(2026, 12, 22, 10, 0, tzinfo=utc)) or "")
    assert frozen(dt.datetime(2027, 1, 4, 7, 30, tzinfo=utc)) is None  # Mon 08:30 Berlin: after the window
    assert frozen(dt.datetime(2026, 11, 27, 14, 59, tzinfo=utc)) is None  # Fri 15:59 Berlin (CET)
    assert "friday evening" in (frozen(dt.datetime(2026, 11, 27, 15, 0, tzinfo=utc)) or "")
    # summer time: Fri 16:00 Berlin is 14:00 UTC in July
    assert "friday evening" in (frozen(dt.datetime(2026, 7, 3, 14, 0, tzinfo=utc)) or "")
    assert "weekend" in (frozen(dt.datetime(2026, 11, 29, 12, 0, tzinfo=utc)) or "")
    # overnight window: Monday 23:30 and Tuesday 01:30 Berlin, not Tuesday 02:30
    assert "nightly" in (frozen(dt.datetime(2026, 11, 30, 22, 30, tzinfo=utc)) or "")
    assert "nightly" in (frozen(dt.datetime(2026, 12, 1, 0, 30, tzinfo=utc)) or "")
    assert frozen(dt.datetime(2026, 12, 1, 1, 30, tzinfo=utc)) is None
    with pytest.raises(ValueError):
        evaluate(policy, "prod", ev(stage="prod"), dt.datetime(2026, 1, 1))
    # the denial says when the freeze lifts, following windows that continue it
    fri = frozen(dt.datetime(2026, 11, 27, 15, 0, tzinfo=utc)) or ""
    assert fri.startswith("frozen until 2026-11-30 00:00 CET (Europe/Berlin, 2d8h to go): friday evening"), fri
    year_end = frozen(dt.datetime(2026, 12, 22, 10, 0, tzinfo=utc)) or ""
    assert year_end.startswith("frozen until 2027-01-04 08:00 CET (Europe/Berlin, 12d21h to go): year end"), year_end
    into_year_end = frozen(dt.datetime(2026, 12, 18, 16, 59, tzinfo=utc)) or ""
    assert "until 2027-01-04 08:00 CET" in into_year_end and "friday evening" in into_year_end
    nightly = frozen(dt.datetime(2026, 11, 30, 22, 30, tzinfo=utc)) or ""
    assert nightly.startswith("frozen until 2026-12-01 02:00 CET (Europe/Berlin, 2h30m to go)"), nightly
    assert "now 2026-11-30 23:30 CET" in nightly
