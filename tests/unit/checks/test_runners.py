"""Check runners: the commands they build (pure), the Kubernetes Jobs validated against the Kubernetes
OpenAPI schemas offline (kubernetes-validate, strict) and golden-tested, and fleet ``runner:`` validation.

The Slurm and engine runners run for real in tests/integration/test_check_clusters.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.checks.runners.kubernetes import gfd_product, job_manifest, job_name
from builder.checks.runners.slurm import (
    GPUS,
    MARKER,
    WRAPPER,
    enroot_uri,
    launcher_argv,
    sbatch_argv,
    srun_argv,
)
from builder.compat.fleet_model import RunnerSettings
from builder.compat.fleets import fleet_from_data
from builder.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Sequence

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "golden" / "kubernetes"
IMAGE = "registry.example/ml/jax@sha256:" + "ab" * 32
PROBE = ["sh", "-c", 'exec python3 - "$@"', "sh", "--mode", "nvidia", "--framework", "auto"]

#: the Kubernetes releases the Jobs must be valid for (oldest and newest the schemas package ships, strict)
K8S_VERSIONS = ("1.29.0", "1.37.0")


def test_sbatch_asks_for_gres_only_when_the_check_needs_gpus() -> None:
    s = RunnerSettings("slurm", partition="gpu", account="ml", qos="high", gres="gpu:h100:8", time_limit=30)
    with_gpus = sbatch_argv(s, gpus=True, name="builder-check-h100", minutes=30)
    assert with_gpus[:2] == ["sbatch", "--parsable"]
    assert {"--partition=gpu", "--account=ml", "--qos=high", "--gres=gpu:h100:8", "--time=30"} <= set(with_gpus)
    assert with_gpus[-1] == "--wrap=exec sleep 1800"
    assert not any(a.startswith("--gres") for a in sbatch_argv(s, gpus=False, name="n", minutes=30))
    bare = sbatch_argv(RunnerSettings("slurm"), gpus=True, name="n", minutes=5)
    assert not any(a.startswith(("--partition", "--account", "--qos", "--gres")) for a in bare)


def test_srun_step_reports_where_it_runs_then_execs_the_command_unquoted() -> None:
    argv = srun_argv("42", ["docker", "run", "--rm", "-i", "img", "sh", "-c", "echo 'a b'"])
    assert argv[:2] == ["srun", "--jobid=42"] and "--overlap" in argv
    i = argv.index("-c")
    assert argv[i + 1] == WRAPPER and argv[i + 2] == MARKER  # $0 of the wrapper
    assert argv[i + 3 :] == ["docker", "run", "--rm", "-i", "img", "sh", "-c", "echo 'a b'"]  # "$@": no re-quoting
    assert "$SLURM_JOB_ID" in WRAPPER and "$SLURMD_NODENAME" in WRAPPER and WRAPPER.endswith('exec "$@"')


def _wrapper(env: dict[str, str], *args: str) -> list[str]:
    """Run :data:`WRAPPER` with the real POSIX shell as srun would (``sh -c WRAPPER MARKER ARGS...``) in
    ``env``, the command being ``printf '%s\\n'``: the arguments the container command would get, one a line."""
    proc = subprocess.run(
        ["sh", "-c", WRAPPER, MARKER, "printf", "%s\\n", *args], env=env, capture_output=True, text=True, check=True
    )
    assert proc.stderr.startswith(f"{MARKER} job=")
    return proc.stdout.splitlines()


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        # srun sets SLURM_STEP_GPUS to the step's global GPU indices (comma separated), sbatch SLURM_JOB_GPUS
        # to the job's (https://slurm.schedmd.com/srun.html#OPT_SLURM_STEP_GPUS,
        # https://slurm.schedmd.com/sbatch.html#OPT_SLURM_JOB_GPUS): the step's win
        ({"SLURM_STEP_GPUS": "2,3", "SLURM_JOB_GPUS": "0,1,2,3"}, '"device=2,3"'),
        ({"SLURM_JOB_GPUS": "5"}, '"device=5"'),
        # the submitter's CUDA_VISIBLE_DEVICES (srun passes the environment on) is not an allocation
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, "all"),
        ({}, "all"),  # no GRES: the node is the job's
    ],
)
def test_step_wrapper_gives_docker_the_slurm_allocation_not_every_gpu(env: dict[str, str], expected: str) -> None:
    base = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURMD_NODENAME": "gpu-01"}
    out = _wrapper({**base, **env}, "run", "--gpus", GPUS, "img", "sh", "-c", "echo 'a b'", "")
    assert out == ["run", "--gpus", expected, "img", "sh", "-c", "echo 'a b'", ""]  # the rest unchanged, in order


def test_slurm_docker_step_asks_for_the_allocation_placeholder_not_all() -> None:
    from builder.checks.runners.slurm import SlurmSession

    seen: list[list[str]] = []

    def srun(argv: Sequence[str], stdin: bytes | None, timeout: float) -> subprocess.CompletedProcess[bytes]:
        seen.append(list(argv))  # what srun was given; the step's answer is srun's shape with the marker line
        return subprocess.CompletedProcess(list(argv), 0, b"ok", f"{MARKER} job=9 step=0 node=n1\n".encode())

    session = SlurmSession("c", RunnerSettings("slurm"), True, run=srun, job_id="9")
    session.run_container(IMAGE, ["nvidia-smi"], gpus="all", entrypoint="")
    command = seen[0][seen[0].index(MARKER) + 1 :]
    assert command[0] == "docker" and command[command.index("--gpus") + 1] == GPUS
    # podman's --gpus names CDI devices (nvidia.com/gpu=VALUE), so docker's device= form is not given to it
    SlurmSession("c", RunnerSettings("slurm", launcher="podman"), True, run=srun, job_id="9").run_container(
        IMAGE, ["nvidia-smi"], gpus="all", entrypoint=""
    )
    command = seen[1][seen[1].index(MARKER) + 1 :]
    assert command[0] == "podman" and command[command.index("--gpus") + 1] == "all"


def test_a_declared_checks_env_reaches_the_container_through_a_slurm_step() -> None:
    """A matrix's ``env:`` (docs/matrices.md) is a runner option like the others: ``-e`` for an engine."""
    from builder.checks.runners.slurm import SlurmSession

    seen: list[list[str]] = []

    def srun(argv: Sequence[str], stdin: bytes | None, timeout: float) -> subprocess.CompletedProcess[bytes]:
        seen.append(list(argv))
        return subprocess.CompletedProcess(list(argv), 0, b"ok", f"{MARKER} job=9 step=0 node=n1\n".encode())

    session = SlurmSession("c", RunnerSettings("slurm"), True, run=srun, job_id="9")
    session.run_container(IMAGE, ["python3", "-"], env={"BATCH": "64"}, stdin=b"print(1)", entrypoint="")
    command = seen[0][seen[0].index(MARKER) + 1 :]
    assert command[command.index("-e") + 1] == "BATCH=64" and "-i" in command


