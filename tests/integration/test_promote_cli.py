"""The promotion commands end to end as a user runs them (``builder ...`` in-process through the
``cli`` fixture), exit codes included; every ``--json`` output is checked against its schema."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from builder.registry import RegistryClient
from builder.signing.keys import load_signer
from tests.conftest import unset_builder_settings
from tests.integration.test_promote_support import (
    docker_config_dir,
    make_keys,
    password_registry,
    push_build,
    push_image,
    write_policy,
)
from tests.projects import jax_matrix

if TYPE_CHECKING:
    from tests.conftest import Cli, CliResult

pytestmark = pytest.mark.integration

VARIANT = "jax0.7-cpu-py3.11-debian12"
ROOT = Path(__file__).resolve().parents[2]


class Run(Protocol):
    def __call__(self, project: Path, *args: str, code: int = 0, env: dict[str, str] | None = None) -> CliResult: ...


@pytest.fixture
def run(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Run:
    """``builder ARGS`` in ``project`` as a user whose environment names only ``HOME`` (the
    project) and ``env``: no ``DOCKER_CONFIG``, ``BUILDER_*`` or ``COSIGN_PASSWORD`` from the
    test's own environment or an earlier call."""

    def go(project: Path, *args: str, code: int = 0, env: dict[str, str] | None = None) -> CliResult:
        unset_builder_settings(monkeypatch)
        return cli(*args, code=code, env={"HOME": str(project), **(env or {})}, cwd=project)

    return go


def js(result: CliResult) -> Any:
    return result.json()


@pytest.fixture
def project(tmp_path: Path, registry_address: str, unique_repo: str) -> Path:
    return _project(tmp_path / "project", registry_address, unique_repo)


def _project(root: Path, registry: str, repo: str) -> Path:
    (root / "matrices").mkdir(parents=True)
    (root / "policies").mkdir()
    state = root / "state"
    keys = make_keys(state)
    write_policy(root / "policies" / "default.yaml", keys)
    (root / "builder.toml").write_text(f'registry = "{registry}"\nstate_dir = "state"\nkey = "{keys.key("build")}"\n')
    (root / "matrices" / "tiny.yaml").write_text(jax_matrix(repo))
    return root


def _build(project: Path, registry: str, repo: str, content: bytes) -> str:
    from builder.signing.keys import load_signer
    from builder.signing.sign import sign_image

    client = RegistryClient(registry, insecure=True)
    digest = push_image(client, repo, VARIANT, content=content)
    signer = load_signer(project / "state" / "keys" / "build" / "builder.key", None)
    sign_image(client, repo, digest, signer, lock_dir=project / "state" / "locks")
    return digest


