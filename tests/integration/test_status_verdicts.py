"""``status`` with the verified-layer cache (``builder.promote.verdict_cache``) on the real registry:
a second run answers the layers it verified before without verifying them again (nor reading
the blobs a cold run reads), and a cached
verdict is never reused once what it was about changed: another trusted key set, or a ``.sig`` /
``.att`` tag that now names another manifest (here: one whose signature was edited)."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
from typing import TYPE_CHECKING, Any

import pytest

from builder.ledger import open_ledger
from builder.policy import load_policy
from builder.promote import PromotionContext, Target, apply_promotion, plan_promotion, stage_histories, status
from builder.promote.queries import STATUS_WORKERS
from builder.registry import RegistryClient
from builder.signing.layer import (
    ATT_SUFFIX,
    ENVELOPE_ANNOTATION,
    SIG_SUFFIX,
    SIGNATURE_ANNOTATION,
    sha256_digest,
    signature_tag,
)
from builder.signing.sign import sign_image
from tests.integration.test_promote_support import Clients, Keys, make_keys, push_image

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from builder.promote import StatusRow
    from builder.signing.report import VerifiedItem

pytestmark = pytest.mark.integration

STAGES = """\
stages:
  dev:
    from: build
    require:
      signature: {signers: [build]}
    rollback: {allowed: [build]}
"""


class Project:
    """Three variants in one repository, promoted to dev, signed by ``build``; status contexts over
    one cache directory, trusting the key files given."""

    def __init__(self, registry: str, repo: str, tmp: Path) -> None:
        self.registry, self.repo, self.tmp = registry, repo, tmp
        self.state = tmp / "state"
        self.state.mkdir()
        self.keys: Keys = make_keys(self.state)
        self.client = RegistryClient(registry, insecure=True)
        self.targets: list[Target] = []
        self.digests: list[str] = []

    def context(self, *trusted: str) -> tuple[PromotionContext, Clients]:
        files = ", ".join(f"{{file: {self.keys.pub(k)}}}" for k in trusted or ("build",))
        policy = self.tmp / f"policy-{'-'.join(trusted or ('build',))}.yaml"
        policy.write_text(f"version: 1\nkeys:\n  build: [{files}]\npromoters: [build]\n{STAGES}")
        clients = Clients()
        ctx = PromotionContext(
            policy=load_policy(policy),
            registry=self.registry,
            clients=clients,
            lock_dir=self.state / "locks",
            ledger=open_ledger(self.state / "ledger.sqlite"),
            signer=self.keys.signer("build"),
            cache_dir=self.state / "cache",
        )
        return ctx, clients

    def make(self, n: int = 3) -> None:
        for i in range(n):
            variant = f"verdicts-{i}"
            digest = push_image(self.client, self.repo, variant)
            sign_image(self.client, self.repo, digest, self.keys.signer("build"), lock_dir=self.state / "locks")
            target = Target(variant, self.repo, self.registry)
            ctx, _ = self.context()
            apply_promotion(ctx, plan_promotion(ctx, target, "dev"))
            self.targets.append(target)
            self.digests.append(digest)

    def status(self, *trusted: str) -> tuple[list[StatusRow], int]:
        ctx, clients = self.context(*trusted)
        rows = status(ctx, self.targets, ["dev"])
        return rows, clients.sent

    def status_verified(self, *trusted: str) -> tuple[list[StatusRow], int, int]:
        """``status`` plus how many layers it verified from the registry (not from the cache)."""
        with verified_layers() as verified:
            rows, sent = self.status(*trusted)
        return rows, sent, len(verified)

    def edit_signature(self, digest: str, suffix: str) -> None:
        """Push another manifest under ``digest``'s ``.sig``/``.att`` tag: the same layers, the
        first one's signature edited (``.sig``: the signature annotation; ``.att``: the DSSE
        envelope's signature, a new blob)."""
        tag = signature_tag(digest, suffix)
        manifest = self.client.get_manifest(self.repo, tag)
        doc = json.loads(manifest.raw)
        layer = doc["layers"][0]
        if suffix == SIG_SUFFIX:
            layer["annotations"][SIGNATURE_ANNOTATION] = _flip(layer["annotations"][SIGNATURE_ANNOTATION])
        else:
            envelope = json.loads(self.client.get_blob(self.repo, layer["digest"]))
            envelope["signatures"][0]["sig"] = _flip(envelope["signatures"][0]["sig"])
            blob = json.dumps(envelope).encode()
            layer["digest"] = self.client.put_blob(self.repo, blob)
            layer["size"] = len(blob)
        self.client.put_manifest(self.repo, tag, json.dumps(doc).encode(), manifest.media_type)


