"""``builder inspect`` and the measured-code verdicts of ``builder check --static``, end to end.

Small images built here with ``docker buildx`` (no builder involved: "images built outside builder"),
FROM the mirrored Debian base, carrying real GPU libraries:

- ``cu126`` / ``cu128``: the NVIDIA CUDA runtime wheel 12.6.77 / 12.8.90 from PyPI plus bitsandbytes
  0.50.2's ``libbitsandbytes_cuda126.so``, ``_cuda128.so`` and ``_rocm72.so`` (the same layer first, so the
  two images share it);
- ``stale`` / ``fixed``: CUDA 12.8 images with a custom-extension library made by NVIDIA's ``ptxas`` +
  ``fatbinary`` (13.5) for sm_80 and sm_90 only, no PTX (a stale ``TORCH_CUDA_ARCH_LIST``), or with sm_120
  SASS too; ``removed``: ``stale`` with the library deleted in a later layer (a whiteout).

The verdicts come from a fleet file with an H100 and an RTX 5090 (sm_120) cluster on R570 drivers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from builder.registry import Credential, RegistryClient, copy_image
from tests import gpu_code
from tests.attestations import statements, verify_attestation
from tests.conftest import ROOT, Cli
from tests.faultproxy import Fault, FaultProxy
from tests.registries import AuthRegistry, auth_registry

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.integration

SITE = "/usr/local/lib/python3.11/dist-packages"
FLEET = """\
name: blackwell-check
clusters:
  - name: h100
    vendor: nvidia
    gpus: ["NVIDIA H100 80GB HBM3"]
    drivers: ["570.172.08"]
    brand: NVIDIA
  - name: rtx5090
    vendor: nvidia
    gpus: ["NVIDIA GeForce RTX 5090"]
    drivers: ["570.172.08"]
    brand: GeForce
