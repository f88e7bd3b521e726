"""Promotion on the real registry: dev -> staging -> prod under policy, freeze windows, rollback
from registry data alone, copies of evidence (checked by real cosign)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from builder.errors import (
    IncompatibleError,
    NotFoundError,
    PolicyDeniedError,
    PromotionConflictError,
    VerificationError,
)
from builder.ledger import open_ledger
from builder.policy import load_policy
from builder.predicates import DEVICE_CHECK_V1
from builder.promote import (
    PromotionContext,
    Target,
    apply_promotion,
    compat_fleet_checker,
    history,
    plan_promotion,
    resolve,
    rollback,
    status,
)
from builder.registry import RegistryClient, client_for
from builder.signing.fingerprints import short_fingerprint
from tests.integration.test_promote_support import Keys, device_check, make_keys, push_image, write_policy

if TYPE_CHECKING:
    from collections.abc import Callable

pytestmark = pytest.mark.integration

VARIANT = "tiny-cpu-py3.11-debian12"
ROOT = Path(__file__).resolve().parents[2]
DEMO_FLEET = ROOT / "fleets" / "demo.yaml"


@dataclasses.dataclass
class World:
    registry: str
    repo: str
    client: RegistryClient
    keys: Keys
    policy_path: Path
    state: Path
    target: Target

    def env(
        self,
        *,
        signer: str | None = "build",
        state: Path | None = None,
        now: dt.datetime | None = None,
        policy_path: Path | None = None,
    ) -> PromotionContext:
        st = state or self.state
        policy = load_policy(policy_path or self.policy_path, {"state_dir": str(st)})
        return PromotionContext(
            policy=policy,
            registry=self.registry,
            clients=client_factory(),
            lock_dir=st / "locks",
            ledger=open_ledger(st / "ledger.sqlite"),
            signer=self.keys.signer(signer) if signer else None,
            fleet_checker=compat_fleet_checker(),
            now=(lambda: now) if now is not None else _utcnow,
            seen_dir=st / "seen",
        )

    def build(self, content: bytes, labels: dict[str, str] | None = None, env: list[str] | None = None) -> str:
        """Push a new 'build' of the variant (variant tag) and sign it with the build key."""
        from builder.signing.sign import sign_image

        digest = push_image(self.client, self.repo, VARIANT, content=content, labels=labels, env=env)
        sign_image(self.client, self.repo, digest, self.keys.signer("build"), lock_dir=self.state / "locks")
        return digest

    def attest(
        self, key: str, digest: str, predicate_type: str, predicate: dict[str, Any], repo: str | None = None
    ) -> None:
        from builder.signing.attest import attest_image

        attest_image(
            self.client,
            repo or self.repo,
            digest,
            predicate_type,
            predicate,
            self.keys.signer(key),
            lock_dir=self.state / "locks",
        )

    def approve(self, who: str, digest: str, stage: str) -> None:
        from builder.signing.approvals import approve

        approve(
            self.client,
            self.repo,
            digest,
            stage,
            self.keys.signer(who),
            lock_dir=self.state / "locks",
            name=who,
            ticket="CHG-1234",
        )


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def client_factory() -> Callable[[str], RegistryClient]:
    """registry host -> one plain-HTTP client per registry (the loopback test registries need no
    credentials; tests/integration/test_promote_cli.py covers an authenticated one)."""
    cache: dict[str, RegistryClient] = {}

    def make(registry: str) -> RegistryClient:
        return client_for(registry, insecure=lambda r: True, cache=cache)

    return make


@pytest.fixture
def world(registry_address: str, unique_repo: str, tmp_path: Path) -> World:
    state = tmp_path / "state"
    state.mkdir()
    keys = make_keys(state)
    policy = write_policy(tmp_path / "policy.yaml", keys, fleet=DEMO_FLEET)
    client = RegistryClient(registry_address, insecure=True)
    return World(
        registry_address, unique_repo, client, keys, policy, state, Target(VARIANT, unique_repo, registry_address)
    )


def failed_rules(plan: Any) -> dict[str, str]:
    return {r.rule.split()[0]: r.reason for r in plan.decision.failed()}


def test_dev_to_staging_needs_signature_and_cpu_check(world: World) -> None:
    digest = world.build(b"build one")
    env = world.env()
    dev = apply_promotion(env, plan_promotion(env, world.target, "dev"))
    assert dev.record.digest == digest and dev.record.previous is None
    assert world.client.resolve(world.repo, f"{VARIANT}-dev") == digest

    plan = plan_promotion(env, world.target, "staging")
    assert not plan.decision.allowed
    assert "no device-check attestation" in failed_rules(plan)["device_check"]
    with pytest.raises(PolicyDeniedError, match="device_check"):
        apply_promotion(env, plan)
    assert world.client.try_resolve(world.repo, f"{VARIANT}-staging") is None

    world.attest("check-runner", digest, DEVICE_CHECK_V1, device_check("none", digest=digest))
    plan = plan_promotion(env, world.target, "staging")
    assert plan.decision.allowed, plan.decision.failed()
    applied = apply_promotion(env, plan)
    assert world.client.resolve(world.repo, f"{VARIANT}-staging") == digest
    assert applied.record.from_stage == "dev" and applied.record.previous is None
    assert resolve(env, world.target, "staging") == f"{world.registry}/{world.repo}@{digest}"
    assert env.ledger is not None and env.ledger.verify() == []
    rows = env.ledger.records(stage="staging")
    assert [(r.action, r.digest) for r in rows] == [("denied", digest), ("promote", digest)]
    assert "device_check" in rows[0].decision
    assert [r.action for r in env.ledger.records()] == ["promote", "denied", "promote"]


def _to_staging(world: World, content: bytes, **build: Any) -> str:
    digest = world.build(content, **build)
    env = world.env()
    apply_promotion(env, plan_promotion(env, world.target, "dev"))
    world.attest("check-runner", digest, DEVICE_CHECK_V1, device_check("none", digest=digest))
    apply_promotion(env, plan_promotion(env, world.target, "staging"))
    return digest


def test_staging_to_prod_needs_approvals_and_gpu_evidence(world: World, cosign_bin: str) -> None:
    digest = _to_staging(world, b"prod candidate")
    env = world.env()
    plan = plan_promotion(env, world.target, "prod", ticket="CHG-1234")
    failed = failed_rules(plan)
    assert not plan.decision.allowed
    assert set(failed) == {"approvals", "device_check"}, failed
    assert "needs 2 distinct approvals for stage prod, has 0" in failed["approvals"]
    assert "not nvidia" in failed["device_check"] or "vendor none" in failed["device_check"]

    world.approve("alice", digest, "prod")
    world.approve("alice", digest, "prod")  # the same approver twice still counts once
    plan = plan_promotion(env, world.target, "prod", ticket="CHG-1234")
    assert "has 1 (alice)" in failed_rules(plan)["approvals"]
    world.approve("bob", digest, "prod")
    world.attest(
        "check-runner",
        digest,
        DEVICE_CHECK_V1,
        device_check("nvidia", gpus=("NVIDIA H200",), driver="580.65.06", digest=digest),
    )
    plan = plan_promotion(env, world.target, "prod", ticket="BAD-1")
    assert set(failed_rules(plan)) == {"change_ticket"}
    plan = plan_promotion(env, world.target, "prod", ticket="CHG-1234")
    assert plan.decision.allowed, plan.decision.failed()
    applied = apply_promotion(env, plan)
    prod_repo = f"prod/{world.repo}"
    assert world.client.resolve(prod_repo, f"{VARIANT}-prod") == digest
    assert applied.copy is not None and applied.copy.mounted >= 2  # layer + config mounted, never re-uploaded
    assert resolve(env, world.target, "prod") == f"{world.registry}/{prod_repo}@{digest}"
    # the signature travelled with the image: real cosign verifies it in the prod repository
    out = subprocess.run(
        [
            cosign_bin,
            "verify",
            "--key",
            str(world.keys.pub("build")),
            "--insecure-ignore-tlog",
            "--allow-insecure-registry",
            f"{world.registry}/{prod_repo}@{digest}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    out = subprocess.run(
        [
            cosign_bin,
            "verify-attestation",
            "--key",
            str(world.keys.pub("check-runner")),
            "--insecure-ignore-tlog",
            "--allow-insecure-registry",
            "--type",
            DEVICE_CHECK_V1,
            f"{world.registry}/{prod_repo}@{digest}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr


def test_freeze_window_denies(world: World, tmp_path: Path) -> None:
    freeze = (
        "        - freeze:\n"
        "            timezone: America/New_York\n"
        "            windows:\n"
        "              - {reason: holiday freeze, start: 2026-12-24T00:00:00, end: 2026-12-27T00:00:00}\n"
        "              - {reason: no Friday deploys, days: [fri], from: '15:00'}\n"
    )
    policy = write_policy(tmp_path / "freeze.yaml", world.keys, freeze=freeze)
    digest = _to_staging(world, b"freeze")
    for who in ("alice", "bob"):
        world.approve(who, digest, "prod")
    world.attest(
        "check-runner",
        digest,
        DEVICE_CHECK_V1,
        device_check("nvidia", gpus=("NVIDIA H200",), driver="570.124.06", digest=digest),
    )
    # 2026-12-24 10:00 in New York = 15:00 UTC: inside the holiday window
    inside = dt.datetime(2026, 12, 24, 15, 0, tzinfo=dt.UTC)
    env = world.env(now=inside, policy_path=policy)
    plan = plan_promotion(env, world.target, "prod", ticket="CHG-1234")
    assert failed_rules(plan) == {"freeze": failed_rules(plan)["freeze"]}
    assert "holiday freeze" in failed_rules(plan)["freeze"] and "EST" in failed_rules(plan)["freeze"]
    with pytest.raises(PolicyDeniedError, match="frozen"):
        apply_promotion(env, plan)
    # Friday 2026-12-04 16:00 New York (21:00 UTC): the weekly window
    friday = dt.datetime(2026, 12, 4, 21, 0, tzinfo=dt.UTC)
    plan = plan_promotion(world.env(now=friday, policy_path=policy), world.target, "prod", ticket="CHG-1234")
    assert "no Friday deploys" in failed_rules(plan)["freeze"]
    # Friday 14:00 New York (19:00 UTC) is before the window: allowed
    open_time = dt.datetime(2026, 12, 4, 19, 0, tzinfo=dt.UTC)
    plan = plan_promotion(world.env(now=open_time, policy_path=policy), world.target, "prod", ticket="CHG-1234")
    assert plan.decision.allowed, plan.decision.failed()


def test_rollback_from_registry_alone(world: World, tmp_path: Path) -> None:
    d1 = world.build(b"first")
    env = world.env()
    apply_promotion(env, plan_promotion(env, world.target, "dev"))
    d2 = world.build(b"second")
    assert d2 != d1
    apply_promotion(env, plan_promotion(env, world.target, "dev"))
    assert world.client.resolve(world.repo, f"{VARIANT}-dev") == d2

    fresh = tmp_path / "fresh-machine"
    fresh.mkdir()
    # an outsider's key may not roll back
    with pytest.raises(PolicyDeniedError, match="may not roll back"):
        rollback(world.env(signer="mallory", state=fresh), world.target, "dev")
    env2 = world.env(signer="alice", state=fresh)
    assert env2.ledger is not None and env2.ledger.records() == []
    _, recs = history(env2, world.target, "dev")
    assert [(r.digest, r.previous) for r in recs] == [(d2, d1), (d1, None)]
    applied = rollback(env2, world.target, "dev")
    assert applied.record.action == "rollback" and applied.record.digest == d1 and applied.record.previous == d2
    assert world.client.resolve(world.repo, f"{VARIANT}-dev") == d1
    assert resolve(env2, world.target, "dev").endswith("@" + d1)
    _, recs = history(env2, world.target, "dev")
    assert [(r.action, r.digest) for r in recs] == [("rollback", d1), ("promote", d2), ("promote", d1)]
    assert [r.action for r in env2.ledger.records()] == ["rollback"]
    rows = status(env2, [world.target], ["dev", "staging"])
    assert rows[0].digest == d1 and rows[0].action == "rollback" and rows[0].signatures == 1
    assert rows[1].digest is None


def test_moved_outside_builder_is_a_fork(world: World) -> None:
    d1 = world.build(b"a")
    env = world.env()
    apply_promotion(env, plan_promotion(env, world.target, "dev"))
    rogue = push_image(world.client, world.repo, f"{VARIANT}-dev", content=b"rogue")
    world.build(b"b")
    plan = plan_promotion(env, world.target, "dev")
    assert plan.previous == rogue and not plan.trusted and not plan.already
    # the dry run already shows why (a failing chain row), so --confirm is refused up front
    chain = [r for r in plan.decision.failed() if r.rule == "chain"]
    assert not plan.decision.allowed and chain and rogue in chain[0].reason
    assert "no promotion record" in chain[0].reason and "moved outside builder" in chain[0].reason
    with pytest.raises(PolicyDeniedError, match="chain") as denied:
        apply_promotion(env, plan)
    assert "point the tag back" in denied.value.hint and "builder history" in denied.value.hint
    # a plan that claims otherwise (stale or hand-made) is still refused under the lock
    forged = dataclasses.replace(plan, trusted=True, decision=dataclasses.replace(plan.decision, allowed=True))
    with pytest.raises(PromotionConflictError, match="no trusted promotion record"):
        apply_promotion(env, forged)
    with pytest.raises(VerificationError, match="no promotion record by a trusted promoter"):
        resolve(env, world.target, "dev")
    assert d1 != rogue


def test_pointer_moved_by_an_unlisted_promoter(world: World, tmp_path: Path) -> None:
    """Another checkout sharing the registry promotes with a key this policy does not list: the
    dry run fails on the chain naming that key, `already` is False, status/resolve say why."""
    d1 = world.build(b"ours")
    env = world.env()
    apply_promotion(env, plan_promotion(env, world.target, "dev"))
    other = tmp_path / "other.yaml"
    text = world.policy_path.read_text()
    build_entry = f"promoters:\n    - file: {world.keys.pub('build')}\n"
    other.write_text(text.replace(build_entry, f"{build_entry}    - file: {world.keys.pub('mallory')}\n"))
    assert other.read_text() != text
    d2 = world.build(b"theirs")
    env_other = world.env(signer="mallory", policy_path=other)
    plan = plan_promotion(env_other, world.target, "dev")
    assert plan.decision.allowed, plan.decision.reasons  # their policy trusts both keys
    apply_promotion(env_other, plan, expect_previous=d1)
    assert world.client.resolve(world.repo, f"{VARIANT}-dev") == d2
    mine = plan_promotion(env, world.target, "dev")  # the variant tag names d2: "already there"?
    assert mine.digest == d2 and mine.previous == d2
    assert not mine.already and not mine.trusted and not mine.decision.allowed
    chain = next(r for r in mine.decision.failed() if r.rule == "chain")
    fp = world.keys.signer("mallory").fingerprint
    assert short_fingerprint(fp) in chain.reason and "does not list" in chain.reason
    assert mine.to_json()["trusted"] is False and short_fingerprint(fp) in mine.to_json()["untrusted_signers"][0]
    row = status(env, [world.target], ["dev"])[0]
    assert row.digest == d2 and short_fingerprint(fp) in row.note
    with pytest.raises(VerificationError) as err:
        resolve(env, world.target, "dev")
    assert err.value.exit_code == 18 and "promoters" in err.value.hint


def test_expect_previous_is_compare_and_swap(world: World) -> None:
    d1 = world.build(b"one")
    env = world.env()
    apply_promotion(env, plan_promotion(env, world.target, "dev"))
    world.build(b"two")
    plan = plan_promotion(env, world.target, "dev")
    with pytest.raises(PromotionConflictError) as err:
        apply_promotion(env, plan, expect_previous=None)
    assert err.value.details["found"] == d1 and err.value.details["expected"] is None
    assert world.client.resolve(world.repo, f"{VARIANT}-dev") == d1


def test_fleet_compatibility_gates_prod_and_resolve(world: World) -> None:
    # a CUDA 12.8 image whose NVIDIA_REQUIRE_CUDA the R550 clusters of the demo fleet cannot satisfy
    digest = _to_staging(
        world,
        b"cuda image",
        labels={"io.builder.cuda.version": "12.8", "io.builder.accelerator": "cuda"},
        env=["PATH=/usr/bin", "NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=tesla,driver>=470,driver<471"],
    )
    for who in ("alice", "carol"):
        world.approve(who, digest, "prod")
    world.attest(
        "check-runner",
        digest,
        DEVICE_CHECK_V1,
        device_check("nvidia", gpus=("NVIDIA H200",), driver="580.65.06", digest=digest),
    )
    env = world.env()
    plan = plan_promotion(env, world.target, "prod", ticket="CHG-1234")
    failed = failed_rules(plan)
    assert list(failed) == ["fleet"], failed
    assert "cluster h100-train: blocked" in failed["fleet"] and "cluster ws-4090: blocked" in failed["fleet"]
    assert "570.26" in failed["fleet"] and "mi300x" not in failed["fleet"]  # AMD cluster: not this image's vendor
    # resolve refuses a cluster it cannot run on, naming it, and answers for one it can
    with pytest.raises(IncompatibleError, match="cannot run on cluster h100-train"):
        resolve(env, world.target, "staging", cluster="h100-train", fleet=str(DEMO_FLEET))
    # each (driver, GPU) named once, with its verdict, however many reasons it has
    with pytest.raises(IncompatibleError) as err:
        resolve(env, world.target, "staging", cluster="ws-4090", fleet=str(DEMO_FLEET))
    message = err.value.message
    assert message.count("driver 550.144.03, NVIDIA GeForce RTX 4090") == 1, message
    assert "NVIDIA GeForce RTX 4090 (blocked): " in message and "570.26" in message
    assert ": blocked: " not in message and err.value.details["verdict"] == "blocked"
    pinned = resolve(env, world.target, "staging", cluster="a100-inference", fleet=str(DEMO_FLEET))
    assert pinned == f"{world.registry}/{world.repo}@{digest}"
    with pytest.raises(NotFoundError, match="not in fleet"):
        resolve(env, world.target, "staging", cluster="nowhere", fleet=str(DEMO_FLEET))
    with pytest.raises(NotFoundError, match="not in stage prod"):
        resolve(env, world.target, "prod")


def test_record_signed_before_a_long_lock_wait_is_renewed(world: World) -> None:
    """The record is signed (and its blobs uploaded) before the stage lock is taken; when another
    process held the lock for longer than EARLY_RECORD_MAX_AGE_S, a fresh record (fresh time) is
    written instead, and the chain and ledger are as usual."""
    import threading
    import time

    from builder.promote import EARLY_RECORD_MAX_AGE_S

    d1 = world.build(b"early one")
    env = world.env()
    quick = apply_promotion(env, plan_promotion(env, world.target, "dev"))
    assert quick.record.digest == d1 and quick.record.previous is None
    d2 = world.build(b"early two")
    plan = plan_promotion(env, world.target, "dev")
    held = threading.Event()
    released: list[dt.datetime] = []

    def holder() -> None:
        with env.lock(env.stage_location(world.target, "dev")):
            held.set()
            time.sleep(EARLY_RECORD_MAX_AGE_S + 0.5)
            released.append(dt.datetime.now(dt.UTC))

    t = threading.Thread(target=holder)
    t.start()
    held.wait(10)
    applied = apply_promotion(env, plan)
    t.join()
    assert applied.record.digest == d2 and applied.record.previous == d1
    assert applied.record.when >= released[0]  # signed after the lock was ours, not before the wait
    _, chain = history(env, world.target, "dev")
    assert [(r.digest, r.previous) for r in chain] == [(d2, d1), (d1, None)]
    assert env.ledger is not None and env.ledger.verify() == []


def test_status_reads_the_evidence_of_a_digest_once_for_all_its_stages(world: World) -> None:
    """Two stages hold one digest: a status of both sends fewer requests than a status of each
    alone (the digest's evidence is verified once and each evidence blob read once; issue 19 item 2)."""
    digest = _to_staging(world, b"one digest in two stages")

    def sent(stages: list[str]) -> int:
        env = world.env()
        rows = status(env, [world.target], stages)
        assert [(r.digest, r.signatures) for r in rows] == [(digest, 1)] * len(stages)
        return env.client(world.registry).requests_sent

    alone = sent(["dev"]) + sent(["staging"])
    both = sent(["dev", "staging"])
    assert both < alone, (both, alone)
