"""``scripts/slurm`` on a fresh machine: a bare Debian container (the mirrored base ``scripts/setup`` made)
gets munge, slurmctld and slurmd from the distribution's archive, starts them, and a job step runs; a
second run changes nothing (idempotent). Needs the Debian archive (or ``BUILDER_DEBIAN_MIRROR``'s
apt sources in the base) reachable from containers, as ``scripts/setup`` does."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration


def test_scripts_slurm_on_a_fresh_debian_container(docker_engine: str, mirror_base: str) -> None:
    script = (
        "set -e; bash /slurm 2>&1; cp /etc/slurm/slurm.conf /tmp/first.conf; "
        "bash /slurm 2>&1; cmp /etc/slurm/slurm.conf /tmp/first.conf && echo same-conf; "
        'srun -p builder sh -c \'echo "job=$SLURM_JOB_ID node=$SLURMD_NODENAME"\''
    )
    run = subprocess.run(
        ["docker", "run", "--rm", "-v", f"{ROOT / 'scripts' / 'slurm'}:/slurm:ro", mirror_base, "bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "installing munge slurmctld slurmd slurm-client" in out  # nothing was there
    assert out.count("writing /etc/slurm/slurm.conf") == 1 and "same-conf" in out  # the second run kept it
    assert "Slurm answers: partition builder is up" in out
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith("job=") and " node=" in last and last.split("job=")[1].split()[0].isdigit()
