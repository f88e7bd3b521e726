"""``builder check --cluster`` / ``--fleet`` through real check runners: the single-node Slurm that
``scripts/slurm`` starts (sbatch + srun, docker on the node), the local Docker Engine, the real
registry and cosign. No GPU here: the image is a CPU one, so the checks pass on this machine.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import uuid
from typing import TYPE_CHECKING

import pytest

from builder.checks.host.cpu import cpu_model
from builder.predicates import BENCHMARK_V1, DEVICE_CHECK_V1, TEST_RESULT_V1
from tests.attestations import statements, verify_attestation
from tests.conftest import ROOT, Cli, _unavailable, require_tool

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

pytestmark = pytest.mark.integration

PARTITION = "builder"  # scripts/slurm's default (BUILDER_SLURM_PARTITION)


@pytest.fixture(autouse=True)
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


@pytest.fixture(scope="module")
def slurm() -> str:
    """The partition of the local Slurm (scripts/slurm); skips locally, fails under CI=true when it is down."""
    sinfo = require_tool("sinfo")
    out = subprocess.run([sinfo, "-h", "-p", PARTITION, "-o", "%t"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0 or not out.stdout.strip() or out.stdout.split()[0] not in ("idle", "mix", "alloc"):
        _unavailable(f"the Slurm partition {PARTITION} (bash scripts/slurm)")
    return PARTITION


@pytest.fixture(scope="module")
def image(registry_address: str, demo_cpu_image: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A CPU image with python3 in a repository of its own: the demo JAX image (scripts/demo) plus a label
    (a variant id the matrices do not know, so no declared tests run after the check)."""
    base = demo_cpu_image
    ref = f"{registry_address}/test/fleet-{uuid.uuid4().hex[:10]}:cpu"
    ctx = tmp_path_factory.mktemp("ctx")
    (ctx / "Dockerfile").write_text(f'FROM {base}\nLABEL io.builder.variant="fleet-test"\n')
    subprocess.run(["docker", "buildx", "build", "--push", "-q", "-t", ref, str(ctx)], check=True, timeout=600)
    return ref


@pytest.fixture
def key(tmp_path: Path, cli: Cli) -> Path:
    cli("keys", "generate", "--output-dir", str(tmp_path / "k"), env={"BUILDER_KEY_PASSWORD": "fleet"})
    return tmp_path / "k" / "builder.key"


def _fleet(path: Path, clusters: list[dict[str, object]]) -> Path:
    base = {"vendor": "nvidia", "gpus": ["NVIDIA H100 80GB HBM3"], "drivers": ["550.144.03"]}
    path.write_text(json.dumps({"name": "test", "clusters": [{**base, **c} for c in clusters]}))  # JSON is YAML
    return path


def _statement(cosign: str, pub: Path, ref: str) -> list[dict[str, object]]:
    cv = verify_attestation(cosign, pub, ref, DEVICE_CHECK_V1)
    assert cv.returncode == 0, cv.stderr
    return statements(cv.stdout)


def test_demo_cluster_check_runs_through_sbatch_srun_and_signs_job_and_node(
    slurm: str, image: str, key: Path, cosign_bin: str, cli: Cli
) -> None:
    env = {"BUILDER_KEY_PASSWORD": "fleet"}
    res = cli("check", image, "--fleet", "demo", "--cluster", "h100-train", "--key", str(key), "--json", env=env)
    doc = res.json()
    assert doc["passed"] is True and doc["run"]["mode"] == "cpu"
    where = doc["placement"]
    assert where["cluster"] == "h100-train" and where["runner"] == "slurm"
    assert where["node"] == socket.gethostname().split(".")[0] and where["job_id"].isdigit()
    # every container started as a step of that job, with docker on the node
    for step in doc["steps"]:
        assert step["name"].startswith("probe/")
    assert doc["host"]["engine"]["name"] == "docker"  # the node's facts came from its own `docker info`
    # Slurm knows the job: it was cancelled when the check was done (MinJobAge keeps it listed)
    job = subprocess.run(["scontrol", "show", "job", where["job_id"]], capture_output=True, text=True, timeout=30)
    assert f"Partition={slurm}" in job.stdout and "JobName=builder-check-h100-train" in job.stdout
    assert "JobState=RUNNING" not in job.stdout and "JobState=PENDING" not in job.stdout
    # an independent verifier accepts the attestation, and the signed predicate names the job and node
    statements = _statement(cosign_bin, key.with_suffix(".pub"), image)
    placements = [s["predicate"]["placement"] for s in statements]  # type: ignore[index]
    assert where in placements