def test_promotion_commands(run: Run, project: Path, registry_address: str, unique_repo: str) -> None:
    keys = project / "state" / "keys"
    out = js(run(project, "policy", "validate", "--json"))
    assert out["files"][0]["valid"] and out["files"][0]["stages"] == ["dev", "staging", "prod"]

    d1 = _build(project, registry_address, unique_repo, b"cli one")
    plan = js(run(project, "promote", VARIANT, "--to", "dev", "--json"))["results"][0]
    assert plan["applied"] is False and plan["allowed"] and plan["digest"] == d1 and plan["previous"] is None
    client = RegistryClient(registry_address, insecure=True)
    assert client.try_resolve(unique_repo, f"{VARIANT}-dev") is None  # a dry run writes nothing

    applied = js(run(project, "--json", "promote", VARIANT, "--to", "dev", "--confirm"))["results"][0]
    assert applied["applied"] and applied["pinned"] == f"{registry_address}/{unique_repo}@{d1}"
    assert client.resolve(unique_repo, f"{VARIANT}-dev") == d1

    # staging without a device check: exit 31 with the failed rule in the JSON error
    err = js(run(project, "promote", "--select", "jax*", "--to", "staging", "--confirm", "--json", code=31))
    reasons = err["error"]["details"]["results"][0]["decision"]["reasons"]
    flat = json.dumps(reasons)
    assert "no device-check attestation" in flat and '"passed": false' in flat
    human = run(project, "promote", VARIANT, "--to", "staging", code=31).stderr
    assert "FAIL" in human and "device_check" in human

    # approvals go through the CLI too
    ref = f"{registry_address}/{unique_repo}:{VARIANT}-dev"
    out = js(
        run(
            project,
            "approve",
            ref,
            "--stage",
            "prod",
            "--key",
            str(keys / "alice" / "builder.key"),
            "--ticket",
            "CHG-1234",
            "--json",
        )
    )
    assert out["predicate"]["digest"] == d1 and out["predicate"]["approver"]["name"] == "alice"
    run(project, "approve", ref, "--stage", "qa", "--key", str(keys / "alice" / "builder.key"), code=8)

    # resolve prints the pinned reference on stdout
    assert run(project, "resolve", VARIANT, "--stage", "dev").stdout.strip() == f"{registry_address}/{unique_repo}@{d1}"
    run(project, "resolve", VARIANT, "--stage", "prod", code=8)

    # a second build, promoted, then rolled back by an allowed key; history and status read the registry
    d2 = _build(project, registry_address, unique_repo, b"cli two")
    run(project, "promote", VARIANT, "--to", "dev", "--confirm", "--expect-previous", d1)
    run(project, "rollback", "dev", VARIANT, "--key", str(keys / "mallory" / "builder.key"), code=31)
    alice_key = str(keys / "alice" / "builder.key")
    dry = js(run(project, "rollback", "dev", VARIANT, "--key", alice_key, "--json"))  # dry run by default
    assert dry["applied"] is False and (dry["digest"], dry["previous"]) == (d1, d2)
    assert run(project, "resolve", VARIANT, "--stage", "dev").stdout.strip().endswith("@" + d2)
    assert "add --confirm" in run(project, "rollback", "dev", VARIANT, "--key", alice_key).stderr
    out = js(run(project, "rollback", "dev", VARIANT, "--key", alice_key, "--confirm", "--ticket", "CHG-9", "--json"))
    assert out["record"]["digest"] == d1 and out["record"]["previous"] == d2 and out["record"]["ticket"] == "CHG-9"
    hist = js(run(project, "history", VARIANT, "--stage", "dev", "--json"))["stages"][0]["records"]
    assert [(h["action"], h["digest"]) for h in hist] == [("rollback", d1), ("promote", d2), ("promote", d1)]
    rows = js(run(project, "status", "--json"))["rows"]
    dev = next(r for r in rows if r["stage"] == "dev")
    assert dev["digest"] == d1 and dev["action"] == "rollback" and dev["signatures"] == 1
    assert dev["trusted"] is True and next(r for r in rows if r["stage"] == "prod")["trusted"] is None
    assert [h["by"] for h in hist] == ["alice", "build", "build"]  # the policy's names, for every action
    human = run(project, "history", VARIANT, "--stage", "dev").stderr
    from builder.signing.keys import load_signer

    build_fp = load_signer(keys / "build" / "builder.key", None).fingerprint
    assert "rollback" in human and "previous" in human and build_fp[7:19] not in human  # a name, not the key
    assert "by" in human and " alice" in human and " build" in human
    # at 80 columns every line fits (a fitted table; the lines were 87 characters), the ticket kept
    narrow = run(project, "history", VARIANT, "--stage", "dev", env={"COLUMNS": "80"}).stderr
    assert max(len(line.rstrip()) for line in narrow.splitlines()) <= 80, narrow
    assert all(line == line.rstrip() for line in narrow.splitlines()), narrow  # rows end at their last character
    assert "CHG-9" in narrow and d1[:19] in narrow and d2[:19] in narrow
    dev_row = next(r for r in js(run(project, "status", "--json"))["rows"] if r["stage"] == "dev")
    assert dev_row["promoter"] == "alice"

    # a stale compare-and-swap is a conflict (exit 32)
    run(project, "promote", VARIANT, "--to", "dev", "--confirm", "--expect-previous", d2, code=32)

    _resolve_finds_the_cluster_as_check_does(run, project, f"{registry_address}/{unique_repo}@{d1}")

    # a reference by digest alone: the variant comes from the image's io.builder.variant label
    d3 = push_build(client, unique_repo, VARIANT, b"by digest")
    plan = js(run(project, "promote", f"{registry_address}/{unique_repo}@{d3}", "--to", "dev", "--json"))
    assert plan["results"][0]["variant"] == VARIANT and plan["results"][0]["digest"] == d3

    # the dev tag moved by hand: status says so in a field CI can test (and resolve refuses it)
    push_image(client, unique_repo, f"{VARIANT}-dev", content=b"moved by hand")
    dev = next(r for r in js(run(project, "status", "--json"))["rows"] if r["stage"] == "dev")
    assert dev["trusted"] is False and dev["note"], dev


