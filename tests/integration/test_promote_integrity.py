"""Promotion integrity (#20), each case written as the attack with the refusal or detection it
must produce, on the real registry: a stage tag pushed back by hand (rollback by re-tagging), a
re-run after a failed tag write (soak bypass), rollback as a planned signed operation (never a
toggle, ``--to DIGEST``), re-promotion after a rollback writes its own record, the history shows
every cycle and every gap, ``--expect-previous`` is a compare-and-swap even when the stage already
holds the digest."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
from typing import TYPE_CHECKING, Any

import pytest

from builder.errors import (
    ConfigError,
    NotFoundError,
    PolicyDeniedError,
    PromotionConflictError,
    RegistryError,
    VerificationError,
)
from builder.labels import own
from builder.predicates import DEVICE_CHECK_V1
from builder.promote import (
    Target,
    apply_promotion,
    apply_rollback,
    chain,
    plan_promotion,
    plan_rollback,
    resolve,
    rollback,
    stage_histories,
    status,
)
from builder.registry import RegistryClient
from tests.faultproxy import Fault, FaultProxy
from tests.integration import test_promote
from tests.integration.test_promote import VARIANT, World, failed_rules
from tests.integration.test_promote_support import device_check, make_keys, write_policy

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli

world = test_promote.world  # the shared fixture of the promotion tests

pytestmark = pytest.mark.integration


def _retag(w: World, stage: str, digest: str, repo: str | None = None) -> None:
    """What anyone with push rights can do: PUT the stage tag back onto an older digest."""
    r = repo or w.repo
    m = w.client.get_manifest(r, digest)
    w.client.put_manifest(r, f"{VARIANT}-{stage}", m.raw, m.media_type)


def _dev(w: World, content: bytes) -> str:
    d = w.build(content)
    env = w.env()
    apply_promotion(env, plan_promotion(env, w.target, "dev"))
    return d


def test_retag_back_to_an_older_recorded_digest_is_refused_everywhere(world: World) -> None:
    d1 = _dev(world, b"integrity one")
    d2 = _dev(world, b"integrity two")
    env = world.env()
    assert resolve(env, world.target, "dev").endswith("@" + d2)
    _retag(world, "dev", d1)  # the attack: d1 carries a valid record from its own promotion
    with pytest.raises(VerificationError) as err:
        resolve(env, world.target, "dev")
    assert err.value.exit_code == 18
    assert "newer record moved the stage away" in err.value.message and d2[:19] in err.value.message
    row = status(env, [world.target], ["dev"])[0]
    assert row.digest == d1 and row.action is None and "moved back outside builder" in (row.note or "")
    [hist] = stage_histories(env, world.target, ["dev"])
    assert hist.note and "newer record moved the stage away" in hist.note
    assert hist.to_json()["note"] == hist.note
    # the next promotion refuses to build on it (dry run already), and a forged plan under the lock
    world.build(b"integrity three")
    plan = plan_promotion(env, world.target, "dev")
    assert not plan.trusted and "chain" in failed_rules(plan)
    forged = dataclasses.replace(plan, trusted=True, decision=dataclasses.replace(plan.decision, allowed=True))
    with pytest.raises(PromotionConflictError, match="newer record moved the stage away"):
        apply_promotion(env, forged)
    assert world.client.resolve(world.repo, f"{VARIANT}-dev") == d1  # nothing was overwritten
    # a rollback cannot start from it either
    with pytest.raises(VerificationError):
        plan_rollback(world.env(signer="alice"), world.target, "dev")
    # putting the tag back where the chain says restores trust
    _retag(world, "dev", d2)
    assert resolve(env, world.target, "dev").endswith("@" + d2)


def test_rollback_is_planned_signed_never_a_toggle_and_retag_forward_is_refused(world: World) -> None:
    d1 = _dev(world, b"rb one")
    d2 = _dev(world, b"rb two")
    d3 = _dev(world, b"rb three")
    alice = world.env(signer="alice")
    with pytest.raises(PolicyDeniedError, match="may not roll back"):
        plan_rollback(world.env(signer="mallory"), world.target, "dev")
    # the dry run writes nothing
    plan = plan_rollback(alice, world.target, "dev")
    assert (plan.previous, plan.digest) == (d3, d2)
    assert world.client.resolve(world.repo, f"{VARIANT}-dev") == d3
    # --to: only a digest of the stage's history, and a real digest
    with pytest.raises(ConfigError, match="not a digest"):
        plan_rollback(alice, world.target, "dev", to="latest")
    stranger = "sha256:" + "ab" * 32
    with pytest.raises(NotFoundError, match="never in dev"):
        plan_rollback(alice, world.target, "dev", to=stranger)
    applied = rollback(alice, world.target, "dev", to=d1, ticket="CHG-4711")
    assert applied.record.action == "rollback" and applied.record.ticket == "CHG-4711"
    assert (applied.record.digest, applied.record.previous) == (d1, d3)
    assert resolve(alice, world.target, "dev").endswith("@" + d1)
    # a second rollback goes further back than what d1 replaced when promoted: nothing (first promotion)
    with pytest.raises(NotFoundError, match="nothing to roll back to"):
        plan_rollback(alice, world.target, "dev")
    # the rolled-back digest cannot be brought back by re-tagging: the rollback's record supersedes it
    _retag(world, "dev", d3)
    with pytest.raises(VerificationError, match="rollback to"):
        resolve(alice, world.target, "dev")
    _retag(world, "dev", d1)
    # a planned rollback whose pointer moved meanwhile is a conflict
    stale = plan_rollback(alice, world.target, "dev", to=d2)
    env = world.env()
    apply_promotion(env, plan_promotion(env, world.target, "dev"))  # the variant tag names d3 again
    with pytest.raises(PromotionConflictError):
        apply_rollback(alice, stale)
    # history: every cycle, each move its own record (the re-promotion of d3 wrote a new one)
    found = chain(env, world.target, "dev")
    assert [(r.action, r.digest) for r in found.records] == [
        ("promote", d3),
        ("rollback", d1),
        ("promote", d3),
        ("promote", d2),
        ("promote", d1),
    ]
    assert found.gap is None and found.forks == ()  # rollbacks and re-promotions are no fork
    assert len({r.time for r in found.records}) == 5


def test_rerun_after_a_failed_tag_write_signs_a_fresh_record_so_soak_counts_from_it(
    registry_address: str, unique_repo: str, tmp_path: Path
) -> None:
    """The attack: staging's tag write fails (500) after its record is written; the re-run a
    minute later must not reuse that record's time, else a 60 s soak would be met 2 s after the
    digest really entered staging."""
    state = tmp_path / "state"
    state.mkdir()
    keys = make_keys(state)
    soak = "        - soak: {min: 60s, signers: [promoters]}\n"
    policy = write_policy(tmp_path / "policy.yaml", keys, soak=soak)
    with FaultProxy(registry_address) as proxy:
        host = proxy.address
        w = World(
            host,
            unique_repo,
            RegistryClient(host, insecure=True),
            keys,
            policy,
            state,
            Target(VARIANT, unique_repo, host),
        )
        digest = w.build(b"soak")
        t0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
        env = w.env(now=t0)
        apply_promotion(env, plan_promotion(env, w.target, "dev"))
        w.attest("check-runner", digest, DEVICE_CHECK_V1, device_check("none", digest=digest))
        proxy.add(Fault("status", 500, method="PUT", path=rf"/manifests/{VARIANT}-staging$"))
        env = w.env(now=t0 + dt.timedelta(minutes=5))
        with pytest.raises(RegistryError):
            apply_promotion(env, plan_promotion(env, w.target, "staging"))
        assert w.client.try_resolve(unique_repo, f"{VARIANT}-staging") is None
        proxy.clear()
        entered = t0 + dt.timedelta(minutes=10)
        env = w.env(now=entered)
        applied = apply_promotion(env, plan_promotion(env, w.target, "staging"))
        assert applied.record.when == entered  # a fresh record, not the failed run's
        _ready_for_prod(w, digest)
        soon = plan_promotion(w.env(now=entered + dt.timedelta(seconds=2)), w.target, "prod", ticket="CHG-1234")
        assert set(failed_rules(soon)) == {"soak"}, soon.decision.failed()
        later = plan_promotion(w.env(now=entered + dt.timedelta(seconds=61)), w.target, "prod", ticket="CHG-1234")
        assert later.decision.allowed, later.decision.failed()


def test_expect_previous_is_checked_even_when_the_stage_already_holds_the_digest(world: World) -> None:
    d1 = _dev(world, b"cas one")
    env = world.env()
    plan = plan_promotion(env, world.target, "dev")
    assert plan.already
    with pytest.raises(PromotionConflictError):
        apply_promotion(env, plan, expect_previous="sha256:" + "cd" * 32)
    held = apply_promotion(env, plan, expect_previous=d1)
    assert held.record.digest == d1 and not held.completed  # nothing was interrupted: nothing to complete


def test_history_shows_a_gap_where_the_chain_breaks(world: World, tmp_path: Path) -> None:
    """d1 was promoted by a key another checkout's policy lists and ours does not; our promotion
    of d2 on top is trusted, and history says the chain breaks at d1 instead of stopping silently."""
    other = tmp_path / "other.yaml"
    text = world.policy_path.read_text()
    build_entry = f"promoters:\n    - file: {world.keys.pub('build')}\n"
    other.write_text(text.replace(build_entry, f"{build_entry}    - file: {world.keys.pub('mallory')}\n"))
    d1 = world.build(b"gap one")
    theirs = world.env(signer="mallory", policy_path=other)
    apply_promotion(theirs, plan_promotion(theirs, world.target, "dev"))
    world.build(b"gap two")
    ours_under_theirs = world.env(policy_path=other)
    apply_promotion(ours_under_theirs, plan_promotion(ours_under_theirs, world.target, "dev"))
    [hist] = stage_histories(world.env(), world.target, ["dev"])
    assert len(hist.records) == 1 and hist.gap and d1[:19] in hist.gap
    assert hist.to_json()["gap"] == hist.gap


def _referrer(w: World, subject: str, listed_under: str, artifact_type: str, payload: bytes) -> str:
    """Push a referrer manifest naming ``subject`` and list it in ``listed_under``'s fallback index
    (a tag anyone with push rights can write)."""
    from builder.registry import OCI_MANIFEST, canonical_json, sha256_digest

    empty = "application/vnd.oci.empty.v1+json"
    w.client.put_blob(w.repo, b"{}")
    w.client.put_blob(w.repo, payload)
    subj = w.client.get_manifest(w.repo, subject)
    raw = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": artifact_type,
            "config": {"mediaType": empty, "digest": sha256_digest(b"{}"), "size": 2},
            "layers": [{"mediaType": artifact_type, "digest": sha256_digest(payload), "size": len(payload)}],
            "subject": {"mediaType": subj.media_type, "digest": subject, "size": subj.size},
        }
    )
    digest = w.client.put_manifest(w.repo, sha256_digest(raw), raw, OCI_MANIFEST)
    desc = w.client.get_manifest(w.repo, digest).descriptor(with_artifact_type=True)
    w.client.add_referrer_to_fallback_index(w.repo, listed_under, desc)
    return digest


def _ready_for_prod(w: World, digest: str) -> None:
    for who in ("alice", "bob"):
        w.approve(who, digest, "prod")
    w.attest(
        "check-runner",
        digest,
        DEVICE_CHECK_V1,
        device_check("nvidia", gpus=("NVIDIA H200",), driver="580.65.06", digest=digest),
    )


def test_only_referrers_of_the_digest_with_a_known_type_are_copied(world: World) -> None:
    """The attack: the source's fallback referrers index (a plain tag) lists a manifest whose
    subject is another image, and one of a type builder does not know; only the real bundle
    referrer of the promoted digest reaches prod."""
    from builder.registry import fallback_tag

    digest = test_promote._to_staging(world, b"referrers")
    other = world.build(b"someone else's image")
    bundle = "application/vnd.dev.sigstore.bundle.v0.3+json"
    ours = _referrer(world, digest, digest, bundle, b'{"ours":1}')
    foreign = _referrer(world, other, digest, bundle, b'{"foreign":1}')  # subject: another digest
    unknown = _referrer(world, digest, digest, "application/x-anything", b'{"unknown":1}')
    _ready_for_prod(world, digest)
    env = world.env()
    applied = apply_promotion(env, plan_promotion(env, world.target, "prod", ticket="CHG-1234"))
    assert applied.record.digest == digest
    prod = f"prod/{world.repo}"
    index = world.client.get_manifest(prod, fallback_tag(digest))
    assert [m.digest for m in index.manifests] == [ours]
    assert world.client.try_get_manifest(prod, foreign) is None
    assert world.client.try_get_manifest(prod, unknown) is None


def test_an_untrusted_source_stage_cannot_feed_the_next(world: World) -> None:
    """The attack: staging's tag pushed by hand onto a digest never promoted there; prod must
    refuse to take it (the same rule as resolve), even with every other piece of evidence."""
    good = test_promote._to_staging(world, b"trusted source")
    rogue = world.build(b"pushed by hand")
    world.attest("check-runner", rogue, DEVICE_CHECK_V1, device_check("none", digest=rogue))
    _retag(world, "staging", rogue)
    _ready_for_prod(world, rogue)
    env = world.env()
    plan = plan_promotion(env, world.target, "prod", ticket="CHG-1234")
    assert plan.digest == rogue and not plan.decision.allowed
    reason = failed_rules(plan)["source"]
    assert "staging is not trusted" in reason and "no promotion record" in reason
    with pytest.raises(PolicyDeniedError, match="source"):
        apply_promotion(env, plan)
    assert world.client.try_resolve(f"prod/{world.repo}", f"{VARIANT}-prod") is None
    _retag(world, "staging", good)
    _ready_for_prod(world, good)
    assert plan_promotion(env, world.target, "prod", ticket="CHG-1234").decision.allowed


def test_an_overwritten_promotion_from_another_machine_is_detected_as_a_fork(world: World, tmp_path: Path) -> None:
    """Registry-only mode, two machines (separate lock directories): both plan from d1; A applies;
    B's re-reads ran before A's tag write, so B goes on and overwrites it. The end state of that
    interleaving is replayed with B's own writes in B's order (record, tag, successor record);
    history then reports the fork at d1 naming both moves."""
    from builder.predicates import PROMOTION_V1
    from builder.promote.apply import mark_replaced, new_record
    from builder.signing.attest import attest_image

    d1 = _dev(world, b"fork base")
    da = world.build(b"machine a")
    machine_a = world.env(state=tmp_path / "a")
    plan_a = plan_promotion(machine_a, world.target, "dev")
    db = world.build(b"machine b")
    machine_b = world.env(state=tmp_path / "b")
    plan_b = plan_promotion(machine_b, world.target, "dev")
    assert (plan_a.previous, plan_b.previous) == (d1, d1)
    apply_promotion(machine_a, plan_a)  # A: exit 0, the stage names da
    # B's writes, as its apply_promotion makes them once its checks passed before A's tag PUT
    signer = world.keys.signer("build")
    dst = plan_b.destination
    rec = new_record(machine_b, plan_b, signer, "promote", db, d1)
    written = attest_image(world.client, world.repo, db, PROMOTION_V1, rec.predicate(), signer, lock_dir=tmp_path / "b")
    rec = dataclasses.replace(rec, signer=signer.fingerprint, layer=written.layer_digest)
    _retag(world, "dev", db)
    mark_replaced(machine_b, dst, rec, signer)
    [hist] = stage_histories(world.env(), world.target, ["dev"])
    assert hist.note and "fork at " + d1[:19] in hist.note
    assert da[:19] in hist.note and db[:19] in hist.note and "overwritten" in hist.note
    assert found_fork(world, d1)


def found_fork(w: World, digest: str) -> bool:
    return any(digest[:19] in f for f in chain(w.env(), w.target, "dev").forks)


def test_approvals_from_separate_machines_at_once_are_never_lost(world: World, tmp_path: Path) -> None:
    """The attack: approvers on separate machines (separate lock directories, so no shared lock)
    approve one digest at the same moment, and a stale read-modify-write of the ``.att`` manifest
    drops another approver's layer. Every approval still counts: each approver's own tag holds it."""
    import threading

    from builder.signing.approvals import approve
    from builder.signing.layer import ATT_SUFFIX, signature_tag

    digest = test_promote._to_staging(world, b"approvals at once")
    who = ("alice", "bob", "carol")
    barrier = threading.Barrier(len(who))
    errors: list[BaseException] = []

    def machine(name: str) -> None:
        try:
            barrier.wait(10)
            approve(
                world.client, world.repo, digest, "prod", world.keys.signer(name), lock_dir=tmp_path / name, name=name
            )
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=machine, args=(n,)) for n in who]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    # and the .att manifest as a stale writer leaves it: bob's and carol's approval layers dropped
    from builder.registry import canonical_json

    att = signature_tag(digest, ATT_SUFFIX)
    m = world.client.get_manifest(world.repo, att)
    layers = m.json["layers"]
    stale = [d for d in layers if approver_of(world, d) not in ("bob", "carol")]
    # (the race above may already have lost some of them from .att: the replay makes it certain)
    world.client.put_manifest(world.repo, att, canonical_json({**m.json, "layers": stale}), m.media_type)
    left = world.client.get_manifest(world.repo, att).json["layers"]
    assert {approver_of(world, d) for d in left} & {"bob", "carol"} == set()
    plan = plan_promotion(world.env(), world.target, "prod", ticket="CHG-1234")
    reasons = {r.rule.split()[0]: r for r in plan.decision.reasons[-1].children}
    approvals = reasons["approvals"]
    assert approvals.passed and all(n in approvals.reason for n in who), approvals.reason


def approver_of(w: World, descriptor: dict[str, object]) -> str:
    """The approver name inside an approval layer's statement (empty for other layers)."""
    import base64
    import json

    blob = w.client.get_blob(w.repo, str(descriptor["digest"]))
    try:
        env = json.loads(blob)
        return str(json.loads(base64.b64decode(env["payload"])).get("predicate", {}).get("approver", {}).get("name"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return ""


def test_ledger_verify_checks_the_chain_and_the_registry(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`builder ledger verify`: agrees after two promotions; the attacks (a ledger row edited with
    its trigger dropped, a record deleted from the registry, the last row removed) each exit 33 naming
    the row."""
    import shutil
    import sqlite3

    from builder.registry import canonical_json
    from builder.signing.layer import ATT_SUFFIX, signature_tag
    from tests.integration.test_promote_cli import VARIANT as CLI_VARIANT
    from tests.integration.test_promote_cli import _build, _project

    project = _project(tmp_path / "p", registry_address, unique_repo)
    run = functools.partial(cli, cwd=project, env={"HOME": str(project)})
    # no ledger yet: nothing verified is not a pass, and verifying creates none
    missing = run("ledger", "verify", "--json", code=33).json()["error"]
    assert missing["message"].startswith("no ledger at ") and not (project / "state" / "ledger.sqlite").exists()
    _build(project, registry_address, unique_repo, b"ledger one")
    run("promote", CLI_VARIANT, "--to", "dev", "--confirm")
    d2 = _build(project, registry_address, unique_repo, b"ledger two")
    run("promote", CLI_VARIANT, "--to", "dev", "--confirm")
    ok = run("ledger", "verify", "--json").json()
    assert (ok["rows"], ok["checked"], ok["chain"], ok["registry"]) == (2, 2, [], [])
    assert "confirmed by the registry" in run("ledger", "verify").stderr

    # the last row deleted and SQLite's row counter reset too (the tail gone without a trace in the
    # file: the chain of what is left is intact): the registry's newest record has no row (it passed)
    cut = tmp_path / "cut.sqlite"
    shutil.copy(project / "state" / "ledger.sqlite", cut)
    db = sqlite3.connect(cut)
    db.execute("DROP TRIGGER records_no_delete")
    db.execute("DELETE FROM records WHERE seq = 2")
    db.execute("UPDATE sqlite_sequence SET seq = 1 WHERE name = 'records'")
    db.commit()
    db.close()
    env = {"HOME": str(project), "BUILDER_LEDGER": str(cut)}
    tail = run("ledger", "verify", "--json", code=33, env=env).json()["error"]
    said = " ".join(tail["message"].split())
    assert "the registry's newest record" in said and d2[:19] in said and "has no row in this ledger" in said
    assert "rows removed at the end" in said and "row 0" not in said
    monkeypatch.delenv("BUILDER_LEDGER")  # the `cli` fixture keeps env for the test: the real ledger again

    # the registry loses d2's record (someone with push rights rewrote its .att)
    client = RegistryClient(registry_address, insecure=True)
    att = signature_tag(d2, ATT_SUFFIX)
    m = client.get_manifest(unique_repo, att)
    kept = [d for d in m.json["layers"] if "promotion" not in json.dumps(d.get("annotations") or {})]
    client.put_manifest(unique_repo, att, canonical_json({**m.json, "layers": kept}), m.media_type)
    err = run("ledger", "verify", "--json", code=33).json()["error"]
    said = " ".join(err["message"].split())  # each problem is folded to 80 columns
    assert err["kind"] == "ledger" and "row 2" in said and "holds no record" in said
    human = run("ledger", "verify", code=33, env={"HOME": str(project), "COLUMNS": "80"}).stderr.splitlines()
    problem_lines = [ln for ln in human if not ln.startswith("  hint:")]
    # 80 columns, except a line that is one unbreakable path or reference
    assert len(problem_lines) >= 2 and all(len(ln) <= 80 or " " not in ln.strip() for ln in problem_lines), human

    # a ledger row edited (the append-only trigger dropped first)
    db = sqlite3.connect(project / "state" / "ledger.sqlite")
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]
    for name in names:
        db.execute(f"DROP TRIGGER {name}")
    db.execute("UPDATE records SET ticket = 'forged' WHERE seq = 1")
    db.commit()
    db.close()
    err = run("ledger", "verify", "--json", code=33).json()["error"]
    assert "row 1: content does not match its hash (edited)" in " ".join(err["message"].split())


def test_a_label_claiming_another_variant_or_repository_is_refused(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    """The attack: an image pushed with a well-formed label naming a variant the matrices do not
    have, a real variant built into another repository, or a real variant in its own repository
    that no build of the variant confirms (no content tag names the digest: any image pushed
    there, or another variant's build in a repository several variants share): refused (exit 8)
    before any write."""
    from tests.integration.test_promote_cli import VARIANT as CLI_VARIANT
    from tests.integration.test_promote_cli import _project
    from tests.integration.test_promote_support import push_build, push_image

    project = _project(tmp_path / "p", registry_address, unique_repo)
    run = functools.partial(cli, cwd=project, env={"HOME": str(project)})
    client = RegistryClient(registry_address, insecure=True)
    ghost = push_image(client, unique_repo, None, content=b"ghost", labels={"io.builder.variant": "ghost-cpu-py3.11"})
    err = run("promote", f"{registry_address}/{unique_repo}@{ghost}", "--to", "dev", "--json", code=8).json()
    assert "which no matrix defines" in err["error"]["message"] and "--variant-id" in err["error"]["hint"]
    elsewhere = f"{unique_repo}-other"
    moved = push_image(client, elsewhere, None, content=b"elsewhere", labels={"io.builder.variant": CLI_VARIANT})
    err = run("promote", f"{registry_address}/{elsewhere}@{moved}", "--to", "dev", "--confirm", "--json", code=8)
    assert f"built into {unique_repo}, not {elsewhere}" in err.json()["error"]["message"]
    assert client.list_tags(elsewhere) == [] or all(not t.endswith("-dev") for t in client.list_tags(elsewhere))
    # in the variant's own repository: a label alone, or a content-hash label whose content tag names
    # another digest (the variant's real build), is no build of the variant
    pushed = push_image(client, unique_repo, None, content=b"pushed", labels={"io.builder.variant": CLI_VARIANT})
    err = run("promote", f"{registry_address}/{unique_repo}@{pushed}", "--to", "dev", "--json", code=8).json()
    assert "no build of that variant confirms it" in err["error"]["message"], err
    assert "no content-hash label" in err["error"]["message"] and "--variant-id" in err["error"]["hint"]
    ours = push_build(client, unique_repo, CLI_VARIANT, b"ours")
    claimed = client.get_blob(unique_repo, client.get_manifest(unique_repo, ours).json["config"]["digest"])
    labels = json.loads(claimed)["config"]["Labels"]
    copied = push_image(client, unique_repo, None, content=b"copied", labels=labels)  # the build's labels, copied
    err = run("promote", f"{registry_address}/{unique_repo}@{copied}", "--to", "dev", "--json", code=8).json()
    tag = f"{CLI_VARIANT}-{labels[own('content-hash')][:12]}"
    assert f"{unique_repo}:{tag} does not name this digest" in " ".join(err["error"]["message"].split()), err
    assert not any(t.endswith("-dev") for t in client.list_tags(unique_repo))
    # the variant's own build, by digest: its label is confirmed by its content tag
    plan = run("promote", f"{registry_address}/{unique_repo}@{ours}", "--to", "dev", "--json").json()
    assert plan["results"][0]["variant"] == CLI_VARIANT
    # a tag is anyone's name for an image: one naming no variant of the matrices is no variant
    push_image(client, unique_repo, "evil", content=b"evil")
    err = run("promote", f"{registry_address}/{unique_repo}:evil", "--to", "dev", "--confirm", "--json", code=8)
    assert "names variant 'evil', which no matrix defines" in err.json()["error"]["message"]
    assert "evil-dev" not in client.list_tags(unique_repo)


def test_a_shared_git_ref_serialises_promotions_across_machines(world: World, tmp_path: Path) -> None:
    """promotion_remote mode: each machine moves the pointer's git ref by a non-forced push before
    the tag. The race the registry cannot see (A has claimed the move, its tag PUT not done yet;
    B's re-reads of the tag still find d1) is refused for B (exit 32), and A completes."""
    import subprocess

    from builder.errors import PromotionConflictError
    from builder.promote.gitref import PointerRefs

    remote = tmp_path / "pointers.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)

    def machine(name: str) -> Any:
        env = world.env(state=tmp_path / name)
        return dataclasses.replace(env, pointer_refs=PointerRefs(str(remote), tmp_path / name / "refs.git"))

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = machine("a"), machine("b")
    d1 = world.build(b"shared ref one")
    apply_promotion(a, plan_promotion(a, world.target, "dev"))
    pointer = str(a.stage_location(world.target, "dev"))
    assert a.pointer_refs.read(pointer)[1] == d1  # the ref follows the tag

    da = world.build(b"machine a wins")
    plan_a = plan_promotion(a, world.target, "dev")
    a.pointer_refs.swap(pointer, d1, da)  # A claimed the move; its tag PUT has not happened yet
    db = world.build(b"machine b loses")
    plan_b = plan_promotion(b, world.target, "dev")
    assert plan_b.previous == d1  # the registry still says d1: B's re-reads cannot see A
    with pytest.raises(PromotionConflictError) as err:
        apply_promotion(b, plan_b)
    assert err.value.exit_code == 32 and da in err.value.message
    assert world.client.resolve(world.repo, f"{VARIANT}-dev") == d1  # B moved nothing
    applied = apply_promotion(a, plan_a)  # A completes its claimed move
    assert applied.record.digest == da and world.client.resolve(world.repo, f"{VARIANT}-dev") == da
    assert b.pointer_refs.read(pointer)[1] == da
    assert db != da


def test_rollback_applied_on_a_pointer_moved_back_meanwhile_is_an_integrity_failure(world: World) -> None:
    """The plan saw a trusted pointer; before the apply, the stage moved on (a record away from
    that digest) and the tag was put back by hand: the same digest, no longer trusted. Under the
    lock the rollback refuses with the plan's own error, exit 18 as resolve, naming why and what to
    do (it said only "no longer trusted", without the digest or a hint)."""
    d1 = _dev(world, b"late one")
    d2 = _dev(world, b"late two")
    alice = world.env(signer="alice")
    plan = plan_rollback(alice, world.target, "dev")
    assert (plan.previous, plan.digest) == (d2, d1)
    _dev(world, b"late three")  # d2 -> d3: the successor record on d2 says the stage left it
    _retag(world, "dev", d2)  # ... and someone put the tag back by hand
    with pytest.raises(VerificationError) as err:
        resolve(alice, world.target, "dev")
    assert err.value.exit_code == 18
    with pytest.raises(VerificationError) as late:
        apply_rollback(alice, plan)
    assert late.value.exit_code == 18 and "refusing to roll back" in late.value.message
    assert "newer record moved the stage away" in late.value.message
    assert late.value.details["found"] == d2 and late.value.hint
    assert world.client.resolve(world.repo, f"{VARIANT}-dev") == d2  # nothing was written
