"""Reliability of promotion on the real registry: SIGKILL at random points (50 trials), two
promotions of one stage released together by a barrier, and tampered evidence."""

from __future__ import annotations

import base64
import json
import multiprocessing
import os
import random
import signal
import time
from typing import TYPE_CHECKING, Any

import pytest

from builder.errors import PromotionConflictError
from builder.ledger import open_ledger
from builder.predicates import APPROVAL_V1, DEVICE_CHECK_V1
from builder.promote import Target, apply_promotion, history, plan_promotion
from builder.signing.layer import ATT_SUFFIX, signature_tag
from tests.integration import test_promote
from tests.integration.test_promote import VARIANT, World, failed_rules
from tests.integration.test_promote_support import device_check, push_image

world = test_promote.world  # the shared fixture of the promotion tests

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration

FORK = multiprocessing.get_context("fork")


def _child_promote(w: World, target: Target, stage: str) -> None:
    """Run in a forked process: a whole promotion with its own clients, ledger connection, env."""
    env = w.env()
    apply_promotion(env, plan_promotion(env, target, stage))
    os._exit(0)


def _dev_tag(w: World) -> str | None:
    return w.client.try_resolve(w.repo, f"{VARIANT}-dev")


def test_sigkill_at_random_points_leaves_old_or_new_and_rerun_completes(world: World) -> None:
    rng = random.Random(20261130)
    w = world
    # size the kill delays on whole child runs (fork, environment, plan, apply), left to finish
    durations = []
    for i in range(3):
        w.build(f"sizing {i}".encode())
        t0 = time.perf_counter()
        proc = FORK.Process(target=_child_promote, args=(w, w.target, "dev"), daemon=True)
        proc.start()
        proc.join(60)
        durations.append(time.perf_counter() - t0)
        assert proc.exitcode == 0
    one_run = sorted(durations)[1]
    stages_hit = {"old": 0, "new": 0}
    trials = 50
    for i in range(trials):
        old = _dev_tag(w)
        new = w.build(f"trial {i}".encode())
        proc = FORK.Process(target=_child_promote, args=(w, w.target, "dev"), daemon=True)
        proc.start()
        upper = one_run * 1.3
        # the machine's load can change under the test: make sure both sides of the tag move are hit
        if i >= trials - 10 and stages_hit["new"] == 0:
            upper = one_run * 3.0
        elif i >= trials - 10 and stages_hit["old"] == 0:
            upper = one_run * 0.2
        time.sleep(rng.uniform(0.0, upper))
        os.kill(proc.pid or 0, signal.SIGKILL)
        proc.join(10)
        now = _dev_tag(w)
        assert now in (old, new), f"trial {i}: tag names {now}, neither old {old} nor new {new}"
        stages_hit["new" if now == new else "old"] += 1
        with open_ledger(w.state / "ledger.sqlite") as ledger:
            assert ledger.verify() == [], f"trial {i}"
            rows = [r for r in ledger.records(stage="dev") if r.digest == new]
            assert len(rows) <= 1, f"trial {i}: {len(rows)} rows for one promotion"
        # re-running completes it (or finds it complete)
        env = w.env()
        applied = apply_promotion(env, plan_promotion(env, w.target, "dev"))
        assert _dev_tag(w) == new
        assert applied.record.digest == new and applied.record.previous == old, f"trial {i}"
        with open_ledger(w.state / "ledger.sqlite") as ledger:
            assert ledger.verify() == []
            dev_rows = ledger.records(stage="dev")
            assert [r.digest for r in dev_rows if r.digest == new] == [new], f"trial {i}: ledger lost/duplicated"
            assert dev_rows[-1].digest == new and dev_rows[-1].previous == old
    # the registry's chain agrees with the ledger, newest first
    env = w.env()
    _, recs = history(env, w.target, "dev", limit=10)
    with open_ledger(w.state / "ledger.sqlite") as ledger:
        tail = [r.digest for r in ledger.records(stage="dev")][-10:]
    assert [r.digest for r in recs] == list(reversed(tail))
    assert [r.previous for r in recs[:-1]] == [r.digest for r in recs[1:]]
    # the kills landed both before and after the tag moved
    print("kills before/after the tag moved:", stages_hit)
    assert stages_hit["old"] > 0 and stages_hit["new"] > 0, stages_hit


def _racer(w: World, target: Target, barrier: Any, results: Any) -> None:
    try:
        env = w.env()
        plan = plan_promotion(env, target, "dev")
        barrier.wait(10)
        applied = apply_promotion(env, plan)
        results.put(("ok", applied.record.digest, ""))
    except PromotionConflictError as exc:
        results.put(("conflict", exc.details.get("expected"), exc.message))
    except BaseException as exc:
        results.put(("error", type(exc).__name__, str(exc)))
    finally:
        os._exit(0)


def test_two_promotions_of_one_stage_started_together(world: World) -> None:
    w = world
    w.build(b"race base")
    env = w.env()
    apply_promotion(env, plan_promotion(env, w.target, "dev"))
    for round_ in range(3):
        before = _dev_tag(w)
        a = push_image(w.client, w.repo, None, content=f"racer a {round_}".encode())
        b = push_image(w.client, w.repo, None, content=f"racer b {round_}".encode())
        barrier = FORK.Barrier(2)
        results = FORK.SimpleQueue()
        procs = [
            FORK.Process(
                target=_racer, args=(w, Target(VARIANT, w.repo, w.registry, digest=d), barrier, results), daemon=True
            )
            for d in (a, b)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0, 0]
        got = [results.get() for _ in procs]
        kinds = sorted(g[0] for g in got)
        assert kinds == ["conflict", "ok"], got
        winner = next(g[1] for g in got if g[0] == "ok")
        loser = a if winner == b else b
        message = next(g[2] for g in got if g[0] == "conflict")
        assert _dev_tag(w) == winner
        # the loser names what it expected (the old digest) and what it found (the winner's)
        assert before in message and winner in message, message
        assert loser != winner


