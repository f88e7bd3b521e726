"""Real cosign 2.x as the independent judge, in both directions (offline, key pairs).

- cosign verifies what this project writes: `cosign verify --key k.pub --insecure-ignore-tlog` and
  `cosign verify-attestation --key k.pub --insecure-ignore-tlog --type URI`.
- this project verifies what cosign wrote: `cosign sign --key ... --tlog-upload=false` and
  `cosign attest --key ... --tlog-upload=false --type ... --predicate ...` (in-toto Statement v0.1).
- keys move both ways: a cosign.key imported and used here; a key this project writes in
  cosign's encrypted format used by cosign.

cosign talks plain HTTP to 127.0.0.1 registries by itself (no --allow-insecure-registry needed).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient
from builder.signing.attest import attest_image
from builder.signing.cosign_key import cosign_key_pem
from builder.signing.keys import load_public_keys
from builder.signing.sign import sign_image
from builder.signing.verify import verify_image
from tests.integration.test_sign import SignCli, new_signer, public_key, push_tiny_image

if TYPE_CHECKING:
    from tests.conftest import Cli

DATA = Path(__file__).resolve().parents[1] / "data" / "signing"
COSIGN_PASSWORD = "test-password"  # tests/data/signing/README.md
PTYPE = "https://slsa.dev/provenance/v1"


@pytest.fixture
def run_cli(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> SignCli:
    """``builder ARGS`` in-process (``tests.integration.test_sign.SignCli``)."""
    return SignCli(cli, monkeypatch)


def cosign(cosign_bin: str, *args: str, password: str = COSIGN_PASSWORD) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COSIGN_PASSWORD": password}
    return subprocess.run([cosign_bin, *args], capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def client(registry_address: str) -> RegistryClient:
    return RegistryClient(registry_address, insecure=True)


@pytest.fixture
def image(client: RegistryClient, unique_repo: str) -> tuple[str, str, str]:
    digest = push_tiny_image(client, unique_repo, "v1")
    return unique_repo, digest, f"{client.registry}/{unique_repo}@{digest}"


def test_cosign_verifies_our_signature_and_attestation(
    cosign_bin: str, client: RegistryClient, image: tuple[str, str, str], tmp_path: Path
) -> None:
    repo, digest, ref = image
    signer = new_signer(tmp_path / "k")
    pub = tmp_path / "k" / "builder.pub"
    sign_image(client, repo, digest, signer, lock_dir=tmp_path)
    attest_image(client, repo, digest, PTYPE, {"buildDefinition": {"buildType": "x"}}, signer, lock_dir=tmp_path)
    v = cosign(cosign_bin, "verify", "--key", str(pub), "--insecure-ignore-tlog", ref)
    assert v.returncode == 0, v.stderr
    payloads = json.loads(v.stdout)
    assert payloads[0]["critical"]["image"]["docker-manifest-digest"] == digest
    va = cosign(cosign_bin, "verify-attestation", "--key", str(pub), "--insecure-ignore-tlog", "--type", PTYPE, ref)
    assert va.returncode == 0, va.stderr
    env = json.loads(va.stdout.splitlines()[0])
    statement = json.loads(base64.b64decode(env["payload"]))
    assert statement["_type"] == "https://in-toto.io/Statement/v1" and statement["predicateType"] == PTYPE
    # cosign refuses the wrong type and the wrong key too (it is a real judge)
    wrong_type = cosign(
        cosign_bin, "verify-attestation", "--key", str(pub), "--insecure-ignore-tlog", "--type", "https://x/v9", ref
    )
    assert wrong_type.returncode != 0
    stranger = new_signer(tmp_path / "s")
    assert stranger
    wrong_key = cosign(
        cosign_bin, "verify", "--key", str(tmp_path / "s" / "builder.pub"), "--insecure-ignore-tlog", ref
    )
    assert wrong_key.returncode != 0


def test_we_verify_what_cosign_wrote(
    run_cli: SignCli, cosign_bin: str, client: RegistryClient, image: tuple[str, str, str], tmp_path: Path
) -> None:
    repo, digest, ref = image
    key, pub = DATA / "cosign.key", DATA / "cosign.pub"
    s = cosign(cosign_bin, "sign", "--key", str(key), "--tlog-upload=false", "-y", ref)
    assert s.returncode == 0, s.stderr
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({"builder": {"id": "cosign"}, "metadata": {"buildFinishedOn": "2026-11-30T12:00:00Z"}}))
    a = cosign(
        cosign_bin,
        "attest",
        "--key",
        str(key),
        "--tlog-upload=false",
        "-y",
        "--type",
        PTYPE,
        "--predicate",
        str(pred),
        ref,
    )
    assert a.returncode == 0, a.stderr
    pk = load_public_keys([pub])
    report = verify_image(client, repo, digest, keys=pk, predicate_types=[PTYPE])
    assert report.ok, report.problems
    att = next(i for i in report.items if i.kind == "attestation")
    assert att.statement is not None and att.statement["_type"] == "https://in-toto.io/Statement/v0.1"
    assert att.signer == pk[0].fingerprint and att.time == "2026-11-30T12:00:00Z"
    # the CLI says so too
    cli = run_cli(
        ["verify", f"{repo}@{digest}", "--key", str(pub), "--attestation", PTYPE, "--json"], tmp_path, client.registry
    )
    assert cli.code == 0, cli.stderr
    assert json.loads(cli.stdout)["ok"] is True


def test_layers_of_both_tools_coexist(
    cosign_bin: str, client: RegistryClient, image: tuple[str, str, str], tmp_path: Path
) -> None:
    """We append to what cosign wrote and cosign appends to what we wrote; nobody drops a layer."""
    repo, digest, ref = image
    ours_before = new_signer(tmp_path / "a")
    sign_image(client, repo, digest, ours_before, lock_dir=tmp_path)
    assert (
        cosign(cosign_bin, "sign", "--key", str(DATA / "cosign.key"), "--tlog-upload=false", "-y", ref).returncode == 0
    )
    ours_after = new_signer(tmp_path / "b")
    sign_image(client, repo, digest, ours_after, lock_dir=tmp_path)
    for pub in (tmp_path / "a" / "builder.pub", DATA / "cosign.pub", tmp_path / "b" / "builder.pub"):
        v = cosign(cosign_bin, "verify", "--key", str(pub), "--insecure-ignore-tlog", ref)
        assert v.returncode == 0, (pub, v.stderr)
    everyone = [public_key(ours_before), *load_public_keys([DATA / "cosign.pub"]), public_key(ours_after)]
    report = verify_image(client, repo, digest, keys=everyone)
    assert [i.ok for i in report.items] == [True, True, True]
    assert [i.signer for i in report.items] == [k.fingerprint for k in everyone]


def test_imported_cosign_key_signs_for_cosign(
    run_cli: SignCli, cosign_bin: str, client: RegistryClient, image: tuple[str, str, str], tmp_path: Path
) -> None:
    repo, digest, ref = image
    env = {"COSIGN_PASSWORD": COSIGN_PASSWORD, "BUILDER_KEY_PASSWORD": "imported-pw"}
    imp = run_cli(
        ["keys", "import", str(DATA / "cosign.key"), "--output-dir", "k", "--json"], tmp_path, client.registry, **env
    )
    assert imp.code == 0, imp.stderr
    assert json.loads(imp.stdout)["fingerprint"] == load_public_keys([DATA / "cosign.pub"])[0].fingerprint
    signed = run_cli(["sign", f"{repo}@{digest}", "--key", "k/builder.key"], tmp_path, client.registry, **env)
    assert signed.code == 0, signed.stderr
    v = cosign(cosign_bin, "verify", "--key", str(DATA / "cosign.pub"), "--insecure-ignore-tlog", ref)
    assert v.returncode == 0, v.stderr


def test_cosign_uses_a_key_we_wrote_in_its_format(
    cosign_bin: str, client: RegistryClient, image: tuple[str, str, str], tmp_path: Path
) -> None:
    repo, digest, ref = image
    signer = new_signer(tmp_path / "k")
    cosign_key = tmp_path / "as-cosign.key"
    cosign_key.write_bytes(cosign_key_pem(signer.private_key, "their-pw"))
    s = cosign(cosign_bin, "sign", "--key", str(cosign_key), "--tlog-upload=false", "-y", ref, password="their-pw")
    assert s.returncode == 0, s.stderr
    assert verify_image(client, repo, digest, keys=[public_key(signer)]).ok
