"""Sign before publish (#20 item 5), as the attack: `builder build --sign` whose first signature
write fails (the registry answers 500 to every `.sig` PUT, as a run killed at that write leaves it:
the content tag on an image with no signature). The build must not report success, and the
re-run must finish the signing it finds missing (status `signed`) instead of `up-to-date`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient
from tests.faultproxy import Fault, FaultProxy
from tests.integration import test_build_cli
from tests.sigstore_instance import SigstoreTestInstance, TrustFiles, write_trust_files

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration.test_build_cli import BuilderCli

pytestmark = pytest.mark.integration

project = test_build_cli.project  # the shared fixtures of the build CLI tests
builder = test_build_cli.builder
B = test_build_cli.B
ROOT = Path(__file__).resolve().parents[2]
PATIENCE = 300.0  # seconds: a guard against hanging the suite, not a timing assertion


def test_an_interrupted_signature_write_is_finished_by_the_rerun(
    builder: BuilderCli, docker_engine: str, registry_address: str, unique_repo: str, project: Path
) -> None:
    env = {"BUILDER_KEY_PASSWORD": "pw-for-test"}
    keys = builder(project, "keys", "generate", "--json", env=env)
    assert keys.code == 0, keys.stderr
    pub = json.loads(keys.stdout)["public_key"]
    with FaultProxy(registry_address) as proxy:
        proxy.add(Fault("status", 500, method="PUT", path=r"/manifests/sha256-[0-9a-f]{64}\.sig$"))
        first = builder(
            project, "build", "--json", "--select", "tiny2*", "--sign", env={**env, "BUILDER_REGISTRY": proxy.address}
        )
        assert proxy.injected() >= 1  # the signature write really was refused
    assert first.code != 0, first.stdout[-2000:]  # never a success with the image unsigned
    client = RegistryClient(registry_address, insecure=True)
    content_tags = [t for t in client.list_tags(unique_repo) if t.startswith(B + "-") and len(t) == len(B) + 13]
    assert content_tags, "the push happened: the content tag names the unsigned image"
    digest = client.resolve(unique_repo, content_tags[0])
    ref = f"{registry_address}/{unique_repo}@{digest}"
    assert builder(project, "verify", ref, "--key", pub).code == 18  # unsigned

    again = builder(project, "build", "--json", "--select", "tiny2*", "--sign", env=env)
    assert again.code == 0, again.stderr[-3000:]
    assert {i["variant"]: i["status"] for i in json.loads(again.stdout)["images"]} == {B: "signed"}
    assert builder(project, "verify", ref, "--key", pub, "--attestation", "https://slsa.dev/provenance/v1").code == 0


def test_a_build_killed_at_its_first_signature_write_is_signed_by_the_rerun(
    builder: BuilderCli, docker_engine: str, registry_address: str, unique_repo: str, project: Path
) -> None:
    """The issue's attack itself: `builder build --sign` as a real process, SIGKILLed while its
    first `.sig` write is in flight (the proxy holds that PUT, so the test knows the moment; the
    write never reaches the registry). What the design promises (docs/build.md, "Sign before
    publish"): the content tag may then name an image with no signature, never reported as done,
    and the re-run signs it (status `signed`, not `up-to-date`) before anything else uses it."""
    env = {"BUILDER_KEY_PASSWORD": "pw-for-test"}
    keys = builder(project, "keys", "generate", "--json", env=env)
    assert keys.code == 0, keys.stderr
    pub = json.loads(keys.stdout)["public_key"]
    with FaultProxy(registry_address) as proxy:
        hold = proxy.add(Fault("hold", method="PUT", path=r"/manifests/sha256-[0-9a-f]{64}\.sig$", count=1))
        proc = subprocess.Popen(
            [sys.executable, "-m", "builder", "-C", str(project), "build", "--select", "tiny2*", "--sign"],
            cwd=project,
            env={**os.environ, **env, "PYTHONPATH": str(ROOT), "BUILDER_REGISTRY": proxy.address},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            while not hold.held.wait(0.5):  # the build, its push, then the first signature write
                if proc.poll() is not None:
                    _, err = proc.communicate()
                    pytest.fail(f"builder exited {proc.returncode} before its signature write:\n{err[-3000:]}")
            os.killpg(proc.pid, signal.SIGKILL)  # mid-write: the PUT is in flight at the proxy
            proc.communicate(timeout=PATIENCE)
        finally:
            hold.release.set()
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    client = RegistryClient(registry_address, insecure=True)
    content_tags = [t for t in client.list_tags(unique_repo) if t.startswith(B + "-") and len(t) == len(B) + 13]
    assert content_tags, "killed after the push: the content tag names the image"
    digest = client.resolve(unique_repo, content_tags[0])
    assert client.try_resolve(unique_repo, f"sha256-{digest[7:]}.sig") is None  # the write never landed
    ref = f"{registry_address}/{unique_repo}@{digest}"
    assert builder(project, "verify", ref, "--key", pub).code == 18  # unsigned, as the kill left it

    again = builder(project, "build", "--json", "--select", "tiny2*", "--sign", env=env)  # stale locks: none wait
    assert again.code == 0, again.stderr[-3000:]
    assert {i["variant"]: i["status"] for i in json.loads(again.stdout)["images"]} == {B: "signed"}
    assert builder(project, "verify", ref, "--key", pub, "--attestation", "https://slsa.dev/provenance/v1").code == 0
    settled = builder(project, "build", "--json", "--select", "tiny2*", "--sign", env=env)
    assert {i["variant"]: i["status"] for i in json.loads(settled.stdout)["images"]} == {B: "up-to-date"}


def test_an_image_pushed_under_a_content_tag_is_signed_only_when_this_checkout_pushed_it(
    builder: BuilderCli, docker_engine: str, registry_address: str, unique_repo: str, project: Path
) -> None:
    """The attack: someone who may push to the repository but holds no key points a content tag at
    their own image (a registry keeps no tag write-once). `build --sign` must not give it the build
    key's signature: exit 15 (tag-conflict), nothing written. The same for a real unsigned build
    that another checkout (another machine, a fresh CI runner) pushed: not provably ours, so the
    hint says to sign it explicitly, after which the build is up to date."""
    from tests.integration.test_promote_support import push_image

    env = {"BUILDER_KEY_PASSWORD": "pw-for-test"}
    keys = builder(project, "keys", "generate", "--json", env=env)
    assert keys.code == 0, keys.stderr
    unsigned = builder(project, "build", "--json", "--select", "tiny2*", "--no-sign", env=env)
    assert unsigned.code == 0, unsigned.stderr[-3000:]
    [image] = json.loads(unsigned.stdout)["images"]
    tag, ours = image["content_tag"], image["digest"]
    client = RegistryClient(registry_address, insecure=True)
    original = client.get_manifest(unique_repo, ours)

    # another variant's build, unsigned, that this checkout pushed itself, moved under the tag: its
    # push record names its own content tag, so it is not this variant's build
    other = builder(project, "build", "--json", "--select", "tiny-*", "--no-sign", env=env)
    assert other.code == 0, other.stderr[-3000:]
    [built_a] = json.loads(other.stdout)["images"]
    moved = client.get_manifest(unique_repo, built_a["digest"])
    client.put_manifest(unique_repo, tag, moved.raw, moved.media_type)
    swapped = builder(project, "build", "--json", "--select", "tiny2*", "--sign", env=env)
    assert swapped.code == 15 and built_a["digest"] in swapped.stdout, swapped.stderr[-3000:]
    assert client.try_resolve(unique_repo, f"sha256-{built_a['digest'][7:]}.sig") is None

    evil = push_image(client, unique_repo, tag, content=b"backdoor")  # the content tag, overwritten
    attacked = builder(project, "build", "--json", "--select", "tiny2*", "--sign", env=env)
    assert attacked.code == 15, attacked.stderr[-3000:]
    error = json.loads(attacked.stdout)["error"]
    said = " ".join(error["message"].split())
    assert evil in said and "did not push" in said and "builder signs only images it built" in said, said
    assert client.try_resolve(unique_repo, f"sha256-{evil[7:]}.sig") is None  # nothing signed
    assert client.try_resolve(unique_repo, f"sha256-{evil[7:]}.att") is None

    # the real build back under its tag, but this checkout's record of the push gone (another runner)
    client.put_manifest(unique_repo, tag, original.raw, original.media_type)
    shutil.rmtree(project / "state" / "pushed")
    elsewhere = builder(project, "build", "--json", "--select", "tiny2*", "--sign", env=env)
    assert elsewhere.code == 15, elsewhere.stderr[-3000:]
    told = " ".join(json.loads(elsewhere.stdout)["error"]["message"].split())
    ref = f"{registry_address}/{unique_repo}@{ours}"
    assert f"builder sign {ref}" in told, told
    assert builder(project, "sign", ref, env=env).code == 0  # the user's own word
    completed = builder(project, "build", "--json", "--select", "tiny2*", "--sign", env=env)  # + provenance
    assert {i["variant"]: i["status"] for i in json.loads(completed.stdout)["images"]} == {B: "signed"}
    settled = builder(project, "build", "--json", "--select", "tiny2*", "--sign", env=env)
    assert {i["variant"]: i["status"] for i in json.loads(settled.stdout)["images"]} == {B: "up-to-date"}


def test_sign_and_attest_of_a_variant_id_vouch_only_for_what_this_checkout_built(
    builder: BuilderCli, docker_engine: str, registry_address: str, unique_repo: str, project: Path, tmp_path: Path
) -> None:
    """`builder sign VARIANT` (and `attest`, `sbom --key`) signs the digest the variant's moving tag
    names. Anyone who can push
    can move that tag: a digest this checkout did not build as the variant is exit 15 with nothing
    written, and the message gives the command that signs it by digest (the user's own word)."""
    from tests.integration.test_promote_support import push_image

    env = {"BUILDER_KEY_PASSWORD": "pw-for-test"}
    keys = builder(project, "keys", "generate", "--json", env=env)
    assert keys.code == 0, keys.stderr
    key = json.loads(keys.stdout)["private_key"]
    built = builder(project, "build", "--json", "--select", "tiny2*", "--no-sign", env=env)
    assert built.code == 0, built.stderr[-3000:]
    ours = json.loads(built.stdout)["images"][0]["digest"]
    client = RegistryClient(registry_address, insecure=True)
    evil = push_image(client, unique_repo, B, content=b"moved variant tag")  # the moving tag, moved
    predicate = tmp_path / "note.json"
    predicate.write_text('{"note": "a release note"}')
    attest = ("attest", B, "--predicate-type", "https://example.com/note/v1", "--predicate", str(predicate))
    for args in (("sign", B), attest, ("sbom", B, "--key", key)):
        refused = builder(project, *args, "--json", env=env)
        assert refused.code == 15, refused.stderr[-3000:]
        error = json.loads(refused.stdout)["error"]
        assert evil in error["message"] and f"builder sign {registry_address}/{unique_repo}@{evil}" in error["hint"]
    assert client.try_resolve(unique_repo, f"sha256-{evil[7:]}.sig") is None
    assert client.try_resolve(unique_repo, f"sha256-{evil[7:]}.att") is None
    original = client.get_manifest(unique_repo, ours)
    client.put_manifest(unique_repo, B, original.raw, original.media_type)  # the tag back on our build
    signed = builder(project, "sign", B, "--json", env=env)
    assert signed.code == 0, signed.stderr[-3000:]
    assert client.try_resolve(unique_repo, f"sha256-{ours[7:]}.sig") is not None


@pytest.fixture(scope="module")
def sigstore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SigstoreTestInstance, TrustFiles]]:
    """The offline Sigstore test instance (real Fulcio v2 / Rekor v1 protocols on loopback), the
    keyless test double for public Sigstore that tests/integration/test_build_keyless.py uses."""
    with SigstoreTestInstance() as inst:
        yield inst, write_trust_files(inst, tmp_path_factory.mktemp("sigstore-trust"))