# --------------------------------------------------------------------------------------------- tampering


def _replace_att_layer(w: World, repo: str, digest: str, edit: Any) -> None:
    """Rewrite one layer of the .att manifest of ``digest`` with ``edit(statement) -> statement``
    without re-signing (what an attacker with registry write access can do)."""
    tag = signature_tag(digest, ATT_SUFFIX)
    m = w.client.get_manifest(repo, tag)
    doc = json.loads(m.raw)
    layer = doc["layers"][-1]
    env = json.loads(w.client.get_blob(repo, layer["digest"]))
    statement = json.loads(base64.b64decode(env["payload"]))
    env["payload"] = base64.b64encode(json.dumps(edit(statement)).encode()).decode()
    blob = json.dumps(env).encode()
    layer["digest"] = w.client.put_blob(repo, blob)
    layer["size"] = len(blob)
    w.client.put_manifest(repo, tag, json.dumps(doc).encode(), m.media_type)


def test_tampered_evidence_denies_with_the_reason(world: World) -> None:
    w = world
    d1 = w.build(b"tamper one")
    env = w.env()
    apply_promotion(env, plan_promotion(env, w.target, "dev"))

    # a failed CPU check edited to "passed" without re-signing
    w.attest("check-runner", d1, DEVICE_CHECK_V1, device_check("none", passed=False, digest=d1))

    def flip(statement: dict[str, Any]) -> dict[str, Any]:
        statement["predicate"]["result"] = "passed"
        return statement

    _replace_att_layer(w, w.repo, d1, flip)
    reason = failed_rules(plan_promotion(env, w.target, "staging"))["device_check"]
    assert "does not verify" in reason and "edited" in reason, reason

    # a device check signed by the build key does not count
    w.attest("build", d1, DEVICE_CHECK_V1, device_check("none", digest=d1))
    reason = failed_rules(plan_promotion(env, w.target, "staging"))["device_check"]
    assert "not a listed check runner" in reason, reason

    # a signature by an unlisted key: the build signature is the only one that counts
    from builder.signing.sign import sign_image

    d2 = push_image(w.client, w.repo, None, content=b"unsigned by build")
    sign_image(w.client, w.repo, d2, w.keys.signer("mallory"), lock_dir=w.state / "locks")
    w.attest("check-runner", d2, DEVICE_CHECK_V1, device_check("none", digest=d2))
    target2 = Target(VARIANT, w.repo, w.registry, digest=d2)
    env2 = w.env()
    apply_promotion(env2, plan_promotion(env2, target2, "dev"))
    plan2 = plan_promotion(env2, target2, "staging")
    reason = failed_rules(plan2)["signature"]
    # summarised as a count naming only the rule's key set; builder.sign's full wording ("none of the
    # given keys (...) verifies this signature") stays in the rule's JSON notes
    assert "has 0" in reason and "1 signature(s) by keys this policy does not list (none of build" in reason, reason
    notes = json.dumps([r.to_json() for r in plan2.decision.failed()])
    assert "does not verify" in notes and "none of the given keys" in notes, notes

    # approvals: a non-approver's key, an unknown key, one replayed from another digest
    d3 = w.build(b"approval target")
    apply_promotion(env, plan_promotion(env, w.target, "dev"))
    w.attest(
        "check-runner",
        d3,
        DEVICE_CHECK_V1,
        device_check("nvidia", gpus=("NVIDIA H200",), driver="580.65.06", digest=d3),
    )
    apply_promotion(env, plan_promotion(env, w.target, "staging"))
    w.approve("alice", d3, "prod")
    w.approve("check-runner", d3, "prod")  # known key, not an approver
    w.approve("mallory", d3, "prod")  # unknown key
    w.approve("bob", d1, "prod")  # bob approved another digest ...
    _copy_last_att_layer(w, d1, d3)  # ... and that approval is replayed onto d3
    w.approve("carol", d3, "staging")  # carol approved another stage
    reason = failed_rules(plan_promotion(env, w.target, "prod", ticket="CHG-1234"))["approvals"]
    assert "has 1 (alice)" in reason, reason
    assert "who is not a listed approver" in reason, reason
    assert "another digest" in reason, reason
    assert "is for stage 'staging'" in reason, reason
    assert "does not verify" in reason, reason
    # once a second listed approver approves this digest for prod, it is allowed
    w.approve("bob", d3, "prod")
    plan = plan_promotion(env, w.target, "prod", ticket="CHG-1234")
    assert plan.decision.allowed, plan.decision.failed()


def _copy_last_att_layer(w: World, src_digest: str, dst_digest: str) -> None:
    from builder.signing.layer import SignatureLayer, append_layer

    m = json.loads(w.client.get_manifest(w.repo, signature_tag(src_digest, ATT_SUFFIX)).raw)
    layer = m["layers"][-1]
    assert layer["annotations"]["predicateType"] == APPROVAL_V1
    blob = w.client.get_blob(w.repo, layer["digest"])
    append_layer(
        w.client,
        w.repo,
        dst_digest,
        ATT_SUFFIX,
        SignatureLayer(layer["mediaType"], blob, layer["annotations"]),
        lock_dir=w.state / "locks",
    )


def test_kill_delay_sizing_is_sane(tmp_path: Path) -> None:
    """Guard for the kill test: SIGKILL really kills a forked child mid-sleep."""
    proc = FORK.Process(target=time.sleep, args=(30,))
    proc.start()
    os.kill(proc.pid or 0, signal.SIGKILL)
    proc.join(5)
    assert proc.exitcode == -signal.SIGKILL
