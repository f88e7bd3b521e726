"""Signatures every verifier accepts, judged by the real tools (issue #13, items 3 and 4):

- skopeo 1.18 with the containers/image policy of docs/signing.md (run verbatim: only the registry,
  repository names and key paths are replaced) copies a builder-signed multi-platform image and its
  promoted copy in another repository, and refuses an unsigned image and an index signed only at the
  top (what `cosign sign` without `--recursive` leaves);
- `cosign attest --new-bundle-format --key` output (a Sigstore bundle referrer, no `.att` tag) is
  verified by `builder verify --key` and counted by an `attestation` policy rule;
- `builder attest --bundle` output is verified by `cosign verify-attestation --new-bundle-format`;
- `cosign sign --key` signs with a key written by `builder keys export`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from builder.predicates import COSIGN_SIGN_V1
from builder.registry import OCI_INDEX, OCI_MANIFEST, RegistryClient
from builder.signing.bundles import BUNDLE_MEDIA_TYPE
from builder.signing.keys import generate_key_pair, load_public_keys
from builder.signing.layer import ATT_SUFFIX, SIG_SUFFIX, signature_tag
from tests.attestations import statements
from tests.conftest import require_tool, unset_builder_settings
from tests.integration.test_promote_support import docker_config_dir, password_registry, push_image
from tests.projects import jax_matrix

if TYPE_CHECKING:
    from tests.conftest import Cli, CliResult

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "signing"
COSIGN_PASSWORD = "test-password"  # tests/data/signing/README.md
PTYPE = "https://slsa.dev/provenance/v1"
VARIANT = "jax0.7-cpu-py3.11-debian12"
#: A trusted root with no authorities: cosign --new-bundle-format otherwise fetches the public-good
#: TUF root, which this machine cannot reach; key-pair bundles need none of it.
EMPTY_TRUSTED_ROOT = {"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}


def push_index(client: RegistryClient, repository: str, tag: str, seed: str) -> str:
    """A real two-platform OCI index (linux/amd64, linux/arm64 tiny images) tagged ``tag``."""
    children = []
    for arch in ("amd64", "arm64"):
        digest = push_image(client, repository, None, content=f"{seed}-{arch}".encode())
        size = client.get_manifest(repository, digest).size
        children.append(
            {
                "mediaType": OCI_MANIFEST,
                "digest": digest,
                "size": size,
                "platform": {"architecture": arch, "os": "linux"},
            }
        )
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": children}
    return client.put_manifest(repository, tag, json.dumps(index).encode(), OCI_INDEX)


def tool(binary: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary, *args], capture_output=True, text=True, timeout=180, env={**os.environ, **(env or {})}, check=False
    )


def verify_bundle(
    cosign_bin: str, tmp: Path, key: Path, ptype: str, reference: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``cosign verify-attestation --new-bundle-format`` of a key-signed bundle (an empty trusted root
    written under ``tmp``: no Sigstore instance, ``--insecure-ignore-tlog``)."""
    root = tmp / "trusted_root.json"
    root.write_text(json.dumps(EMPTY_TRUSTED_ROOT))
    flags = ("--new-bundle-format", "--trusted-root", str(root), "--insecure-ignore-tlog", "--type", ptype)
    return tool(cosign_bin, "verify-attestation", *flags, "--key", str(key), reference, env=env)