# Apptainer and pyxis are not installable on this Debian machine (no package): the argv each produces is
# checked against their documented syntax. Apptainer: `apptainer exec [--nv|--rocm] docker://REF CMD`
# (https://apptainer.org/docs/user/latest/gpu.html, https://apptainer.org/docs/user/latest/cli/apptainer_exec.html);
# pyxis: `srun --container-image=[USER@][REGISTRY#]IMAGE[:TAG] --no-container-entrypoint CMD`
# (https://github.com/NVIDIA/pyxis/wiki/Usage, https://github.com/NVIDIA/enroot/blob/master/doc/cmd/import.md).
REMOTE = "registry.example.com:5000/ml/torch@sha256:" + "cd" * 32


def test_apptainer_launcher_golden() -> None:
    nv = launcher_argv("apptainer", REMOTE, ["-c", "probe", "sh"], gpus="all", entrypoint="sh")
    assert nv == (["apptainer", "exec", "--nv", f"docker://{REMOTE}", "sh", "-c", "probe", "sh"], [])
    cdi = launcher_argv("apptainer", REMOTE, ["nvidia-smi"], devices=["nvidia.com/gpu=all"], entrypoint="")
    assert cdi == (["apptainer", "exec", "--nv", f"docker://{REMOTE}", "nvidia-smi"], [])
    amd = launcher_argv("apptainer", REMOTE, ["rocminfo"], devices=["/dev/kfd", "/dev/dri"])
    # env(1) sets a declared check's variables in the container (neither launcher takes docker's -e)
    env = launcher_argv("apptainer", REMOTE, ["-c", "probe"], entrypoint="sh", env={"BATCH": "64", "A": "b c"})
    assert env == (["apptainer", "exec", f"docker://{REMOTE}", "env", "BATCH=64", "A=b c", "sh", "-c", "probe"], [])
    assert amd == (["apptainer", "exec", "--rocm", f"docker://{REMOTE}", "rocminfo"], [])
    cpu = launcher_argv("apptainer", "127.0.0.1:5000/demo/jax@sha256:" + "ef" * 32, ["true"])
    assert cpu[0][:3] == ["apptainer", "exec", "--no-https"]  # builder speaks plain HTTP to loopback


