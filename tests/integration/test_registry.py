"""The OCI distribution client against the real local registry (distribution 2.8.2)."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import pytest

from builder.errors import NotFoundError, RegistryError, RegistryUnavailableError
from builder.registry import (
    OCI_EMPTY,
    OCI_INDEX,
    OCI_MANIFEST,
    CopyStats,
    Descriptor,
    RegistryClient,
    canonical_json,
    copy_image,
    fallback_tag,
    platform_names,
    runnable_platforms,
    sha256_digest,
    verify_complete,
)

LAYER = "application/vnd.oci.image.layer.v1.tar"
CONFIG = "application/vnd.oci.image.config.v1+json"
BUNDLE = "application/vnd.dev.sigstore.bundle.v0.3+json"


def push_image(client: RegistryClient, repo: str, *, layers: int = 2, size: int = 1024, tag: str | None = None) -> str:
    """Push a small real image (random layers, a config) and return its manifest digest."""
    descs: list[dict[str, Any]] = []
    for _ in range(layers):
        data = os.urandom(size)
        client.put_blob(repo, data)
        descs.append({"mediaType": LAYER, "digest": sha256_digest(data), "size": len(data)})
    cfg = canonical_json(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Env": ["PATH=/usr/bin", "CUDA_VERSION=12.8.1"]},
            "rootfs": {"type": "layers", "diff_ids": [d["digest"] for d in descs]},
        }
    )
    client.put_blob(repo, cfg)
    manifest = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": CONFIG, "digest": sha256_digest(cfg), "size": len(cfg)},
            "layers": descs,
        }
    )
    return client.put_manifest(repo, tag or sha256_digest(manifest), manifest, OCI_MANIFEST)


def push_index_with_attestation(client: RegistryClient, repo: str, tag: str) -> tuple[str, str, str]:
    """An index as buildx writes it: one linux/amd64 image + one attestation manifest."""
    image = push_image(client, repo)
    att = push_image(client, repo, layers=1)
    img_m = client.get_manifest(repo, image)
    att_m = client.get_manifest(repo, att)
    index = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": image,
                    "size": img_m.size,
                    "platform": {"architecture": "amd64", "os": "linux"},
                },
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": att,
                    "size": att_m.size,
                    "annotations": {
                        "vnd.docker.reference.digest": image,
                        "vnd.docker.reference.type": "attestation-manifest",
                    },
                    "platform": {"architecture": "unknown", "os": "unknown"},
                },
            ],
        }
    )
    return client.put_manifest(repo, tag, index, OCI_INDEX), image, att


@pytest.fixture
def client(registry_address: str) -> RegistryClient:
    return RegistryClient(registry_address, insecure=True)


def test_blob_upload_exists_get_and_manifest_bytes_round_trip(client: RegistryClient, unique_repo: str) -> None:
    data = b"hello registry " * 100
    digest = client.put_blob(unique_repo, data)
    assert digest == sha256_digest(data)
    assert client.blob_exists(unique_repo, digest)
    assert client.get_blob(unique_repo, digest) == data
    assert not client.blob_exists(unique_repo, sha256_digest(b"never pushed"))

    # a manifest with unusual whitespace keeps its exact bytes (digest = sha256 of what we sent)
    cfg = b"{}"
    client.put_blob(unique_repo, cfg)
    head = f'{{\n  "schemaVersion": 2,\n  "mediaType": "{OCI_MANIFEST}",\n'
    body = f'  "config": {{"mediaType": "{OCI_EMPTY}", "digest": "{sha256_digest(cfg)}", "size": 2}},\n'
    body += '  "layers": []\n}\n'
    raw = (head + body).encode()
    got = client.put_manifest(unique_repo, "v1", raw, OCI_MANIFEST)
    assert got == sha256_digest(raw)
    m = client.get_manifest(unique_repo, "v1")
    assert m.raw == raw and m.digest == got and m.media_type == OCI_MANIFEST
    assert client.resolve(unique_repo, "v1") == got
    assert client.get_manifest(unique_repo, got).raw == raw


def test_resolve_missing_tag_names_the_reference(client: RegistryClient, unique_repo: str) -> None:
    with pytest.raises(NotFoundError) as err:
        client.resolve(unique_repo, "nope")
    assert f"{client.registry}/{unique_repo}:nope" in err.value.message
    assert "404" in err.value.message
    assert client.try_resolve(unique_repo, "nope") is None


def test_manifest_referring_to_missing_blob_is_refused(client: RegistryClient, unique_repo: str) -> None:
    raw = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": CONFIG, "digest": sha256_digest(b"missing"), "size": 7},
            "layers": [],
        }
    )
    with pytest.raises(RegistryError) as err:
        client.put_manifest(unique_repo, "broken", raw, OCI_MANIFEST)
    assert "400" in err.value.message and unique_repo in err.value.message


def test_list_tags_follows_pagination(client: RegistryClient, unique_repo: str) -> None:
    digest = push_image(client, unique_repo, layers=1)
    raw = client.get_manifest(unique_repo, digest).raw
    names = [f"t{i:02d}" for i in range(7)]
    for n in names:
        client.put_manifest(unique_repo, n, raw, OCI_MANIFEST)
    assert sorted(client.list_tags(unique_repo, page_size=2)) == names  # 4 pages via Link headers
    assert client.list_tags("test/does-not-exist-" + unique_repo[5:]) == []


def test_index_platforms_ignore_buildx_attestation_manifests(client: RegistryClient, unique_repo: str) -> None:
    index_digest, image, att = push_index_with_attestation(client, unique_repo, "multi")
    index = client.get_manifest(unique_repo, "multi")
    assert index.is_index and index.digest == index_digest
    assert [d.digest for d in runnable_platforms(index)] == [image]
    assert platform_names(index) == ("linux/amd64",)
    assert [d.digest for d in index.manifests if d.is_attestation] == [att]
    assert verify_complete(client, unique_repo, index_digest) == []


def test_mount_and_copy_image_within_registry(client: RegistryClient, unique_repo: str) -> None:
    index_digest, _image, _att = push_index_with_attestation(client, unique_repo, "src")
    dst_repo = unique_repo + "-dst"
    stats = CopyStats()
    got = copy_image(client, unique_repo, index_digest, client, dst_repo, tag="copied", stats=stats)
    assert got == index_digest == client.resolve(dst_repo, "copied")
    assert stats.mounted == 5 and stats.copied == 0  # 2+1 layers, 2 configs: mounted, not copied
    assert stats.manifests == 3  # two children first, then the index
    assert verify_complete(client, dst_repo, index_digest) == []
    # a second copy finds the manifest there: nothing moves
    again = CopyStats()
    copy_image(client, unique_repo, index_digest, client, dst_repo, stats=again)
    assert (again.mounted, again.copied, again.manifests) == (0, 0, 0)


def test_mount_from_repository_without_the_blob_returns_false(client: RegistryClient, unique_repo: str) -> None:
    assert client.mount_blob(unique_repo, sha256_digest(b"absent"), unique_repo + "-other") is False


def test_copy_between_registries_copies_only_missing_blobs(
    client: RegistryClient, unique_repo: str, registry_address: str
) -> None:
    """Two clients on the same registry but seen as different registries (localhost vs 127.0.0.1)
    force the blob-copy path: each blob is streamed once; blobs already present are skipped."""
    host, port = registry_address.rsplit(":", 1)
    if host != "127.0.0.1":
        pytest.skip("needs the registry on 127.0.0.1 to address it as localhost too")
    other = RegistryClient(f"localhost:{port}", insecure=True)
    digest = push_image(client, unique_repo, layers=2, size=2 * 1024 * 1024)
    dst_repo = unique_repo + "-x"
    first_layer = client.get_manifest(unique_repo, digest).layers[0]
    other.put_blob(dst_repo, client.get_blob(unique_repo, first_layer.digest))  # pre-seed one blob
    stats = CopyStats()
    copy_image(client, unique_repo, digest, other, dst_repo, tag="x", stats=stats)
    assert (stats.present, stats.copied, stats.mounted) == (1, 2, 0)
    assert stats.copied_bytes > 2 * 1024 * 1024
    assert other.resolve(dst_repo, "x") == digest


def _referrer(client: RegistryClient, repo: str, subject: str, payload: bytes) -> Descriptor:
    """Push a bundle-like referrer manifest (artifactType + subject) and return its descriptor."""
    client.put_blob(repo, b"{}")
    client.put_blob(repo, payload)
    subj = client.get_manifest(repo, subject)
    raw = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": BUNDLE,
            "config": {"mediaType": OCI_EMPTY, "digest": sha256_digest(b"{}"), "size": 2},
            "layers": [{"mediaType": BUNDLE, "digest": sha256_digest(payload), "size": len(payload)}],
            "subject": {"mediaType": subj.media_type, "digest": subject, "size": subj.size},
        }
    )
    digest = client.put_manifest(repo, sha256_digest(raw), raw, OCI_MANIFEST)
    return client.get_manifest(repo, digest).descriptor(with_artifact_type=True)


def test_referrers_fallback_index(client: RegistryClient, unique_repo: str) -> None:
    subject = push_image(client, unique_repo, layers=1)
    assert client.referrers(unique_repo, subject) == []  # distribution 2.8: no API, no fallback tag yet
    d1 = _referrer(client, unique_repo, subject, b'{"n":1}')
    d2 = _referrer(client, unique_repo, subject, b'{"n":2}')
    assert d1.artifact_type == BUNDLE
    client.add_referrer_to_fallback_index(unique_repo, subject, d1)
    client.add_referrer_to_fallback_index(unique_repo, subject, d2)
    client.add_referrer_to_fallback_index(unique_repo, subject, d1)  # idempotent
    found = client.referrers(unique_repo, subject)
    assert [d.digest for d in found] == sorted([d1.digest, d2.digest])
    assert all(d.artifact_type == BUNDLE for d in found)
    assert client.referrers(unique_repo, subject, artifact_type="application/other") == []
    index = client.get_manifest(unique_repo, fallback_tag(subject))
    doc = json.loads(index.raw)
    assert doc["mediaType"] == OCI_INDEX and doc["schemaVersion"] == 2
    assert [e["artifactType"] for e in doc["manifests"]] == [BUNDLE, BUNDLE]


def test_fallback_index_concurrent_writers_keep_every_entry(client: RegistryClient, unique_repo: str) -> None:
    subject = push_image(client, unique_repo, layers=1)
    descs = [_referrer(client, unique_repo, subject, f'{{"w":{i}}}'.encode()) for i in range(6)]
    errors: list[BaseException] = []

    def add(d: Descriptor) -> None:
        try:
            RegistryClient(client.registry, insecure=True).add_referrer_to_fallback_index(unique_repo, subject, d)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(d,)) for d in descs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert {d.digest for d in client.referrers(unique_repo, subject)} == {d.digest for d in descs}


def test_unreachable_registry_is_registry_unavailable() -> None:
    c = RegistryClient("127.0.0.1:9", insecure=True, retries=1, backoff=0.01)
    with pytest.raises(RegistryUnavailableError) as err:
        c.resolve("any/repo", "tag")
    assert "127.0.0.1:9" in err.value.message
    assert err.value.exit_code == 5


CHILD = """
import json, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from builder.registry import Descriptor, RegistryClient
c = RegistryClient({reg!r}, insecure=True)
for d in json.loads(sys.argv[1]):
    c.add_referrer_to_fallback_index({repo!r}, {subject!r}, Descriptor.from_json(d), lock_dir=Path({locks!r}))
"""


def test_fallback_index_writers_in_separate_processes_with_lock_dir(
    client: RegistryClient, unique_repo: str, tmp_path: Any
) -> None:
    import subprocess
    import sys
    from pathlib import Path

    subject = push_image(client, unique_repo, layers=1)
    descs = [_referrer(client, unique_repo, subject, f'{{"p":{i}}}'.encode()) for i in range(8)]
    script = CHILD.format(
        root=str(Path(__file__).resolve().parents[2]),
        reg=client.registry,
        repo=unique_repo,
        subject=subject,
        locks=str(tmp_path / "locks"),
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, json.dumps([d.to_json() for d in descs[i::4]])])
        for i in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    assert {d.digest for d in client.referrers(unique_repo, subject)} == {d.digest for d in descs}