def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No BUILDER_* setting, Docker config or cosign password of the machine running the tests."""
    unset_builder_settings(monkeypatch)


def doc_snippet(name: str) -> str:
    """The code block after ``<!-- test: NAME -->`` in docs/signing.md."""
    text = (ROOT / "docs" / "signing.md").read_text()
    match = re.search(rf"<!-- test: {re.escape(name)} -->\n```\w*\n(.*?)```", text, re.S)
    assert match, f"docs/signing.md has no snippet {name}"
    return match.group(1)


def _project(root: Path, registry: str, repo: str) -> Path:
    """A checkout whose policy sends dev into ``prod/{repository}`` and needs a build-key signature
    and a provenance attestation by the cosign key; the promoter key is a third key."""
    keys = root / "state" / "keys"
    for name in ("build", "promoter"):
        generate_key_pair(keys / name, None)
    (root / "matrices").mkdir(parents=True)
    (root / "policies").mkdir()
    (root / "builder.toml").write_text(
        f'registry = "{registry}"\nstate_dir = "state"\nkey = "{keys / "build" / "builder.key"}"\n'
    )
    (root / "matrices" / "tiny.yaml").write_text(jax_matrix(repo))
    (root / "policies" / "default.yaml").write_text(
        textwrap.dedent(
            f"""\
            version: 1
            keys:
              build: [{{file: {keys / "build" / "builder.pub"}}}]
              cosign: [{{file: {DATA / "cosign.pub"}}}]
              promoters: [{{file: {keys / "promoter" / "builder.pub"}}}]
            promoters: [promoters]
            stages:
              dev:
                from: build
                repository: "prod/{{repository}}"
                require:
                  all_of:
                    - signature: {{signers: [build]}}
                    - attestation: {{type: "{PTYPE}", signers: [cosign]}}
            """
        )
    )
    return root


def _run(cli: Cli, project: Path, *args: str, code: int = 0, env: dict[str, str] | None = None) -> CliResult:
    return cli(*args, code=code, env={"HOME": str(project), **(env or {})}, cwd=project)


def _skopeo_copy(
    skopeo: str, conf: Path, reference: str, out: Path, authfile: Path | None = None
) -> subprocess.CompletedProcess[str]:
    auth = ["--src-authfile", str(authfile)] if authfile else []
    return tool(
        skopeo,
        "--policy",
        str(conf / "policy.json"),
        "--registries.d",
        str(conf / "registries.d"),
        "copy",
        "--src-tls-verify=false",
        *auth,
        f"docker://{reference}",
        f"dir:{out}",
    )


def _containers_conf(
    conf: Path, registry: str, source: str, promoted: str, build_pub: Path, promoter_pub: Path
) -> None:
    """docs/signing.md's policy.json and registries.d file with the test's names and keys."""
    policy = (
        doc_snippet("policy.json")
        .replace("registry.example.com/prod/ml/jax", f"{registry}/{promoted}")
        .replace("registry.example.com/ml/jax", f"{registry}/{source}")
        .replace("/etc/containers/keys/builder.pub", str(build_pub))
        .replace("/etc/containers/keys/promoter.pub", str(promoter_pub))
    )
    (conf / "registries.d").mkdir(parents=True)
    (conf / "policy.json").write_text(policy)
    (conf / "registries.d" / "builder.yaml").write_text(
        doc_snippet("registries.d").replace("registry.example.com", registry)
    )


def test_containers_policy_and_cosign_bundles_end_to_end(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str, cosign_bin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    skopeo = require_tool("skopeo")
    _clean_environment(monkeypatch)
    project = _project(tmp_path / "project", registry_address, unique_repo)
    keys = project / "state" / "keys"
    client = RegistryClient(registry_address, insecure=True)
    ref = f"{registry_address}/{unique_repo}:{VARIANT}"
    digest = push_index(client, unique_repo, VARIANT, "signed")

    # builder signs the index and each platform manifest with the build key
    signed = _run(cli, project, "sign", ref, "--json").json()
    children = [d.digest for d in client.get_manifest(unique_repo, digest).manifests]
    assert signed["platforms"] == children  # what --json reports is what was signed
    for d in (digest, *children):
        assert client.try_resolve(unique_repo, signature_tag(d, SIG_SUFFIX)) is not None

    # the attestation rule is not met yet: the plan is denied
    denied = _run(cli, project, "promote", VARIANT, "--to", "dev", "--json", code=31).json()
    assert f"no valid attestation of type {PTYPE}" in json.dumps(denied) or PTYPE in json.dumps(denied)

    # cosign 2.5 writes the attestation in the bundle format only (no .att tag)
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({"runDetails": {"metadata": {"finishedOn": "2026-12-01T10:00:00Z"}}}))
    attest = tool(
        cosign_bin,
        "attest",
        "--new-bundle-format",
        "--key",
        str(DATA / "cosign.key"),
        "--tlog-upload=false",
        "-y",
        "--type",
        PTYPE,
        "--predicate",
        str(pred),
        f"{registry_address}/{unique_repo}@{digest}",
        env={"COSIGN_PASSWORD": COSIGN_PASSWORD},
    )
    assert attest.returncode == 0, attest.stderr
    assert client.try_resolve(unique_repo, signature_tag(digest, ATT_SUFFIX)) is None

    # builder verify --key reads it (and refuses it with another key)
    args = ("verify", f"{registry_address}/{unique_repo}@{digest}", "--attestations-only", "--attestation", PTYPE)
    doc = _run(cli, project, *args, "--key", str(DATA / "cosign.pub"), "--json").json()
    (item,) = [i for i in doc["items"] if i["kind"] == "attestation"]
    assert item["ok"] and item["predicate_type"] == PTYPE and "->" in item["tag"]
    assert item["time"] == "2026-12-01T10:00:00Z"
    wrong = _run(cli, project, *args, "--key", str(keys / "build" / "builder.pub"), "--json", code=18).json()
    (other,) = [i for i in wrong["error"]["details"]["items"] if i["kind"] == "attestation"]
    cosign_fp = doc["items"][0]["signer"] if doc["items"][0]["kind"] == "attestation" else item["signer"]
    assert other["classification"] == "untrusted" and other["signer"] == cosign_fp  # the bundle's key hint

    # ... and the policy counts it: the promotion into prod/<repo> is allowed and applied
    applied = _run(
        cli,
        project,
        "--json",
        "promote",
        VARIANT,
        "--to",
        "dev",
        "--confirm",
        "--key",
        str(keys / "promoter" / "builder.key"),
    ).json()["results"][0]
    assert applied["applied"] and applied["digest"] == digest
    promoted = f"prod/{unique_repo}"
    assert applied["pinned"] == f"{registry_address}/{promoted}@{digest}"
    # status counts the bundle-format attestation (copied with the image) like a legacy one
    (row,) = [r for r in _run(cli, project, "status", "--json").json()["rows"] if r["stage"] == "dev"]
    assert row["digest"] == digest and PTYPE in row["attestations"], row
    (tag,) = [t for t in client.list_tags(promoted) if not t.startswith("sha256-")]

    # skopeo with docs/signing.md's policy: the image and its promoted copy are accepted
    conf = tmp_path / "containers"
    _containers_conf(
        conf, registry_address, unique_repo, promoted, keys / "build" / "builder.pub", keys / "promoter" / "builder.pub"
    )
    for i, reference in enumerate((ref, f"{registry_address}/{promoted}:{tag}")):
        copied = _skopeo_copy(skopeo, conf, reference, tmp_path / f"ok{i}")
        assert copied.returncode == 0, (reference, copied.stderr)

    # an unsigned image in the same repository is refused
    push_index(client, unique_repo, "unsigned", "unsigned")
    refused = _skopeo_copy(skopeo, conf, f"{registry_address}/{unique_repo}:unsigned", tmp_path / "no1")
    assert refused.returncode != 0 and "no signature exists" in refused.stderr, refused.stderr

    # `cosign sign --key` with the exported build key: signs the index only, which containers/image
    # refuses (it verifies the platform manifest it pulls); builder verify accepts cosign's signature
    exported = tmp_path / "exported"
    out = _run(
        cli, project, "keys", "export", "--output-dir", str(exported), "--json", env={"COSIGN_PASSWORD": "export-pw"}
    ).json()
    build_fp = load_public_keys([keys / "build" / "builder.pub"])[0].fingerprint
    assert out["fingerprint"] == build_fp and (exported / "cosign.key").stat().st_mode & 0o777 == 0o600
    top = push_index(client, unique_repo, "top-only", "top-only")
    top_ref = f"{registry_address}/{unique_repo}@{top}"
    signed = tool(
        cosign_bin,
        "sign",
        "--key",
        str(exported / "cosign.key"),
        "--tlog-upload=false",
        "-y",
        top_ref,
        env={"COSIGN_PASSWORD": "export-pw"},
    )
    assert signed.returncode == 0, signed.stderr
    _run(cli, project, "verify", top_ref, "--key", str(keys / "build" / "builder.pub"))  # cosign's, by our key
    refused = _skopeo_copy(skopeo, conf, f"{registry_address}/{unique_repo}:top-only", tmp_path / "no2")
    assert refused.returncode != 0 and "no signature exists" in refused.stderr, refused.stderr


def test_cosign_verifies_builders_bundle(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str, cosign_bin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clean_environment(monkeypatch)
    project = _project(tmp_path / "project", registry_address, unique_repo)
    pub = project / "state" / "keys" / "build" / "builder.pub"
    client = RegistryClient(registry_address, insecure=True)
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({"buildDefinition": {"buildType": "https://example.com/b"}}))

    def cosign_verify(reference: str, key: Path) -> subprocess.CompletedProcess[str]:
        return verify_bundle(cosign_bin, tmp_path, key, PTYPE, reference)

    results: dict[str, Any] = {}
    for flag in ("--bundle", "--no-bundle"):
        digest = push_image(client, unique_repo, flag.strip("-"), content=flag.encode())
        reference = f"{registry_address}/{unique_repo}@{digest}"
        args = ("attest", reference, "--predicate-type", PTYPE, "--predicate", str(pred), flag, "--json")
        results[flag] = (reference, _run(cli, project, *args).json())
    reference, doc = results["--bundle"]
    assert doc["referrer"]["predicate_type"] == PTYPE and doc["referrer"]["manifest_digest"].startswith("sha256:")
    ok = cosign_verify(reference, pub)
    assert ok.returncode == 0, ok.stderr
    statement = statements(ok.stdout)[0]
    assert statement["predicateType"] == PTYPE and statement["_type"] == "https://in-toto.io/Statement/v1"
    assert cosign_verify(reference, DATA / "cosign.pub").returncode != 0  # another key: refused
    # the same statement again: the bundle is reused, not written twice
    args = ("attest", reference, "--predicate-type", PTYPE, "--predicate", str(pred), "--bundle", "--json")
    again = _run(cli, project, *args).json()
    assert again["referrer"]["manifest_digest"] == doc["referrer"]["manifest_digest"]
    subject = reference.split("@")[1]
    assert len(client.referrers(unique_repo, subject, BUNDLE_MEDIA_TYPE)) == 1
    # without --bundle only the legacy tag exists: cosign's bundle verifier finds nothing
    reference, doc = results["--no-bundle"]
    assert doc["referrer"] is None
    assert cosign_verify(reference, pub).returncode != 0


def test_bundles_and_promoted_signatures_on_a_password_protected_registry(
    cli: Cli, tmp_path: Path, unique_repo: str, cosign_bin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Credentials only through the Docker config: builder writes and reads bundle referrers, cosign
    verifies them, the promotion re-signs the copy, and skopeo (`--src-authfile`) accepts it."""
    from builder.registry import DockerCredentials

    skopeo = require_tool("skopeo")
    _clean_environment(monkeypatch)
    with password_registry(tmp_path / "registry") as registry:
        project = _project(tmp_path / "project", registry, unique_repo)
        keys = project / "state" / "keys"
        config = docker_config_dir(tmp_path / "docker", registry)
        env = {"DOCKER_CONFIG": str(config), "COSIGN_PASSWORD": COSIGN_PASSWORD}
        client = RegistryClient(registry, insecure=True, auth=DockerCredentials.from_file(config))
        digest = push_index(client, unique_repo, VARIANT, "auth")
        ref = f"{registry}/{unique_repo}@{digest}"
        _run(cli, project, "sign", ref, "--docker-config", str(config))
        pred = tmp_path / "pred.json"
        pred.write_text(json.dumps({"buildDefinition": {"buildType": "https://example.com/b"}}))
        attest = ("attest", ref, "--key", str(DATA / "cosign.key"), "--predicate-type", PTYPE, "--predicate", str(pred))
        written = _run(cli, project, *attest, "--bundle", "--json", env=env).json()
        assert written["referrer"] is not None
        verified = verify_bundle(cosign_bin, tmp_path, DATA / "cosign.pub", PTYPE, ref, env=env)
        assert verified.returncode == 0, verified.stderr
        promoter = str(keys / "promoter" / "builder.key")
        out = _run(cli, project, "--json", "promote", VARIANT, "--to", "dev", "--confirm", "--key", promoter, env=env)
        assert out.json()["results"][0]["applied"]
        promoted = f"prod/{unique_repo}"
        args = ("verify", f"{registry}/{promoted}@{digest}", "--key", str(keys / "promoter" / "builder.pub"), "--json")
        doc = _run(cli, project, *args, env=env).json()
        assert doc["ok"]
        conf = tmp_path / "containers"
        _containers_conf(
            conf, registry, unique_repo, promoted, keys / "build" / "builder.pub", keys / "promoter" / "builder.pub"
        )
        for i, reference in enumerate((f"{registry}/{unique_repo}:{VARIANT}", f"{registry}/{promoted}:{VARIANT}-dev")):
            copied = _skopeo_copy(skopeo, conf, reference, tmp_path / f"ok{i}", authfile=config / "config.json")
            assert copied.returncode == 0, (reference, copied.stderr)