def test_pyxis_launcher_golden() -> None:
    command, options = launcher_argv("pyxis", REMOTE, ["-c", "probe"], gpus="all", entrypoint="sh")
    assert command == ["sh", "-c", "probe"]
    assert options == [
        "--container-image=registry.example.com:5000#ml/torch@sha256:" + "cd" * 32,
        "--no-container-entrypoint",
    ]
    argv = srun_argv("42", command, options)
    assert argv.index(options[0]) < argv.index(WRAPPER)  # srun's options, before the step's command
    _, local = launcher_argv("pyxis", "127.0.0.1:5000/demo/jax@sha256:" + "ef" * 32, ["true"])
    assert "--export=ALL,ENROOT_ALLOW_HTTP=yes" in local


def test_enroot_uri_sets_the_registry_off_with_a_hash() -> None:
    assert enroot_uri("nvcr.io/nvidia/pytorch@sha256:00") == "nvcr.io#nvidia/pytorch@sha256:00"
    assert enroot_uri("localhost/x@sha256:00") == "localhost#x@sha256:00"
    assert enroot_uri("library/ubuntu@sha256:00") == "library/ubuntu@sha256:00"  # Docker Hub: no registry part
    with pytest.raises(ValueError, match="engine"):
        launcher_argv("docker", REMOTE, ["true"])


CLUSTER = {"name": "c", "vendor": "nvidia", "gpus": ["NVIDIA H100 80GB HBM3"], "drivers": ["550.144.03"]}


def test_fleet_runner_accepts_the_hpc_launchers_and_names_the_choices() -> None:
    for launcher in ("docker", "podman", "apptainer", "pyxis"):
        fleet = fleet_from_data(
            {"clusters": [{**CLUSTER, "runner": {"kind": "slurm", "launcher": launcher}}]},
            path=Path("f.yaml"),
        )
        assert fleet.clusters[0].runner is not None and fleet.clusters[0].runner.launcher == launcher
    with pytest.raises(ConfigError) as err:
        fleet_from_data(
            {"clusters": [{**CLUSTER, "runner": {"kind": "slurm", "launcher": "singularity"}}]},
            path=Path("f.yaml"),
        )
    assert "apptainer" in str(err.value.details) and "pyxis" in str(err.value.details)


