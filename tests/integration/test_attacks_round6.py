"""Integrity under attack (round 6): each test mounts one attack on the real registry
(127.0.0.1:5000, a unique repository per test) or from a hostile registry served by the test, as
someone who can push to the registry (or answers as the registry) but holds none of builder's
build, promoter or approver private keys. Builder must not move a stage pointer, call a digest
trusted (``resolve``, ``status``, ``verify``), write outside where it was asked, or crash.

Kinds: a ``.sig`` copied from another digest; a promotion record copied from another digest or
stage; a stage tag moved back by hand; a registry whose manifest bytes or ``Docker-Content-Digest``
lie; oversized and hostile documents; an approval reused for another digest or stage.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import sys
import threading
from typing import TYPE_CHECKING, Any

import pytest

from builder.errors import LedgerError, PolicyDeniedError, PromotionConflictError, RegistryError, VerificationError
from builder.predicates import DEVICE_CHECK_V1
from builder.promote import Target, apply_promotion, plan_promotion, resolve, status
from builder.registry import OCI_MANIFEST
from builder.signing.approvals import approval_suffix
from builder.signing.layer import ATT_SUFFIX, SIG_SUFFIX, signature_tag
from builder.signing.verify import verify_image
from tests.integration import test_promote
from tests.integration.test_promote import VARIANT, World, failed_rules
from tests.integration.test_promote_support import device_check, push_image

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from builder.signing.keys import PublicKey
    from tests.conftest import Cli

world = test_promote.world  # the shared fixture of the promotion tests

pytestmark = pytest.mark.integration


def _copy_tag(w: World, src_tag: str, dst_tag: str, *, src_repo: str | None = None) -> None:
    """What anyone with push rights can do: PUT the manifest one tag names under another tag
    (blobs are mounted first when the source is another repository)."""
    m = w.client.get_manifest(src_repo or w.repo, src_tag)
    if src_repo is not None and src_repo != w.repo:
        for d in [m.json["config"], *m.json.get("layers", [])]:
            w.client.mount_blob(w.repo, d["digest"], src_repo)
    w.client.put_manifest(w.repo, dst_tag, m.raw, m.media_type)


def _retag(w: World, stage: str, digest: str) -> None:
    m = w.client.get_manifest(w.repo, digest)
    w.client.put_manifest(w.repo, f"{VARIANT}-{stage}", m.raw, m.media_type)


def _build_key(w: World) -> PublicKey:
    from builder.signing.keys import load_public_keys

    [key] = load_public_keys([w.keys.pub("build")])
    return key


def _dev(w: World, content: bytes) -> str:
    d = w.build(content)
    env = w.env()
    apply_promotion(env, plan_promotion(env, w.target, "dev"))
    return d


# -- 1. a .sig copied from another digest ------------------------------------------------------


def test_a_sig_copied_from_another_digest_is_no_signature_of_this_one(world: World, cli: Cli) -> None:
    signed = world.build(b"sig source")  # signed by the build key
    unsigned = push_image(world.client, world.repo, "other", content=b"never signed")
    # the attack: the genuine .sig manifest of `signed` put under `unsigned`'s .sig tag
    _copy_tag(world, signature_tag(signed, SIG_SUFFIX), signature_tag(unsigned, SIG_SUFFIX))
    report = verify_image(world.client, world.repo, unsigned, keys=[_build_key(world)])
    assert not report.ok
    [item] = [i for i in report.items if i.kind == "signature"]
    assert not item.ok and f"signature is for another digest ({signed})" in item.reason
    # the CLI, as a user runs it: exit 18 naming the other digest, no traceback
    ref = f"{world.registry}/{world.repo}@{unsigned}"
    res = cli("verify", ref, "--key", str(world.keys.pub("build")), "--json", code=18)
    assert res.json()["error"]["exit_code"] == 18 and signed in res.stdout
    assert "Traceback" not in res.stderr
    # a promotion gate that needs the build signature does not count it
    env = world.env()
    _copy_tag(world, unsigned, VARIANT)  # the variant tag names it, as a push by hand would
    apply_promotion(env, plan_promotion(env, world.target, "dev"))  # dev takes every build
    world.attest("check-runner", unsigned, DEVICE_CHECK_V1, device_check("none", digest=unsigned))
    plan = plan_promotion(env, world.target, "staging")
    assert "signature" in failed_rules(plan) and "another digest" in failed_rules(plan)["signature"]
    with pytest.raises(PolicyDeniedError):
        apply_promotion(env, plan)
    assert world.client.try_resolve(world.repo, f"{VARIANT}-staging") is None


def test_a_sig_naming_another_repository_follows_cosign(world: World, cosign_bin: str) -> None:
    """The same digest signed in another repository, its .sig copied here: the signed payload names
    the other repository (``docker-reference``) but this very digest. cosign verifies the digest
    only and ignores ``docker-reference`` (specs/SIGNATURE_SPEC.md,
    https://github.com/sigstore/cosign/blob/main/specs/SIGNATURE_SPEC.md); builder does the same,
    so a digest copied between repositories keeps its signature. The signature says who built these
    bytes, never which pointer may name them: that is the promotion record's job (kind 2)."""
    import subprocess

    from builder.signing.sign import sign_image

    other = world.repo + "-elsewhere"
    digest = push_image(world.client, other, "x", content=b"same bytes two repos")
    sign_image(world.client, other, digest, world.keys.signer("build"), lock_dir=world.state / "locks")
    _copy_tag(world, digest, "copied", src_repo=other)
    _copy_tag(world, signature_tag(digest, SIG_SUFFIX), signature_tag(digest, SIG_SUFFIX), src_repo=other)
    report = verify_image(world.client, world.repo, digest, keys=[_build_key(world)])
    ours = report.ok
    ref = f"{world.registry}/{world.repo}@{digest}"
    theirs = subprocess.run(
        [cosign_bin, "verify", "--key", str(world.keys.pub("build")), "--insecure-ignore-tlog", ref],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ours == (theirs.returncode == 0), theirs.stderr
    assert ours
    named = json.loads(theirs.stdout)[0]["critical"]["identity"]["docker-reference"]
    assert named.endswith(other)


# -- 2. a promotion record copied from another digest or stage ---------------------------------


def test_a_promotion_record_copied_onto_another_digest_is_not_trusted(world: World, cli: Cli) -> None:
    promoted = _dev(world, b"record source")
    intruder = push_image(world.client, world.repo, "intruder", content=b"never promoted")
    # the attack: promoted's .att (its genuine promotion/v1 record, signed by the promoter) put
    # under intruder's .att tag, then the stage tag moved onto intruder
    _copy_tag(world, signature_tag(promoted, ATT_SUFFIX), signature_tag(intruder, ATT_SUFFIX))
    _retag(world, "dev", intruder)
    env = world.env()
    with pytest.raises(VerificationError) as err:
        resolve(env, world.target, "dev")
    assert err.value.exit_code == 18 and intruder in err.value.message
    [row] = status(env, [world.target], ["dev"])
    assert row.digest == intruder and row.action is None and row.note
    # the next promotion does not build on it, and the pointer stays where the attacker put it
    world.build(b"record next")
    plan = plan_promotion(env, world.target, "dev")
    assert not plan.trusted and "chain" in failed_rules(plan)
    with pytest.raises((PolicyDeniedError, PromotionConflictError)):
        apply_promotion(env, plan)
    assert world.client.resolve(world.repo, f"{VARIANT}-dev") == intruder


def test_a_record_for_another_stage_does_not_make_this_stage_trusted(world: World) -> None:
    promoted = _dev(world, b"stage record")
    # the attack: the staging tag pointed at a digest whose only record is for dev
    _retag(world, "staging", promoted)
    env = world.env()
    with pytest.raises(VerificationError):
        resolve(env, world.target, "staging")
    [row] = status(env, [world.target], ["staging"])
    assert row.digest == promoted and row.action is None and row.note
    assert resolve(env, world.target, "dev").endswith("@" + promoted)  # dev itself stays trusted


def test_a_record_for_another_repositorys_pointer_does_not_make_this_pointer_trusted(world: World) -> None:
    """The same digest (same bytes) pushed into a second repository with its .att copied along:
    the genuine record names the first repository's pointer, so the second's is not explained."""
    promoted = _dev(world, b"repository record")
    other = world.repo + "-mirror"
    for tag in (promoted, signature_tag(promoted, SIG_SUFFIX), signature_tag(promoted, ATT_SUFFIX)):
        m = world.client.get_manifest(world.repo, tag)
        for d in [m.json["config"], *m.json.get("layers", [])]:
            world.client.mount_blob(other, d["digest"], world.repo)
        world.client.put_manifest(other, tag, m.raw, m.media_type)
    world.client.put_manifest(other, f"{VARIANT}-dev", *_raw(world, promoted))
    env = world.env()
    elsewhere = Target(VARIANT, other, world.registry)
    with pytest.raises(VerificationError) as err:
        resolve(env, elsewhere, "dev")
    assert "no promotion record for this pointer" in err.value.message
    [row] = status(env, [elsewhere], ["dev"])
    assert row.digest == promoted and row.action is None and row.note
    assert resolve(env, world.target, "dev").endswith("@" + promoted)  # the real pointer stays trusted


def _raw(w: World, digest: str) -> tuple[bytes, str]:
    m = w.client.get_manifest(w.repo, digest)
    return m.raw, m.media_type


# -- 3. a stage tag moved back by hand (rollback attack) ---------------------------------------


def test_a_stage_tag_moved_back_to_an_older_recorded_digest_is_not_trusted(world: World, cli: Cli) -> None:
    old = _dev(world, b"replay old")
    new = _dev(world, b"replay new")
    # the attack: old carries its own genuine, older promotion record for dev
    _retag(world, "dev", old)
    env = world.env()
    with pytest.raises(VerificationError) as err:
        resolve(env, world.target, "dev")
    assert "newer record moved the stage away" in err.value.message and new[:19] in err.value.message
    [row] = status(env, [world.target], ["dev"])
    assert row.digest == old and row.action is None and "moved back outside builder" in (row.note or "")
    # the next promotion refuses to build on it: nothing is moved
    world.build(b"replay next")
    plan = plan_promotion(env, world.target, "dev")
    assert not plan.trusted and "chain" in failed_rules(plan)
    assert world.client.resolve(world.repo, f"{VARIANT}-dev") == old


def test_a_replayed_att_manifest_without_the_successor_record_is_caught(world: World) -> None:
    """Every record left is genuine: only the newest record this machine saw for the pointer (the
    promotion it made, builder.promote.newest_seen) shows the stage had moved past the replay."""
    old = _dev(world, b"att replay old")
    att_tag = signature_tag(old, ATT_SUFFIX)
    before = world.client.get_manifest(world.repo, att_tag)  # the attacker keeps a copy
    new = _dev(world, b"att replay new")  # writes the successor record onto old's .att
    world.client.put_manifest(world.repo, att_tag, before.raw, before.media_type)  # replayed
    _retag(world, "dev", old)
    with pytest.raises(VerificationError) as err:
        resolve(world.env(), world.target, "dev")
    assert "newer record moved the stage away" in err.value.message and new[:19] in err.value.message
    assert f"remembered by this machine ({world.state / 'seen'}/" in err.value.message  # the local memory named
    [row] = status(world.env(), [world.target], ["dev"])
    assert row.digest == old and row.action is None and "moved back outside builder" in (row.note or "")


def test_a_machine_that_never_saw_the_newer_record_cannot_tell_a_replay(world: World, tmp_path: Path) -> None:
    """The documented limit (docs/promotion.md): a fresh state folder (another developer's machine)
    has seen nothing newer, so the replay reads as the stage's state; its first read of the real
    state is then kept, and a replay after that is refused there too."""
    old = _dev(world, b"att replay fresh old")
    att_tag = signature_tag(old, ATT_SUFFIX)
    before = world.client.get_manifest(world.repo, att_tag)
    new = _dev(world, b"att replay fresh new")
    elsewhere = tmp_path / "another-machine"
    assert resolve(world.env(state=elsewhere), world.target, "dev").endswith("@" + new)  # it sees the new state
    world.client.put_manifest(world.repo, att_tag, before.raw, before.media_type)
    _retag(world, "dev", old)
    with pytest.raises(VerificationError):
        resolve(world.env(state=elsewhere), world.target, "dev")
    assert resolve(world.env(state=tmp_path / "never-looked"), world.target, "dev").endswith("@" + old)


def test_the_promoting_machines_ledger_names_a_replayed_att_manifest(world: World) -> None:
    """What the registry alone cannot tell (the xfail above), the ledger of the machine that
    promoted can: its last move of the pointer is newer than any record on what the pointer names."""
    from builder.promote.ledger_check import verify_ledger

    old = _dev(world, b"ledger replay old")
    att_tag = signature_tag(old, ATT_SUFFIX)
    before = world.client.get_manifest(world.repo, att_tag)
    new = _dev(world, b"ledger replay new")
    env = world.env()
    ledger = env.ledger
    assert ledger is not None
    assert verify_ledger(env, ledger, "ledger.sqlite").ok  # before the attack: agrees
    world.client.put_manifest(world.repo, att_tag, before.raw, before.media_type)
    _retag(world, "dev", old)
    report = verify_ledger(env, ledger, "ledger.sqlite")
    assert not report.ok
    [problem] = report.registry
    assert f"names {old[:19]}" in problem and new[:19] in problem and "moved back outside builder" in problem
    with pytest.raises(LedgerError) as err:
        report.raise_for_problems()
    assert err.value.exit_code == 33


def test_as_a_user_runs_them_resolve_and_status_refuse_a_copied_record_and_a_moved_back_tag(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kinds 2 and 3 through the command line of a real project: exit 18 and the row's note, with
    the digests named; never a traceback."""
    from builder.registry import RegistryClient
    from tests.conftest import unset_builder_settings
    from tests.integration.test_promote_cli import VARIANT as CLI_VARIANT
    from tests.integration.test_promote_cli import _build, _project

    unset_builder_settings(monkeypatch)
    project = _project(tmp_path / "project", registry_address, unique_repo)
    client = RegistryClient(registry_address, insecure=True)

    def run(*args: str, code: int = 0) -> Any:
        res = cli(*args, code=code, env={"HOME": str(project), "COLUMNS": "80"}, cwd=project)
        assert "Traceback" not in res.stderr + res.stdout
        return res

    def put(tag: str, src: str) -> None:
        m = client.get_manifest(unique_repo, src)
        client.put_manifest(unique_repo, tag, m.raw, m.media_type)

    d1 = _build(project, registry_address, unique_repo, b"cli attack one")
    run("promote", CLI_VARIANT, "--to", "dev", "--confirm")
    d2 = _build(project, registry_address, unique_repo, b"cli attack two")
    run("promote", CLI_VARIANT, "--to", "dev", "--confirm")
    assert run("resolve", CLI_VARIANT, "--stage", "dev").stdout.strip().endswith("@" + d2)
    # 3: the stage tag moved back by hand
    put(f"{CLI_VARIANT}-dev", d1)
    err = run("resolve", CLI_VARIANT, "--stage", "dev", "--json", code=18).json()["error"]
    assert d1 in err["details"]["found"] and d2[:19] in err["message"]
    assert "error:" in run("resolve", CLI_VARIANT, "--stage", "dev", code=18).stderr
    [row] = [r for r in run("status", "--json").json()["rows"] if r["stage"] == "dev"]
    assert row["digest"] == d1 and row["action"] is None and "moved back outside builder" in row["note"]
    # 2: d2's genuine record copied onto a digest never promoted, the tag moved onto it
    intruder = push_image(client, unique_repo, "intruder", content=b"cli intruder")
    put(signature_tag(intruder, ATT_SUFFIX), signature_tag(d2, ATT_SUFFIX))
    put(f"{CLI_VARIANT}-dev", intruder)
    err = run("resolve", CLI_VARIANT, "--stage", "dev", "--json", code=18).json()["error"]
    assert err["details"]["found"] == intruder
    [row] = [r for r in run("status", "--json").json()["rows"] if r["stage"] == "dev"]
    assert row["digest"] == intruder and row["action"] is None and row["note"]


# -- 6. an approval reused for another digest or stage -----------------------------------------


def _approval_tag(w: World, who: str, digest: str) -> str:
    return signature_tag(digest, approval_suffix(w.keys.signer(who).fingerprint))


def test_approvals_reused_for_another_digest_or_stage_do_not_count(world: World) -> None:
    approved = test_promote._to_staging(world, b"approved one")
    world.approve("alice", approved, "prod")
    world.approve("bob", approved, "prod")
    env = world.env()
    assert "approvals" not in failed_rules(plan_promotion(env, world.target, "prod", ticket="CHG-1234"))
    # the attack: both genuine approvals of `approved` copied onto the next staging digest's tags
    other = test_promote._to_staging(world, b"approved two")
    for who in ("alice", "bob"):
        _copy_tag(world, _approval_tag(world, who, approved), _approval_tag(world, who, other))
    plan = plan_promotion(env, world.target, "prod", ticket="CHG-1234")
    why = failed_rules(plan)["approvals"]
    assert "has 0" in why and "for another digest" in why
    with pytest.raises(PolicyDeniedError):
        apply_promotion(env, plan)
    assert world.client.try_resolve(f"prod/{world.repo}", f"{VARIANT}-prod") is None
    # approvals genuinely on `other`, but for stage staging, do not count for prod either
    world.approve("alice", other, "staging")
    world.approve("bob", other, "staging")
    why = failed_rules(plan_promotion(env, world.target, "prod", ticket="CHG-1234"))["approvals"]
    assert "has 0" in why and "for stage 'staging', not 'prod'" in why


# -- 4, 5. a registry that lies, and hostile documents -----------------------------------------
# A registry the attacker runs (or answers for): a real HTTP server speaking the distribution API
# (https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md) for the paths a test
# gives it, 404 MANIFEST_UNKNOWN for the rest. Each answer is built by the test.

Answer = tuple[int, dict[str, str], "bytes | Callable[[], Iterator[bytes]]"]


class HostileRegistry:
    """``routes``: (method, path without query) -> (status, headers, body or a generator of body
    pieces; a generator is sent without Content-Length, the connection closed after it), or a
    function of the full request path giving one. ``seen``: requests, in order."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Answer | Callable[[str], Answer]] = {}
        self.seen: list[str] = []
        hostile = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self) -> None:
                path = self.path.split("?")[0]
                hostile.seen.append(f"{self.command} {self.path}")
                method = "GET" if self.command == "HEAD" else self.command
                route = hostile.routes.get(
                    (method, path),
                    (404, {"Content-Type": "application/json"}, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}'),
                )
                status_code, headers, body = route(self.path) if callable(route) else route
                self.send_response(status_code)
                for k, v in headers.items():
                    self.send_header(k, v)
                if isinstance(body, bytes):
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(body)
                    return
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                if self.command != "HEAD":
                    try:
                        for piece in body():
                            self.wfile.write(piece)
                    except (BrokenPipeError, ConnectionResetError):
                        return  # the client stopped reading: what a bounded reader does

            do_GET = do_HEAD = answer

            def log_message(self, format: str, *args: object) -> None:
                del format, args

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                # the client hung up mid-answer (what a bounded reader does): kept, not printed
                # into the stderr the test reads
                del request
                hostile.errors.append(f"{client_address}: {sys.exc_info()[1]}")

        self.errors: list[str] = []
        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.routes[("GET", "/v2/")] = (200, {"Content-Type": "application/json"}, b"{}")
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def manifest(self, repo: str, ref: str, raw: bytes | Callable[[], Iterator[bytes]], **headers: str) -> None:
        head = {"Content-Type": OCI_MANIFEST, **{k.replace("_", "-"): v for k, v in headers.items()}}
        self.routes[("GET", f"/v2/{repo}/manifests/{ref}")] = (200, head, raw)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hostile() -> Iterator[HostileRegistry]:
    h = HostileRegistry()
    yield h
    h.close()


def _manifest(layers: list[dict[str, object]] | None = None) -> bytes:
    config = {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + "0" * 64, "size": 2}
    doc = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config, "layers": layers or []}
    return json.dumps(doc).encode()


def _sha(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def _verify(cli: Cli, world: World, ref: str, code: int) -> dict[str, object]:
    res = cli("verify", ref, "--key", str(world.keys.pub("build")), "--json", code=code)
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout
    return dict(res.json()["error"])


def test_a_manifest_whose_bytes_or_header_lie_is_refused(hostile: HostileRegistry, world: World, cli: Cli) -> None:
    image = _manifest()
    digest = _sha(image)
    # HEAD of the digest answers as the registry should; the .sig tag's bytes are served under a
    # Docker-Content-Digest header naming other bytes (a real signature manifest's digest)
    hostile.manifest("evil/app", digest, image, Docker_Content_Digest=digest)
    sig = _manifest([{"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json", "digest": digest, "size": 1}])
    hostile.manifest("evil/app", signature_tag(digest, SIG_SUFFIX), sig, Docker_Content_Digest=_sha(b"other"))
    err = _verify(cli, world, f"{hostile.address}/evil/app@{digest}", 7)
    assert "bytes hash to" in str(err["message"]) and _sha(sig) in str(err["message"])
    # a manifest asked for by digest whose bytes hash to something else (no header at all)
    other = _manifest([{"mediaType": "x", "digest": "sha256:" + "1" * 64, "size": 1}])
    hostile.manifest("evil/app", digest, other)
    res = cli("inspect", f"{hostile.address}/evil/app@{digest}", "--json", code=7)
    assert f"hash to {_sha(other)}" in res.json()["error"]["message"] and "Traceback" not in res.stderr


@pytest.mark.parametrize(
    "header", ["sha256:../../../../etc/passwd", "sha256:" + "../" * 21 + "x", "md5:abc", "sha256:AB"]
)
def test_a_malformed_digest_header_is_not_believed(
    hostile: HostileRegistry, world: World, cli: Cli, header: str
) -> None:
    """A tag whose HEAD answer carries a Docker-Content-Digest that is no sha256 digest: builder
    hashes the manifest bytes itself (a GET) and goes on with that digest, never the header's text
    (which would become a tag, a path, a lock name). The GET's own header, when it claims a
    sha256 digest the bytes do not have, is the registry lying: exit 7 naming both."""
    image = _manifest()
    digest = _sha(image)
    hostile.manifest("evil/hdr", "v1", image, Docker_Content_Digest=header)
    lie = header.startswith("sha256:")
    err = _verify(cli, world, f"{hostile.address}/evil/hdr:v1", 7 if lie else 18)
    assert digest in str(err["message"])
    assert ("but its bytes hash to" in str(err["message"])) == lie
    assert not [p for p in hostile.seen if ".." in p.split(" ", 1)[1]]


def test_an_oversized_manifest_is_refused_before_it_is_read(hostile: HostileRegistry, world: World, cli: Cli) -> None:
    image = _manifest()
    digest = _sha(image)
    hostile.manifest("evil/big", digest, image, Docker_Content_Digest=digest)
    tag = signature_tag(digest, SIG_SUFFIX)
    sent = [0]

    def fifty_mib() -> Iterator[bytes]:  # no Content-Length: only the reader's own limit stops it
        yield b'{"schemaVersion":2,"layers":[' + b" " * (64 * 1024 - 29)
        for _ in range(50 * 16 - 1):
            sent[0] += 64 * 1024
            yield b" " * (64 * 1024)

    hostile.manifest("evil/big", tag, fifty_mib)
    err = _verify(cli, world, f"{hostile.address}/evil/big@{digest}", 7)
    assert "more than 16 MiB" in str(err["message"]) and tag in str(err["message"])
    assert sent[0] < 40 * 1024 * 1024  # stopped reading well before the end
    # a declared Content-Length over the limit is refused without reading the body
    hostile.manifest("evil/big", tag, b" " * (50 * 1024 * 1024))
    err = _verify(cli, world, f"{hostile.address}/evil/big@{digest}", 7)
    assert "over the 16 MiB limit" in str(err["message"])
    # a small .sig whose one layer's blob is 50 MiB (no Content-Length): the blob read stops too
    blob = "sha256:" + "2" * 64
    layer = {"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json", "digest": blob, "size": 52428800}
    hostile.manifest(
        "evil/big", tag, _manifest([{**layer, "annotations": {"dev.cosignproject.cosign/signature": "MEU="}}])
    )
    sent[0] = 0
    hostile.routes[("GET", f"/v2/evil/big/blobs/{blob}")] = (
        200,
        {"Content-Type": "application/octet-stream"},
        fifty_mib,
    )
    err = _verify(cli, world, f"{hostile.address}/evil/big@{digest}", 7)
    assert "more than 16 MiB" in str(err["message"]) and blob in str(err["message"])
    assert sent[0] < 40 * 1024 * 1024


def test_deeply_nested_json_is_an_invalid_document_not_a_crash(
    hostile: HostileRegistry, world: World, cli: Cli
) -> None:
    image = _manifest()
    digest = _sha(image)
    hostile.manifest("evil/deep", digest, image, Docker_Content_Digest=digest)
    deep = b'{"layers":' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    hostile.manifest("evil/deep", signature_tag(digest, SIG_SUFFIX), deep)
    err = _verify(cli, world, f"{hostile.address}/evil/deep@{digest}", 7)
    assert "nested" in str(err["message"])


def test_a_sig_with_100000_layers_is_refused_without_fetching_them(
    hostile: HostileRegistry, world: World, cli: Cli
) -> None:
    image = _manifest()
    digest = _sha(image)
    hostile.manifest("evil/many", digest, image, Docker_Content_Digest=digest)
    layer = {"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json", "size": 1}
    many = _manifest([{**layer, "digest": f"sha256:{i:064x}"} for i in range(100_000)])
    assert len(many) < 16 * 1024 * 1024  # under the body limit: only a layer count can stop it
    hostile.manifest("evil/many", signature_tag(digest, SIG_SUFFIX), many)
    err = _verify(cli, world, f"{hostile.address}/evil/many@{digest}", 7)
    assert "100,000 layers" in str(err["message"])
    assert not [p for p in hostile.seen if "/blobs/" in p]  # not one of them was fetched


def test_a_referrers_index_of_60000_bundles_is_refused_without_fetching_them(
    hostile: HostileRegistry, world: World, cli: Cli
) -> None:
    """The ``sha256-<hex>`` fallback referrers index (the registry has no referrers API: 404)
    listing 60,000 Sigstore bundle referrers, under the 16 MiB body limit: refused by count."""
    from builder.registry import OCI_INDEX, fallback_tag
    from builder.signing.bundles import BUNDLE_MEDIA_TYPE

    image = _manifest()
    digest = _sha(image)
    hostile.manifest("evil/refs", digest, image, Docker_Content_Digest=digest)
    one = {"mediaType": OCI_MANIFEST, "size": 400, "artifactType": BUNDLE_MEDIA_TYPE}
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [{**one, "digest": f"sha256:{i:064x}"} for i in range(60_000)],
        }
    ).encode()
    assert len(index) < 16 * 1024 * 1024
    hostile.manifest("evil/refs", fallback_tag(digest), index, Content_Type=OCI_INDEX)
    err = _verify(cli, world, f"{hostile.address}/evil/refs@{digest}", 7)
    assert "60,000 bundle referrers" in str(err["message"])
    assert len(hostile.seen) < 20  # the index, never its 60,000 manifests


