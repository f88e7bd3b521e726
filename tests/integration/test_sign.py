"""Key-pair signatures and attestations on the real registry: write, append, verify, CLI.

Images are tiny real OCI images (one gzip layer, a config) pushed with the registry client to a
``unique_repo``; no docker build is needed.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.registry import OCI_MANIFEST, RegistryClient, sha256_digest
from builder.signing.attest import attest_image
from builder.signing.fingerprints import short_fingerprint
from builder.signing.keys import (
    KeyPairSigner,
    PublicKey,
    generate_key_pair,
    load_public_keys,
    load_signer,
)
from builder.signing.layer import SIGNATURE_CONFIG, signature_tag
from builder.signing.sign import sign_and_attest_build, sign_image
from builder.signing.verify import read_attestations, verify_image

if TYPE_CHECKING:
    from tests.conftest import Cli, CliResult

ROOT = Path(__file__).resolve().parents[2]
PTYPE = "https://slsa.dev/provenance/v1"


def push_tiny_image(client: RegistryClient, repository: str, tag: str, content: bytes = b"hello\n") -> str:
    """Push a real one-layer OCI image whose file holds ``content``; returns its manifest digest."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    layer_tar = buf.getvalue()
    layer = gzip.compress(layer_tar, mtime=0)
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": [sha256_digest(layer_tar)]},
            "config": {},
        }
    ).encode()
    client.put_blob(repository, layer)
    client.put_blob(repository, config)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": sha256_digest(config),
            "size": len(config),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": sha256_digest(layer),
                "size": len(layer),
            }
        ],
    }
    return client.put_manifest(repository, tag, json.dumps(manifest).encode(), OCI_MANIFEST)


def new_signer(directory: Path, password: str = "pw") -> KeyPairSigner:
    key_path, _, _ = generate_key_pair(directory, password)
    return load_signer(key_path, password)


def public_key(signer: KeyPairSigner) -> PublicKey:
    return PublicKey(signer.public_key, "test.pub")


@pytest.fixture
def client(registry_address: str) -> RegistryClient:
    return RegistryClient(registry_address, insecure=True)


@pytest.fixture
def image(client: RegistryClient, unique_repo: str) -> tuple[str, str]:
    return unique_repo, push_tiny_image(client, unique_repo, "v1")


def test_sign_attest_verify_round_trip(client: RegistryClient, image: tuple[str, str], tmp_path: Path) -> None:
    repo, digest = image
    signer = new_signer(tmp_path / "k")
    s = sign_image(client, repo, digest, signer, lock_dir=tmp_path / "locks")
    a = attest_image(
        client,
        repo,
        digest,
        PTYPE,
        {"runDetails": {"metadata": {"finishedOn": "2026-11-30T17:00:00Z"}}},
        signer,
        lock_dir=tmp_path / "locks",
    )
    assert s.appended and a.appended and s.tag == signature_tag(digest, ".sig")
    report = verify_image(client, repo, digest, keys=[public_key(signer)], predicate_types=[PTYPE])
    assert report.ok, report.problems
    kinds = {(i.kind, i.ok, i.signer, i.predicate_type) for i in report.items}
    assert kinds == {("signature", True, signer.fingerprint, None), ("attestation", True, signer.fingerprint, PTYPE)}
    att = next(i for i in report.items if i.kind == "attestation")
    assert att.time == "2026-11-30T17:00:00Z"
    assert att.statement is not None and att.statement["subject"][0]["name"] == f"{client.registry}/{repo}"
    # the stored layer is exactly the documented layout
    manifest = client.get_manifest(repo, a.tag).json
    layer = manifest["layers"][0]
    assert layer["mediaType"] == "application/vnd.dsse.envelope.v1+json"
    assert layer["annotations"]["dev.cosignproject.cosign/signature"] == ""
    assert layer["annotations"]["predicateType"] == PTYPE
    # the config is the one of cosign's empty signature image, the same bytes for every .sig/.att
    # manifest (uploaded once per repository; readers take the layers from the manifest)
    config = json.loads(client.get_blob(repo, manifest["config"]["digest"]))
    assert config["rootfs"] == {"type": "layers", "diff_ids": []} and config["created"] == "0001-01-01T00:00:00Z"
    sig_manifest = client.get_manifest(repo, signature_tag(digest, ".sig")).json
    assert sig_manifest["config"] == manifest["config"] == {
        "mediaType": "application/vnd.oci.image.config.v1+json",
        "size": len(SIGNATURE_CONFIG),
        "digest": sha256_digest(SIGNATURE_CONFIG),
    }