@pytest.fixture(scope="module")
def variant_image(registry_address: str, demo_cpu_image: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The demo JAX image (variant jax0.7-cpu-py3.11-debian12, whose matrix declares tests, a benchmark and a
    2-GPU collective check) in a repository of its own, so its attestations are this test's alone."""
    ref = f"{registry_address}/test/fleet-variant-{uuid.uuid4().hex[:10]}:cpu"
    ctx = tmp_path_factory.mktemp("ctx")
    (ctx / "Dockerfile").write_text(f"FROM {demo_cpu_image}\n")  # its variant label stays
    subprocess.run(["docker", "buildx", "build", "--push", "-q", "-t", ref, str(ctx)], check=True, timeout=600)
    return ref


def test_cluster_check_runs_the_declared_tests_and_benchmark_through_slurm_as_a_local_check_does(
    slurm: str, variant_image: str, key: Path, cosign_bin: str, cli: Cli
) -> None:
    """`check --cluster` runs what a local check runs after a passing probe: the variant's tests and benchmark,
    each a step of the same Slurm job (srun + docker on the node), signed with the job and node; the collective
    check this CPU run cannot do is named with its reason in --json and on stderr, never left out silently."""
    env = {"BUILDER_KEY_PASSWORD": "fleet"}
    args = ("check", variant_image, "--fleet", "demo", "--cluster", "h100-train", "--key", str(key), "--json")
    res = cli(*args, env=env)
    doc = res.json()
    assert doc["passed"] is True and doc["placement"]["runner"] == "slurm"
    ev = {e["predicate_type"]: e for e in doc["evidence"]}
    assert set(ev) == {TEST_RESULT_V1, BENCHMARK_V1}
    assert ev[TEST_RESULT_V1]["passed"] and ev[TEST_RESULT_V1]["summary"]["tests"] > 0
    assert ev[BENCHMARK_V1]["passed"] and ev[BENCHMARK_V1]["metrics"]
    assert all(e["written"] for e in ev.values())
    assert doc["evidence_skipped"] == [
        {"kind": "collective", "reason": "needs at least 2 GPUs; the check saw no GPUs (mode cpu)"}
    ]
    assert "[h100-train] collective not run: needs at least 2 GPUs" in res.stderr
    # the signed test result ran in the same job as the probe, on the node Slurm gave it
    pub = key.with_suffix(".pub")
    for ptype in (TEST_RESULT_V1, BENCHMARK_V1):
        cv = verify_attestation(cosign_bin, pub, variant_image, ptype)
        assert cv.returncode == 0, cv.stderr
        preds = [s["predicate"] for s in statements(cv.stdout)]
        assert [p["placement"] for p in preds] == [doc["placement"]]
        assert all(p["result"] == "passed" for p in preds)
        # the node's CPU, read by a step of the job (the single-node Slurm's node is this machine)
        assert all(p["hardware"]["cpu_model"] == cpu_model() for p in preds)


def test_kubernetes_jobs_name_the_declared_checks_they_do_not_run(variant_image: str, cli: Cli) -> None:
    """`--manifest` renders the probe's Jobs only: the variant's tests, benchmark and collective check are
    named as not rendered (--json `evidence_skipped[]` and stderr), never left out silently."""
    res = cli("check", variant_image, "--fleet", "demo", "--cluster", "a100-inference", "--manifest", "--json")
    doc = res.json()
    assert [j["kind"] for j in doc["jobs"]] == ["Job"]  # a CPU image: the probe's Job
    assert [s["kind"] for s in doc["evidence_skipped"]] == ["tests", "benchmark", "collective"]
    assert all("run the probe only" in s["reason"] for s in doc["evidence_skipped"])
    assert "[a100-inference] tests not rendered: the rendered Jobs run the probe only" in res.stderr


def test_fleet_check_runs_every_cluster_and_shows_one_row_each(
    slurm: str, image: str, key: Path, tmp_path: Path, cli: Cli
) -> None:
    fleet = _fleet(
        tmp_path / "fleet.yaml",
        [
            {"name": "slurm-a", "runner": {"kind": "slurm", "partition": slurm}},
            {"name": "slurm-b", "runner": {"kind": "slurm", "partition": slurm, "time_limit": 10}},
            {"name": "local", "runner": {"kind": "docker"}},
            {"name": "k8s", "runner": {"kind": "kubernetes", "namespace": "gpu"}},
            {"name": "unmapped"},
        ],
    )
    env = {"BUILDER_KEY_PASSWORD": "fleet"}
    res = cli("check", image, "--fleet", str(fleet), "--key", str(key), "--json", code=23, env=env)
    assert res.json()["error"]["kind"] == "checks-incomplete"  # nothing failed; two clusters were not checked
    doc = res.json()["error"]["details"]["result"]
    rows = {r["cluster"]: r for r in doc["clusters"]}
    assert list(rows) == ["slurm-a", "slurm-b", "local", "k8s", "unmapped"]
    assert [rows[c]["status"] for c in rows] == ["passed", "passed", "passed", "skipped", "skipped"]
    assert rows["slurm-a"]["job_id"] != rows["slurm-b"]["job_id"]  # one job per cluster
    assert rows["local"]["runner"] == "docker" and rows["local"]["job_id"] is None and rows["local"]["node"]
    assert rows["k8s"]["error"]["kind"] == "checks-incomplete"
    assert f"builder check {doc['reference']} --cluster k8s --manifest" in rows["k8s"]["error"]["hint"]
    assert "no `runner:`" in rows["unmapped"]["error"]["message"] and "runner:" in rows["unmapped"]["error"]["hint"]
    for name in ("slurm-a", "slurm-b", "local"):
        assert rows[name]["check"]["placement"]["cluster"] == name
        assert rows[name]["check"]["attestation"]["written"] is True
    # the human table: one row per cluster, within 80 columns
    human = cli("check", image, "--fleet", str(fleet), "--no-attest", code=23, env={"COLUMNS": "80"})
    table = human.stderr + human.stdout
    for name in rows:
        assert any(line.lstrip("│ ").startswith(name) for line in table.splitlines()), table
    assert "k8s: cluster k8s runs checks on Kubernetes" in table
    assert "  what to do: render the Jobs with `builder check " in table
    assert max(len(line) for line in table.splitlines() if "│" in line) <= 80


def test_demo_fleet_as_a_new_user_runs_it(slurm: str, image: str, cli: Cli) -> None:
    """`builder check REF --fleet fleets/demo.yaml` on this machine: the Slurm and docker clusters pass, the
    Kubernetes one and the one without a runner are skipped with what to do, exit 23 (not 22: no runner
    failed); `--cluster` of the Kubernetes cluster alone is 23 with the pinned reference in the command."""
    res = cli("check", image, "--fleet", "fleets/demo.yaml", "--no-attest", "--json", code=23)
    rows = {r["cluster"]: r for r in res.json()["error"]["details"]["result"]["clusters"]}
    assert {n: r["status"] for n, r in rows.items()} == {
        "h100-train": "passed",
        "a100-inference": "skipped",
        "ws-4090": "passed",
        "mi300x": "skipped",
    }
    assert rows["h100-train"]["job_id"] and rows["h100-train"]["runner"] == "slurm"
    one = cli("check", image, "--cluster", "a100-inference", "--no-attest", "--json", code=23).json()["error"]
    assert one["kind"] == "checks-incomplete" and "namespace gpu-checks" in one["message"]
    assert "--cluster a100-inference --manifest > jobs.yaml" in one["hint"] and "@sha256:" in one["hint"]


def test_cluster_without_runner_is_skipped_as_in_the_fleet(image: str, cli: Cli) -> None:
    """`check --cluster mi300x` (the demo cluster without `runner:`) is what its `--fleet` row says: skipped,
    exit 23 checks-incomplete with what to do (it was a usage error, exit 2, blaming --cluster)."""
    one = cli("check", image, "--cluster", "mi300x", "--no-attest", "--json", code=23).json()["error"]
    assert one["kind"] == "checks-incomplete" and one["details"]["cluster"] == "mi300x"
    assert "has no `runner:` in " in one["message"] and "fleets/demo.yaml" in one["message"]
    assert "skipped" in one["message"]
    assert "runner: {kind: slurm" in one["hint"]
    human = cli("check", image, "--cluster", "mi300x", "--no-attest", code=23, env={"COLUMNS": "80"})
    assert "add e.g. `runner: {kind: slurm" in human.stderr and "Traceback" not in human.stderr


def test_slurm_refusal_is_the_schedulers_words_and_exit_22(slurm: str, image: str, tmp_path: Path, cli: Cli) -> None:
    fleet = _fleet(tmp_path / "f.yaml", [{"name": "nope", "runner": {"kind": "slurm", "partition": "no-such-part"}}])
    res = cli("check", image, "--fleet", str(fleet), "--cluster", "nope", "--no-attest", code=22)
    assert "sbatch refused the check job" in res.stderr and "invalid partition" in res.stderr.lower()
    assert "Traceback" not in res.stderr


def test_unknown_cluster_names_the_known_ones(cli: Cli) -> None:
    res = cli("check", "127.0.0.1:5000/x/y:z", "--fleet", "demo", "--cluster", "h200-nope", code=8)
    assert "unknown cluster 'h200-nope'" in res.stderr and "h100-train" in res.stderr


def test_podman_cluster_pulls_the_probed_manifest_and_runs_it_with_podman(image: str, tmp_path: Path, cli: Cli) -> None:
    """The podman runner on this host. Podman pulls here, but `podman run` may be refused by the sandbox
    (runc cannot set rlimits): then the check is a failed check carrying podman's own error, not a crash."""
    podman = require_tool("podman")
    fleet = _fleet(tmp_path / "f.yaml", [{"name": "pod", "runner": {"kind": "podman"}}])
    res = cli("check", image, "--fleet", str(fleet), "--cluster", "pod", "--no-attest", "--json", code=None)
    assert res.code in (0, 20), res.stderr
    doc = res.json() if res.code == 0 else res.json()["error"]["details"]["result"]
    host = subprocess.run([podman, "info", "--format", "{{.Host.Hostname}}"], capture_output=True, text=True)
    assert doc["placement"] == {"cluster": "pod", "runner": "podman", "node": host.stdout.strip(), "job_id": None}
    ran = doc["image"]["reference"]  # registry/repo@sha256:<platform manifest>
    assert subprocess.run([podman, "image", "exists", ran], timeout=60).returncode == 0  # podman pulled it
    if res.code == 20:
        step = doc["steps"][0]
        assert step["detail"]["command"][:2] == ["podman", "run"] and "--tls-verify=false" in step["detail"]["command"]
        assert step["error"] and "Traceback" not in res.stderr
    else:
        assert doc["passed"] is True


@pytest.fixture(scope="module")
def python_image(registry_address: str, docker_engine: str, mirror_base: str) -> str:
    """A small CPU image with python3 (the mirrored Debian base + python3, as tests/integration/test_check.py
    builds it) in the local registry."""
    ref = f"{registry_address}/test/fleet-py-{uuid.uuid4().hex[:10]}:cpu"
    dockerfile = (
        f"FROM {mirror_base}\n"
        "RUN apt-get update && apt-get install -y --no-install-recommends python3 && rm -rf /var/lib/apt/lists/*\n"
        'LABEL io.builder.accelerator="cpu" io.builder.framework="none"\n'
    )
    subprocess.run(
        ["docker", "buildx", "build", "--push", "-q", "-t", ref, "-"],
        input=dockerfile.encode(),
        check=True,
        capture_output=True,
        timeout=900,
    )
    return ref


def test_slurm_check_of_an_image_in_a_password_protected_registry(
    slurm: str, python_image: str, tmp_path: Path, cosign_bin: str, cli: Cli
) -> None:
    """Credentials reach builder and the node's engine only through DOCKER_CONFIG: the job steps inherit it
    (srun exports the environment), the node's docker pulls with it, builder attaches the attestation with it."""
    from tests.registries import auth_registry

    skopeo = require_tool("skopeo")
    (tmp_path / "reg").mkdir()
    with auth_registry(tmp_path / "reg", "basic") as reg:
        ref = f"{reg.address}/ml/py:cpu"
        subprocess.run(
            [
                *(skopeo, "copy", "-q", "--src-tls-verify=false", "--dest-tls-verify=false"),
                *("--dest-creds", f"{reg.user}:{reg.password}", f"docker://{python_image}", f"docker://{ref}"),
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
        config = reg.docker_config(tmp_path / "docker")
        env = {"DOCKER_CONFIG": str(config), "BUILDER_KEY_PASSWORD": "fleet"}
        cli("keys", "generate", "--output-dir", str(tmp_path / "k"), env=env)
        fleet = _fleet(tmp_path / "f.yaml", [{"name": "hpc", "runner": {"kind": "slurm", "partition": slurm}}])
        args = ("check", ref, "--fleet", str(fleet), "--cluster", "hpc", "--key", str(tmp_path / "k" / "builder.key"))
        doc = cli(*args, "--json", env=env).json()
        assert doc["passed"] is True and doc["placement"]["runner"] == "slurm" and doc["attestation"]["written"]
        # without the credentials the registry refuses builder itself (exit 6), before any job is submitted
        (tmp_path / "empty").mkdir()  # a Docker config folder with no config.json: no credentials
        denied = cli(*args, "--no-attest", code=6, env={"DOCKER_CONFIG": str(tmp_path / "empty")})
        assert reg.address in denied.stderr
        cv = subprocess.run(
            [
                *(cosign_bin, "verify-attestation", "--key", str(tmp_path / "k" / "builder.pub")),
                *("--insecure-ignore-tlog", "--allow-insecure-registry", "--type", DEVICE_CHECK_V1, ref),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "DOCKER_CONFIG": str(config)},
        )
        assert cv.returncode == 0, cv.stderr


def _job_state(job: str) -> str:
    """``JobState=...`` of ``job`` as ``scontrol show job`` says it once the cancellation it was sent has
    been applied ("" when Slurm no longer knows the job); polled a few seconds, a condition, not a limit
    on builder: builder's ``scancel`` has returned before it exits."""
    import time

    shown = ""
    for _ in range(50):
        shown = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True).stdout
        if "JobState=PENDING" not in shown:
            break
        time.sleep(0.2)
    return next((w for w in shown.split() if w.startswith("JobState=")), "")


def _sigterm_a_pending_check(
    slurm: str, image: str, tmp_path: Path, submitted: Callable[[str], str], env: dict[str, str] | None = None
) -> None:
    """Drain the node, start `builder check --cluster`, SIGTERM it once ``submitted(job name)`` names the
    job id (polled), and assert exit 143 and the job cancelled, not left waiting in the queue."""
    import signal
    import sys
    import time

    node = socket.gethostname().split(".")[0]
    name = f"wait-{uuid.uuid4().hex[:8]}"
    fleet = _fleet(tmp_path / "f.yaml", [{"name": name, "runner": {"kind": "slurm", "partition": slurm}}])
    subprocess.run(["scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=builder-test"], check=True)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "builder", "check", image, "--fleet", str(fleet), "--cluster", name, "--no-attest"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        job = ""
        for _ in range(600):  # until the job is known (a condition, polled; not a time limit on builder)
            job = submitted(f"builder-check-{name}")
            if job or proc.poll() is not None:
                break
            time.sleep(0.2)
        assert job, proc.communicate(timeout=60)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 143, err
        assert "interrupted by SIGTERM" in err and "Traceback" not in err
        assert _job_state(job) in ("JobState=CANCELLED", ""), subprocess.run(["squeue"], capture_output=True).stdout
    finally:
        subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=True)


def test_sigterm_while_the_job_is_pending_cancels_it(slurm: str, image: str, tmp_path: Path) -> None:
    """SIGTERM (how CI cancels a job) stops `builder check --cluster` while its Slurm job waits for the
    (drained) node: exit 143 and the job cancelled, not left in the queue."""

    def pending(job_name: str) -> str:
        out = subprocess.run(["squeue", "-h", "-n", job_name, "-t", "PENDING", "-o", "%i"], capture_output=True)
        return out.stdout.decode().strip()

    _sigterm_a_pending_check(slurm, image, tmp_path, pending)


def test_sigterm_while_sbatch_answers_still_cancels_the_job_it_queued(slurm: str, image: str, tmp_path: Path) -> None:
    """SIGTERM landing after the controller queued the job but before ``sbatch`` printed its id (a busy
    slurmctld answers late) still cancels that job: ``sbatch`` is let finish, so builder learns the id.
    The ``sbatch`` on PATH here is the real one followed by a 3 s pause before its answer."""
    real = require_tool("sbatch")
    bin_dir, queued = tmp_path / "bin", tmp_path / "queued"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(
        f'#!/bin/sh\nout=$("{real}" "$@"); rc=$?\necho "$out" > "{queued}.tmp" && mv "{queued}.tmp" "{queued}"\n'
        'sleep 3\necho "$out"\nexit $rc\n'
    )
    (bin_dir / "sbatch").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def answered_late(_job_name: str) -> str:
        return queued.read_text().strip().split(";")[0] if queued.exists() else ""

    _sigterm_a_pending_check(slurm, image, tmp_path, answered_late, env)


def test_fleet_clusters_run_at_once_and_other_vendors_are_not_applicable(
    slurm: str, python_image: str, tmp_path: Path
) -> None:
    """Both Slurm clusters' jobs are queued together while the node is drained (they were submitted in
    parallel, not one after the other); a CUDA image is not run on the AMD cluster; every cluster checks the
    one digest the reference was pinned to."""
    import signal
    import sys
    import time

    cuda = python_image.rsplit(":", 1)[0] + ":cuda"
    dockerfile = f'FROM {python_image}\nLABEL io.builder.accelerator="cuda" io.builder.cuda.version="12.8"\n'
    subprocess.run(
        ["docker", "buildx", "build", "--push", "-q", "-t", cuda, "-"], input=dockerfile.encode(), check=True
    )
    tag = uuid.uuid4().hex[:6]
    fleet = _fleet(
        tmp_path / "f.yaml",
        [
            {"name": f"a-{tag}", "runner": {"kind": "slurm", "partition": slurm}},
            {"name": f"b-{tag}", "runner": {"kind": "slurm", "partition": slurm}},
            {"name": f"amd-{tag}", "vendor": "amd", "gpus": ["AMD Instinct MI300X"], "drivers": [], "rocm": ["6.3"]}
            | {"runner": {"kind": "docker"}},
        ],
    )
    node = socket.gethostname().split(".")[0]
    subprocess.run(["scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=builder-test"], check=True)
    resumed = False
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "builder", "--json", "check", cuda, "--fleet", str(fleet), "--no-attest"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        queued: set[str] = set()
        for _ in range(600):  # polled until both jobs are queued at the same moment
            listed = subprocess.run(["squeue", "-h", "-t", "PENDING", "-o", "%j"], capture_output=True, text=True)
            queued = {n for n in listed.stdout.split() if n.endswith(tag)}
            if len(queued) == 2 or proc.poll() is not None:
                break
            time.sleep(0.2)
        assert queued == {f"builder-check-a-{tag}", f"builder-check-b-{tag}"}, (queued, proc.poll())
        subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=True)
        resumed = True
        out, err = proc.communicate(timeout=600)
    finally:
        if not resumed:
            subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    assert proc.returncode in (0, 20), err  # 20: no NVIDIA GPU or toolkit on this machine
    doc = json.loads(out)
    doc = doc["error"]["details"]["result"] if "error" in doc else doc
    rows = {r["cluster"]: r for r in doc["clusters"]}
    assert rows[f"amd-{tag}"]["status"] == "not-applicable" and rows[f"amd-{tag}"]["check"] is None
    for name in (f"a-{tag}", f"b-{tag}"):
        assert rows[name]["status"] in ("passed", "failed") and rows[name]["check"]["run"]["mode"] == "nvidia"
        assert rows[name]["check"]["image"]["digest"] == doc["reference"].rsplit("@", 1)[1]