def test_an_endless_referrers_answer_is_cut_at_the_body_limit(hostile: HostileRegistry, world: World, cli: Cli) -> None:
    """A registry with the referrers API (distribution-spec v1.1, "Listing Referrers") whose
    answer never ends: read with the body limits like every document, and, as any answer of the
    API that is not a usable index, taken as no API (``RegistryClient.referrers``): nothing it
    names counts, so the digest has no signature (exit 18, fail closed)."""
    from builder.registry import OCI_INDEX

    image = _manifest()
    digest = _sha(image)
    hostile.manifest("evil/api", digest, image, Docker_Content_Digest=digest)
    sent = [0]

    def endless() -> Iterator[bytes]:
        yield b'{"schemaVersion":2,"mediaType":"' + OCI_INDEX.encode() + b'","manifests":['
        while sent[0] < 200 * 1024 * 1024:
            sent[0] += 64 * 1024
            yield b" " * (64 * 1024)

    hostile.routes[("GET", f"/v2/evil/api/referrers/{digest}")] = (200, {"Content-Type": OCI_INDEX}, endless)
    err = _verify(cli, world, f"{hostile.address}/evil/api@{digest}", 18)
    assert "no signatures found" in str(err["message"])
    assert sent[0] < 100 * 1024 * 1024  # stopped reading (before: read whole, 200 MiB into memory)