"""


def _build(ctx: Path, dockerfile: str, ref: str, base: str) -> None:
    (ctx / "Dockerfile").write_text(dockerfile)
    subprocess.run(
        [
            "docker",
            "buildx",
            "build",
            "--push",
            "--provenance=false",
            "--build-arg",
            f"BASE={base}",
            "-t",
            ref,
            str(ctx),
        ],
        check=True,
        capture_output=True,
        timeout=900,
    )


def _runtime(site: Path, version: str) -> None:
    rt = gpu_code.cuda_runtime(version)
    shutil.copytree(rt / "nvidia" / "cuda_runtime" / "lib", site / "nvidia" / "cuda_runtime" / "lib")
    for info in rt.glob("*.dist-info"):
        shutil.copytree(info, site / info.name)


@pytest.fixture(scope="module")
def images(
    registry_address: str, docker_engine: str, mirror_base: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    repo = f"{registry_address}/test/inspect-{uuid.uuid4().hex[:10]}"
    refs: dict[str, str] = {}
    bnb = tmp_path_factory.mktemp("bnb")
    lib = bnb / "bnb"
    lib.mkdir()
    for name in ("libbitsandbytes_cuda126.so", "libbitsandbytes_cuda128.so", "libbitsandbytes_rocm72.so"):
        shutil.copy(gpu_code.bitsandbytes_lib(name), lib / name)
    for version, cuda in (("12.6.77", "12.6.3"), ("12.8.90", "12.8.1")):
        rt = bnb / f"rt-{version}"
        _runtime(rt, version)
        _build(
            bnb,
            "ARG BASE\nFROM ${BASE}\n"
            f"COPY bnb/ {SITE}/bitsandbytes/\n"
            f"COPY rt-{version}/ {SITE}/\n"
            f'ENV CUDA_VERSION={cuda} NVIDIA_REQUIRE_CUDA="cuda>={cuda[:4]}"\n',
            refs.setdefault(f"cu{cuda[:4].replace('.', '')}", f"{repo}:cu{cuda[:4].replace('.', '')}"),
            mirror_base,
        )
    libs: dict[str, Path] = {}
    for name, sass in (("stale", ("sm_80", "sm_90")), ("fixed", ("sm_80", "sm_90", "sm_120"))):
        ctx = tmp_path_factory.mktemp(name)
        fb = gpu_code.make_fatbin(ctx / "kernels.fatbin", sass=sass)
        libs[name] = gpu_code.make_library(ctx / "libcustom_kernels.so", fb)
        _runtime(ctx / "rt", "12.8.90")
        refs[name] = f"{repo}:{name}"
        _build(
            ctx,
            "ARG BASE\nFROM ${BASE}\n"
            f"COPY rt/ {SITE}/\n"
            "COPY libcustom_kernels.so /opt/ext/lib/libcustom_kernels.so\n"
            'ENV CUDA_VERSION=12.8.1 NVIDIA_REQUIRE_CUDA="cuda>=12.8"\n',
            refs[name],
            mirror_base,
        )
    ctx = tmp_path_factory.mktemp("claim")  # a framework package whose build lacks a target its label claims
    shutil.copy(libs["stale"], ctx / "libtorch_cuda.so")
    (ctx / "torch-2.7.0+cu128.dist-info").mkdir()
    (ctx / "torch-2.7.0+cu128.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.7.0+cu128\n"
    )
    refs["claim"] = f"{repo}:claim"
    _build(
        ctx,
        "ARG BASE\nFROM ${BASE}\n"
        f"COPY libtorch_cuda.so {SITE}/torch/lib/libtorch_cuda.so\n"
        f"COPY torch-2.7.0+cu128.dist-info/ {SITE}/torch-2.7.0+cu128.dist-info/\n"
        'LABEL io.builder.gpu-archs="sm_80,sm_90,sm_120"\n',
        refs["claim"],
        refs["stale"],
    )
    ctx = tmp_path_factory.mktemp("removed")
    refs["removed"] = f"{repo}:removed"
    _build(ctx, "ARG BASE\nFROM ${BASE}\nRUN rm /opt/ext/lib/libcustom_kernels.so\n", refs["removed"], refs["stale"])
    return refs


@pytest.fixture(autouse=True)
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _inspect(cli: Cli, ref: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(cli("inspect", ref, "--json", *args, env=env).stdout)
    return doc


def test_inspect_reads_targets_and_stack(cli: Cli, images: dict[str, str]) -> None:
    doc = _inspect(cli, images["cu128"], "--no-cache")
    binaries = {b["path"]: b for b in doc["binaries"]}
    lib128 = f"{SITE}/bitsandbytes/libbitsandbytes_cuda128.so"
    sass, ptx = gpu_code.cuobjdump_targets(gpu_code.bitsandbytes_lib("libbitsandbytes_cuda128.so"))
    assert set(binaries[lib128]["sass"]) == sass
    assert set(binaries[lib128]["ptx"]) == ptx
    assert "gfx90a" in binaries[f"{SITE}/bitsandbytes/libbitsandbytes_rocm72.so"]["gfx"]
    assert doc["loading"] == [lib128, f"{SITE}/bitsandbytes/libbitsandbytes_rocm72.so"]  # cuda126 does not load
    stack = doc["stack"]
    assert doc["min_driver"] == "570.26"  # the installed runtime's CUDA 12.8 line
    assert doc["min_driver_jit"] == "570.26"  # compute_120 PTX of ISA 8.7 (CUDA 12.8)
    assert stack["cuda_runtime"] == "12.8.90"
    assert stack["python"] == ["3.11"]
    assert stack["env"]["CUDA_VERSION"] == "12.8.1"
    assert "libc6" in stack["dpkg_packages"]
    assert str(doc["reference"]).startswith(images["cu128"].rsplit(":", 1)[0] + "@sha256:")


def test_whiteout_removes_a_library(cli: Cli, images: dict[str, str]) -> None:
    assert [b["path"] for b in _inspect(cli, images["stale"])["binaries"]] == ["/opt/ext/lib/libcustom_kernels.so"]
    assert _inspect(cli, images["removed"])["binaries"] == []


def test_sibling_reads_only_its_new_layers(cli: Cli, images: dict[str, str], tmp_path: Path) -> None:
    first = _inspect(cli, images["cu126"], env={"BUILDER_STATE_DIR": str(tmp_path / "state")})
    second = _inspect(cli, images["cu128"], env={"BUILDER_STATE_DIR": str(tmp_path / "state")})
    assert not any(layer["cached"] for layer in first["layers"])
    cached = [layer["cached"] for layer in second["layers"]]
    assert cached == [True, True, False]  # base and bitsandbytes layers shared; the runtime layer is new


def test_static_fleet_verdict_from_measured_code(cli: Cli, images: dict[str, str], tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    stale = cli("check", images["stale"], "--static", "--fleet", str(fleet), "--json", code=11)
    clusters = {c["cluster"]: c for c in json.loads(stale.stdout)["error"]["details"]["verdict"]["clusters"]}
    assert clusters["h100"]["verdict"] == "ok"
    assert clusters["rtx5090"]["verdict"] == "blocked"
    assert any("libcustom_kernels.so" in r and "sm_120" in r for r in clusters["rtx5090"]["reasons"])
    fixed = json.loads(cli("check", images["fixed"], "--static", "--fleet", str(fleet), "--json", code=0).stdout)
    assert {c["cluster"]: c["verdict"] for c in fixed["clusters"]} == {"h100": "ok", "rtx5090": "ok"}
    human = cli("check", images["stale"], "--static", "--fleet", str(fleet), code=11)
    assert "libcustom_kernels.so: no SASS for sm_120" in human.stderr


@pytest.fixture
def protected(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthRegistry]:
    with auth_registry(tmp_path_factory.mktemp("inspect-registry"), "basic") as reg:
        yield reg


def test_inspect_on_a_password_protected_registry(
    cli: Cli, images: dict[str, str], protected: AuthRegistry, registry_address: str, tmp_path: Path
) -> None:
    repo, _, tag = images["fixed"].removeprefix(registry_address + "/").partition(":")
    source = RegistryClient(registry_address, insecure=True)
    target = RegistryClient(protected.address, insecure=True, auth=Credential(protected.user, protected.password))
    copy_image(source, repo, source.resolve(repo, tag), target, "team/fixed", tag="v1")
    env = {"DOCKER_CONFIG": str(protected.docker_config(tmp_path / "docker")), "HOME": str(tmp_path / "home")}
    doc = _inspect(cli, f"{protected.address}/team/fixed:v1", "--no-cache", env=env)
    assert doc["binaries"][0]["sass"] == ["sm_80", "sm_90", "sm_120"]
    wrong = {"DOCKER_CONFIG": str(protected.docker_config(tmp_path / "bad", password="nope")), "HOME": str(tmp_path)}
    denied = cli("inspect", f"{protected.address}/team/fixed:v1", "--no-cache", env=wrong, code=6)
    assert "Traceback" not in denied.stderr


def test_unknown_image_is_a_clear_error(cli: Cli, registry_address: str) -> None:
    r = cli("inspect", f"{registry_address}/test/no-such-image-{uuid.uuid4().hex[:8]}:v1", code=8)
    assert "Traceback" not in r.stderr
    assert "no-such-image" in r.stderr


def test_fleet_file_text_is_valid_yaml(tmp_path: Path) -> None:
    """The fleet used above is a valid fleet (its clusters resolve to sm_90 and sm_120)."""
    from builder.checks.host.reading import load_host
    from builder.compat.fleets import load_fleet

    path = tmp_path / "fleet.yaml"
    path.write_text(textwrap.dedent(FLEET))
    fleet = load_fleet(path, load_host=load_host)
    assert [c.name for c in fleet.clusters] == ["h100", "rtx5090"]


def test_diff_names_the_cuda_change_and_the_targets_gained(cli: Cli, images: dict[str, str], tmp_path: Path) -> None:
    doc = json.loads(cli("diff", images["cu126"], images["cu128"], "--json").stdout)
    assert doc["stack"]["cuda_runtime"] == {"a": "12.6.77", "b": "12.8.90"}
    assert {"sm_100", "sm_120"} <= set(doc["targets"]["gained"])
    assert "sm_60" in doc["targets"]["lost"]  # bitsandbytes' CUDA 12.8 build dropped Pascal
    assert doc["min_driver"] == {"a": "560.28.03", "b": "570.26"}
    assert doc["packages"]["python"]["changed"]["nvidia-cuda-runtime-cu12"] == {"a": "12.6.77", "b": "12.8.90"}
    assert doc["fleet"] is None
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    human = cli("diff", images["stale"], images["fixed"], "--fleet", str(fleet))
    assert "GPU targets gained: sm_120" in human.stderr
    assert "cluster rtx5090: blocked -> ok" in human.stderr
    assert all(len(line) <= 80 for line in human.stderr.splitlines() if not line.startswith(("a: ", "b: ")))


def test_sbom_is_accepted_by_cosign_verify_attestation_cyclonedx(
    cli: Cli, images: dict[str, str], cosign_bin: str, tmp_path: Path
) -> None:
    env = {"BUILDER_KEY_PASSWORD": "sbom-test"}
    cli("keys", "generate", "--output-dir", str(tmp_path / "keys"), env=env)
    out = tmp_path / "sbom.cdx.json"
    doc = json.loads(
        cli(
            "sbom", images["cu128"], "--key", str(tmp_path / "keys" / "builder.key"), "-o", str(out), "--json", env=env
        ).stdout
    )
    assert doc["attested"] is True
    assert doc["predicate_type"] == "https://cyclonedx.org/bom"
    bom = json.loads(out.read_text())
    assert bom["bomFormat"] == "CycloneDX"
    purls = {c.get("purl") for c in bom["components"]}
    assert "pkg:pypi/nvidia-cuda-runtime-cu12@12.8.90" in purls
    assert any(p and p.startswith("pkg:deb/debian/libc6@") for p in purls)
    gpu = {
        c["name"]: {p["name"]: p["value"] for p in c["properties"]}
        for c in bom["components"]
        if c.get("type") == "file"
    }
    lib = gpu[f"{SITE}/bitsandbytes/libbitsandbytes_cuda128.so"]
    assert "sm_120" in lib["builder:gpu:sass"].split()
    assert lib["builder:gpu:loads"] == "true"
    verify = verify_attestation(cosign_bin, tmp_path / "keys" / "builder.pub", images["cu128"], "cyclonedx")
    assert verify.returncode == 0, verify.stderr
    statement = statements(verify.stdout)[0]
    assert statement["predicateType"] == "https://cyclonedx.org/bom"
    assert statement["predicate"]["metadata"]["component"]["type"] == "container"
    wrong = verify_attestation(cosign_bin, tmp_path / "keys" / "builder.pub", images["cu128"], "spdxjson")
    assert wrong.returncode != 0  # cosign is a real judge: no SPDX attestation is there


def test_policy_fleet_evidence_judges_the_measured_code(images: dict[str, str], tmp_path: Path) -> None:
    """The fleet checker promotions use (policy `fleet` rules, `resolve --cluster`) sees the library."""
    from builder.image.layers import LayerCache
    from builder.promote.fleets import compat_fleet_checker

    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    checker = compat_fleet_checker(LayerCache(tmp_path / "layers"))
    registry, _, rest = images["stale"].partition("/")
    repo, _, tag = rest.partition(":")
    client = RegistryClient(registry, insecure=True)
    for name, rtx5090 in (("stale", "blocked"), ("fixed", "ok")):
        rows = {r.cluster: r for r in checker(client, repo, client.resolve(repo, name), str(fleet))}
        assert rows["h100"].verdict == "ok"
        assert rows["rtx5090"].verdict == rtx5090
    stale = {r.cluster: r for r in checker(client, repo, client.resolve(repo, tag), str(fleet))}
    assert "libcustom_kernels.so: no SASS for sm_120" in stale["rtx5090"].reason


def test_inspect_human_output(cli: Cli, images: dict[str, str]) -> None:
    out = cli("inspect", images["cu128"], env={"COLUMNS": "80"}).stderr
    assert "CUDA runtime: 12.8.90" in out
    assert "SASS sm_70 sm_75 sm_80 sm_86 sm_89 sm_90 sm_100 sm_120" in out
    assert "not loaded: the build of another CUDA/ROCm line loads" in out
    assert all(len(line) <= 80 for line in out.splitlines() if not line.lstrip().startswith(("/", "127.0.0.1")))


def test_a_layer_cut_off_mid_download_is_an_error_and_never_cached(
    cli: Cli, images: dict[str, str], registry_address: str, tmp_path: Path
) -> None:
    """The registry connection breaks in the middle of a layer (a real proxy cuts it): inspect exits
    with a registry error naming the layer, no traceback, and caches nothing for that layer; the next
    run reads it whole."""
    state = {"BUILDER_STATE_DIR": str(tmp_path / "state")}
    with FaultProxy(registry_address) as proxy:
        ref = images["cu128"].replace(registry_address, proxy.address)
        proxy.add(Fault("cut", method="GET", path=r"/blobs/sha256:", count=100))
        broken = cli("inspect", ref, "--no-cache", env=state, code=None)
        assert broken.code in (5, 7), broken.stderr
        assert "Traceback" not in broken.stderr
        assert not list((tmp_path / "state").glob("cache/layers/*.json"))
        proxy.clear()
        whole = json.loads(cli("inspect", ref, "--json", env=state).stdout)
    assert whole["stack"]["cuda_runtime"] == "12.8.90"


def test_sigterm_stops_inspect_mid_layer(images: dict[str, str], tmp_path: Path, registry_address: str) -> None:
    """SIGTERM while a layer streams: builder stops (the layer threads see the interruption), exits 143
    with `interrupted by SIGTERM`, no traceback. A fault proxy holds the first blob GET, so the signal
    always arrives mid-layer (no race with a fast machine)."""
    import os
    import signal
    import sys

    env = {**os.environ, "BUILDER_STATE_DIR": str(tmp_path / "state")}
    with FaultProxy(registry_address) as proxy:
        hold = proxy.add(Fault("hold", method="GET", path=r"/blobs/sha256:", count=1))
        ref = images["cu128"].replace(registry_address, proxy.address)
        proc = subprocess.Popen(
            [sys.executable, "-m", "builder", "inspect", ref, "--no-cache"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            while not hold.held.wait(0.5):  # the manifest, the config, then the first layer's GET
                if proc.poll() is not None:
                    pytest.fail(f"inspect exited {proc.returncode} before reading a layer:\n{proc.communicate()[1]}")
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=120)  # a hang guard, not a timing assertion
        finally:
            hold.release.set()
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 143, err
    assert "interrupted by SIGTERM" in err
    assert "Traceback" not in err


def test_the_gpu_archs_label_is_a_checked_claim(cli: Cli, images: dict[str, str]) -> None:
    """The label says sm_120; the framework's library (made by ptxas/fatbinary for sm_80 and sm_90) has
    none: inspect says so, and check --static judges the code, not the label."""
    doc = _inspect(cli, images["claim"])
    assert doc["label_check"] == {
        "declared": ["sm_80", "sm_90", "sm_120"],
        "libraries": [f"{SITE}/torch/lib/libtorch_cuda.so"],
        "uncovered": ["sm_120"],
    }
    assert doc["stack"]["frameworks"][0]["cuda"] == "12.8"
    human = cli("inspect", images["claim"]).stderr
    assert "label gpu-archs claims sm_120, which no framework GPU library has code for" in human
    assert _inspect(cli, images["stale"])["label_check"] is None  # no label, no framework: nothing to check


def test_promote_dry_run_shows_the_diff_against_the_stage(cli: Cli, images: dict[str, str], tmp_path: Path) -> None:
    """Issue 15 item 5 in the promote dry run: ``stale`` is in dev; the plan for ``fixed`` shows what
    an approver must see against it (targets gained, the cluster whose verdict changes, package
    counts), human and in --json; --confirm computes none of it."""
    from tests.integration.test_promote_support import make_keys
    from tests.projects import build_key_policy

    registry, _, rest = images["stale"].partition("/")
    repo = rest.partition(":")[0]
    project = tmp_path / "project"
    (project / "policies").mkdir(parents=True)
    (project / "matrices").mkdir()
    keys = make_keys(project / "state")
    (project / "fleet.yaml").write_text(FLEET)
    (project / "policies" / "default.yaml").write_text(
        build_key_policy(
            keys.pub("build"),
            """\
            dev:
              from: build
              require:
                fleet: {file: ../fleet.yaml, clusters: [h100]}
            """,
        )
    )
    toml = f'registry = "{registry}"\nstate_dir = "state"\nkey = "{keys.key("build")}"\n'
    (project / "builder.toml").write_text(toml)
    variant = f"ext-{uuid.uuid4().hex[:8]}"
    args = ("promote", "--variant-id", variant, "--to", "dev")
    first = json.loads(cli(*args, images["stale"], "--json", cwd=project).stdout)["results"][0]
    assert first["changes"] == {"against": None, "diff": None, "note": first["changes"]["note"]}
    assert "holds nothing" in first["changes"]["note"]
    applied = json.loads(cli(*args, images["stale"], "--confirm", "--json", cwd=project).stdout)["results"][0]
    assert applied["applied"] is True and "changes" not in applied

    plan = json.loads(cli(*args, images["fixed"], "--json", cwd=project).stdout)["results"][0]
    changes = plan["changes"]
    assert changes["against"] == applied["digest"] and changes["note"] == ""
    diff = changes["diff"]
    assert diff["a"] == f"{registry}/{repo}@{applied['digest']}"
    assert diff["b"] == f"{registry}/{repo}@{plan['digest']}"
    assert diff["targets"] == {"gained": ["sm_120"], "lost": []}
    assert diff["binaries"]["changed"] == [
        {"path": "/opt/ext/lib/libcustom_kernels.so", "gained": ["sm_120"], "lost": []}
    ]
    assert diff["fleet"] == [{"cluster": "rtx5090", "a": "blocked", "b": "ok"}]  # every cluster of the file
    assert diff["stack"] == {}  # the same CUDA 12.8 runtime

    human = cli(*args, images["fixed"], cwd=project, env={"COLUMNS": "80"}).stderr
    assert f"changes against what the stage holds ({applied['digest'][:19]}…):" in human
    assert "    GPU targets gained: sm_120" in human and "    cluster rtx5090: blocked -> ok" in human
    assert "    python packages: 0 added, 0 removed, 0 changed" in human
    mine = human[human.index("  changes against") :].splitlines()[:-1]  # up to the dry-run note
    assert mine and all(len(line) <= 80 for line in mine), mine

    back = json.loads(cli(*args, images["stale"], "--json", cwd=project).stdout)["results"][0]
    assert back["changes"]["note"] == "the stage already holds this digest"


def test_device_check_measures_the_gpu_code_while_the_containers_run(images: dict[str, str], tmp_path: Path) -> None:
    """What `builder check` on a GPU host starts before running the containers: the image's loading GPU
    libraries read from the registry in a background thread; an unknown digest is the registry's error."""
    from builder.checks.run import measure_in_background
    from builder.errors import NotFoundError

    registry, _, rest = images["stale"].partition("/")
    repo = rest.partition(":")[0]
    client = RegistryClient(registry, insecure=True)
    digest = client.resolve(repo, "stale")
    wait = measure_in_background(client, repo, digest, "linux/amd64", tmp_path / "layers")
    by_path = {k.path: k for k in wait()}
    assert by_path["/opt/ext/lib/libcustom_kernels.so"].sass == ("sm_80", "sm_90")
    assert list((tmp_path / "layers").glob("sha256-*.json")), "each layer's summary is cached under layer_dir"
    on_a_cpu_host = measure_in_background(client, repo, digest, "linux/amd64", tmp_path / "none", when=lambda: False)
    assert on_a_cpu_host() == () and not (tmp_path / "none").exists(), "nothing read where `when` says no"
    missing = measure_in_background(client, repo, "sha256:" + "0" * 64, "linux/amd64", None)
    with pytest.raises(NotFoundError):
        missing()


def test_stage_changes_say_why_an_image_could_not_be_compared(images: dict[str, str], tmp_path: Path) -> None:
    """The promote dry run's comparison never fails the plan: a stage digest that cannot be read (gone
    from the registry) becomes the note, with the registry's answer."""
    from builder.image.layers import LayerCache
    from builder.promote.changes import ImageAt, stage_changes

    registry, _, rest = images["fixed"].partition("/")
    repo = rest.partition(":")[0]
    client = RegistryClient(registry, insecure=True)
    new = ImageAt(client, repo, client.resolve(repo, "fixed"))
    gone = "sha256:" + "1" * 64
    changes = stage_changes(new, ImageAt(client, repo, gone), cache=LayerCache(tmp_path / "layers"))
    assert changes.diff is None and changes.against == gone
    assert changes.note.startswith(f"could not compare with {gone}: ") and repo in changes.note
    assert changes.to_json() == {"against": gone, "diff": None, "note": changes.note}