def _k8s(vendor: str | None, **settings: object) -> dict[str, object]:
    s = RunnerSettings("kubernetes", **settings)  # type: ignore[arg-type]
    gpus = ["NVIDIA H100 80GB HBM3"] if vendor == "nvidia" else ["AMD Instinct MI300X"]
    return job_manifest(
        cluster="h100-train",
        settings=s,
        vendor=vendor,
        gpu_names=gpus,
        image=IMAGE,
        command=PROBE,
        step="probe",
        stdin=True,
        timeout=600,
        shm_size="1g",
    )


@pytest.mark.parametrize(
    ("name", "vendor", "settings"),
    [
        ("nvidia-h100", "nvidia", {"namespace": "gpu-checks", "runtime_class": "nvidia", "gpus": 8}),
        (
            "amd-mi300x",
            "amd",
            {"gpu_product": "AMD_Instinct_MI300X", "node_selector": (("topology.kubernetes.io/zone", "eu-1a"),)},
        ),
        ("cpu", None, {}),
    ],
)
def test_kubernetes_job_is_valid_for_the_kubernetes_schemas_and_matches_golden(
    name: str, vendor: str | None, settings: dict[str, object]
) -> None:
    import kubernetes_validate  # type: ignore[import-untyped]

    job = _k8s(vendor, **settings)
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(job, version, strict=True)  # raises ValidationError
    golden = GOLDEN / f"job-{name}.json"
    assert json.loads(golden.read_text()) == job, f"regenerate {golden}"