def test_build_signing_writes_the_provenance_bundle_on_request(
    tmp_path: Path, registry_address: str, unique_repo: str, cosign_bin: str
) -> None:
    """`builder build --sign --bundle`'s signing step (``sign_and_attest_build(bundle=True)``): the
    legacy tags and a provenance bundle with the same statement, which cosign verifies; without
    ``bundle`` no referrer is written."""
    from builder.signing.keys import load_signer
    from builder.signing.sign import sign_and_attest_build

    generate_key_pair(tmp_path / "k", None)
    signer = load_signer(tmp_path / "k" / "builder.key", None)
    client = RegistryClient(registry_address, insecure=True)
    provenance = {"buildDefinition": {"buildType": "https://example.com/build"}, "runDetails": {}}
    for bundle in (True, False):
        digest = push_index(client, unique_repo, f"b{bundle}", f"build-{bundle}")
        sig, att = sign_and_attest_build(
            client, unique_repo, digest, signer, provenance, lock_dir=tmp_path, bundle=bundle
        )
        assert sig.appended and att.appended
        listed = client.referrers(unique_repo, digest, BUNDLE_MEDIA_TYPE)
        assert len(listed) == (1 if bundle else 0)
        reference = f"{registry_address}/{unique_repo}@{digest}"
        verified = verify_bundle(cosign_bin, tmp_path, tmp_path / "k" / "builder.pub", PTYPE, reference)
        assert (verified.returncode == 0) is bundle, verified.stderr