def _keyless(sigstore: tuple[SigstoreTestInstance, TrustFiles]) -> tuple[str, ...]:
    inst, trust = sigstore
    token = inst.token(job_workflow_ref="builder-org/builder/.github/workflows/images.yml@refs/heads/main")
    return ("build", "--keyless", "--oidc-token", token, "--trust-config", str(trust.trust_config))


@pytest.mark.parametrize(
    ("command", "code"),
    [
        (("build", "--sign"), 15),
        (("build", "--no-sign"), 15),
        (("keyless",), 15),
        (("run", "--to", "dev", "--policy", str(ROOT / "policies" / "default.yaml")), 14),
    ],
    ids=["build-sign", "build-no-sign", "build-keyless", "run"],
)
def test_a_refused_foreign_digest_does_not_move_the_variant_tag(
    builder: BuilderCli,
    docker_engine: str,
    registry_address: str,
    unique_repo: str,
    project: Path,
    sigstore: tuple[SigstoreTestInstance, TrustFiles],
    command: tuple[str, ...],
    code: int,
) -> None:
    """A foreign push under the content tag, then `build --sign` (exit 15), `build --no-sign` or
    `build --keyless` (exit 15: no key to check a signature by, and this checkout did not push it), or
    `run`, which signs (exit 14, its build failed with tag-conflict): the moving variant tag stays on
    the build it named. Before, the plan pointed it at the foreign digest before the signing decision
    refused that digest, so `promote VARIANT --to dev` would carry it on; `--no-sign`/`--keyless`
    moved it with exit 0 ("retagged")."""
    from tests.integration.test_promote_support import push_image

    if command == ("keyless",):
        command = _keyless(sigstore)
    env = {"BUILDER_KEY_PASSWORD": "pw-for-test"}
    assert builder(project, "keys", "generate", "--json", env=env).code == 0
    unsigned = builder(project, "build", "--json", "--select", "tiny2*", "--no-sign", env=env)
    assert unsigned.code == 0, unsigned.stderr[-3000:]
    [image] = json.loads(unsigned.stdout)["images"]
    client = RegistryClient(registry_address, insecure=True)
    assert client.resolve(unique_repo, B) == image["digest"]
    evil = push_image(client, unique_repo, image["content_tag"], content=b"foreign push")
    attacked = builder(project, *command, "--json", "--select", "tiny2*", env=env)
    assert attacked.code == code, attacked.stderr[-3000:]
    assert evil in json.loads(attacked.stdout)["error"]["message"]
    assert client.resolve(unique_repo, B) == image["digest"]  # the variant tag: not moved to the refused digest
    assert "retagged" not in attacked.stderr
    assert client.try_resolve(unique_repo, f"sha256-{evil[7:]}.sig") is None
    human = builder(project, *command, "--select", "tiny2*", env=env).stderr  # as a user reads it
    assert evil in human and "[red]" not in human and "[/]" not in human, human[-2000:]  # styled, not printed


