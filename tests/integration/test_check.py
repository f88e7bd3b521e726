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
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.predicates import DEVICE_CHECK_V1

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def builder(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "builder", *args], capture_output=True, text=True, cwd=ROOT, env=e, timeout=timeout
    )


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


def test_cpu_check_passes_and_attaches_device_check(images: dict[str, str], tmp_path: Path, cosign_bin: str) -> None:
    env = {"BUILDER_KEY_PASSWORD": "check-test"}
    gen = builder("keys", "generate", "--output-dir", str(tmp_path / "k"), env=env)
    assert gen.returncode == 0, gen.stderr
    res = builder("check", images["cpu"], "--key", str(tmp_path / "k" / "builder.key"), "--json", env=env)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["passed"] is True and doc["result"] == "passed" and doc["run"]["mode"] == "cpu"
    names = [s["name"] for s in doc["steps"]]
    assert names == ["probe/python", "probe/framework-import", "probe/compute"]
    assert all(s["seconds"] >= 0 for s in doc["steps"])
    assert doc["image"]["digest"].startswith("sha256:")
    assert doc["host"]["engine"]["version"] and doc["host"]["engine"]["oci_runtime"] == "runc"
    assert doc["attestation"]["predicate_type"] == DEVICE_CHECK_V1
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
    ver = builder(
        "verify",
        images["cpu"],
        "--key",
        str(tmp_path / "k" / "builder.pub"),
        "--attestations-only",
        "--attestation",
        DEVICE_CHECK_V1,
        "--json",
    )
    assert ver.returncode == 0, ver.stdout + ver.stderr


def _no_toolkit() -> None:
    if shutil.which("nvidia-container-runtime-hook") or shutil.which("nvidia-ctk"):
        pytest.skip("this machine has the NVIDIA Container Toolkit: the failure paths cannot be reproduced")


def test_gpus_all_really_fails_as_toolkit_missing(images: dict[str, str]) -> None:
    _no_toolkit()
    res = builder("check", images["cuda"], "--no-attest", "--json")
    assert res.returncode == 20, res.stdout + res.stderr  # CheckFailedError
    err = json.loads(res.stdout)["error"]
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


def test_cdi_request_really_fails_as_unresolvable(images: dict[str, str]) -> None:
    _no_toolkit()
    res = builder("check", images["cuda"], "--cdi", "--no-attest", "--json")
    assert res.returncode == 20, res.stdout + res.stderr
    d = json.loads(res.stdout)["error"]["details"]
    step = d["result"]["steps"][0]
    if "unresolvable CDI devices" not in step["detail"]["stderr"]:
        pytest.fail("CDI is not enabled in this engine (features.cdi): " + step["detail"]["stderr"][-300:])
    assert (d["diagnosis"], d["at_fault"]) == ("cdi-device-unresolvable", "container-toolkit")
    assert d["result"]["run"]["device_request"] == "cdi:nvidia.com/gpu=all"


def test_static_fleet_verdicts(images: dict[str, str]) -> None:
    res = builder("check", images["cuda"], "--static", "--fleet", "fleets/demo.yaml", "--json")
    # the fleet verdict is the worst over the NVIDIA clusters (docs/fleets.md): ws-4090 blocks -> exit 11
    assert res.returncode == 11, res.stderr
    doc = json.loads(res.stdout)["error"]["details"]["verdict"]
    verdicts = {c["cluster"]: c["verdict"] for c in doc["clusters"]}
    assert verdicts["a100-inference"] == "ok"
    assert verdicts["h100-train"] == "forward-compat"  # R550 exemption, data-center brand
    assert verdicts["ws-4090"] == "blocked"  # no exemption for GeForce
    assert "a100-inference" in doc["runs_on"] and "ws-4090" in doc["blocked_on"]
    assert doc["verdict"] == "blocked" and doc["not_applicable"] == ["mi300x"]  # a CUDA image on AMD: n/a


def test_static_host_blocked_exit_code(images: dict[str, str]) -> None:
    res = builder(
        "check", images["cuda"], "--static", "--host", str(DATA / "nvidia-smi" / "nvidia-smi-04.txt"), "--json"
    )
    assert res.returncode == 11, res.stdout + res.stderr
    err = json.loads(res.stdout)["error"]
    assert err["details"]["verdict"]["verdict"] == "blocked"
    ok = builder("check", images["cuda"], "--static", "--host", str(DATA / "h200" / "nvidia-smi-q.txt"), "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["verdict"] == "ok"


def test_each_check_container_has_a_timeout(images: dict[str, str]) -> None:
    from builder import engine

    r = engine.run_container(images["cpu"], ["sleep", "60"], timeout=3)
    assert r.exit_code == 124 and r.timed_out
    name = r.command[r.command.index("--name") + 1]
    left = subprocess.run(
        ["docker", "ps", "-a", "-q", "--filter", f"name={name}"], capture_output=True, text=True, timeout=60
    )
    assert left.stdout.strip() == ""  # removed


def test_hostinfo_live_here() -> None:
    res = builder("hostinfo", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["vendor"] in ("none", "nvidia", "amd")
    assert doc["engine"]["version"]
    if doc["vendor"] == "none":
        assert doc["gpus"] == [] and doc["diagnosis"] is None


def test_hostinfo_from_shared_cases() -> None:
    res = builder("hostinfo", "--from", str(DATA / "nvidia-smi" / "nvidia-smi-11.txt"), "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["diagnosis"] == "driver-not-loaded"
    res = builder("diagnose", str(DATA / "errors" / "error-04.txt"), "--json")
    doc = json.loads(res.stdout)
    assert doc["diagnosis"] == "driver-too-old-for-image" and doc["facts"]["min_driver"] == "450.36.06"