def test_a_step_slurm_does_not_start_is_a_runner_error_not_a_failed_check(slurm: str) -> None:
    """The job is cancelled under the session (an operator's scancel): srun refuses the next step, and that
    is the runner's failure (exit 22), never a failed check of the image."""
    from builder.checks.runners.slurm import slurm_session
    from builder.compat.fleet_model import RunnerSettings
    from builder.errors import RunnerError

    with slurm_session("gone", RunnerSettings("slurm", partition=slurm)) as session:
        job = session.submit()
        code, out, _, _ = session.step(["echo", "started"], None, 120.0)
        assert (code, out.strip()) == (0, "started") and session.node == socket.gethostname().split(".")[0]
        subprocess.run(["scancel", job], check=True, timeout=60)
        with pytest.raises(RunnerError) as exc:
            session.step(["echo", "again"], None, 120.0)
    assert f"srun did not start a step of job {job}" in exc.value.message
    assert exc.value.exit_code == 22


def test_real_srun_step_hands_the_allocation_to_docker_not_the_whole_node(
    slurm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step's wrapper runs under the real srun and replaces the GPU placeholder by the step's allocation.
    This node has no GRES GPUs, so Slurm sets no SLURM_STEP_GPUS itself; srun passes the caller's environment
    into the step (as it passes Slurm's own for a GRES job), so the values are set here in Slurm's format."""
    from builder.checks.runners.slurm import GPUS, slurm_session
    from builder.compat.fleet_model import RunnerSettings

    monkeypatch.setenv("SLURM_STEP_GPUS", "1,3")
    with slurm_session("alloc", RunnerSettings("slurm", partition=slurm)) as session:
        code, out, _, _ = session.step(["printf", "%s\\n", "--gpus", GPUS, "img"], None, 120.0)
        assert (code, out.splitlines()) == (0, ["--gpus", '"device=1,3"', "img"])
        monkeypatch.delenv("SLURM_STEP_GPUS")
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # the submitter's, not an allocation
        code, out, _, _ = session.step(["printf", "%s\\n", GPUS], None, 120.0)
        assert (code, out.strip()) == (0, "all")


def test_hpc_launchers_go_through_the_real_srun(slurm: str) -> None:
    """Neither apptainer nor pyxis is installable here: the real Slurm shows what a site without them sees.
    pyxis: srun itself refuses --container-image (no plugin), a runner error naming the fix; apptainer: the
    step runs and the missing runtime is the container command's failure, with the apptainer argv."""
    from builder.checks.runners.slurm import slurm_session
    from builder.compat.fleet_model import RunnerSettings
    from builder.errors import RunnerError

    ref = "127.0.0.1:5000/demo/jax@sha256:" + "0" * 64
    pyxis = RunnerSettings("slurm", partition=slurm, launcher="pyxis")
    with slurm_session("pyxis", pyxis) as session, pytest.raises(RunnerError) as exc:
        session.run_container(ref, ["-c", "true"], entrypoint="sh", timeout=120.0)
    assert "container-image" in exc.value.message and "pyxis" in (exc.value.hint or "")
    with slurm_session("appt", RunnerSettings("slurm", partition=slurm, launcher="apptainer")) as session:
        result = session.run_container(ref, ["nvidia-smi"], gpus="all", entrypoint="", timeout=120.0)
    assert result.exit_code == 127 and "apptainer" in result.stderr
    assert ["apptainer", "exec", "--nv", "--no-https", f"docker://{ref}", "nvidia-smi"] == list(result.command[-6:])


def test_an_engine_runner_passes_every_container_option(image: str) -> None:
    """A declared check's ``env`` (and stdin, entrypoint) reach the container through an engine runner as
    through ``builder.engine.run_container``: one set of options (``ContainerOptions``) for every runner."""
    from builder.checks.runners.engines import EngineSession
    from builder.compat.fleet_model import RunnerSettings

    session = EngineSession("local", RunnerSettings("docker"))
    argv = ["-c", 'echo "BATCH=$BATCH"; cat']
    result = session.run_container(image, argv, env={"BATCH": "64"}, stdin=b"sent", entrypoint="sh", timeout=120.0)
    assert (result.exit_code, result.stdout) == (0, "BATCH=64\nsent"), result.stderr


def test_docker_runner_at_a_host_address_talks_to_that_engine(
    image: str, tmp_path: Path, cli: Cli, docker_host: str
) -> None:
    """`runner: {kind: docker, host: ADDRESS}` runs `docker -H ADDRESS run ...` (ssh://, tcp:// or unix://; here
    this machine's own socket, addressed as a remote engine would be): node and engine facts come from that
    engine's `docker info`."""
    host = docker_host
    name = subprocess.run(["docker", "-H", host, "info", "--format", "{{.Name}}"], capture_output=True, text=True)
    fleet = _fleet(tmp_path / "f.yaml", [{"name": "remote", "runner": {"kind": "docker", "host": host}}])
    doc = cli("check", image, "--fleet", str(fleet), "--cluster", "remote", "--no-attest", "--json").json()
    assert doc["passed"] is True
    assert doc["placement"] == {"cluster": "remote", "runner": "docker", "node": name.stdout.strip(), "job_id": None}
    assert doc["host"]["engine"]["name"] == "docker" and doc["host"]["engine"]["version"]


def test_a_remote_engine_that_does_not_answer_is_named_with_its_fleet_host(
    image: str, tmp_path: Path, cli: Cli
) -> None:
    """A docker runner whose `host:` answers nothing: exit 3, and the hint names the cluster and that
    address, not this machine's daemon or DOCKER_HOST (which the check never used; newcomer trial)."""
    fleet = _fleet(tmp_path / "f.yaml", [{"name": "far", "runner": {"kind": "docker", "host": "tcp://127.0.0.1:1"}}])
    res = cli("check", image, "--fleet", str(fleet), "--cluster", "far", "--no-attest", "--json", code=3)
    hint = res.json()["error"]["hint"]
    assert "cluster far" in hint and "tcp://127.0.0.1:1" in hint and "DOCKER_HOST" not in hint, hint


def test_a_gpu_image_is_not_checked_on_a_cluster_of_the_other_vendor(
    python_image: str, tmp_path: Path, cli: Cli
) -> None:
    rocm = python_image.rsplit(":", 1)[0] + ":rocm"
    dockerfile = f'FROM {python_image}\nLABEL io.builder.accelerator="rocm" io.builder.rocm.version="6.3"\n'
    subprocess.run(
        ["docker", "buildx", "build", "--push", "-q", "-t", rocm, "-"], input=dockerfile.encode(), check=True
    )
    fleet = _fleet(tmp_path / "f.yaml", [{"name": "h100", "runner": {"kind": "docker"}}])
    res = cli("check", rocm, "--fleet", str(fleet), "--cluster", "h100", "--no-attest", code=11)
    assert "is built for amd GPUs; cluster h100 has nvidia GPUs" in res.stderr