def test_read_attestations_for_policies(client: RegistryClient, image: tuple[str, str], tmp_path: Path) -> None:
    repo, digest = image
    trusted, stranger = new_signer(tmp_path / "a"), new_signer(tmp_path / "b")
    attest_image(client, repo, digest, PTYPE, {"n": 1}, trusted, lock_dir=tmp_path)
    attest_image(client, repo, digest, "https://x.example/other/v1", {"n": 2}, trusted, lock_dir=tmp_path)
    attest_image(client, repo, digest, PTYPE, {"n": 3}, stranger, lock_dir=tmp_path)
    items = read_attestations(client, repo, digest, keys=[public_key(trusted)])
    assert [(i.predicate_type, i.verified) for i in items] == [
        (PTYPE, True),
        ("https://x.example/other/v1", True),
        (PTYPE, False),
    ]
    assert items[0].predicate == {"n": 1} and items[0].signer == trusted.fingerprint
    assert "wrong key" in items[2].reason and items[2].signer == stranger.fingerprint
    only = read_attestations(client, repo, digest, keys=[public_key(trusted)], predicate_type=PTYPE)
    assert len(only) == 2
    assert read_attestations(client, repo, "sha256:" + "0" * 64, keys=[public_key(trusted)]) == []


def test_append_skips_identical_and_keeps_other_signers(
    client: RegistryClient, image: tuple[str, str], tmp_path: Path
) -> None:
    repo, digest = image
    one, two = new_signer(tmp_path / "1"), new_signer(tmp_path / "2")
    first = sign_image(client, repo, digest, one, lock_dir=tmp_path)
    again = sign_image(client, repo, digest, one, lock_dir=tmp_path)
    assert first.appended and not again.appended and again.layers == 1
    other = sign_image(client, repo, digest, two, lock_dir=tmp_path)
    assert other.appended and other.layers == 2
    a1 = attest_image(client, repo, digest, PTYPE, {"x": 1}, one, lock_dir=tmp_path)
    a2 = attest_image(client, repo, digest, PTYPE, {"x": 1}, one, lock_dir=tmp_path)
    assert a1.appended and not a2.appended
    report = verify_image(client, repo, digest, keys=[public_key(one)])
    assert report.ok
    sigs = [i for i in report.items if i.kind == "signature"]
    assert [i.ok for i in sigs] == [True, False] and "wrong key" in sigs[1].reason
    both = verify_image(client, repo, digest, keys=[public_key(one), public_key(two)])
    assert [i.signer for i in both.items if i.kind == "signature"] == [one.fingerprint, two.fingerprint]


def test_concurrent_signers_never_drop_layers(client: RegistryClient, image: tuple[str, str], tmp_path: Path) -> None:
    repo, digest = image
    signers = [new_signer(tmp_path / str(n)) for n in range(4)]
    errors: list[BaseException] = []

    def run(s: KeyPairSigner) -> None:
        try:
            sign_image(client, repo, digest, s, lock_dir=tmp_path / "locks")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in signers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    report = verify_image(client, repo, digest, keys=[public_key(s) for s in signers])
    assert sorted(i.signer or "" for i in report.items) == sorted(s.fingerprint for s in signers)
    assert all(i.ok for i in report.items)


def test_sign_and_attest_build(client: RegistryClient, image: tuple[str, str], tmp_path: Path) -> None:
    repo, digest = image
    signer = new_signer(tmp_path)
    s, a = sign_and_attest_build(client, repo, digest, signer, {"buildDefinition": {}}, lock_dir=tmp_path)
    assert s.appended and a.appended and a.predicate_type == PTYPE
    assert verify_image(client, repo, digest, keys=[public_key(signer)], predicate_types=[PTYPE]).ok


def test_verify_unsigned_and_unknown_digest(client: RegistryClient, image: tuple[str, str], tmp_path: Path) -> None:
    repo, digest = image
    pk = public_key(new_signer(tmp_path))
    report = verify_image(client, repo, digest, keys=[pk])
    assert not report.ok and "no signatures found" in report.problems[0]
    missing = verify_image(client, repo, "sha256:" + "1" * 64, keys=[pk])
    assert not missing.ok and "no longer resolves" in missing.problems[0]
    from builder.errors import VerificationError

    with pytest.raises(VerificationError) as info:
        report.raise_for_failure()
    assert info.value.exit_code == 18


# ---------------------------------------------------------------------------------------------
# the command line


