"""Shared set-up for the promotion tests: tiny real OCI images pushed with the registry client,
key pairs (build, check runner, approvers, an outsider), a policy file, and device-check
evidence written with ``builder.attest.attest_image`` by a check-runner key.

The device-check predicate shape is the one ``builder check`` writes (docs/checks.md):
``result`` + ``host`` (``vendor``, ``driver_version``, ``cuda_version``, ``gpus[].name``).
The GPU itself is unreachable here, so a test writes that statement as evidence input.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import gzip
import hashlib
import io
import json
import tarfile
import textwrap
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from builder.labels import own
from builder.registry import OCI_MANIFEST, RegistryClient, client_for

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.integration

AUTH_USER, AUTH_PASSWORD = "promoter", "pr0mote-s3cret"

OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"


def tar_layer(files: dict[str, bytes], *, compress: bool = True) -> bytes:
    """A deterministic tar (gzip) layer holding ``files``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    return gzip.compress(raw, mtime=0) if compress else raw


def push_image(
    client: RegistryClient,
    repository: str,
    tag: str | None,
    *,
    content: bytes | None = None,
    labels: dict[str, str] | None = None,
    env: list[str] | None = None,
    layers: list[bytes] | None = None,
    layer_media_type: str = OCI_LAYER_GZIP,
) -> str:
    """Push a small real OCI image (one layer with ``/hello.txt``) and tag it; returns its digest."""
    blobs = layers if layers is not None else [tar_layer({"hello.txt": content or uuid.uuid4().bytes})]
    diff_ids = []
    descs = []
    for blob in blobs:
        digest = client.put_blob(repository, blob)
        raw = gzip.decompress(blob) if layer_media_type.endswith("gzip") else blob
        diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
        descs.append({"mediaType": layer_media_type, "digest": digest, "size": len(blob)})
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Labels": labels or {}, "Env": env or ["PATH=/usr/bin"]},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    cfg = json.dumps(config, separators=(",", ":")).encode()
    cfg_digest = client.put_blob(repository, cfg)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": cfg_digest, "size": len(cfg)},
        "layers": descs,
    }
    raw_manifest = json.dumps(manifest, separators=(",", ":")).encode()
    digest = "sha256:" + hashlib.sha256(raw_manifest).hexdigest()
    client.put_manifest(repository, tag or digest, raw_manifest, OCI_MANIFEST)
    return digest


def push_build(client: RegistryClient, repository: str, variant: str, content: bytes) -> str:
    """What a finished build of ``variant`` leaves in ``repository`` (small image, real labels): an
    image labelled with the variant and a content hash, under its content tag ``<variant>-<hash12>``
    (the tag by which the build confirms the label's claim) and its moving variant tag; returns its
    digest."""
    content_hash = hashlib.sha256(content).hexdigest()
    labels = {own("variant"): variant, own("content-hash"): content_hash}  # as `builder render` writes them
    for tag in (f"{variant}-{content_hash[:12]}", variant):
        digest = push_image(client, repository, tag, content=content, labels=labels)
    return digest


@dataclasses.dataclass
class Keys:
    """Key files under ``state/keys``: build (also promoter), check runner, approvers, outsider."""

    root: Path

    def key(self, name: str) -> Path:
        return self.root / name / "builder.key"

    def pub(self, name: str) -> Path:
        return self.root / name / "builder.pub"

    def signer(self, name: str) -> Any:
        from builder.signing.keys import load_signer

        return load_signer(self.key(name), None)


KEY_NAMES = ("build", "check-runner", "alice", "bob", "carol", "mallory")


def make_keys(state_dir: Path) -> Keys:
    from builder.signing.keys import generate_key_pair

    root = state_dir / "keys"
    for name in KEY_NAMES:
        generate_key_pair(root / name, None)
    return Keys(root)


