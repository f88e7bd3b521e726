"""Registry requests of a promotion and of ``status``, counted on the real registry (issue 19 item 2).

Requests are deterministic (unlike time): each test counts them with ``RegistryClient.requests_sent``
and asserts the exact number, so a change that adds a repeated read fails here. The breakdown of
what remains and why each request is needed is in docs/benchmarks.md ("Requests").

Whether the registry has the OCI referrers API is remembered per process (one 404 per registry):
each test first makes one read-only plan so that the counted run starts with it known, as every
promotion after the first one of a process does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from builder.ledger import open_ledger
from builder.policy import load_policy
from builder.promote import (
    PromotionContext,
    Target,
    apply_promotion,
    plan_promotion,
    promote_many,
    stage_histories,
    status,
)
from builder.promote import referrers as referrers_module
from builder.registry import RegistryClient, copy_image
from builder.signing.layer import SIGNATURE_CONFIG_DIGEST, signature_tag
from builder.signing.sign import sign_image
from tests.integration.test_promote_support import Clients, Keys, make_keys, push_image, tar_layer
from tests.projects import build_key_policy

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration


def _policy(path: Path, keys: Keys) -> Path:
    path.write_text(
        build_key_policy(
            keys.pub("build"),
            """\
            dev:
              from: build
              require:
                signature: {signers: [build]}
              rollback: {allowed: [build]}
            rel:
              from: dev
              repository: "rel/{repository}"
              require:
                signature: {signers: [build]}
              rollback: {allowed: [build]}
            edge:
              from: build
              repository: "edge/{repository}"
              require:
                signature: {signers: [build]}
              rollback: {allowed: [build]}
            """,
        )
    )
    return path


class Setup:
    def __init__(self, registry: str, repo: str, tmp: Path) -> None:
        self.registry, self.repo = registry, repo
        self.state = tmp / "state"
        self.state.mkdir()
        self.keys = make_keys(self.state)
        self.policy = _policy(tmp / "policy.yaml", self.keys)
        self.client = RegistryClient(registry, insecure=True)

    def context(self) -> tuple[PromotionContext, Clients]:
        clients = Clients()
        ctx = PromotionContext(
            policy=load_policy(self.policy, {"state_dir": str(self.state)}),
            registry=self.registry,
            clients=clients,
            lock_dir=self.state / "locks",
            ledger=open_ledger(self.state / "ledger.sqlite"),
            signer=self.keys.signer("build"),
        )
        return ctx, clients

    def build(self, variant: str, layers: list[bytes] | None = None) -> tuple[Target, str]:
        """A signed build of ``variant`` (its variant tag), and one plan that leaves the referrers API known."""
        digest = push_image(self.client, self.repo, variant, layers=layers)
        sign_image(self.client, self.repo, digest, self.keys.signer("build"), lock_dir=self.state / "locks")
        target = Target(variant, self.repo, self.registry)
        ctx, _ = self.context()
        plan_promotion(ctx, target, "dev")  # read-only: learns whether the registry has the referrers API
        return target, digest

    def promote(self, target: Target, stage: str) -> int:
        """Plan + apply ``stage`` with fresh clients; the requests they sent."""
        ctx, clients = self.context()
        applied = apply_promotion(ctx, plan_promotion(ctx, target, stage))
        assert applied.record.stage == stage
        return clients.sent


@pytest.fixture
def setup(registry_address: str, unique_repo: str, tmp_path: Path) -> Setup:
    return Setup(registry_address, unique_repo, tmp_path)


def test_same_repository_promotion_sends_12_requests(setup: Setup) -> None:
    """``builder promote --confirm`` (``promote_many``): the source tag GET, then under the stage lock
    and the digest's .att lock the plan: pointer HEAD, .sig GET (its payload is derived from the
    digest, not read), .att GET, fallback referrers index GET (5); the apply builds on those reads
    (no second pointer HEAD or .att GET under the locks): the record's DSSE blob (POST + PUT; the
    .sig/.att config is one blob for every such manifest and the .sig the plan read names it), .att
    PUT and re-read (lost-update check), pointer HEAD before the move, tag PUT, HEAD after (7)."""
    target, digest = setup.build("reqs-same")
    ctx, clients = setup.context()
    [outcome] = promote_many(ctx, [target], "dev", confirm=True)
    assert outcome.ok, outcome.to_json()
    assert clients.sent == 12
    assert setup.client.resolve(setup.repo, "reqs-same-dev") == digest


def test_a_promotion_replacing_a_digest_sends_18_requests(setup: Setup) -> None:
    """A new build promoted over the one ``dev`` holds (``--confirm``): the 12 above, plus the
    previous digest's .att (the chain check, made once, under the stage lock: 1; its record's
    envelope is in the layer's descriptor, no blob read) and the successor record on the previous
    digest (its .att GET under the signature lock, the DSSE blob POST + PUT, PUT, re-read: 5). The
    replaced digest's records are not read a second time to look for a successor record of a
    record this run just signed (28 before #19)."""
    first, _ = setup.build("reqs-next")
    setup.promote(first, "dev")
    target, digest = setup.build("reqs-next")
    ctx, clients = setup.context()
    [outcome] = promote_many(ctx, [target], "dev", confirm=True)
    assert outcome.ok, outcome.to_json()
    assert clients.sent == 18
    assert setup.client.resolve(setup.repo, "reqs-next-dev") == digest
    ctx, _ = setup.context()  # the chain is whole: the successor record is on the replaced digest
    [dev] = stage_histories(ctx, target, ["dev"])
    assert [r.digest for r, _ in dev.records][:1] == [digest] and dev.note is None


def test_a_reviewed_plan_applied_later_reads_the_pointer_and_att_again_under_the_locks(setup: Setup) -> None:
    """A plan made without the locks (``plan_promotion``, then ``apply_promotion``, e.g. a reviewed
    dry run): the apply reads the pointer under the stage lock and the .att under its lock again
    (14 = 12 + 2)."""
    target, digest = setup.build("reqs-plan")
    assert setup.promote(target, "dev") == 14
    assert setup.client.resolve(setup.repo, "reqs-plan-dev") == digest


def test_cross_repository_promotion_reads_the_source_referrers_index_once(setup: Setup) -> None:
    """Into another repository of the same registry (blobs mounted, evidence copied, the copy signed
    for its new name): the source's fallback referrers index the plan read is not read again. The
    copied .att and our record, the copied .sig and our signature of the copy, are one
    read-modify-write each (a GET under the lock, one PUT, the re-read), not a copy then an append;
    the copied manifest is stored by the stage tag's PUT, not PUT by digest first; the source's
    ``dev`` record is verified from the envelope its descriptor carries, no blob read (24 with
    ``promote_many``, whose plan reads the pointer under the stage lock; 25 for a plan applied
    later)."""
    target, digest = setup.build("reqs-cross")
    setup.promote(target, "dev")
    ctx, clients = setup.context()
    [outcome] = promote_many(ctx, [target], "rel", confirm=True)
    assert outcome.ok, outcome.to_json()
    assert clients.sent == 24
    assert setup.client.resolve(f"rel/{setup.repo}", "reqs-cross-rel") == digest
    dst = RegistryClient(setup.registry, insecure=True)  # both tags hold the source's layer and ours
    assert len(dst.get_manifest(f"rel/{setup.repo}", signature_tag(digest, ".sig")).json["layers"]) == 2
    assert len(dst.get_manifest(f"rel/{setup.repo}", signature_tag(digest, ".att")).json["layers"]) == 2

    again, _ = setup.build("reqs-cross-plan")
    setup.promote(again, "dev")
    assert setup.promote(again, "rel") == 25


def test_a_build_promoted_into_another_repository_mounts_the_signature_config_once(setup: Setup) -> None:
    """A build (a ``.sig``, no ``.att`` yet) promoted straight into another repository: the record's
    new ``.att`` and the copied ``.sig`` name the same config blob (``SIGNATURE_CONFIG``), which the
    ``.sig`` copy mounts from the source; the record's write waits for that one mount instead of
    uploading the blob too (a mount, not a mount + POST + PUT: 2 requests fewer, 23 in all)."""
    target, digest = setup.build("reqs-edge")
    ctx, clients = setup.context()
    [outcome] = promote_many(ctx, [target], "edge", confirm=True)
    assert outcome.ok, outcome.to_json()
    assert outcome.applied is not None and outcome.applied.copy is not None
    # the image's config and layer, the build signature's layer and the shared config: mounted
    assert (outcome.applied.copy.mounted, outcome.applied.copy.copied) == (4, 0), outcome.applied.copy
    assert clients.sent == 23, clients.sent
    dst = f"edge/{setup.repo}"
    assert setup.client.resolve(dst, "reqs-edge-edge") == digest
    for suffix in (".sig", ".att"):  # both name the shared config, present in the repository
        config = setup.client.get_manifest(dst, signature_tag(digest, suffix)).json["config"]["digest"]
        assert config == SIGNATURE_CONFIG_DIGEST and setup.client.blob_exists(dst, config)


def test_a_copied_manifest_is_stored_by_the_stage_tag_put(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    """``copy_manifest(tagged_later=True)`` puts the blobs in place but leaves the manifest itself to
    the caller's PUT under the stage tag (one request fewer) on a registry known to have no
    referrers API; while that is not known (a new process that has not asked yet), the manifest is
    PUT by digest as before, so referrers copied alongside would find their subject."""
    from builder.promote import Location
    from builder.promote.transfer import copy_manifest
    from builder.registry import CopyStats

    _, digest = setup.build("reqs-tagged-later")
    manifest = setup.client.get_manifest(setup.repo, digest)
    src, dst = Location(setup.registry, setup.repo), Location(setup.registry, f"later/{setup.repo}")
    ctx, clients = setup.context()
    stats = CopyStats()
    copy_manifest(ctx, src, dst, manifest, stats, known_absent=True, tagged_later=True)
    assert (stats.mounted, stats.manifests, clients.sent) == (2, 1, 2), (stats, clients.sent)  # two mounts
    assert setup.client.try_resolve(dst.repository, digest) is None  # not stored by digest
    assert all(setup.client.blob_exists(dst.repository, b.digest) for b in manifest.blobs)
    setup.client.put_manifest(dst.repository, "stage", manifest.raw, manifest.media_type)  # the tag's PUT
    assert setup.client.resolve(dst.repository, digest) == digest

    monkeypatch.setattr(referrers_module, "_MEMORY", referrers_module._NoReferrersApi())
    ctx, clients = setup.context()  # the referrers API not known: the manifest is PUT by digest
    other = Location(setup.registry, f"later2/{setup.repo}")
    copy_manifest(ctx, src, other, manifest, CopyStats(), known_absent=True, tagged_later=True)
    assert clients.sent == 3 and setup.client.resolve(other.repository, digest) == digest


def test_a_batch_mounts_each_shared_blob_once(setup: Setup) -> None:
    """Three variants sharing a base layer promoted to another repository in one batch: the shared
    layer is mounted once, not once per variant (the other two promotions skip its mount)."""
    base = tar_layer({"base.txt": b"a base layer every variant shares"})
    alone, _ = setup.build("reqs-batch-alone", [base, tar_layer({"v.txt": b"alone"})])
    setup.promote(alone, "dev")
    single = setup.promote(alone, "rel")

    targets = []
    for i in range(3):
        target, _ = setup.build(f"reqs-batch-{i}", [base, tar_layer({"v.txt": f"variant {i}".encode()})])
        setup.promote(target, "dev")
        targets.append(target)
    ctx, clients = setup.context()
    outcomes = promote_many(ctx, targets, "rel", confirm=True)
    assert all(o.ok for o in outcomes), [o.to_json() for o in outcomes]
    # the base layer is already in rel/<repo> (mounted by the promotion of `alone`, by another client):
    # each variant would mount it again without the per-client memory; the batch mounts it once (-2),
    # and so the .sig/.att config, one blob for every such manifest (-2).
    # The batch also lists its two repositories once (+2), which answers for each variant that the
    # source has no fallback referrers index and the stage pointer does not exist yet (-2 each),
    # and that the destination holds none of the digest's evidence tags on a registry without the
    # referrers API (known since `single`): no HEAD asks whether rel/<repo> holds the digest (-1 each;
    # taken as absent, the copy is made: what the HEAD would have found)
    assert clients.sent == 3 * single - 2 - 2 + 2 - 3 * 2 - 3, (clients.sent, single)


def test_a_batch_in_a_new_process_learns_the_referrers_api_before_deciding_from_its_listing(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first promotions of a process (what builder forgets between runs) do not each ask whether
    the destination holds the digest: the batch's listing answers that once the registry is known
    to have no referrers API, and that is learnt first (one probe) instead of found unknown by the
    plans running at once. The same batch shape with the registry already known sends one request
    fewer: the probe, and nothing else."""

    def batch(prefix: str, *, new_process: bool) -> int:
        targets = []
        for i in range(3):
            target, _ = setup.build(f"{prefix}-{i}")
            setup.promote(target, "dev")
            targets.append(target)
        if new_process:
            monkeypatch.setattr(referrers_module, "_MEMORY", referrers_module._NoReferrersApi())
        ctx, clients = setup.context()
        outcomes = promote_many(ctx, targets, "rel", confirm=True)
        assert all(o.ok for o in outcomes), [o.to_json() for o in outcomes]
        for target, o in zip(targets, outcomes, strict=True):
            assert o.applied is not None
            assert setup.client.resolve(f"rel/{setup.repo}", f"{target.variant}-rel") == o.applied.record.digest
        return clients.sent

    first = batch("reqs-learn-new", new_process=True)
    known = batch("reqs-learn-known", new_process=False)
    assert first == known + 1, (first, known)  # before: + 1 + a HEAD per plan that found the answer unknown


def test_a_batch_copies_again_a_digest_the_destination_holds_untagged(setup: Setup) -> None:
    """The batch does not ask whether the destination holds a digest whose evidence tags its listing
    does not show: a digest already there by digest alone (no tag, no evidence) is copied again
    (idempotent mounts and manifest PUT) and promoted with its record and signature."""
    targets = []
    for i in range(2):
        target, digest = setup.build(f"reqs-untagged-{i}")
        setup.promote(target, "dev")
        targets.append((target, digest))
    held = targets[0][1]
    copy_image(setup.client, setup.repo, held, setup.client, f"rel/{setup.repo}")  # by digest, untagged
    ctx, _ = setup.context()
    outcomes = promote_many(ctx, [t for t, _ in targets], "rel", confirm=True)
    assert all(o.ok for o in outcomes), [o.to_json() for o in outcomes]
    for target, digest in targets:
        assert setup.client.resolve(f"rel/{setup.repo}", f"{target.variant}-rel") == digest
        sig = setup.client.get_manifest(f"rel/{setup.repo}", signature_tag(digest, ".sig"))
        assert len(sig.json["layers"]) == 2  # the build's signature copied, ours of the copy
    ctx, _ = setup.context()
    [(again, _)] = [t for t in targets if t[1] == held]
    assert plan_promotion(ctx, again, "rel").decision.allowed  # its evidence there reads back and verifies


def test_a_batch_lists_its_repository_once_instead_of_asking_for_absent_tags(setup: Setup) -> None:
    """Three fresh builds promoted into dev (their own repository) in one batch: one tags/list instead
    of each plan's three 404s (no .att yet, no fallback referrers index, no stage pointer yet); the
    pointer is still read under the stage lock before it moves."""
    targets = [setup.build(f"reqs-list-{i}")[0] for i in range(3)]
    ctx, clients = setup.context()
    outcomes = promote_many(ctx, targets, "dev", confirm=True)
    assert all(o.ok for o in outcomes), [o.to_json() for o in outcomes]
    assert clients.sent == 3 * (14 - 3) + 1, clients.sent
    assert [setup.client.try_resolve(setup.repo, f"{t.variant}-dev") for t in targets] == [
        o.applied.record.digest for o in outcomes if o.applied is not None
    ]


def test_status_lists_each_repository_once_and_reads_each_digest_once(setup: Setup) -> None:
    """Six variants in one repository, three of them in dev: one tags/list answers which pointers,
    ``.sig``/``.att`` tags and fallback referrers indexes exist; each promoted row then costs its
    pointer HEAD, ``.sig`` and ``.att`` GETs (the signature's payload is derived from the digest,
    the record's envelope is carried by its layer descriptor: no blob read), and nothing is asked
    for a variant that is not in the stage."""
    targets = []
    for i in range(6):
        target, _ = setup.build(f"reqs-status-{i}")
        targets.append(target)
        if i % 2 == 0:
            setup.promote(target, "dev")
    ctx, clients = setup.context()
    rows = status(ctx, targets, ["dev"])
    assert [r.digest is not None for r in rows] == [True, False] * 3
    assert all(r.signatures == 1 and r.action == "promote" for r in rows if r.digest)
    assert clients.sent == 1 + 3 * 3, clients.sent

    ctx, clients = setup.context()  # one row alone: no listing (it would cost as much as it saves)
    [row] = status(ctx, targets[:1], ["dev"])
    assert row.digest is not None and row.signatures == 1
    assert clients.sent == 4, clients.sent  # + the fallback referrers index, absent


def test_status_in_a_new_process_asks_for_the_referrers_api_once(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that has not asked this registry yet (what builder forgets between runs): the
    rows read at once (``queries.STATUS_WORKERS``) ask whether it has the referrers API once, the first row's
    probe; the others wait for its answer (they each asked before: 1-4 probes, by timing)."""
    targets = []
    for i in range(8):
        target, _ = setup.build(f"reqs-probe-{i}")
        targets.append(target)
        setup.promote(target, "dev")
    monkeypatch.setattr(referrers_module, "_MEMORY", referrers_module._NoReferrersApi())
    ctx, clients = setup.context()
    rows = status(ctx, targets, ["dev"])
    assert all(r.signatures == 1 and r.action == "promote" for r in rows)
    assert clients.sent == 1 + 8 * 3 + 1, clients.sent  # the listing, 3 per row, one probe (404 here)


def test_history_reads_the_pointer_and_each_record_once(setup: Setup) -> None:
    """Three promotions of one variant into dev: ``history`` reads the pointer once (3 HEADs before),
    then each digest's ``.att`` once; its layers (the record that put it there, and on the two
    older digests the successor record written when the stage moved on) carry their envelopes in
    their descriptors: no blob read (the newest digest's records also decide whether the pointer
    is trusted: its ``.att`` is not read again for that)."""
    digests = []
    for _ in range(3):
        target, digest = setup.build("reqs-history")
        setup.promote(target, "dev")
        digests.append(digest)
    ctx, clients = setup.context()
    [dev] = stage_histories(ctx, target, ["dev"])
    assert [r.digest for r, _ in dev.records] == digests[::-1] and dev.note is None
    assert clients.sent == 4, clients.sent
