"""``builder build`` end to end in a throwaway project (real matrices, templates, engine and
registry): build two variants, no-op rerun from a fresh state directory, only the changed
variant rebuilt (also found by --changed-since), exit codes for a missing engine/registry."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient, verify_complete
from tests.projects import cpu_matrix

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.conftest import Cli, CliResult

ROOT = Path(__file__).resolve().parents[2]


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def project(tmp_path: Path, unique_repo: str, registry_address: str, mirror_base: str) -> Iterator[Path]:
    """A project with two one-variant matrices (families tiny and tiny2) in a git repository."""
    p = tmp_path / "proj"
    (p / "matrices").mkdir(parents=True)
    (p / "images").mkdir()
    shutil.copytree(ROOT / "images" / "_common", p / "images" / "_common")
    shutil.copytree(ROOT / "images" / "tiny", p / "images" / "tiny")
    shutil.copytree(ROOT / "images" / "tiny", p / "images" / "tiny2")
    (p / "matrices" / "tiny.yaml").write_text(cpu_matrix("tiny", unique_repo))
    (p / "matrices" / "tiny2.yaml").write_text(cpu_matrix("tiny2", unique_repo))
    (p / "builder.toml").write_text(f'registry = "{registry_address}"\nstate_dir = "state"\n')
    (p / ".gitignore").write_text("state/\n")
    state = p / "state"
    state.mkdir()
    shutil.copy(ROOT / ".builder" / "mirror.json", state / "mirror.json")
    _git(p, "init", "-q")
    _git(p, "add", ".")
    _git(p, "commit", "-q", "-m", "init")
    yield p


@dataclasses.dataclass
class BuilderCli:
    """``builder -C PROJECT ARGS`` in-process (the ``cli`` fixture), whatever the exit code; ``env``
    holds for that call only (a later call without it sees the test's own environment again)."""

    cli: Cli
    monkeypatch: pytest.MonkeyPatch
    original: dict[str, str | None] = dataclasses.field(default_factory=dict)

    def __call__(self, project: Path, *args: str, env: dict[str, str] | None = None) -> CliResult:
        for name, value in self.original.items():
            if value is None:
                self.monkeypatch.delenv(name, raising=False)
            else:
                self.monkeypatch.setenv(name, value)
        for name in env or {}:
            self.original.setdefault(name, os.environ.get(name))
        return self.cli("-C", str(project), *args, code=None, env=env, cwd=project)


@pytest.fixture
def builder(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> BuilderCli:
    return BuilderCli(cli, monkeypatch)


def _statuses(result: CliResult) -> dict[str, str]:
    assert result.code == 0, result.stderr[-3000:]
    doc = result.json()
    return {i["variant"]: i["status"] for i in doc["images"]}


A, B = "tiny-cpu-py3.11-debian12", "tiny2-cpu-py3.11-debian12"


def test_build_noop_and_only_changed_variant(
    builder: BuilderCli, docker_engine: str, registry_address: str, unique_repo: str, project: Path
) -> None:
    first = builder(project, "build", "--json")
    assert _statuses(first) == {A: "built", B: "built"}
    client = RegistryClient(registry_address, insecure=True)
    for item in json.loads(first.stdout)["images"]:
        assert client.resolve(unique_repo, item["content_tag"]) == item["digest"]
        assert verify_complete(client, unique_repo, item["digest"]) == []
        assert Path(item["log"]).is_file()

    fresh = project / "fresh-state"
    fresh.mkdir()
    shutil.copy(project / "state" / "mirror.json", fresh / "mirror.json")
    noop = builder(project, "build", "--json", env={"BUILDER_STATE_DIR": str(fresh)})
    assert _statuses(noop) == {A: "up-to-date", B: "up-to-date"}
    assert not (fresh / "logs").exists()

    template = project / "images" / "tiny2" / "Dockerfile.j2"
    template.write_text(template.read_text() + 'LABEL io.builder.test.changed="yes"\n')
    plan = builder(project, "build", "--dry-run", "--json", "--changed-since", "HEAD")
    assert plan.code == 0, plan.stderr
    assert [(p["variant"], p["action"]) for p in json.loads(plan.stdout)["plan"]] == [(B, "build")]
    third = builder(project, "build", "--json")
    assert _statuses(third) == {A: "up-to-date", B: "built"}


def test_matrix_list_and_build_dry_run_choose_the_same_shards(
    builder: BuilderCli, registry_address: str, project: Path
) -> None:
    """Three variants read in an order that is not id order (a.yaml: tiny2-cpu, tiny2-cu128; b.yaml:
    tiny-cpu): for every I of N, `builder matrix list --shard I/N` and `builder build --shard I/N
    --dry-run` name the same variants, and the shards of N cover every variant once."""
    for name in ("tiny.yaml", "tiny2.yaml"):
        (project / "matrices" / name).unlink()
    two = cpu_matrix("tiny2", "test/shards").replace(
        "    - {kind: cpu}\n", '    - {kind: cpu}\n    - {kind: cuda, version: "12.8"}\n'
    )
    (project / "matrices" / "a.yaml").write_text(two)
    (project / "matrices" / "b.yaml").write_text(cpu_matrix("tiny", "test/shards"))
    every = json.loads(builder(project, "matrix", "list", "--json").stdout)
    assert [v["id"] for v in every] == ["tiny2-cpu-py3.11-debian12", "tiny2-cu128-py3.11-debian12", A]
    for n in (1, 2, 3):
        covered: list[str] = []
        for i in range(1, n + 1):
            listed = builder(project, "matrix", "list", "--json", "--shard", f"{i}/{n}")
            assert listed.code == 0, listed.stderr[-2000:]
            planned = builder(project, "build", "--dry-run", "--json", "--shard", f"{i}/{n}")
            assert planned.code == 0, planned.stderr[-2000:]
            ids = [v["id"] for v in json.loads(listed.stdout)]
            assert ids == [p["variant"] for p in json.loads(planned.stdout)["plan"]], (i, n)
            covered += ids
        assert sorted(covered) == sorted(v["id"] for v in every)


def test_engine_unavailable_exits_3(builder: BuilderCli, registry_address: str, project: Path) -> None:
    """Nothing is built yet in this repository, so the build needs the engine: exit 3."""
    proc = builder(
        project,
        "build",
        "--json",
        env={"DOCKER_HOST": "unix:///nonexistent.sock"},
    )
    assert proc.code == 3, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["error"]["kind"] == "engine-unavailable"


def test_registry_unreachable_exits_5(builder: BuilderCli, project: Path) -> None:
    proc = builder(project, "build", "--json", env={"BUILDER_REGISTRY": "127.0.0.1:9"})
    assert proc.code == 5, proc.stderr[-2000:]
    err = json.loads(proc.stdout)["error"]
    assert err["kind"] == "registry-unavailable" and "127.0.0.1:9" in err["message"]


def test_content_tag_collision_exits_15(
    builder: BuilderCli, docker_engine: str, registry_address: str, project: Path
) -> None:
    """A rebuild that yields another digest for an existing content tag is refused (exit 15) and
    the tag keeps its digest."""
    (project / "images" / "tiny2" / "Dockerfile.j2").write_text(
        "ARG BASE_IMAGE={{ base_default }}\nFROM ${BASE_IMAGE}\nRUN head -c 32 /dev/urandom > /random\n"
    )
    first = builder(project, "build", "--json", "--select", "tiny2*")
    assert _statuses(first) == {B: "built"}
    item = json.loads(first.stdout)["images"][0]
    again = builder(project, "build", "--json", "--select", "tiny2*", "--rebuild", "--no-cache")
    assert again.code == 15, again.stderr[-2000:]
    err = json.loads(again.stdout)["error"]
    assert err["kind"] == "tag-conflict" and item["digest"] in err["message"]
    client = RegistryClient(registry_address, insecure=True)
    assert client.resolve(item["reference"].split("/", 1)[1], item["content_tag"]) == item["digest"]


def test_build_sign_attaches_verifiable_provenance(
    builder: BuilderCli, docker_engine: str, registry_address: str, cosign_bin: str, project: Path
) -> None:
    """`builder build --sign` signs each pushed digest and attaches its SLSA provenance; `builder
    verify` and real cosign (the independent judge) accept both."""
    (project / "images" / "tiny2" / "Dockerfile.j2").write_text(
        "ARG BASE_IMAGE={{ base_default }}\nFROM ${BASE_IMAGE}\nRUN echo signed-{{ variant.id }} > /v\n"
    )
    env = {"BUILDER_KEY_PASSWORD": "pw-for-test", "COSIGN_PASSWORD": "pw-for-test"}
    keys = builder(project, "keys", "generate", "--json", env=env)
    assert keys.code == 0, keys.stderr
    pub = json.loads(keys.stdout)["public_key"]
    built = builder(project, "build", "--json", "--select", "tiny2*", "--sign", env=env)
    assert _statuses(built) == {B: "built"}
    item = json.loads(built.stdout)["images"][0]
    ref = item["pinned"]
    verify = builder(project, "verify", ref, "--key", pub, "--attestation", "https://slsa.dev/provenance/v1", "--json")
    assert verify.code == 0, verify.stderr[-2000:]
    cosign = subprocess.run(
        [
            cosign_bin,
            "verify-attestation",
            "--key",
            pub,
            "--insecure-ignore-tlog",
            "--allow-http-registry",
            "--type",
            "https://slsa.dev/provenance/v1",
            ref,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cosign.returncode == 0, cosign.stderr[-2000:]
    envelope = json.loads(cosign.stdout.strip().splitlines()[0])
    statement = json.loads(base64.b64decode(envelope["payload"]))
    predicate = statement["predicate"]
    assert predicate["buildDefinition"]["externalParameters"]["variant"] == B
    assert predicate["buildDefinition"]["internalParameters"]["contentTag"] == item["content_tag"]
    deps = {d.get("name"): d for d in predicate["buildDefinition"]["resolvedDependencies"]}
    assert deps["source"]["digest"]["gitCommit"]  # the project is a git checkout
    assert statement["subject"][0]["digest"]["sha256"] == item["digest"].split(":", 1)[1]


def test_tiny_matrix_variants_build_then_noop(
    builder: BuilderCli, docker_engine: str, registry_address: str, tmp_path: Path
) -> None:
    """The two variants of tests/data/matrices/tiny.yaml (Debian + Python, one with a locked
    package installed with the CA bundle secret) build and push (or already exist: content tags
    are shared by every run), then a run from an empty state directory builds nothing."""
    matrix = ROOT / "tests" / "data" / "matrices" / "tiny.yaml"
    states = []
    for name in ("first", "fresh"):
        d = tmp_path / name
        d.mkdir()
        shutil.copy(ROOT / ".builder" / "mirror.json", d / "mirror.json")
        states.append(d)
    env = {"BUILDER_REGISTRY": registry_address}
    first = builder(ROOT, "build", "--json", "--matrix", str(matrix), env={**env, "BUILDER_STATE_DIR": str(states[0])})
    statuses = _statuses(first)
    assert set(statuses) == {"tiny-cpu-py3.11-debian12", "tiny-cu128-py3.11-debian12"}
    assert set(statuses.values()) <= {"built", "up-to-date"}
    again = builder(ROOT, "build", "--json", "--matrix", str(matrix), env={**env, "BUILDER_STATE_DIR": str(states[1])})
    assert set(_statuses(again).values()) == {"up-to-date"}
    assert not (states[1] / "logs").exists()
    client = RegistryClient(registry_address, insecure=True)
    for item in json.loads(again.stdout)["images"]:
        assert verify_complete(client, "test/tiny", item["digest"]) == []


def test_build_sign_signs_an_image_built_earlier_unsigned(
    builder: BuilderCli, docker_engine: str, registry_address: str, project: Path
) -> None:
    """`builder build --sign` on a digest that exists unsigned signs it (as `builder run` does) and
    says so: status ``signed``, counted in the JSON document and the summary; once signed it is
    ``up-to-date``."""
    (project / "images" / "tiny2" / "Dockerfile.j2").write_text(
        "ARG BASE_IMAGE={{ base_default }}\nFROM ${BASE_IMAGE}\nRUN echo signed-later-{{ variant.id }} > /v\n"
    )
    env = {"BUILDER_KEY_PASSWORD": "pw-for-test"}
    keys = builder(project, "keys", "generate", "--json", env=env)
    assert keys.code == 0, keys.stderr
    pub = json.loads(keys.stdout)["public_key"]
    unsigned = builder(project, "build", "--json", "--select", "tiny2*", "--no-sign", env=env)
    assert _statuses(unsigned) == {B: "built"}
    ref = json.loads(unsigned.stdout)["images"][0]["pinned"]
    provenance = ("--attestation", "https://slsa.dev/provenance/v1")
    assert builder(project, "verify", ref, "--key", pub, *provenance).code == 18

    signed = builder(project, "build", "--json", "--select", "tiny2*", "--sign", env=env)
    assert _statuses(signed) == {B: "signed"}
    assert json.loads(signed.stdout)["counts"] == {"built": 0, "up-to-date": 0, "signed": 1, "failed": 0}
    verify = builder(project, "verify", ref, "--key", pub, *provenance, "--json")
    assert verify.code == 0, verify.stderr[-2000:]

    again = builder(project, "build", "--select", "tiny2*", "--sign", env={**env, "COLUMNS": "200"})
    assert again.code == 0 and "1 up-to-date" in again.stderr and "signed" not in again.stderr.replace("unsigned", "")


def test_build_sign_attaches_the_sbom(
    builder: BuilderCli, docker_engine: str, registry_address: str, cosign_bin: str, project: Path
) -> None:
    """`builder build --sign` also attaches the image's CycloneDX SBOM (docs/inspect.md), which real
    cosign accepts as `--type cyclonedx`; it lists the image's dpkg packages."""
    env = {"BUILDER_KEY_PASSWORD": "pw-for-test", "COSIGN_PASSWORD": "pw-for-test"}
    keys = builder(project, "keys", "generate", "--json", env=env)
    assert keys.code == 0, keys.stderr
    pub = json.loads(keys.stdout)["public_key"]
    built = builder(project, "build", "--json", "--select", "tiny*", "--sign", env=env)
    ref = json.loads(built.stdout)["images"][0]["pinned"]
    cosign = subprocess.run(
        [cosign_bin, "verify-attestation", "--key", pub, "--insecure-ignore-tlog", "--type", "cyclonedx", ref],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cosign.returncode == 0, cosign.stderr[-2000:]
    statement = json.loads(base64.b64decode(json.loads(cosign.stdout.strip().splitlines()[0])["payload"]))
    assert statement["predicateType"] == "https://cyclonedx.org/bom"
    purls = [c.get("purl", "") for c in statement["predicate"]["components"]]
    assert any(p.startswith("pkg:deb/debian/") for p in purls)