def write_policy(
    path: Path,
    keys: Keys,
    *,
    prod_extra: str = "",
    freeze: str = "",
    soak: str = "",
    fleet: Path | None = None,
    prod_repository: str = "prod/{repository}",
) -> Path:
    """A dev -> staging -> prod policy like policies/default.yaml, with test key files."""
    fleet_rule = f"        - fleet:\n            file: {fleet}\n" if fleet else ""
    text = textwrap.dedent(
        f"""\
        version: 1
        keys:
          build:
            - file: {keys.pub("build")}
          check-runners:
            - file: {keys.pub("check-runner")}
          promoters:
            - file: {keys.pub("build")}
        approvers:
          alice: {{file: {keys.pub("alice")}}}
          bob: {{file: {keys.pub("bob")}}}
          carol: {{file: {keys.pub("carol")}}}
        promoters: [promoters]
        stages:
          dev:
            from: build
            require:
              unconditional: dev takes every build
            rollback:
              allowed: [promoters, alice]
          staging:
            from: dev
            require:
              all_of:
                - signature: {{signers: [build]}}
                - device_check: {{signers: [check-runners], vendors: [none, nvidia]}}
            rollback:
              allowed: [promoters, alice]
          prod:
            from: staging
            repository: "{prod_repository}"
            require:
              all_of:
                - signature: {{signers: [build]}}
                - approvals: {{count: 2, approvers: [alice, bob, carol]}}
                - device_check:
                    signers: [check-runners]
                    vendors: [nvidia]
                    gpu_models: ["NVIDIA H200*"]
                    driver_branches: ["570", "580"]
                - change_ticket: {{pattern: "CHG-[0-9]{{4,8}}"}}
        """
    )
    text += fleet_rule + freeze + soak + prod_extra
    text += "    rollback:\n      allowed: [alice, bob]\n"
    path.write_text(text)
    return path


def device_check(
    vendor: str, *, gpus: tuple[str, ...] = (), driver: str | None = None, passed: bool = True, digest: str = ""
) -> dict[str, Any]:
    """A device-check/v1 predicate in the shape ``builder check`` writes."""
    return {
        "image": {"digest": digest},
        "result": "passed" if passed else "failed",
        "host": {
            "vendor": vendor,
            "driver_version": driver,
            "cuda_version": "13.0" if vendor == "nvidia" else None,
            "gpus": [{"name": g} for g in gpus],
        },
        "steps": [{"name": "framework-import", "passed": passed, "seconds": 0.4}],
    }


@contextlib.contextmanager
def password_registry(d: Path) -> Iterator[str]:
    """``127.0.0.1:<port>``: a real CNCF distribution registry (``docker-registry``, installed by
    scripts/setup) that answers 401 without the htpasswd (bcrypt) credentials
    ``AUTH_USER``/``AUTH_PASSWORD``."""
    from tests.registries import auth_registry

    d.mkdir(parents=True, exist_ok=True)
    with auth_registry(d, "basic", AUTH_USER, AUTH_PASSWORD) as registry:
        yield registry.address


def docker_config_dir(d: Path, registry: str) -> Path:
    """A Docker config directory (``config.json`` with an ``auths`` entry) holding the credentials
    of ``password_registry``, as ``docker login`` writes them."""
    d.mkdir(parents=True, exist_ok=True)
    auth = base64.b64encode(f"{AUTH_USER}:{AUTH_PASSWORD}".encode()).decode()
    (d / "config.json").write_text(json.dumps({"auths": {registry: {"auth": auth}}}))
    return d


def test_push_image_round_trips(registry_address: str, unique_repo: str) -> None:
    client = RegistryClient(registry_address, insecure=True)
    digest = push_image(client, unique_repo, "t1", content=b"hello")
    assert client.resolve(unique_repo, "t1") == digest
    m = client.get_manifest(unique_repo, digest)
    assert m.digest == digest and len(m.layers) == 1


class Clients:
    """registry -> one plain-HTTP client each (the loopback registry), kept to count their requests
    (``sent``: requests of every client made so far)."""

    def __init__(self) -> None:
        self.cache: dict[str, RegistryClient] = {}

    def __call__(self, registry: str) -> RegistryClient:
        return client_for(registry, insecure=lambda _r: True, cache=self.cache)

    @property
    def sent(self) -> int:
        return sum(c.requests_sent for c in self.cache.values())
