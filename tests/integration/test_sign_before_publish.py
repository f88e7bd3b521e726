"""Sign before publish (#20 item 5), as the attack: `builder build --sign` whose first signature
write fails (the registry answers 500 to every `.sig` PUT, as a run killed at that write leaves it:
the content tag on an image with no signature). The build must not report success, and the
re-run must finish the signing it finds missing (status `signed`) instead of `up-to-date`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient
from tests.faultproxy import Fault, FaultProxy
from tests.integration import test_build_cli

if TYPE_CHECKING:
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