@contextlib.contextmanager
def verified_layers() -> Iterator[list[str]]:
    """The digests of the layers the verdict cache verifies from the registry while inside (the
    real ``verify_layer``, each call noted): a layer answered from the cache is not among them."""
    from builder.promote import verdict_cache
    from builder.signing.verify import verify_layer as real  # what the cache calls on a miss
    seen: list[str] = []

    def noted(*args: Any, **kw: Any) -> VerifiedItem:
        seen.append(str(args[3].get("digest")))
        return real(*args, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(verdict_cache, "verify_layer", noted)
        yield seen


class _AnotherUser:
    """``os`` as ``builder.cachefile`` sees it in a process of another user than the cache's owner."""

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    @staticmethod
    def geteuid() -> int:
        return os.geteuid() + 4242


def _flip(signature_b64: str) -> str:
    """A base64 signature with one byte changed (still well-formed base64, no longer valid)."""
    raw = bytearray(base64.b64decode(signature_b64))
    raw[len(raw) // 2] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


@pytest.fixture
def project(registry_address: str, unique_repo: str, tmp_path: Path) -> Project:
    p = Project(registry_address, unique_repo, tmp_path)
    p.make()
    return p


def _shown(rows: list[StatusRow]) -> list[tuple[str | None, int, str | None, str | None]]:
    return [(r.digest, r.signatures or 0, r.action, r.note) for r in rows]


def test_a_second_status_reads_no_blob_and_shows_the_same_rows(project: Project) -> None:
    """Cold: every layer verified, its bytes derived (the ``.sig`` payload) or carried by its
    descriptor (the record's envelope annotation): no blob read. Warm: no layer verified again;
    per row only the pointer and the ``.sig``/``.att`` manifests (tags move, so they are read every
    time), plus one listing."""
    cold, cold_sent, cold_verified = project.status_verified()
    assert all(r.signatures == 1 and r.action == "promote" and not r.note for r in cold), _shown(cold)
    warm, sent, verified = project.status_verified()
    assert [r.to_json() | {"age_seconds": None} for r in warm] == [r.to_json() | {"age_seconds": None} for r in cold]
    assert cold_sent == sent == 1 + 3 * 3, (cold_sent, sent)
    assert (cold_verified, verified) == (2 * 3, 0)


def test_a_verdict_is_not_reused_when_the_trusted_keys_change(project: Project) -> None:
    project.status()  # cache warm for the build key
    _, _, warm = project.status_verified()
    # another key set that still contains the signer: same outcome, but every layer verified again
    rows, _, verified = project.status_verified("build", "mallory")
    assert all(r.signatures == 1 and r.action == "promote" for r in rows)
    assert (warm, verified) == (0, 2 * 3), (warm, verified)
    # a key set without the signer: nothing verifies, whatever an earlier run concluded
    rows, _ = project.status("mallory")
    assert all(r.signatures == 0 and r.action is None and r.note for r in rows), _shown(rows)


@pytest.mark.parametrize("suffix", [SIG_SUFFIX, ATT_SUFFIX])
def test_a_verdict_is_not_reused_when_the_tag_names_another_manifest(project: Project, suffix: str) -> None:
    project.status()  # every layer's verdict cached
    edited = project.digests[1]
    project.edit_signature(edited, suffix)
    rows, _ = project.status()
    by_digest = {r.digest: r for r in rows}
    for digest in project.digests:
        row = by_digest[digest]
        if digest != edited:
            assert row.signatures == 1 and row.action == "promote" and not row.note
        elif suffix == SIG_SUFFIX:  # the signature no longer verifies; the record still does
            assert row.signatures == 0 and row.action == "promote", _shown(rows)
        else:  # the promotion record no longer verifies: the pointer is not explained
            assert row.signatures == 1 and row.action is None and row.note, _shown(rows)


def test_a_damaged_cache_file_is_a_miss(project: Project) -> None:
    """The repository's one file of verdicts: entries holding another key's verdict (well-formed),
    entries that are not verdicts, and a truncated file are read as misses: the layers are verified
    from the registry again (and written again), the rows do not change."""
    cold, cold_sent, cold_verified = project.status_verified()
    [file] = (project.state / "cache" / "verdicts").glob("*/*.json")  # one repository: one file
    body = file.read_bytes()
    doc = json.loads(body)
    keys, items = list(doc["verdicts"]), list(doc["verdicts"].values())
    assert len(keys) == 2 * 3  # per promoted row: its signature and its promotion record
    doc["verdicts"] = dict(zip(keys, items[1:] + items[:1], strict=True))  # each key now holds the next verdict
    file.write_text(json.dumps(doc))
    rows, sent, verified = project.status_verified()
    assert _shown(rows) == _shown(cold) and (sent, verified) == (cold_sent, cold_verified), (sent, verified)
    assert json.loads(file.read_bytes())["verdicts"] == json.loads(body)["verdicts"]  # written again
    doc["verdicts"] = dict.fromkeys(keys, "not a verdict")
    file.write_text(json.dumps(doc))
    rows, sent, verified = project.status_verified()
    assert _shown(rows) == _shown(cold) and (sent, verified) == (cold_sent, cold_verified), (sent, verified)
    file.write_bytes(file.read_bytes()[:40])  # truncated
    rows, sent, verified = project.status_verified()
    assert _shown(rows) == _shown(cold) and (sent, verified) == (cold_sent, cold_verified), (sent, verified)
    assert cold_verified == 2 * 3


def test_a_cache_directory_that_cannot_be_written_only_costs_the_speed_up(project: Project) -> None:
    """``<state_dir>/cache`` is a file here (a broken or read-only state directory): every run
    verifies from the registry, shows the same rows and raises nothing."""
    (project.state / "cache").write_text("not a directory\n")
    cold, cold_sent = project.status()
    assert all(r.signatures == 1 and r.action == "promote" and not r.note for r in cold), _shown(cold)
    again, sent, verified = project.status_verified()
    assert _shown(again) == _shown(cold) and (sent, verified) == (cold_sent, 2 * 3), (sent, verified)


def test_history_reads_the_records_it_verified_before_from_the_cache(project: Project) -> None:
    """``history`` of a variant promoted once: pointer and ``.att`` (the record's envelope is in its
    descriptor: no blob read); the second time the record's verdict comes from the cache (the tags
    are read again)."""

    def history() -> tuple[list[tuple[str, str]], int, int]:
        ctx, clients = project.context()
        with verified_layers() as verified:
            [dev] = stage_histories(ctx, project.targets[0], ["dev"])
        return [(r.digest, r.action) for r, _ in dev.records], clients.sent, len(verified)

    cold, cold_sent, cold_verified = history()
    warm, warm_sent, warm_verified = history()
    assert cold == warm == [(project.digests[0], "promote")]
    assert (cold_sent, warm_sent, cold_verified, warm_verified) == (2, 2, 1, 0)


def test_a_bundle_referrer_verified_before_is_not_read_again(project: Project) -> None:
    """A key-pair Sigstore bundle referrer (cosign 3's format) on one promoted digest: its attestation
    type shows in the row; the second run reads the referrers listing again (the fallback index on
    this registry, which has no referrers API) but neither the referrer's manifest nor its bundle
    blob; a verdict kept for one key set is not reused for another (``mallory`` alone: no types)."""
    from builder.signing.bundles import attest_bundle

    ptype = "https://builder.example/verdict-cache-test/v1"
    attest_bundle(
        project.client,
        project.repo,
        project.digests[0],
        ptype,
        {"run": 1},
        project.keys.signer("build"),
        lock_dir=project.state / "locks",
    )
    cold, cold_sent = project.status()
    assert [ptype in r.attestations for r in cold] == [True, False, False], [r.attestations for r in cold]
    warm, sent = project.status()
    assert [r.to_json() | {"age_seconds": None} for r in warm] == [r.to_json() | {"age_seconds": None} for r in cold]
    # one listing; per row its pointer, .sig and .att; the one fallback referrers index (the listing)
    assert sent == 1 + 3 * 3 + 1, (sent, cold_sent)
    assert cold_sent - sent == 2, cold_sent  # cold: the referrer's manifest and blob (records: no blob read)
    rows, _ = project.status("mallory")
    assert not any(r.attestations for r in rows), [r.attestations for r in rows]


@pytest.mark.parametrize("planted_by", ["group member", "another user"])
def test_a_verdict_others_could_have_planted_is_not_used(project: Project, planted_by: str) -> None:
    """Every input of a verdict's key is public, so anyone who can write the cache can plant an
    ``ok`` verdict for a signature that does not verify: a repository's file in a directory that
    group or others may write, or a file another user owns, is a miss (verified from the registry).
    Another user's file: the cache checked as by another user than its owner (giving a file away
    needs root, which CI runners lack: never skipped)."""
    from builder import cachefile
    from builder.promote import verdict_cache

    project.status()  # every layer's verdict cached
    edited = project.digests[1]
    project.edit_signature(edited, SIG_SUFFIX)  # the signature no longer verifies
    tag = signature_tag(edited, SIG_SUFFIX)
    desc = json.loads(project.client.get_manifest(project.repo, tag).raw)["layers"][0]
    keys: list[str] = []  # the key of the edited layer, as the cache computes it (all public inputs)
    real_key = verdict_cache.verdict_key

    def noted(*args: Any, **kw: Any) -> str:
        key = real_key(*args, **kw)
        if args[2] == edited and kw["tag"] == tag:
            keys.append(key)
        return key

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(verdict_cache, "verdict_key", noted)
        rows, _ = project.status()
    assert next(r for r in rows if r.digest == edited).signatures == 0 and keys
    [file] = (project.state / "cache" / "verdicts").glob("*/*.json")
    doc = json.loads(file.read_bytes())
    signature = next(e["item"] for e in doc["verdicts"].values() if e["item"]["kind"] == "signature")
    forged = signature | {"tag": tag, "layer_digest": desc["digest"]}
    doc["verdicts"][keys[0]] = {"key": keys[0], "item": forged}
    file.write_text(json.dumps(doc))
    with pytest.MonkeyPatch.context() as mp:
        if planted_by == "group member":
            os.chmod(file.parent, 0o775)  # what umask 002 gave a cache directory
        else:
            mp.setattr(cachefile, "os", _AnotherUser())
        rows, _ = project.status()
    row = next(r for r in rows if r.digest == edited)
    assert row.signatures == 0, _shown(rows)


def test_two_runs_writing_at_once_keep_both_runs_verdicts(project: Project) -> None:
    """Two runs over one cache directory, each verifying other digests, both having read the
    repository's file before either writes it: the second write merges the first one's verdicts
    (the file is read again), so a later status reads no layer blob at all."""
    from builder.promote.evidence import read_place
    from builder.promote.verdict_cache import VerdictCache

    ctx, _ = project.context()
    runs = [VerdictCache.of(ctx), VerdictCache.of(ctx)]
    loc = ctx.stage_location(project.targets[0], "dev")
    for run, digest in zip(runs, project.digests[:2], strict=True):
        got = read_place(ctx, loc, digest, check_present=False, approvals=False, verdicts=run)
        assert got is not None and any(i.ok for i in got.items)
    assert all(r.misses and not r.hits for r in runs)
    for run in runs:
        run.flush()
    _, warm, warm_verified = project.status_verified()  # digests 0 and 1 answered from the file
    _, again, verified = project.status_verified()
    # one listing; per row its pointer, .sig and .att; only digest 2's two layers verified (none of 0's or 1's)
    assert (warm, again) == (1 + 3 * 3, 1 + 3 * 3), (warm, again)
    assert (warm_verified, verified) == (2, 0), (warm_verified, verified)


def test_a_second_report_reads_no_layer_blob(project: Project) -> None:
    """``builder report`` of a promoted variant reads its stage's history and each digest's evidence:
    the layers verified by ``history`` (in the same run) or by an earlier report are answered from
    the cache, so a second report reads only tags (pointer, ``.att`` for the chain, ``.sig``/``.att``
    and the fallback referrers index for the evidence) and verifies no layer again."""
    from builder.promote.report import variant_report

    def report() -> tuple[list[object], int, int]:
        ctx, clients = project.context()
        with verified_layers() as verified:
            rep = variant_report(ctx, f"{project.registry}/{project.repo}:{project.targets[0].variant}", ["dev"])
        return [s.to_json() for s in rep.stages], clients.sent, len(verified)

    first, first_sent, first_verified = report()
    again, sent, verified = report()
    assert first == again and [p["digest"] for p in first[0]["points"]] == [project.digests[0]]  # type: ignore[index]
    assert (first_sent, sent) == (5, 5), (first_sent, sent)
    assert first_verified > 0 and verified == 0, (first_verified, verified)


def test_more_rows_than_threads_read_as_one_thread_reads_them(project: Project) -> None:
    """``status`` of more rows than it reads at once (``STATUS_WORKERS``): the same rows, in the
    same order, for the same requests as one thread reading them one after another (racing rows
    share the listing and each digest's evidence: nothing is read twice). Three promoted variants
    among never-promoted ones (the listing answers those: no request each)."""
    absent = [Target(f"never-{i}", project.repo, project.registry) for i in range(STATUS_WORKERS + 5)]
    targets = [absent[0], project.targets[0], *absent[1:20], project.targets[1], *absent[20:], project.targets[2]]
    assert len(targets) > STATUS_WORKERS
    seen = []
    for workers in (1, STATUS_WORKERS):
        ctx, clients = project.context()
        ctx = dataclasses.replace(ctx, cache_dir=project.tmp / f"cache-{workers}")  # both cold
        rows = status(ctx, targets, ["dev"], workers=workers)
        seen.append(([r.to_json() | {"age_seconds": None} for r in rows], clients.sent))
    (one, one_sent), (many, many_sent) = seen
    assert many == one and [r["variant"] for r in many] == [t.variant for t in targets]
    assert sum(1 for r in many if r["digest"]) == 3
    # the listing, 3 per promoted row (pointer, .sig, .att: the record's envelope is in its descriptor)
    assert many_sent == one_sent == 1 + 3 * 3, (one_sent, many_sent)


def _rewrite_record(project: Project, digest: str, edit: str) -> None:
    """Push another ``.att`` manifest for ``digest``: its promotion record's layer with the envelope
    annotation ``edit`` ed: ``"edited"`` (the envelope's signature flipped in the annotation only:
    the same size, another sha256 than the layer's digest), ``"absent"`` (as written before records
    carried it), ``"both"`` (the edited envelope also uploaded as the layer's blob, digest and size
    naming it: annotation and blob agree, the signature is wrong)."""
    tag = signature_tag(digest, ATT_SUFFIX)
    manifest = project.client.get_manifest(project.repo, tag)
    doc = json.loads(manifest.raw)
    [layer] = doc["layers"]
    text = layer["annotations"][ENVELOPE_ANNOTATION]
    assert sha256_digest(text.encode()) == layer["digest"]  # what a record carries as written
    envelope = json.loads(text)
    envelope["signatures"][0]["sig"] = _flip(envelope["signatures"][0]["sig"])
    forged = json.dumps(envelope, separators=(",", ":"))
    assert len(forged) == len(text)
    if edit == "absent":
        del layer["annotations"][ENVELOPE_ANNOTATION]
    else:
        layer["annotations"][ENVELOPE_ANNOTATION] = forged
    if edit == "both":
        layer["digest"] = project.client.put_blob(project.repo, forged.encode())
    project.client.put_manifest(project.repo, tag, json.dumps(doc).encode(), manifest.media_type)


@pytest.mark.parametrize("edit", ["edited", "absent"])
def test_a_record_envelope_annotation_is_used_only_when_it_is_the_blob(project: Project, edit: str) -> None:
    """A record layer whose envelope annotation does not hash to the layer's digest (edited), or
    has none (a record written before records carried it), is verified from its blob: one blob
    read more, the same rows; the other records are read from their annotations."""
    edited = project.digests[1]
    _rewrite_record(project, edited, edit)
    rows, sent, verified = project.status_verified()
    assert all(r.signatures == 1 and r.action == "promote" and not r.note for r in rows), _shown(rows)
    assert (sent, verified) == (1 + 3 * 3 + 1, 2 * 3), (sent, verified)  # the edited record's blob


def test_a_record_whose_annotation_and_blob_agree_on_a_forged_envelope_is_refused(project: Project) -> None:
    """Annotation and blob both hold an envelope whose signature was edited (digest and size name
    it): no blob is read (the annotation is those bytes) and the record does not verify: the
    pointer is not explained, as with a forged blob read from the registry."""
    edited = project.digests[1]
    _rewrite_record(project, edited, "both")
    rows, sent = project.status()
    by_digest = {r.digest: r for r in rows}
    assert by_digest[edited].action is None and by_digest[edited].note, _shown(rows)
    assert all(r.action == "promote" and not r.note for r in rows if r.digest != edited), _shown(rows)
    assert sent == 1 + 3 * 3, sent
