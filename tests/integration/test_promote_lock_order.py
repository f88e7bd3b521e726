"""Two promotions crossing in one repository do not wait for each other: ``dev`` moves A -> B while
``staging`` moves B -> A, at once, on the real registry (through the fault proxy, which holds both
stage-tag writes until both promotions are in flight, so the crossing happens every run).

Each holds its stage lock and the ``.att`` lock of the digest it promotes (the record goes there),
then writes the successor record on the digest it replaced (``apply.mark_replaced``): the other's
``.att``. Holding the first ``.att`` lock while taking the second made them wait for each other
until the lock timeout (60 s) and fail; a promotion now lets its ``.att`` lock go once its record
is written, so no writer holds two ``.att`` locks."""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING

import pytest

from builder.predicates import DEVICE_CHECK_V1
from builder.promote import Target, apply_promotion, plan_promotion, promote_many, resolve, rollback
from builder.registry import RegistryClient
from tests.faultproxy import Fault, FaultProxy
from tests.integration.test_promote import VARIANT, World
from tests.integration.test_promote_support import device_check, make_keys, write_policy

if TYPE_CHECKING:
    from pathlib import Path

    from builder.promote import Outcome

pytestmark = pytest.mark.integration

LOCK_TIMEOUT_S = 30.0
"""Long enough for any honest wait on this machine; a deadlock ends in SigningError after it."""


def test_crossing_promotions_do_not_wait_for_each_other(
    registry_address: str, unique_repo: str, tmp_path: Path
) -> None:
    with FaultProxy(registry_address) as proxy:
        state = tmp_path / "state"
        state.mkdir()
        keys = make_keys(state)
        world = World(
            proxy.address,
            unique_repo,
            RegistryClient(proxy.address, insecure=True),
            keys,
            write_policy(tmp_path / "policy.yaml", keys),
            state,
            Target(VARIANT, unique_repo, proxy.address),
        )
        env = world.env()
        a = world.build(b"crossing A")
        world.attest("check-runner", a, DEVICE_CHECK_V1, device_check("none", digest=a))
        apply_promotion(env, plan_promotion(env, world.target, "dev"))
        apply_promotion(env, plan_promotion(env, world.target, "staging"))
        b = world.build(b"crossing B")
        world.attest("check-runner", b, DEVICE_CHECK_V1, device_check("none", digest=b))
        apply_promotion(env, plan_promotion(env, world.target, "dev"))
        apply_promotion(env, plan_promotion(env, world.target, "staging"))
        rollback(world.env(signer="alice"), world.target, "dev")  # dev: A again, staging: B, the build tag: B
        pointer = f"/v2/{unique_repo}/manifests/{VARIANT}"
        holds = {
            stage: proxy.add(Fault("hold", method="PUT", path=f"{pointer}-{stage}$", count=1))
            for stage in ("dev", "staging")
        }
        outcomes: dict[str, list[Outcome]] = {}

        def promote(stage: str) -> None:
            ctx = dataclasses.replace(world.env(), lock_timeout=LOCK_TIMEOUT_S)
            outcomes[stage] = promote_many(ctx, [world.target], stage, confirm=True)

        threads = [threading.Thread(target=promote, args=(s,)) for s in holds]
        for t in threads:
            t.start()
        try:  # both tag writes in flight: each promotion holds its stage lock and its digest's .att lock
            for fault in holds.values():
                assert fault.held.wait(120), "a promotion never reached its tag write"
        finally:
            for fault in holds.values():
                fault.release.set()  # dropped without forwarding: the client sends the PUT again
            for t in threads:
                t.join()
        outcomes_all = [*outcomes["dev"], *outcomes["staging"]]
        assert [o.error for o in outcomes_all] == [None, None]  # neither waited out the lock timeout
        assert all(o.applied is not None for o in outcomes_all)
        moved = {
            o.applied.record.stage: (o.applied.record.digest, o.applied.record.previous)
            for o in outcomes_all
            if o.applied
        }
        assert moved == {"dev": (b, a), "staging": (a, b)}
        # each stage's pointer is explained by the newest record of its chain (the successor records
        # on the replaced digests written): trusted (records name the registry as the proxy's address)
        assert resolve(env, world.target, "dev") == f"{proxy.address}/{unique_repo}@{b}"
        assert resolve(env, world.target, "staging") == f"{proxy.address}/{unique_repo}@{a}"
        assert proxy.injected("hold") == 2  # the crossing happened: both tag writes were in flight at once


def test_the_replaced_digests_att_lock_waits_only_the_contexts_lock_timeout(
    registry_address: str, unique_repo: str, tmp_path: Path
) -> None:
    """The successor record on the replaced digest (``mark_replaced``) waits for that ``.att``'s
    lock as long as the context says (``lock_timeout``), as every other lock of a promotion does,
    not a fixed 60 s: another writer holding it past that is a SigningError naming the wait."""
    from builder.signing.layer import ATT_SUFFIX, signature_lock, signature_tag

    state = tmp_path / "state"
    state.mkdir()
    keys = make_keys(state)
    client = RegistryClient(registry_address, insecure=True)
    target = Target(VARIANT, unique_repo, registry_address)
    world = World(
        registry_address, unique_repo, client, keys, write_policy(tmp_path / "policy.yaml", keys), state, target
    )
    env = world.env()
    a = world.build(b"replaced A")
    apply_promotion(env, plan_promotion(env, target, "dev"))
    world.build(b"replacing B")
    tag = signature_tag(a, ATT_SUFFIX)
    with signature_lock(env.lock_dir, client.registry, unique_repo, tag, 1):  # another writer of A's .att
        outcomes = promote_many(dataclasses.replace(env, lock_timeout=1.0), [target], "dev", confirm=True)
    [outcome] = outcomes
    assert outcome.error is not None and outcome.error.exit_code == 17, outcome.to_json()
    assert f"timed out after 1s waiting for the lock on {unique_repo}:{tag}" in outcome.error.message