def test_kubernetes_job_requests_gpus_and_selects_nodes_by_gpu_feature_discovery_label() -> None:
    job = _k8s("nvidia", runtime_class="nvidia", gpus=2)
    pod = job["spec"]["template"]["spec"]  # type: ignore[index]
    assert pod["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 2}}
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert pod["runtimeClassName"] == "nvidia" and pod["restartPolicy"] == "Never"
    assert pod["containers"][0]["stdin"] is True and pod["containers"][0]["stdinOnce"] is True
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["ttlSecondsAfterFinished"] > 0  # type: ignore[index]
    amd = _k8s("amd")["spec"]["template"]["spec"]  # type: ignore[index]
    assert amd["containers"][0]["resources"] == {"limits": {"amd.com/gpu": 1}}
    assert "nodeSelector" not in amd  # no product label value known for AMD unless the fleet says it
    cpu = _k8s(None)["spec"]["template"]["spec"]  # type: ignore[index]
    assert "resources" not in cpu["containers"][0]


def test_kubernetes_job_names_are_dns_labels_and_differ_per_image_and_step() -> None:
    import re

    long = job_name("A_Very.Long Cluster Name That Goes On And On And On", IMAGE, "probe")
    assert len(long) <= 63 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", long)
    assert job_name("c", IMAGE, "probe") != job_name("c", IMAGE, "nvidia-smi")
    assert gfd_product("NVIDIA  A100-SXM4-80GB") == "NVIDIA-A100-SXM4-80GB"


def test_fleet_runner_fields_of_another_kind_are_located_problems() -> None:
    data = {
        "clusters": [
            {
                "name": "a",
                "vendor": "nvidia",
                "gpus": ["NVIDIA H100 80GB HBM3"],
                "drivers": ["550.144.03"],
                "runner": {"kind": "slurm", "partition": "gpu", "namespace": "x", "host": "ssh://a"},
            },
            {
                "name": "b",
                "vendor": "nvidia",
                "gpus": ["NVIDIA H100 80GB HBM3"],
                "drivers": ["550.144.03"],
                "runner": {"kind": "lsf"},
            },
        ]
    }
    with pytest.raises(ConfigError) as exc:
        fleet_from_data(data, path=Path("f.yaml"))
    problems = {(p["path"], p["message"]) for p in exc.value.details["problems"]}
    assert ("clusters[0].runner.namespace", "namespace is for kubernetes runners, not slurm") in problems
    assert ("clusters[0].runner.host", "host is for docker and podman runners, not slurm") in problems
    assert any(path.startswith("clusters[1].runner.kind") for path, _ in problems)


def test_fleet_runner_settings_become_frozen_values() -> None:
    data = {
        "clusters": [
            {
                "name": "k",
                "vendor": "nvidia",
                "gpus": ["NVIDIA A100-SXM4-80GB"],
                "drivers": ["580.65.06"],
                "runner": {"kind": "kubernetes", "node_selector": {"b": "2", "a": "1"}, "gpus": 4},
            },
            {"name": "n", "vendor": "nvidia", "gpus": ["NVIDIA A100-SXM4-80GB"], "drivers": ["580.65.06"]},
        ]
    }
    fleet = fleet_from_data(data, path=Path("f.yaml"))
    k = fleet.clusters[0].runner
    assert k is not None and k.kind == "kubernetes" and k.gpus == 4 and k.namespace == "default"
    assert k.node_selector == (("a", "1"), ("b", "2"))
    assert fleet.clusters[1].runner is None


def test_docker_shm_sizes_become_kubernetes_quantities() -> None:
    from builder.checks.runners.kubernetes import k8s_quantity

    assert [k8s_quantity(s) for s in ("1g", "512m", "64k", "1048576", "2G")] == [
        "1Gi",
        "512Mi",
        "64Ki",
        "1048576",
        "2Gi",
    ]
    with pytest.raises(ConfigError):
        k8s_quantity("1 gigabyte")


def test_fleet_outcome_exit_codes_failed_then_runner_error_then_skipped() -> None:
    """A failure beats a runner error (20 over 22), which beats a skipped cluster (23: nothing failed but not
    every cluster was checked); only not-applicable rows besides passes are success."""
    from builder.checks.clusters import ClusterRun, FleetRun
    from builder.errors import ChecksIncompleteError, RunnerError

    broken = ClusterRun("slurm", "slurm", error=RunnerError("sbatch: error: invalid partition specified"))
    skipped = ClusterRun("k8s", "kubernetes", error=ChecksIncompleteError("renders the Jobs"))
    other_vendor = ClusterRun("amd", None, applies=False)
    assert [r.status for r in (broken, skipped, other_vendor)] == ["error", "skipped", "not-applicable"]

    def code(*rows: ClusterRun) -> int:
        failure = FleetRun("f", "r@sha256:00", rows).failure()
        return failure.exit_code if failure is not None else 0

    assert (code(broken, skipped), code(skipped, other_vendor), code(other_vendor)) == (22, 23, 0)


def test_a_slurm_checks_cpu_model_is_the_nodes_read_in_a_step_not_this_hosts() -> None:
    """The benchmark's hardware class (policy ``benchmark.same: cpu_model``) names the CPU of the node the job
    ran on: a step of the job reads that node's /proc/cpuinfo (here real lines of a GitHub runner's, recorded
    in tests/data/cpuinfo-epyc-7763.txt with their source); a failing step is "not known", never this host's."""
    from builder.checks.host.cpu import cpu_model_of
    from builder.checks.runners.slurm import SlurmSession

    node = (GOLDEN.parents[1] / "cpuinfo-epyc-7763.txt").read_text()
    assert cpu_model_of(node.splitlines()[-1]) == "AMD EPYC 7763 64-Core Processor"  # MSYS's padding dropped
    seen: list[list[str]] = []

    def srun(argv: Sequence[str], stdin: bytes | None, timeout: float) -> subprocess.CompletedProcess[bytes]:
        seen.append(list(argv))
        return subprocess.CompletedProcess(list(argv), 0, node.encode(), f"{MARKER} job=9 step=3 node=n7\n".encode())

    session = SlurmSession("c", RunnerSettings("slurm"), True, run=srun, job_id="9")
    assert session.cpu_model() == "AMD EPYC 7763 64-Core Processor"
    assert seen[0][seen[0].index(MARKER) + 1 :] == ["cat", "/proc/cpuinfo"] and "--jobid=9" in seen[0]

    def failing(argv: Sequence[str], stdin: bytes | None, timeout: float) -> subprocess.CompletedProcess[bytes]:
        return subprocess.CompletedProcess(list(argv), 1, b"", f"{MARKER} job=9 step=4 node=n7\ncat: denied\n".encode())

    assert SlurmSession("c", RunnerSettings("slurm"), True, run=failing, job_id="9").cpu_model() is None


def test_a_slurm_checks_topology_and_dcgm_are_read_on_the_node_by_steps_of_the_job() -> None:
    """The topology a benchmark records is the node's: ``nvidia-smi topo -m`` runs as a step of the job (the
    recorded 4x H100 NV6 output of NVIDIA/nccl#1617 replayed as srun's answer); a tool the node lacks (the
    step's exec says "not found", exit 127) is "not installed" as it is here: no DCGM diagnostic."""
    from builder.checks.dcgm import probe_dcgm
    from builder.checks.runners.slurm import SlurmSession
    from builder.checks.topology import probe_topology

    recorded = (GOLDEN.parents[1] / "topology" / "nvidia-smi-topo-06-h100x4-nv6-nics.txt").read_text()
    topo = "\n".join(recorded.splitlines()[1:]) + "\n"  # without the source line
    seen: list[list[str]] = []

    def srun(argv: Sequence[str], stdin: bytes | None, timeout: float) -> subprocess.CompletedProcess[bytes]:
        seen.append(list(argv))
        tool = list(argv[list(argv).index(MARKER) + 1 :])
        where = f"{MARKER} job=9 step={len(seen)} node=n7\n"
        if tool == ["nvidia-smi", "topo", "-m"]:
            return subprocess.CompletedProcess(list(argv), 0, topo.encode(), where.encode())
        missing = f"{where}sh: 1: exec: {tool[0]}: not found\n"
        return subprocess.CompletedProcess(list(argv), 127, b"", missing.encode())

    tools = SlurmSession("c", RunnerSettings("slurm"), True, run=srun, job_id="9").node_tools()
    t = probe_topology("nvidia", run=tools)
    assert len(t.gpus) == 4 and {x.code for x in t.links} == {"NV6"}
    assert all("--jobid=9" in argv for argv in seen)  # every tool ran in the check's job, on its node
    assert probe_dcgm(run=tools) is None and tools(["dcgmi", "diag", "-r", "1"]) == (127, "")


@pytest.mark.parametrize("failure", ["timeout", "not started"])
def test_a_node_step_that_hangs_or_does_not_start_is_a_tool_result_not_a_crash(failure: str) -> None:
    """A ``dcgmi diag`` that hangs past its limit, or a step Slurm does not start (the holding job ended):
    the node tool's answer says so (exit 124 / 125 with the reason) and the CPU model is "not known";
    the passed device check keeps its result (before, ``TimeoutExpired`` / RunnerError escaped the check)."""
    from builder.checks.dcgm import probe_dcgm
    from builder.checks.runners.slurm import NODE_TOOL_TIMEOUT_S, SlurmSession

    def srun(argv: Sequence[str], stdin: bytes | None, timeout: float) -> subprocess.CompletedProcess[bytes]:
        if failure == "timeout":
            raise subprocess.TimeoutExpired(list(argv), timeout)
        return subprocess.CompletedProcess(list(argv), 1, b"", b"srun: error: Unable to create step for job 9\n")

    session = SlurmSession("c", RunnerSettings("slurm"), True, run=srun, job_id="9")
    code, text = session.node_tools()(["dcgmi", "diag", "-r", "1"])
    if failure == "timeout":
        assert code == 124 and f"dcgmi ran past {NODE_TOOL_TIMEOUT_S:.0f} s" in text
    else:
        assert code == 125 and "srun did not start a step of job 9" in text
    assert session.cpu_model() is None
    probe_dcgm(run=session.node_tools())  # answers (a failed diagnostic or none), raises nothing