def test_a_push_under_the_content_tag_after_the_build_wrote_it_is_neither_signed_nor_tagged(
    builder: BuilderCli,
    docker_engine: str,
    registry_address: str,
    unique_repo: str,
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The race: `build --sign` wrote its content tag (publish_content_tag checked it names the pushed
    digest), then someone who may push replaces the tag before the build signs. Before, the build read
    the tag again and signed, provenance and all, and variant-tagged whatever it named then. Now it
    signs only the digest it pushed, and the replaced content tag is a tag conflict (exit 15): the
    foreign digest gets no signature, no attestation and no variant tag."""
    from builder.build.tags import publish_content_tag as real
    from tests.integration.test_promote_support import push_image

    env = {"BUILDER_KEY_PASSWORD": "pw-for-test"}
    keys = builder(project, "keys", "generate", "--json", env=env)
    assert keys.code == 0, keys.stderr
    pub = json.loads(keys.stdout)["public_key"]
    client = RegistryClient(registry_address, insecure=True)
    pushed: list[str] = []

    def publish_then_overwritten(c: RegistryClient, repository: str, content_tag: str, digest: str) -> bool:
        written = real(c, repository, content_tag, digest)  # the real write-once PUT and its re-read
        pushed.append(digest)
        evil = push_image(client, unique_repo, content_tag, content=b"pushed between the two reads")
        assert client.resolve(unique_repo, content_tag) == evil
        return written

    monkeypatch.setattr("builder.build.variant.publish_content_tag", publish_then_overwritten)
    raced = builder(project, "build", "--json", "--select", "tiny2*", "--sign", env=env)
    assert raced.code == 15, raced.stderr[-3000:]
    [ours] = pushed
    [tag] = [t for t in client.list_tags(unique_repo) if t.startswith(B + "-") and len(t) == len(B) + 13]
    evil = client.resolve(unique_repo, tag)
    assert evil != ours
    assert evil in json.loads(raced.stdout)["error"]["message"]
    assert client.try_resolve(unique_repo, f"sha256-{evil[7:]}.sig") is None  # the foreign digest: unsigned
    assert client.try_resolve(unique_repo, f"sha256-{evil[7:]}.att") is None
    assert client.try_resolve(unique_repo, B) is None  # no variant tag on anything
    ref = f"{registry_address}/{unique_repo}@{ours}"  # the build itself is signed with its provenance
    assert builder(project, "verify", ref, "--key", pub, "--attestation", "https://slsa.dev/provenance/v1").code == 0


def test_keyless_signs_an_unsigned_image_this_checkout_pushed(
    builder: BuilderCli,
    docker_engine: str,
    registry_address: str,
    unique_repo: str,
    project: Path,
    sigstore: tuple[SigstoreTestInstance, TrustFiles],
) -> None:
    """`build --keyless` finds this checkout's own unsigned build up to date (a `--no-sign` run, or a
    run killed before its signature write): it signs it (status `signed`), as `build --sign` does,
    and then leaves the signed image as it is (`up-to-date`)."""
    unsigned = builder(project, "build", "--json", "--select", "tiny2*", "--no-sign")
    assert unsigned.code == 0, unsigned.stderr[-3000:]
    [image] = json.loads(unsigned.stdout)["images"]
    client = RegistryClient(registry_address, insecure=True)
    assert client.try_resolve(unique_repo, f"sha256-{image['digest'][7:]}.sig") is None
    signed = builder(project, *_keyless(sigstore), "--json", "--select", "tiny2*")
    assert signed.code == 0, signed.stderr[-3000:]
    assert {i["variant"]: i["status"] for i in json.loads(signed.stdout)["images"]} == {B: "signed"}
    assert client.try_resolve(unique_repo, f"sha256-{image['digest'][7:]}.sig") is not None
    again = builder(project, *_keyless(sigstore), "--json", "--select", "tiny2*")
    assert {i["variant"]: i["status"] for i in json.loads(again.stdout)["images"]} == {B: "up-to-date"}
