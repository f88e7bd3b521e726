"""Device checks against the real Docker Engine, registry and cosign.

Two tiny images are built FROM the mirrored Debian base (python3 from Debian) and pushed:
a CPU one and a "CUDA" one (labels and NVIDIA_REQUIRE_CUDA as the templates write them; no GPU
code is needed because here the GPU request already fails at container start).
On these machines there is no GPU, no NVIDIA Container Toolkit and CDI is enabled, so
``--gpus all`` really fails as container-toolkit-missing and ``--device nvidia.com/gpu=all``
really fails as cdi-device-unresolvable (real docker stderr, diagnosed).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from typing import TYPE_CHECKING

import pytest

from builder.predicates import DEVICE_CHECK_V1
from tests.conftest import ROOT, Cli

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.integration

DATA = ROOT / "tests" / "data"


@pytest.fixture(autouse=True)
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands run in the repository (its builder.toml; ``fleets/demo.yaml`` relative to it)."""
    monkeypatch.chdir(ROOT)


@pytest.fixture(scope="module")
def images(
    registry_address: str, docker_engine: str, mirror_base: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    repo = f"{registry_address}/test/checks-{uuid.uuid4().hex[:10]}"
    ctx = tmp_path_factory.mktemp("ctx")
    (ctx / "Dockerfile.cpu").write_text(
        f"FROM {mirror_base}\n"
        "RUN apt-get update && apt-get install -y --no-install-recommends python3 && rm -rf /var/lib/apt/lists/*\n"
        'LABEL io.builder.accelerator="cpu" io.builder.framework="none"\n'
    )
    subprocess.run(
        ["docker", "buildx", "build", "--push", "-f", str(ctx / "Dockerfile.cpu"), "-t", f"{repo}:cpu", str(ctx)],
        check=True,
        capture_output=True,
        timeout=900,
    )
    (ctx / "Dockerfile.cuda").write_text(
        f"FROM {repo}:cpu\n"
        'ENV NVIDIA_REQUIRE_CUDA="cuda>=12.8 brand=tesla,driver>=550,driver<551 brand=nvidia,driver>=550,driver<551" '
        "CUDA_VERSION=12.8.1\n"
        'LABEL io.builder.accelerator="cuda" io.builder.cuda.version="12.8" io.builder.gpu-archs="sm_80,sm_90,sm_120"\n'
    )
    subprocess.run(
        ["docker", "buildx", "build", "--push", "-f", str(ctx / "Dockerfile.cuda"), "-t", f"{repo}:cu128", str(ctx)],
        check=True,
        capture_output=True,
        timeout=900,
    )
    yield {"cpu": f"{repo}:cpu", "cuda": f"{repo}:cu128", "repo": repo}


def test_image_probe_reads_labels_and_env_from_registry(images: dict[str, str], registry_address: str) -> None:
    from builder.checks.image import probe_image
    from builder.registry import RegistryClient

    client = RegistryClient(registry_address, insecure=True)
    repo = images["repo"].split("/", 1)[1]
    facts = probe_image(client, repo, "cu128")
    assert facts.accelerator == "cuda" and facts.cuda_version == "12.8"
    assert facts.require_cuda and facts.require_cuda.startswith("cuda>=12.8")
    assert facts.gpu_archs == ("sm_80", "sm_90", "sm_120")
    assert facts.platform == "linux/amd64"
    assert facts.sources["cuda.version"] == "label"
    index = client.get_manifest(repo, "cu128")
    if index.is_index:  # containerd store: index + attestation manifest; the runnable one is read
        assert facts.platform_digest != facts.digest


def test_cpu_check_passes_and_attaches_device_check(
    images: dict[str, str], tmp_path: Path, cosign_bin: str, cli: Cli
) -> None:
    env = {"BUILDER_KEY_PASSWORD": "check-test"}
    cli("keys", "generate", "--output-dir", str(tmp_path / "k"), env=env)
    res = cli("check", images["cpu"], "--key", str(tmp_path / "k" / "builder.key"), "--json", env=env)
    doc = res.json()
    assert doc["passed"] is True and doc["result"] == "passed" and doc["run"]["mode"] == "cpu"
    names = [s["name"] for s in doc["steps"]]
    assert names == ["probe/python", "probe/framework-import", "probe/compute"]
    assert all(s["seconds"] >= 0 for s in doc["steps"])
    assert doc["image"]["digest"].startswith("sha256:")
    assert doc["host"]["engine"]["version"] and doc["host"]["engine"]["oci_runtime"] == "runc"
    assert doc["attestation"]["predicate_type"] == DEVICE_CHECK_V1
    assert doc["attestation"]["key"] == str(tmp_path / "k" / "builder.key")
    # an independent verifier accepts it
    cv = subprocess.run(
        [
            cosign_bin,
            "verify-attestation",
            "--key",
            str(tmp_path / "k" / "builder.pub"),
            "--insecure-ignore-tlog",
            "--allow-insecure-registry",
            "--type",
            DEVICE_CHECK_V1,
            images["cpu"],
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cv.returncode == 0, cv.stderr
    import base64

    envelope = json.loads(cv.stdout.splitlines()[0])
    statement = json.loads(base64.b64decode(envelope["payload"]))
    assert statement["predicateType"] == DEVICE_CHECK_V1
    assert statement["predicate"]["result"] == "passed"
    assert statement["subject"][0]["digest"]["sha256"] == doc["image"]["digest"].split(":", 1)[1]
    # and so does builder verify
    cli(
        "verify",
        images["cpu"],
        "--key",
        str(tmp_path / "k" / "builder.pub"),
        "--attestations-only",
        "--attestation",
        DEVICE_CHECK_V1,
        "--json",
    )
    # the human output says what ran and what was attached
    human = cli("check", images["cpu"], "--key", str(tmp_path / "k" / "builder.key"), env=env)
    assert "running device checks (mode cpu, no devices requested)" in human.stderr
    assert "probe/compute" in human.stderr and "attached device-check/v1 to " in human.stderr


#: what a passing CPU device check never imports: the diagnosis rules and context (a failure), static
#: verdicts, clusters and saved host files (pydantic), the image-layer reader (a GPU host, --static),
#: signing (--no-attest), YAML and the JUnit reader (declared tests)
NOT_ON_A_PASSING_CHECK = (
    "builder.checks.diagnosis.rules",
    "builder.checks.diagnosis.matching",
    "builder.checks.context",
    "builder.checks.static",
    "builder.checks.clusters",
    "builder.checks.host.reading",
    "builder.image",
    "builder.compat.fleets",
    "builder.signing",
    "pydantic",
    "ruamel",
    "xml",
)


def test_a_passing_check_says_what_runs_first_and_imports_only_what_it_uses(images: dict[str, str]) -> None:
    """#19 item 4, as a user runs it (a fresh interpreter, the real engine and registry): the line saying
    what runs comes before the steps (it is printed in a thread as the containers start), the host's engine
    is described (its `docker info` answered while they ran), and `python -X importtime` lists none of the
    modules only a failure, a static verdict, a cluster, a GPU host or signing needs."""
    env = {**os.environ, "NO_COLOR": "1"}
    argv = ["-m", "builder", "check", images["cpu"], "--no-attest"]
    subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, timeout=300)  # caches filled
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    imported = {line.rsplit("|", 1)[-1].strip() for line in lines if line.startswith("import time:")}
    assert "builder.checks.device" in imported
    extra = sorted(m for m in imported for f in NOT_ON_A_PASSING_CHECK if m == f or m.startswith(f + "."))
    assert not extra, f"a passing device check imports {extra}"
    said = [line for line in lines if line.strip() and not line.startswith("import time:")]
    assert said[0].startswith("running device checks (mode cpu, no devices requested) in fresh containers from ")
    assert [line.split()[:2] for line in said[1:]] == [
        ["ok", "probe/python"],
        ["ok", "probe/framework-import"],
        ["ok", "probe/compute"],
    ]
    doc = json.loads(
        subprocess.run(
            [sys.executable, *argv[:2], "--json", *argv[2:]], cwd=ROOT, env=env, capture_output=True, timeout=300
        ).stdout
    )
    assert doc["passed"] and doc["host"]["engine"]["name"] == "docker" and doc["host"]["engine"]["version"]


def require_no_toolkit() -> None:
    """Skip on a machine with the NVIDIA Container Toolkit: the GPU failure paths need a host without it."""
    if shutil.which("nvidia-container-runtime-hook") or shutil.which("nvidia-ctk"):
        pytest.skip("this machine has the NVIDIA Container Toolkit: the failure paths cannot be reproduced")


def test_gpus_all_really_fails_as_toolkit_missing(images: dict[str, str], cli: Cli) -> None:
    require_no_toolkit()
    res = cli("check", images["cuda"], "--no-attest", "--json", code=20)  # CheckFailedError
    err = res.json()["error"]
    assert err["kind"] == "check-failed"
    d = err["details"]
    assert (d["diagnosis"], d["at_fault"], d["noticed_by"]) == (
        "container-toolkit-missing",
        "container-toolkit",
        "container-engine",
    )
    step = d["result"]["steps"][0]
    assert step["name"] == "container-start+nvidia-smi" and not step["ok"]
    assert "could not select device driver" in step["detail"]["stderr"]  # the real engine's words
    assert "--gpus" in step["detail"]["command"]


def test_cdi_request_really_fails_as_unresolvable(images: dict[str, str], cli: Cli) -> None:
    require_no_toolkit()
    d = cli("check", images["cuda"], "--cdi", "--no-attest", "--json", code=20).json()["error"]["details"]
    step = d["result"]["steps"][0]
    if "unresolvable CDI devices" not in step["detail"]["stderr"]:
        pytest.fail("CDI is not enabled in this engine (features.cdi): " + step["detail"]["stderr"][-300:])
    assert (d["diagnosis"], d["at_fault"]) == ("cdi-device-unresolvable", "container-toolkit")
    assert d["result"]["run"]["device_request"] == "cdi:nvidia.com/gpu=all"


def test_static_fleet_verdicts(images: dict[str, str], cli: Cli) -> None:
    # the fleet verdict is the worst over the NVIDIA clusters (docs/fleets.md): ws-4090 blocks -> exit 11
    res = cli("check", images["cuda"], "--static", "--fleet", "fleets/demo.yaml", "--json", code=11)
    doc = res.json()["error"]["details"]["verdict"]
    verdicts = {c["cluster"]: c["verdict"] for c in doc["clusters"]}
    assert verdicts["a100-inference"] == "ok"
    assert verdicts["h100-train"] == "forward-compat"  # R550 exemption, data-center brand
    assert verdicts["ws-4090"] == "blocked"  # no exemption for GeForce
    assert "a100-inference" in doc["runs_on"] and "ws-4090" in doc["blocked_on"]
    assert doc["verdict"] == "blocked" and doc["not_applicable"] == ["mi300x"]  # a CUDA image on AMD: n/a
    # --fleet NAME is the same fleet; the human output leads with the summary line `compat fleet` prints
    human = cli("check", images["cuda"], "--static", "--fleet", "demo", code=11)
    assert doc["header"] in human.stderr and "mi300x: not-applicable (amd)" in human.stderr
    assert "is blocked: cannot run on cluster(s):" in " ".join(human.stderr.split())  # (the console wraps)


def test_static_host_blocked_exit_code(images: dict[str, str], cli: Cli) -> None:
    blocked = DATA / "nvidia-smi" / "nvidia-smi-04.txt"
    err = cli("check", images["cuda"], "--static", "--host", str(blocked), "--json", code=11).json()["error"]
    assert err["details"]["verdict"]["verdict"] == "blocked"
    ok = cli("check", images["cuda"], "--static", "--host", str(DATA / "h200" / "nvidia-smi-q.txt"), "--json").json()
    assert ok["verdict"] == "ok" and ok["reference"].startswith(images["repo"] + "@sha256:")
    assert ok["image"]["cuda_version"] == "12.8" and ok["gpus"][0]["index"] is not None


def test_static_fleet_human_output_has_no_python_none(images: dict[str, str], cli: Cli) -> None:
    """A CPU image's architecture coverage is no question (no GPU code): said in words, never as
    ``None`` or "unknown"; the AMD cluster's configuration is its ROCm release, not a driver."""
    err = cli("check", images["cpu"], "--static", "--fleet", "demo", env={"COLUMNS": "200"}).stderr
    assert "arch covered not applicable (no GPU code)" in err and "None" not in err
    assert "arch covered unknown" not in err and "ROCm 6.3, AMD Instinct MI300X" in err


def test_static_needs_one_host_or_fleet(images: dict[str, str], cli: Cli) -> None:
    for extra in ([], ["--host", str(DATA / "h200" / "nvidia-smi-q.txt"), "--fleet", "demo"]):
        res = cli("check", images["cuda"], "--static", *extra, code=2)
        assert "--static needs exactly one of --host FILE or --fleet NAME|FILE" in res.stderr


def test_each_check_container_has_a_timeout(images: dict[str, str]) -> None:
    from builder import engine

    r = engine.run_container(images["cpu"], ["sleep", "60"], timeout=3)
    assert r.exit_code == 124 and r.timed_out
    name = r.command[r.command.index("--name") + 1]
    left = subprocess.run(
        ["docker", "ps", "-a", "-q", "--filter", f"name={name}"], capture_output=True, text=True, timeout=60
    )
    assert left.stdout.strip() == ""  # removed


def test_hostinfo_live_here(cli: Cli) -> None:
    doc = cli("hostinfo", "--json").json()
    assert doc["vendor"] in ("none", "nvidia", "amd")
    assert doc["engine"]["version"]
    if doc["vendor"] == "none":
        assert doc["gpus"] == [] and doc["diagnosis"] is None


def test_hostinfo_from_shared_cases(cli: Cli) -> None:
    res = cli("hostinfo", "--from", str(DATA / "nvidia-smi" / "nvidia-smi-11.txt"), "--json")
    assert res.json()["diagnosis"] == "driver-not-loaded"
    doc = cli("diagnose", str(DATA / "errors" / "error-04.txt"), "--json").json()
    assert doc["diagnosis"] == "driver-too-old-for-image" and doc["facts"]["min_driver"] == "450.36.06"


def test_a_check_without_a_check_runner_key_says_it_is_not_signed(
    images: dict[str, str], cli: Cli, tmp_path: Path
) -> None:
    """No key at the default place: the check still runs, and stderr says its result is no evidence."""
    res = cli("check", images["cpu"], "--json", env={"BUILDER_STATE_DIR": str(tmp_path / "state")})
    assert "attestation" not in res.json()
    assert "not signed: no check-runner key at" in res.stderr and "builder keys generate" in res.stderr