def _resolve_finds_the_cluster_as_check_does(run: Run, project: Path, pinned: str) -> None:
    """resolve for a cluster: dev has no fleet rule, so the cluster is looked up as `check --cluster`
    looks it up, in fleets/ (it said "needs a fleet file", exit 2, while check found the cluster)."""
    err = js(run(project, "resolve", VARIANT, "--stage", "dev", "--cluster", "a100-inference", "--json", code=8))
    assert err["error"]["message"].startswith("unknown cluster 'a100-inference'")  # no fleets/ yet
    (project / "fleets").mkdir()
    (project / "fleets" / "demo.yaml").write_text((ROOT / "fleets" / "demo.yaml").read_text())
    out = run(project, "resolve", VARIANT, "--stage", "dev", "--cluster", "a100-inference").stdout.strip()
    assert out == pinned  # a CPU image runs anywhere
    err = js(run(project, "resolve", VARIANT, "--stage", "dev", "--cluster", "nowhere", "--json", code=8))
    assert err["error"]["message"].startswith("unknown cluster 'nowhere'") and "demo.yaml" in err["error"]["message"]
    assert "h100-train" in err["error"]["message"] and "mi300x" in err["error"]["message"]  # the known ones
    fleet = ["--fleet", "fleets/demo.yaml"]
    out = run(project, "resolve", VARIANT, "--stage", "dev", "--cluster", "a100-inference", *fleet).stdout.strip()
    assert out == pinned
    run(project, "resolve", VARIANT, "--stage", "dev", "--cluster", "nowhere", *fleet, code=8)


def test_policy_validate_lists_problems(run: Run, project: Path) -> None:
    bad = project / "policies" / "bad.yaml"
    bad.write_text("stages:\n  dev:\n    from: nowhere\n    require:\n      all_of: []\n")
    err = js(run(project, "policy", "validate", str(bad), "--json", code=30))
    problems = err["error"]["details"]["files"][0]["problems"]
    where = {(p["path"], p["line"]) for p in problems if p["severity"] == "error"}
    assert ("stages.dev.from", 3) in where and ("stages.dev.require.all_of", 5) in where
    assert all(p["file"] == str(bad) for p in problems)


