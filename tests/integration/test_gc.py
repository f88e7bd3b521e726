"""``builder gc`` end to end on a real registry (deletes enabled), in-process through the ``cli``
fixture: a project whose variant was promoted twice into dev (so dev holds one digest and its
history the other), plus an unpromoted old content tag (signed), a young one, one without a
created time, one also under a tag builder does not know, and an interrupted build's pending tag.
A dry run deletes nothing and lists exactly what would go; ``--confirm`` deletes exactly that
(with the signature tag of the deleted digest), and afterwards verify, resolve and rollback of
the stage still work."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from builder.promote.gc import _Protection, _Sweep
from builder.registry import OCI_INDEX, OCI_MANIFEST, RegistryClient, fallback_tag
from builder.signing.bundles import attest_bundle
from builder.signing.keys import load_signer
from builder.signing.sign import sign_image
from tests.conftest import unset_builder_settings
from tests.integration.test_promote_cli import VARIANT, _project
from tests.integration.test_promote_support import OCI_CONFIG, OCI_LAYER_GZIP, tar_layer

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli, CliResult

pytestmark = pytest.mark.integration

OLD = "2020-01-01T00:00:00Z"


def push_dated(client: RegistryClient, repo: str, tags: list[str], *, created: str | None, layers: list[bytes]) -> str:
    """A small OCI image whose config says ``created`` (None: no created field), under ``tags``."""
    diff_ids = []
    descs = []
    for blob in layers:
        descs.append({"mediaType": OCI_LAYER_GZIP, "digest": client.put_blob(repo, blob), "size": len(blob)})
        diff_ids.append("sha256:" + hashlib.sha256(gzip.decompress(blob)).hexdigest())
    config: dict[str, Any] = {
        "architecture": "amd64",
        "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    if created is not None:
        config["created"] = created
    cfg = json.dumps(config, separators=(",", ":")).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": client.put_blob(repo, cfg), "size": len(cfg)},
        "layers": descs,
    }
    raw = json.dumps(manifest, separators=(",", ":")).encode()
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    for tag in tags:
        client.put_manifest(repo, tag, raw, OCI_MANIFEST)
    return digest


def layer() -> bytes:
    return tar_layer({"f": uuid.uuid4().bytes})


def blobs(client: RegistryClient, repo: str, ref: str) -> dict[str, int]:
    m = client.get_manifest(repo, ref)
    return {b.digest: b.size for b in m.blobs}


def reclaimable(client: RegistryClient, repo: str, kept: set[str], gone: tuple[str, ...], shared: bytes) -> int:
    """Sizes of the blobs of the ``gone`` manifests that no ``kept`` tag's manifest references;
    the ``shared`` layer is in both (so it must not count)."""
    kept_blobs: dict[str, int] = {}
    for tag in sorted(kept):
        kept_blobs.update(blobs(client, repo, tag))
    gone_blobs: dict[str, int] = {}
    for ref in gone:
        gone_blobs.update(blobs(client, repo, ref))
    shared_digest = "sha256:" + hashlib.sha256(shared).hexdigest()
    assert shared_digest in gone_blobs and shared_digest in kept_blobs
    return sum(size for b, size in gone_blobs.items() if b not in kept_blobs)


def test_gc_deletes_only_what_no_stage_needs(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    project = _project(tmp_path / "project", registry_address, unique_repo)
    keys = project / "state" / "keys"

    def run(*args: str, code: int = 0) -> CliResult:
        unset_builder_settings(monkeypatch)
        return cli(*args, code=code, env={"HOME": str(project)}, cwd=project)

    client = RegistryClient(registry_address, insecure=True)
    signer = load_signer(keys / "build" / "builder.key", None)
    repo = unique_repo

    def build(
        suffix: str, *, created: str | None = OLD, extra: tuple[str, ...] = (), shared: bytes | None = None
    ) -> str:
        layers = [layer()] + ([shared] if shared else [])
        digest = push_dated(client, repo, [f"{VARIANT}-{suffix * 12}", *extra], created=created, layers=layers)
        sign_image(client, repo, digest, signer, lock_dir=project / "state" / "locks")
        return digest

    d1 = build("a", extra=(VARIANT,))
    run("promote", VARIANT, "--to", "dev", "--confirm")
    d2 = build("b", extra=(VARIANT,))
    run("promote", VARIANT, "--to", "dev", "--confirm")  # dev: d2, its history: d1 (the rollback target)
    shared = layer()
    d3 = build("c", shared=shared)  # old, in no stage: goes, with its signature
    d4 = build("d", created=dt.datetime.now(dt.UTC).isoformat(), shared=shared)  # young: stays
    d5 = build("e", created=None)  # age unknown: stays
    d6 = build("f", extra=("keep-me",))  # also under a tag builder does not know: stays
    pending = push_dated(client, repo, [f"pending-{VARIANT}"], created=OLD, layers=[layer()])
    gone_tags = {f"{VARIANT}-{'c' * 12}", f"pending-{VARIANT}", f"sha256-{d3[7:]}.sig"}
    before = set(client.list_tags(repo))
    assert gone_tags <= before

    # expected bytes: the unique blobs of d3, its signature and the pending image, nothing shared
    expected_bytes = reclaimable(client, repo, before - gone_tags, (d3, f"sha256-{d3[7:]}.sig", pending), shared)
    assert expected_bytes > 0

    dry = run("gc", "--json").json()
    assert dry["confirm"] is False and dry["content_retention_s"] == 30 * 86400 and dry["pending_retention_s"] == 3600
    [report] = dry["repositories"]
    assert report["repository"] == f"{registry_address}/{repo}"
    going = {t["tag"] for t in report["tags"] if t["delete"]}
    assert going == gone_tags
    reasons = {t["tag"]: t["reason"] for t in report["tags"] if not t["delete"]}
    assert "stage or its history" in reasons[f"{VARIANT}-{'a' * 12}"]  # d1: only the history names it
    assert "stage or its history" in reasons[f"{VARIANT}-{'b' * 12}"]
    assert "younger than the retention (30d)" in reasons[f"{VARIANT}-{'d' * 12}"]
    assert "age unknown" in reasons[f"{VARIANT}-{'e' * 12}"]
    assert "also under keep-me" in reasons[f"{VARIANT}-{'f' * 12}"]
    assert set(report["manifests"]) == {d3, pending, client.resolve(repo, f"sha256-{d3[7:]}.sig")}
    assert report["reclaimable_bytes"] == expected_bytes == dry["reclaimable_bytes"]
    assert set(client.list_tags(repo)) == before  # a dry run deletes nothing
    human = run("gc").stderr + run("gc").stdout
    assert "would delete" in human and f"pending-{VARIANT}" in human and "--confirm" in human

    done = run("gc", "--confirm", "--json").json()
    assert done["confirm"] is True and done["deleted_tags"] == 3 and done["deleted_manifests"] == 3
    assert set(client.list_tags(repo)) == before - gone_tags
    for d in (d3, pending):
        assert client.try_get_manifest(repo, d) is None
    for d in (d1, d2, d4, d5, d6):
        assert client.try_get_manifest(repo, d) is not None
    assert run("gc", "--json").json()["deleted_tags"] == 0  # nothing left to collect

    # every stage that holds something still verifies, resolves and rolls back
    pub = str(keys / "build" / "builder.pub")
    run("verify", f"{registry_address}/{repo}:{VARIANT}-dev", "--key", pub)
    assert run("resolve", VARIANT, "--stage", "dev").stdout.strip() == f"{registry_address}/{repo}@{d2}"
    run("rollback", "dev", VARIANT, "--key", str(keys / "alice" / "builder.key"), "--confirm")
    assert run("resolve", VARIANT, "--stage", "dev").stdout.strip() == f"{registry_address}/{repo}@{d1}"
    run("verify", f"{registry_address}/{repo}@{d1}", "--key", pub)


def test_policy_retention_is_validated_and_applied(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    project = _project(tmp_path / "project", registry_address, unique_repo)
    policy = project / "policies" / "default.yaml"
    text = policy.read_text()
    unset_builder_settings(monkeypatch)
    env = {"HOME": str(project)}
    policy.write_text(text + "retention:\n  content_tags: soon\n")
    err = cli("policy", "validate", "--json", code=30, env=env, cwd=project).json()
    problems = err["error"]["details"]["files"][0]["problems"]
    assert any(p["path"] == "retention.content_tags" and "not a duration" in p["message"] for p in problems)

    policy.write_text(text + "retention:\n  content_tags: 1d\n  pending_tags: 10m\n")
    client = RegistryClient(registry_address, insecure=True)
    hours_ago = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)).isoformat()
    # a finished build: its pending tag names the content tag's digest
    content, pending = f"{VARIANT}-{'a' * 12}", f"pending-{VARIANT}"
    digest = push_dated(client, unique_repo, [pending, content], created=hours_ago, layers=[layer()])
    out = cli("gc", "--json", env=env, cwd=project).json()
    assert out["content_retention_s"] == 86400 and out["pending_retention_s"] == 600
    decided = {t["tag"]: (t["delete"], t["manifest_kept"]) for t in out["repositories"][0]["tags"]}
    assert decided == {pending: (True, True), content: (False, False)}  # 2 h: older than 10m, younger than 1d
    assert out["deleted_manifests"] == 0 and out["reclaimable_bytes"] == 0

    # --confirm removes the pending tag alone: the content tag and its manifest stay
    done = cli("gc", "--confirm", "--json", env=env, cwd=project).json()
    assert done["deleted_tags"] == 1 and done["deleted_manifests"] == 0
    assert set(client.list_tags(unique_repo)) == {content}
    assert client.resolve(unique_repo, content) == digest
    cli("gc", "--select", "nothing-like-this*", code=8, env=env, cwd=project)


def test_a_pointer_no_trusted_record_explains_keeps_every_manifest_of_its_variant(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    """dev's pointer was moved outside builder: its rollback target is unknown, so no manifest of
    the variant goes (an old pending tag still loses its tag, never its manifest)."""
    project = _project(tmp_path / "project", registry_address, unique_repo)
    unset_builder_settings(monkeypatch)
    env = {"HOME": str(project)}
    client = RegistryClient(registry_address, insecure=True)
    push_dated(client, unique_repo, [f"{VARIANT}-dev"], created=OLD, layers=[layer()])
    old = push_dated(client, unique_repo, [f"{VARIANT}-{'a' * 12}"], created=OLD, layers=[layer()])
    pending = push_dated(client, unique_repo, [f"pending-{VARIANT}"], created=OLD, layers=[layer()])
    out = cli("gc", "--confirm", "--json", env=env, cwd=project).json()
    tags = {t["tag"]: t for t in out["repositories"][0]["tags"]}
    assert not tags[f"{VARIANT}-{'a' * 12}"]["delete"]
    assert "no trusted promotion record explains" in tags[f"{VARIANT}-{'a' * 12}"]["reason"]
    assert tags[f"pending-{VARIANT}"]["delete"] and tags[f"pending-{VARIANT}"]["manifest_kept"]
    assert out["deleted_manifests"] == 0
    assert client.try_get_manifest(unique_repo, old) is not None
    assert client.try_get_manifest(unique_repo, pending) is not None
    assert f"pending-{VARIANT}" not in client.list_tags(unique_repo)


def push_platform(client: RegistryClient, repo: str, arch: str, *, created: str) -> dict[str, Any]:
    """An untagged platform image manifest (pushed by digest) -> its index descriptor."""
    blob = layer()
    diff_id = "sha256:" + hashlib.sha256(gzip.decompress(blob)).hexdigest()
    config = {
        "architecture": arch,
        "os": "linux",
        "created": created,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    cfg = json.dumps(config, separators=(",", ":")).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": client.put_blob(repo, cfg), "size": len(cfg)},
        "layers": [{"mediaType": OCI_LAYER_GZIP, "digest": client.put_blob(repo, blob), "size": len(blob)}],
    }
    raw = json.dumps(manifest, separators=(",", ":")).encode()
    digest = client.put_manifest(repo, "sha256:" + hashlib.sha256(raw).hexdigest(), raw, OCI_MANIFEST)
    return {
        "mediaType": OCI_MANIFEST,
        "digest": digest,
        "size": len(raw),
        "platform": {"architecture": arch, "os": "linux"},
    }


def push_index(client: RegistryClient, repo: str, tags: list[str], platforms: list[dict[str, Any]]) -> str:
    raw = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": platforms}).encode()
    digests = {client.put_manifest(repo, tag, raw, OCI_INDEX) for tag in tags}
    [digest] = digests
    return digest


def test_a_deleted_index_takes_its_platform_signatures_and_bundles_but_not_a_shared_platforms(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    """Two signed indexes share one platform manifest; the old unpromoted one is deleted. Its own
    ``.sig``, its platform's ``.sig`` and both Sigstore bundle referrers (fallback index and
    referrer manifest) go; the shared platform's signature and bundle stay, since the kept index
    still serves them (containers/image verifies the platform it pulls)."""
    project = _project(tmp_path / "project", registry_address, unique_repo)
    unset_builder_settings(monkeypatch)
    env = {"HOME": str(project)}
    keys = project / "state" / "keys"
    locks = project / "state" / "locks"
    client = RegistryClient(registry_address, insecure=True)
    signer = load_signer(keys / "build" / "builder.key", None)
    repo = unique_repo
    own_platform = push_platform(client, repo, "amd64", created=OLD)
    shared = push_platform(client, repo, "arm64", created=OLD)
    other = push_platform(client, repo, "amd64", created=OLD)
    p1, ps = own_platform["digest"], shared["digest"]
    old_tag, kept_tag = f"{VARIANT}-{'a' * 12}", f"{VARIANT}-{'b' * 12}"
    doomed = push_index(client, repo, [old_tag], [own_platform, shared])
    kept = push_index(client, repo, [kept_tag, "keep-me"], [other, shared])
    for index in (doomed, kept):
        sign_image(client, repo, index, signer, lock_dir=locks)  # the index and each platform
    predicate = {"note": "gc test"}
    bundles = {
        d: attest_bundle(client, repo, d, "https://example.org/gc/v1", predicate, signer, lock_dir=locks)
        for d in (doomed, p1, ps)
    }
    for d in (doomed, kept, p1, ps, other["digest"]):
        assert fallback_tag(d) + ".sig" in client.list_tags(repo)
    # evidence of other kinds under cosign's tag convention (an SBOM, an approver's own tag)
    for suffix in (".sbom", ".approval-0123456789abcdef.att"):
        push_dated(client, repo, [fallback_tag(doomed) + suffix], created=None, layers=[layer()])

    dry = run_gc(cli, env, project)
    [report] = dry["repositories"]
    going = {t["tag"] for t in report["tags"] if t["delete"]}
    doomed_evidence = {f"{fallback_tag(d)}{s}" for d in (doomed, p1) for s in (".sig", "")}
    doomed_evidence |= {f"{fallback_tag(doomed)}{s}" for s in (".sbom", ".approval-0123456789abcdef.att")}
    assert going == {old_tag} | doomed_evidence
    reasons = {t["tag"]: t["reason"] for t in report["tags"]}
    assert reasons[f"{fallback_tag(p1)}.sig"] == f"evidence of platform {p1[:19]} of deleted index {doomed[:19]}"
    referrer_manifests = {bundles[d].manifest_digest for d in (doomed, p1)}
    evidence_manifests = {client.resolve(repo, t) for t in doomed_evidence}
    assert set(report["manifests"]) == {doomed} | evidence_manifests | referrer_manifests
    assert bundles[ps].manifest_digest not in report["manifests"]

    done = run_gc(cli, env, project, "--confirm")
    assert done["deleted_manifests"] == 1 + len(evidence_manifests) + len(referrer_manifests)
    tags = set(client.list_tags(repo))
    assert not tags & ({old_tag} | doomed_evidence)
    assert {kept_tag, "keep-me", fallback_tag(ps), f"{fallback_tag(ps)}.sig", f"{fallback_tag(kept)}.sig"} <= tags
    for d in (doomed, *referrer_manifests):
        assert client.try_get_manifest(repo, d) is None
    assert client.try_get_manifest(repo, bundles[ps].manifest_digest) is not None
    pub = str(keys / "build" / "builder.pub")
    for d in (kept, ps):  # the kept index and its shared platform still verify, bundle included
        out = cli("verify", f"{registry_address}/{repo}@{d}", "--key", pub, "--json", env=env, cwd=project).json()
        assert out["ok"] and any(i["tag"].endswith(fallback_tag(d) + ".sig") for i in out["items"])
    assert run_gc(cli, env, project)["deleted_tags"] == 0


def run_gc(cli: Cli, env: dict[str, str], project: Path, *args: str) -> Any:
    return cli("gc", "--json", *args, env=env, cwd=project).json()


def test_a_sweep_reads_each_manifest_once(registry_address: str, unique_repo: str) -> None:
    """Exact requests of one dry-run sweep (``RegistryClient.requests_sent``): an old image and an old
    two-platform index (both candidates) and an image under a tag builder does not know (kept). Each of
    the five manifests is read once, though its age, an index's platforms and the blobs it references
    all need it; each config blob once."""
    repo = unique_repo
    pusher = RegistryClient(registry_address, insecure=True)
    image = push_dated(pusher, repo, [f"{VARIANT}-{'a' * 12}"], created=OLD, layers=[layer()])
    amd64, arm64 = (push_platform(pusher, repo, arch, created=OLD) for arch in ("amd64", "arm64"))
    index = push_index(pusher, repo, [f"{VARIANT}-{'b' * 12}"], [amd64, arm64])
    push_dated(pusher, repo, ["keep-me"], created=OLD, layers=[layer()])
    subjects = sorted({image, index, amd64["digest"], arm64["digest"]})
    lister = RegistryClient(registry_address, insecure=True)
    for subject in subjects:  # what the referrers of the deleted digests and platforms cost on this registry
        lister.referrers(repo, subject)

    client = RegistryClient(registry_address, insecure=True)
    retention = (dt.timedelta(days=30), dt.timedelta(hours=1))
    sweep = _Sweep(client, repo, frozenset({VARIANT}), _Protection(frozenset(), {}), retention, dt.datetime.now(dt.UTC))
    report = sweep.run(confirm=False)

    assert set(report.manifests) == {image, index}
    # 1 tag list + 3 tag HEADs + 5 manifest GETs (image, index, its 2 platforms, keep-me) + 2 config
    # blobs (the image's, the index's amd64 platform's: the age of an index is that platform's)
    assert client.requests_sent == 1 + 3 + 5 + 2 + lister.requests_sent