def test_an_endless_tag_list_is_bounded(hostile: HostileRegistry, world: World) -> None:
    """``status`` of two variants in one repository lists its tags once (builder.promote.listing):
    a registry whose pages link back to themselves, or never end, or one page of a million tags,
    is an error (exit 7) after a bounded read, never an endless loop."""
    repo = "evil/tags"
    targets = [Target(v, repo, hostile.address) for v in (VARIANT, VARIANT + "-b")]
    env = world.env()

    def rows_fail(what: str) -> None:
        hostile.seen.clear()
        with pytest.raises(RegistryError) as err:  # no row can be read: the first row's error
            status(env, targets, ["dev"])
        assert err.value.exit_code == 7 and what in err.value.message, err.value.message

    def page(path: str) -> Answer:
        n = int(path.rpartition("last=p")[2]) if "last=p" in path else 0
        tags = json.dumps({"name": repo, "tags": [f"p{n:05d}-{i:05d}" for i in range(10_000)]}).encode()
        after = 0 if loop_back else n + 1  # loop_back: every page links to the first page again
        link = f'</v2/{repo}/tags/list?n=1000&last=p{after}>; rel="next"'
        return 200, {"Content-Type": "application/json", "Link": link}, tags

    hostile.routes[("GET", f"/v2/{repo}/tags/list")] = page
    loop_back = True
    rows_fail("links back to a page already read")
    assert len([p for p in hostile.seen if "/tags/list" in p]) <= 3
    loop_back = False  # pages that never end: stopped past the tag limit
    rows_fail("listed over 1,000,000 tags")
    assert len([p for p in hostile.seen if "/tags/list" in p]) <= 102
    million = json.dumps({"name": repo, "tags": [f"tag-{i:012d}" for i in range(1_000_000)]}).encode()
    assert len(million) > 16 * 1024 * 1024
    hostile.routes[("GET", f"/v2/{repo}/tags/list")] = (200, {"Content-Type": "application/json"}, million)
    rows_fail("16 MiB")