def test_resolve_takes_the_fleet_from_the_stage_rule(
    run: Run, project: Path, registry_address: str, unique_repo: str
) -> None:
    """A stage whose policy has a `fleet` rule: resolve --cluster uses that rule's file (no --fleet)."""
    keys = project / "state" / "keys"
    (project / "fleets").mkdir()
    (project / "fleets" / "edge.yaml").write_text((ROOT / "fleets" / "demo.yaml").read_text())
    policy = project / "policies" / "fleet.yaml"
    policy.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            keys:
              build: [{{file: {keys / "build" / "builder.pub"}}}]
            promoters: [build]
            stages:
              dev:
                from: build
                require:
                  fleet: {{file: ../fleets/edge.yaml}}
            """
        )
    )
    d1 = _build(project, registry_address, unique_repo, b"fleet rule")
    run(project, "promote", VARIANT, "--to", "dev", "--confirm", "--policy", str(policy))
    args = ("resolve", VARIANT, "--stage", "dev", "--policy", str(policy), "--json")
    out = js(run(project, *args, "--cluster", "a100-inference"))
    assert out["reference"] == f"{registry_address}/{unique_repo}@{d1}" and out["cluster"] == "a100-inference"
    err = js(run(project, *args, "--cluster", "nowhere", code=8))
    assert "edge.yaml" in err["error"]["message"]  # the rule's file, named


def test_untrusted_pointer_is_shown_in_the_dry_run(
    run: Run, project: Path, registry_address: str, unique_repo: str
) -> None:
    """A stage tag moved outside builder: the dry run fails on the chain (never "add --confirm"),
    history says why as status does, resolve exits 18 (verification), not 32 (retry)."""
    from tests.integration.test_promote_support import push_image as push

    first = _build(project, registry_address, unique_repo, b"trusted one")
    run(project, "promote", VARIANT, "--to", "dev", "--confirm")
    client = RegistryClient(registry_address, insecure=True)
    rogue = push(client, unique_repo, f"{VARIANT}-dev", content=b"moved by hand")
    _build(project, registry_address, unique_repo, b"next build")
    dry = run(project, "promote", VARIANT, "--to", "dev", code=31)
    assert "[FAIL] chain:" in dry.stderr and rogue in dry.stderr and "dry run: add --confirm" not in dry.stderr
    assert "moved outside builder" in dry.stderr and "point the tag back" in dry.stderr  # the hint: what to do
    err = js(run(project, "promote", VARIANT, "--to", "dev", "--json", code=31))
    result = err["error"]["details"]["results"][0]
    assert result["trusted"] is False and result["already"] is False
    hist = run(project, "history", VARIANT, "--stage", "dev")
    assert "no promotion record by a trusted promoter" in " ".join((hist.stdout + hist.stderr).split())
    out = js(run(project, "history", VARIANT, "--stage", "dev", "--json"))["stages"][0]
    assert out["digest"] == rogue and "moved outside builder" in out["note"]
    err = js(run(project, "resolve", VARIANT, "--stage", "dev", "--json", code=18))
    assert err["error"]["kind"] == "verification-failed" and "--no-verify" in err["error"]["hint"]
    # --no-verify takes the tag as is, and says so: one stderr line (80 columns) and `verified`
    taken = run(project, "resolve", VARIANT, "--stage", "dev", "--no-verify")
    assert taken.stdout.strip().endswith("@" + rogue)
    [warning] = taken.stderr.splitlines()
    assert warning.startswith("warning: --no-verify: ") and len(warning) <= 80
    out = js(run(project, "resolve", VARIANT, "--stage", "dev", "--no-verify", "--json"))
    assert out["reference"].endswith("@" + rogue) and out["verified"] is False
    alice = str(project / "state" / "keys" / "alice" / "builder.key")
    err = js(run(project, "rollback", "dev", VARIANT, "--key", alice, "--json", code=18))
    assert "cannot tell where to roll back to" in err["error"]["message"]
    # --to a digest of the stage's history: the same integrity failure, the same code as resolve's
    # (18, docs/exit-codes.md), never "not in the history" (8) or a conflict (32)
    assert err["error"]["details"]["found"] == rogue
    to = ("--to", first, "--key", alice, "--json")
    err = js(run(project, "rollback", VARIANT, "--stage", "dev", *to, code=18))
    assert err["error"]["kind"] == "verification-failed" and err["error"]["details"]["pointer"].endswith("-dev")


def test_rollback_of_a_first_promotion_says_what_to_do(
    run: Run, project: Path, registry_address: str, unique_repo: str
) -> None:
    alice = str(project / "state" / "keys" / "alice" / "builder.key")
    err = js(run(project, "rollback", "dev", VARIANT, "--key", alice, "--json", code=8))
    assert "never promoted to dev" in err["error"]["message"] and "builder history" in err["error"]["hint"]
    # a key the rollback rule does not list hears the same: nothing is in the stage (it was told
    # "may not roll back", exit 31); VARIANT --stage STAGE, as resolve/history/report take it
    mallory = str(project / "state" / "keys" / "mallory" / "builder.key")
    err = js(run(project, "rollback", VARIANT, "--stage", "dev", "--key", mallory, "--json", code=8))
    assert err["error"]["message"].startswith("nothing is in dev: ") and "may not" not in err["error"]["message"]
    usage = run(project, "rollback", VARIANT, "--key", alice, code=2)
    assert "builder rollback VARIANT --stage STAGE" in usage.stderr and "Traceback" not in usage.stderr
    d1 = _build(project, registry_address, unique_repo, b"first ever")
    run(project, "promote", VARIANT, "--to", "dev", "--confirm")
    err = js(run(project, "rollback", "dev", VARIANT, "--key", alice, "--json", code=8))
    assert "nothing to roll back to" in err["error"]["message"] and d1 in err["error"]["message"]
    assert "promote another digest explicitly" in err["error"]["hint"]
    assert "builder matrix list" not in err["error"]["hint"]


def test_approve_warns_when_the_approval_would_never_count(
    run: Run, project: Path, registry_address: str, unique_repo: str
) -> None:
    keys = project / "state" / "keys"
    d1 = _build(project, registry_address, unique_repo, b"approve me")
    ref = f"{registry_address}/{unique_repo}@{d1}"
    mallory, alice = str(keys / "mallory" / "builder.key"), str(keys / "alice" / "builder.key")
    # an unlisted key may not present itself as a listed approver
    err = js(run(project, "approve", ref, "--stage", "prod", "--key", mallory, "--name", "alice", "--json", code=16))
    assert "not alice's key" in err["error"]["message"]
    # an unlisted key: refused (it would never count) unless --unlisted; then written with a
    # warning on stderr and in the JSON, shown by fingerprint
    err = js(run(project, "approve", ref, "--stage", "prod", "--key", mallory, "--json", code=16))
    assert "not an approver" in err["error"]["message"] and "--unlisted" in err["error"]["hint"]
    proc = run(
        project, "approve", ref, "--stage", "prod", "--key", mallory, "--ticket", "CHG-1234", "--unlisted", "--json"
    )
    out = js(proc)
    assert out["approver"] is None and any("not a listed approver of stage prod" in w for w in out["warnings"])
    assert "warning: " in proc.stderr and "never count" in proc.stderr
    human = " ".join(
        run(project, "approve", ref, "--stage", "prod", "--key", mallory, "--name", "mal", "--unlisted").stderr.split()
    )
    assert "as alice" not in human and "unlisted key, calls itself 'mal'" in human
    # a listed approver with a ticket the stage's pattern rejects
    out = js(run(project, "approve", ref, "--stage", "prod", "--key", alice, "--ticket", "JIRA-1", "--json"))
    assert out["approver"] == "alice" and out["predicate"]["approver"]["name"] == "alice"
    assert [w for w in out["warnings"] if "does not match stage prod's change_ticket pattern" in w]
    out = js(run(project, "approve", ref, "--stage", "prod", "--key", alice, "--ticket", "CHG-1234", "--json"))
    assert out["warnings"] == [] and out["digest"] == d1
    assert any("already approved" in n and "counts once" in n for n in out["notes"])  # alice approved above
    # by tag: the digest it names is approved and said; --strict refuses the tag
    tag_ref = f"{registry_address}/{unique_repo}:{VARIANT}"
    proc = run(project, "approve", tag_ref, "--stage", "staging", "--key", alice)
    assert f"names {d1} now" in " ".join(proc.stderr.split())
    err = js(run(project, "approve", tag_ref, "--stage", "staging", "--key", alice, "--strict", "--json", code=2))
    assert "--strict approves only a digest" in err["error"]["message"]
    # the tag is what the user typed: said first, before the policy's verdict on the key (exit 2, not 16)
    err = js(run(project, "approve", tag_ref, "--stage", "prod", "--key", mallory, "--strict", "--json", code=2))
    assert "--strict approves only a digest" in err["error"]["message"] and "@sha256:" in err["error"]["hint"]
    wrong = run(
        project, "approve", f"{registry_address}/{unique_repo}@sha256:1234", "--stage", "prod", "--key", alice, code=2
    )
    assert "Traceback" not in wrong.stderr and "sha256" in wrong.stderr
    bare = run(
        project, "approve", f"{registry_address}/{unique_repo}", "--stage", "prod", "--key", alice, "--strict", code=2
    )
    assert "neither a tag nor a digest" in bare.stderr and "is a tag" not in bare.stderr
    # a stage without an approvals rule
    out = js(run(project, "approve", ref, "--stage", "dev", "--key", alice, "--json"))
    assert any("has no approvals rule" in w for w in out["warnings"])


def test_promotion_commands_on_a_password_protected_registry(run: Run, tmp_path: Path, unique_repo: str) -> None:
    """Credentials only in the Docker config (``$DOCKER_CONFIG`` or ``--docker-config``): promote,
    rollback, history, status and resolve all reach a registry that answers 401 without them."""
    from builder.registry import DockerCredentials
    from builder.signing.sign import sign_image

    with password_registry(tmp_path / "registry") as registry:
        root = _project(tmp_path / "project", registry, unique_repo)
        docker_config = docker_config_dir(tmp_path / "docker", registry)
        client = RegistryClient(registry, insecure=True, auth=DockerCredentials.from_file(docker_config))
        signer = load_signer(root / "state" / "keys" / "build" / "builder.key", None)

        def build(content: bytes) -> str:
            digest = push_image(client, unique_repo, VARIANT, content=content)
            sign_image(client, unique_repo, digest, signer, lock_dir=root / "state" / "locks")
            return digest

        d1 = build(b"auth one")
        # without credentials the registry refuses (exit 6), and the hint's --docker-config exists
        err = js(run(root, "promote", VARIANT, "--to", "dev", "--json", code=6))
        assert "--docker-config" in err["error"]["hint"]
        env = {"DOCKER_CONFIG": str(docker_config)}
        out = js(run(root, "promote", VARIANT, "--to", "dev", "--confirm", "--json", env=env))["results"][0]
        assert out["applied"] and out["digest"] == d1
        d2 = build(b"auth two")
        flag = ("--docker-config", str(docker_config))
        out = js(run(root, "promote", VARIANT, "--to", "dev", "--confirm", "--json", *flag))["results"][0]
        assert out["applied"] and out["digest"] == d2 and out["previous"] == d1
        alice = str(root / "state" / "keys" / "alice" / "builder.key")
        out = js(run(root, "rollback", "dev", VARIANT, "--key", alice, "--confirm", "--json", *flag))
        assert out["record"]["digest"] == d1 and out["record"]["previous"] == d2
        hist = js(run(root, "history", VARIANT, "--stage", "dev", "--json", env=env))["stages"][0]["records"]
        assert [(h["action"], h["digest"]) for h in hist] == [("rollback", d1), ("promote", d2), ("promote", d1)]
        rows = js(run(root, "status", "--json", *flag))["rows"]
        dev = next(r for r in rows if r["stage"] == "dev")
        assert dev["digest"] == d1 and dev["action"] == "rollback" and dev["signatures"] == 1
        # the verified layers' verdicts are kept (keyed by this registry among the rest); a second
        # status answers them from there and shows the same rows
        assert list((root / "state" / "cache" / "verdicts").glob("*/*.json"))
        again = js(run(root, "status", "--json", *flag))["rows"]
        assert [{**r, "age_seconds": None} for r in again] == [{**r, "age_seconds": None} for r in rows]
        out = js(run(root, "resolve", VARIANT, "--stage", "dev", "--json", *flag))
        assert out["reference"] == f"{registry}/{unique_repo}@{d1}"
        err = js(run(root, "resolve", VARIANT, "--stage", "dev", "--json", code=6))
        assert "--docker-config" in err["error"]["hint"]


@pytest.mark.parametrize("claimed", ["../../other/evil", "evil/../x", "Evil Tag", "sha256-" + "0" * 64])
def test_an_image_label_cannot_choose_where_a_tag_is_written(
    run: Run, project: Path, registry_address: str, unique_repo: str, claimed: str
) -> None:
    """The io.builder.variant label is the image's own claim: a crafted one is refused before any
    write, whether it comes from the label or from --variant-id (one grammar for variant ids)."""
    client = RegistryClient(registry_address, insecure=True)
    digest = push_image(client, unique_repo, "crafted", labels={"io.builder.variant": claimed})
    ref = f"{registry_address}/{unique_repo}@{digest}"
    before = set(client.list_tags(unique_repo))
    err = js(run(project, "promote", ref, "--to", "dev", "--confirm", "--json", code=2))["error"]
    assert "builder-project.variant label" in err["message"] and "is not a variant id" in err["message"], err
    err = js(run(project, "promote", ref, "--variant-id", claimed, "--to", "dev", "--confirm", "--json", code=2))
    assert "--variant-id" in err["error"]["message"]
    assert set(client.list_tags(unique_repo)) == before  # nothing written