def test_sign_bundle_is_cosign3s_image_signature(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str, cosign_bin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`builder sign --bundle`: a sign/v1 bundle referrer next to the legacy .sig, verified by cosign
    (`verify-attestation --type https://sigstore.dev/cosign/sign/v1`, which is how cosign 2.5 reads a
    bundle signature; docs/keyless.md) and read back by `builder verify` as a signature."""
    _clean_environment(monkeypatch)
    project = _project(tmp_path / "project", registry_address, unique_repo)
    pub = project / "state" / "keys" / "build" / "builder.pub"
    client = RegistryClient(registry_address, insecure=True)
    digest = push_image(client, unique_repo, "v1", content=b"sign bundle")
    reference = f"{registry_address}/{unique_repo}@{digest}"
    doc = _run(cli, project, "sign", reference, "--bundle", "--json").json()
    assert doc["referrer"]["predicate_type"] == COSIGN_SIGN_V1 and doc["appended"]
    ok = verify_bundle(cosign_bin, tmp_path, pub, COSIGN_SIGN_V1, reference)
    assert ok.returncode == 0, ok.stderr
    assert verify_bundle(cosign_bin, tmp_path, DATA / "cosign.pub", COSIGN_SIGN_V1, reference).returncode != 0
    report = _run(cli, project, "verify", reference, "--key", str(pub), "--json").json()
    sigs = sorted((i["ok"], "->" in i["tag"]) for i in report["items"] if i["kind"] == "signature")
    assert sigs == [(True, False), (True, True)]  # the legacy layer and the bundle, both by the key
