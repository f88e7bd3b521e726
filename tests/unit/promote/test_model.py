"""Pure values of promotion: promotion/v1 records, --expect-previous, history entries, and the
approval predicate the approve command writes next to them."""

from __future__ import annotations

import datetime as dt

from builder.promote.location import Location
from builder.promote.model import (
    UNSET,
    PointerTrust,
    PromotionRecord,
    StageHistory,
    parse_expect_previous,
    short_signer,
)
from builder.signing.approvals import approval_predicate

DIGEST = "sha256:" + "c" * 64


def _record() -> PromotionRecord:
    return PromotionRecord(
        action="promote",
        variant="jax0.7-cpu-py3.11-debian12",
        stage="prod",
        from_stage="staging",
        reference="127.0.0.1:5000/prod/demo/jax:jax0.7-cpu-py3.11-debian12-prod",
        digest=DIGEST,
        previous=None,
        allowed=True,
        reasons=("pass approvals: approved by alice, bob",),
        policy="policies/default.yaml",
        promoter="sha256:" + "f" * 64,
        promoter_name="alice",
        time="2026-11-30T17:00:00.000001Z",
        ticket="CHG-1234",
    )


def test_promotion_record_round_trips() -> None:
    p = _record().predicate()
    assert p["fromStage"] == "staging" and p["decision"]["allowed"] is True
    back = PromotionRecord.from_predicate(p, signer="sha256:" + "f" * 64, layer="sha256:" + "1" * 64)
    assert back is not None and back.predicate() == p and back.layer == "sha256:" + "1" * 64
    assert back.when == dt.datetime(2026, 11, 30, 17, 0, 0, 1, tzinfo=dt.UTC)
    # anything malformed is not a record (it is then simply not trusted)
    for broken in ({}, {**p, "digest": 7}, {**p, "previous": ["x"]}, {**p, "time": None}, {**p, "decision": "yes"}):
        assert PromotionRecord.from_predicate(broken) is None


def test_expect_previous_text() -> None:
    assert parse_expect_previous(None) is UNSET
    assert parse_expect_previous("none") is None
    assert parse_expect_previous(DIGEST) == DIGEST


def test_untrusted_pointer_note_names_the_pointer_or_the_short_digest() -> None:
    loc = Location("r:5000", "demo/jax", "v-dev")
    assert PointerTrust(loc, None, None).note() == ""
    bare = PointerTrust(loc, DIGEST, None)
    assert bare.note(["build"]).startswith(f"r:5000/demo/jax:v-dev names {DIGEST} but no promotion record")
    assert "(moved outside builder?)" in bare.note()
    foreign = PointerTrust(loc, DIGEST, None, ("sha256:abc… (key set ci, not a promoter of dev)",))
    assert foreign.note(short=True).startswith(f"untrusted: names {DIGEST[:19]}…")
    assert foreign.note().endswith("signed by sha256:abc… (key set ci, not a promoter of dev)")
    assert short_signer("sha256:" + "a" * 64) == "SHA256:" + "a" * 12 + "…"
    assert short_signer(None) == "unknown signer"


def test_stage_history_json_shapes() -> None:
    assert StageHistory("dev", None).to_json() == {"stage": "dev", "pointer": None, "records": []}
    rec = _record()
    held = StageHistory("prod", rec.reference, ((rec, "alice"),), DIGEST).to_json()
    assert held["digest"] == DIGEST and held["records"][0]["by"] == "alice" and "note" not in held
    untrusted = StageHistory("prod", rec.reference, (), DIGEST, "untrusted: ...").to_json()
    assert untrusted == {
        "stage": "prod",
        "pointer": rec.reference,
        "records": [],
        "digest": DIGEST,
        "note": "untrusted: ...",
    }


def test_approval_predicate() -> None:
    now = dt.datetime(2026, 11, 30, 18, 30, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    p = approval_predicate(DIGEST, "prod", "sha256:" + "a" * 64, name="alice", ticket="CHG-1", now=now)
    assert p == {
        "approver": {"fingerprint": "sha256:" + "a" * 64, "name": "alice"},
        "stage": "prod",
        "digest": DIGEST,
        "ticket": "CHG-1",
        "comment": None,
        "time": "2026-11-30T17:30:00.000000Z",
    }