@dataclasses.dataclass(frozen=True)
class SignCli:
    """``builder ARGS`` in-process (the ``cli`` fixture) in ``cwd`` against ``registry``, state in
    ``cwd/state``; key passwords only from ``env`` (never from the test's environment or an earlier
    call). Returns the ``CliResult`` whatever the exit code."""

    cli: Cli
    monkeypatch: pytest.MonkeyPatch

    def __call__(self, args: list[str], cwd: Path, registry: str, **env: str) -> CliResult:
        for name in ("COSIGN_PASSWORD", "BUILDER_KEY_PASSWORD", "BUILDER_OIDC_TOKEN"):
            if name not in env:
                self.monkeypatch.delenv(name, raising=False)
        base = {"BUILDER_REGISTRY": registry, "BUILDER_STATE_DIR": str(cwd / "state")}
        return self.cli(*args, code=None, env={**base, **env}, cwd=cwd)


@pytest.fixture
def run_cli(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> SignCli:
    return SignCli(cli, monkeypatch)


def test_cli_keys_sign_attest_verify(
    run_cli: SignCli, client: RegistryClient, image: tuple[str, str], tmp_path: Path
) -> None:
    repo, digest = image
    reg = client.registry
    pw = {"BUILDER_KEY_PASSWORD": "cli-pw"}
    gen = run_cli(["keys", "generate", "--output-dir", "k", "--json"], tmp_path, reg, **pw)
    assert gen.code == 0, gen.stderr
    fp = json.loads(gen.stdout)["fingerprint"]
    assert run_cli(["keys", "generate", "--output-dir", "k"], tmp_path, reg, **pw).code == 16
    nopw = run_cli(["keys", "generate", "--output-dir", "k2"], tmp_path, reg)
    assert nopw.code == 16 and "BUILDER_KEY_PASSWORD" in nopw.stderr
    (tmp_path / "pred.json").write_text(json.dumps({"timestamp": "2026-11-30T18:00:00Z"}))
    signed = run_cli(["sign", f"{reg}/{repo}:v1", "--key", "k/builder.key", "--json"], tmp_path, reg, **pw)
    assert signed.code == 0, signed.stderr
    assert json.loads(signed.stdout)["digest"] == digest
    att = run_cli(
        ["attest", f"{repo}:v1", "--key", "k/builder.key", "--predicate-type", PTYPE, "--predicate", "pred.json"],
        tmp_path,
        reg,
        **pw,
    )
    assert att.code == 0, att.stderr
    ok = run_cli(["verify", f"{repo}:v1", "--key", "k/builder.pub", "--attestation", PTYPE], tmp_path, reg)
    assert ok.code == 0, ok.stderr
    assert "VERIFIED" in ok.stderr and short_fingerprint(fp) in ok.stderr and "2026-11-30T18:00:00Z" in ok.stderr
    js = run_cli(["verify", f"{repo}@{digest}", "--key", "k/builder.pub", "--json"], tmp_path, reg)
    doc = json.loads(js.stdout)
    assert doc["ok"] and doc["digest"] == digest and {i["kind"] for i in doc["items"]} == {"signature", "attestation"}
    # a key that did not sign: exit 18, one JSON document with every item and why
    run_cli(["keys", "generate", "--output-dir", "other", "--no-password"], tmp_path, reg)
    bad = run_cli(["verify", f"{repo}:v1", "--key", "other/builder.pub", "--json"], tmp_path, reg)
    assert bad.code == 18
    err = json.loads(bad.stdout)["error"]
    assert err["kind"] == "verification-failed" and "wrong key" in err["details"]["items"][0]["reason"]
    human = run_cli(["verify", f"{repo}:v1", "--key", "other/builder.pub"], tmp_path, reg)
    assert human.code == 18 and "NOT VERIFIED" in human.stderr and "wrong key" in human.stderr


def test_cli_wrong_input_as_a_new_user_types_it(
    run_cli: SignCli, client: RegistryClient, image: tuple[str, str], tmp_path: Path
) -> None:
    """What a new user gets wrong, each a documented exit code with the file or value named and
    what to do, never a traceback: the wrong half of the key pair, a wrong password, a short
    digest, a cosign --type short name or a whole statement as the predicate, an unsigned image."""
    repo, digest = image
    reg = client.registry
    pw = {"BUILDER_KEY_PASSWORD": "right"}
    assert run_cli(["keys", "generate", "--output-dir", "k"], tmp_path, reg, **pw).code == 0
    (tmp_path / "pred.json").write_text("{}")
    (tmp_path / "stmt.json").write_text(json.dumps({"_type": "https://in-toto.io/Statement/v1", "predicate": {}}))
    ref = f"{repo}@{digest}"
    cases = [
        (["sign", ref, "--key", "k/builder.pub"], pw, 16, "is a public key; signing needs the private key"),
        (["sign", ref, "--key", "k/builder.key"], {"BUILDER_KEY_PASSWORD": "wrong"}, 16, "the one the key was"),
        (["sign", ref, "--key", "k/nope.key"], pw, 16, "k/nope.key does not exist"),
        (["sign", ref, "--keyless", "--key", "k/builder.key"], pw, 2, "--keyless and --key exclude each other"),
        (["verify", ref, "--key", "k/builder.key"], {}, 16, "is a private key, not a public key"),
        (["verify", f"{repo}@{digest[:19]}", "--key", "k/builder.pub"], {}, 2, "copy the whole digest"),
        (["verify", repo, "--key", "k/builder.pub"], {}, 2, "neither a tag nor a digest"),
        (["verify", ref, "--key", "k/builder.pub"], {}, 18, "no .sig tag, no Sigstore bundle referrer"),
        (
            ["attest", ref, "--key", "k/builder.key", "--predicate-type", "slsaprovenance", "--predicate", "pred.json"],
            pw,
            2,
            "is not a URI",
        ),
        (
            ["attest", ref, "--key", "k/builder.key", "--predicate-type", PTYPE, "--predicate", "stmt.json"],
            pw,
            2,
            "whole in-toto statement",
        ),
    ]
    for args, env, code, words in cases:
        r = run_cli(args, tmp_path, reg, **env)
        assert (r.code, "Traceback" in r.stderr) == (code, False), (args, r.stderr)
        assert words in " ".join(r.stderr.split()) and "hint:" in r.stderr, (args, r.stderr)
        js = run_cli(["--json", *args], tmp_path, reg, **env)
        assert json.loads(js.stdout)["error"]["exit_code"] == code
    assert not [t for t in client.list_tags(repo) if t.startswith("sha256-")]  # nothing was written


def test_cli_signers_in_parallel_processes_keep_every_layer(
    run_cli: SignCli, client: RegistryClient, image: tuple[str, str], tmp_path: Path
) -> None:
    """Three `builder sign` processes with three keys at once: the file lock serializes the
    read-modify-write, so the .sig ends with three layers (no lost update)."""
    repo, digest = image
    reg = client.registry
    for n in range(3):
        assert run_cli(["keys", "generate", "--output-dir", f"k{n}", "--no-password"], tmp_path, reg).code == 0
    env = {**os.environ, "BUILDER_REGISTRY": reg, "BUILDER_STATE_DIR": str(tmp_path / "state")}
    env.pop("BUILDER_KEY_PASSWORD", None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "builder", "sign", f"{repo}@{digest}", "--key", f"k{n}/builder.key"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(3)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    pubs = load_public_keys([tmp_path / f"k{n}" / "builder.pub" for n in range(3)])
    report = verify_image(client, repo, digest, keys=pubs)
    assert len(report.items) == 3 and all(i.ok for i in report.items)
    assert sorted(i.signer or "" for i in report.items) == sorted(k.fingerprint for k in pubs)


def test_cli_signs_with_a_cosign_key_file_directly(
    run_cli: SignCli, client: RegistryClient, image: tuple[str, str], tmp_path: Path
) -> None:
    repo, digest = image
    data = ROOT / "tests" / "data" / "signing"
    out = run_cli(
        ["sign", f"{repo}@{digest}", "--key", str(data / "cosign.key"), "--json"],
        tmp_path,
        client.registry,
        COSIGN_PASSWORD="test-password",
    )
    assert out.code == 0, out.stderr
    pubs = load_public_keys([data / "cosign.pub"])
    assert json.loads(out.stdout)["signer"] == pubs[0].fingerprint
    assert verify_image(client, repo, digest, keys=pubs).ok
    wrong = run_cli(
        ["sign", f"{repo}@{digest}", "--key", str(data / "cosign.key")], tmp_path, client.registry, COSIGN_PASSWORD="x"
    )
    assert wrong.code == 16 and "wrong password" in wrong.stderr


class _RacingClient(RegistryClient):
    """A real client; right after our first manifest PUT of a .sig tag, a writer on "another
    machine" (not holding our lock) replaces that manifest with its own one-layer version."""

    def __init__(self, registry: str, foreign: bytes) -> None:
        super().__init__(registry, insecure=True)
        self.foreign = foreign
        self.raced = 0

    def put_manifest(self, repository: str, reference: str, raw: bytes, media_type: str) -> str:
        digest = super().put_manifest(repository, reference, raw, media_type)
        if reference.endswith(".sig") and not self.raced:
            self.raced += 1
            super().put_manifest(repository, reference, self.foreign, media_type)
        return digest


def test_write_lost_to_another_machine_is_merged_again(
    client: RegistryClient, image: tuple[str, str], tmp_path: Path
) -> None:
    repo, digest = image
    theirs, ours = new_signer(tmp_path / "t"), new_signer(tmp_path / "o")
    sign_image(client, repo, digest, theirs, lock_dir=tmp_path / "machine-b")
    foreign = client.get_manifest(repo, signature_tag(digest, ".sig")).raw
    racing = _RacingClient(client.registry, foreign)
    result = sign_image(racing, repo, digest, ours, lock_dir=tmp_path / "machine-a")
    assert racing.raced == 1 and result.appended and result.layers == 2
    report = verify_image(client, repo, digest, keys=[public_key(theirs), public_key(ours)])
    assert [i.signer for i in report.items] == [theirs.fingerprint, ours.fingerprint]


def test_cli_verify_output_tells_signers_apart(
    run_cli: SignCli, client: RegistryClient, image: tuple[str, str], tmp_path: Path
) -> None:
    """Two keys both named builder.pub (release + check runner), two strangers' keys on the same digest
    (a shared registry), a signed device check that failed: what `builder verify` shows."""
    repo, digest = image
    reg = client.registry
    ref = f"{reg}/{repo}:v1"
    dirs = [".builder/keys", ".builder/keys/check-runner", "stranger1", "stranger2", "wrong"]
    fps = {}
    for d in dirs:
        gen = run_cli(["keys", "generate", "--output-dir", d, "--no-password", "--json"], tmp_path, reg)
        assert gen.code == 0, gen.stderr
        fps[d] = json.loads(gen.stdout)["fingerprint"]
    (tmp_path / "prov.json").write_text(
        json.dumps({"runDetails": {"metadata": {"finishedOn": "2026-11-30T17:00:00Z"}}})
    )
    (tmp_path / "check.json").write_text(json.dumps({"result": "failed", "timestamp": "2026-11-30T17:05:00Z"}))
    device = "https://builder-project.github.io/attestations/device-check/v1"
    writes = [["sign", ref, "--key", ".builder/keys/builder.key"]]
    writes.append(
        ["attest", ref, "--key", ".builder/keys/builder.key", "--predicate-type", PTYPE, "--predicate", "prov.json"]
    )
    runner = ".builder/keys/check-runner/builder.key"
    writes.append(["attest", ref, "--key", runner, "--predicate-type", device, "--predicate", "check.json"])
    for d in ("stranger1", "stranger2"):
        writes.append(["sign", ref, "--key", f"{d}/builder.key"])
        writes.append(
            ["attest", ref, "--key", f"{d}/builder.key", "--predicate-type", PTYPE, "--predicate", "prov.json"]
        )
    for w in writes:
        assert run_cli(w, tmp_path, reg).code == 0
    both = ["--key", ".builder/keys/builder.pub", "--key", ".builder/keys/check-runner/builder.pub"]
    ok = run_cli(["verify", ref, *both, "--attestation", PTYPE, "--attestation", device], tmp_path, reg)
    out = ok.stderr
    assert ok.code == 0, out
    assert "FAIL " not in out and "INVALID" not in out and out.count("untrusted") == 4
    assert f".builder/keys/builder.pub ({short_fingerprint(fps['.builder/keys'])})" in out
    assert f".builder/keys/check-runner/builder.pub ({short_fingerprint(fps['.builder/keys/check-runner'])})" in out
    assert "device-check: FAILED" in out and "device-check FAILED (.builder/keys/check-runner/builder.pub)" in out
    assert f"VERIFIED {reg}/{repo}@{digest}: signature by .builder/keys/builder.pub" in out
    s1, s2 = short_fingerprint(fps["stranger1"]), short_fingerprint(fps["stranger2"])
    assert f"also present: 4 item(s) by keys you did not pass (claimed: {s1}, {s2})" in out
    # one key: the check runner's items are by a key not given; still verified (a signature and provenance)
    one = run_cli(["verify", ref, "--key", ".builder/keys/builder.pub", "--attestation", PTYPE], tmp_path, reg)
    assert one.code == 0 and "5 item(s) by keys you did not pass" in one.stderr, one.stderr
    assert short_fingerprint(fps[".builder/keys/check-runner"]) in one.stderr
    # requiring the device check with only the release key: exit 18, it names who did sign it
    need = run_cli(["verify", ref, "--key", ".builder/keys/builder.pub", "--attestation", device], tmp_path, reg)
    assert need.code == 18 and f"no valid attestation of type {device}" in need.stderr
    assert f"{device} (by a signer not given)" in need.stderr
    # a wrong key: exit 18, "wrong key given?", and the fingerprints that did sign (not "do not use this digest")
    wrong = run_cli(["verify", ref, "--key", "wrong/builder.pub"], tmp_path, reg)
    assert wrong.code == 18 and "wrong key given?" in wrong.stderr, wrong.stderr
    assert f"you passed: wrong/builder.pub ({short_fingerprint(fps['wrong'])})" in wrong.stderr
    assert (
        all(short_fingerprint(fps[d]) in wrong.stderr for d in dirs[:4])
        and "do not use this digest" not in wrong.stderr
    )
    js = run_cli(["verify", ref, "--key", "wrong/builder.pub", "--json"], tmp_path, reg)
    err = json.loads(js.stdout)["error"]
    assert err["details"]["diagnosis"] == "wrong-key"
    assert {i["classification"] for i in err["details"]["items"]} == {"untrusted"}
    assert set(err["details"]["other_signers"]) == {fps[d] for d in dirs[:4]}
    full = json.loads(run_cli(["verify", ref, *both, "--json"], tmp_path, reg).stdout)
    assert [i["classification"] for i in full["items"]].count("ok") == 3
    assert all({"kind", "ok", "reason", "signer", "statement", "classification"} <= set(i) for i in full["items"])


def test_a_signature_payload_derived_from_its_digest_is_not_read(
    client: RegistryClient, image: tuple[str, str], tmp_path: Path
) -> None:
    """A plain simple-signing payload is determined by the identity and the digest: verifying it
    sends no blob GET (the derived bytes hash to the layer's digest); a payload with annotations
    cannot be derived and is read from the registry, and both verify."""
    repo, digest = image
    signer = new_signer(tmp_path / "k")
    sign_image(client, repo, digest, signer, lock_dir=tmp_path / "locks")
    keys = [public_key(signer)]
    fresh = RegistryClient(client.registry, insecure=True)
    report = verify_image(fresh, repo, digest, keys=keys)
    assert report.ok and [i.kind for i in report.items] == ["signature"]
    first = fresh.requests_sent  # manifests, the digest's confirmation, referrers: no blob
    assert fresh.content.size == 0, "a blob was read"

    sign_image(client, repo, digest, signer, lock_dir=tmp_path / "locks", annotations={"team": "infra"})
    fresh = RegistryClient(client.registry, insecure=True)
    report = verify_image(fresh, repo, digest, keys=keys)
    assert report.ok and [i.ok for i in report.items] == [True, True]
    assert fresh.requests_sent == first + 1  # + the annotated payload's blob
    assert fresh.content.size > 0


def test_a_shared_config_the_registry_lost_is_sent_again(
    client: RegistryClient, image: tuple[str, str], tmp_path: Path
) -> None:
    """Every .sig/.att manifest names one config blob, uploaded once per client and repository.
    When the registry no longer has it in the repository (here deleted; in practice its link being
    rewritten by a concurrent upload), the manifest PUT's BLOB_UNKNOWN makes the writer send the
    blobs again and retry: the signature is written."""
    repo, digest = image
    signer = new_signer(tmp_path / "k")
    writer = RegistryClient(client.registry, insecure=True)
    sign_image(writer, repo, digest, signer, lock_dir=tmp_path / "locks")
    config = sha256_digest(SIGNATURE_CONFIG)
    client.request("DELETE", f"/v2/{repo}/blobs/{config}", ok=(202,))
    assert not client.blob_exists(repo, config)
    other = push_tiny_image(client, repo, "v2", b"another image\n")
    sent = writer.requests_sent
    w = sign_image(writer, repo, other, signer, lock_dir=tmp_path / "locks")
    # the image manifest (an index?), .sig GET (absent), payload POST + PUT, the refused PUT, both
    # blobs again (4), PUT, re-read
    assert writer.requests_sent - sent == 11
    assert w.appended and client.blob_exists(repo, config)
    assert verify_image(client, repo, other, keys=[public_key(signer)]).ok
