"""A `builder sign` that waits for the ``.sig`` lock another process holds says so once on stderr
after about 2 s (what is awaited, the lock file, why, how long at most), then signs when the other
process lets go. Real parts: the registry, a tiny real image, `python -m builder` as its own process,
a second process holding the lock file with filelock."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient
from builder.signing.layer import signature_lock_path, signature_tag
from tests.conftest import lock_holder
from tests.integration.test_sign import push_tiny_image

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration


def test_a_sign_waiting_for_another_process_says_what_it_waits_for(
    registry_address: str, unique_repo: str, tmp_path: Path
) -> None:
    client = RegistryClient(registry_address, insecure=True)
    digest = push_tiny_image(client, unique_repo, "v1")
    env = {**os.environ, "BUILDER_REGISTRY": registry_address, "BUILDER_STATE_DIR": str(tmp_path / "state")}
    env.pop("BUILDER_KEY_PASSWORD", None)
    keys = [sys.executable, "-m", "builder", "keys", "generate", "--output-dir", "k", "--no-password"]
    subprocess.run(keys, cwd=tmp_path, env=env, check=True, capture_output=True)
    tag = signature_tag(digest, ".sig")
    lock = signature_lock_path(tmp_path / "state" / "locks", registry_address, unique_repo, tag)
    lock.parent.mkdir(parents=True)
    holder = lock_holder(lock)
    sign = subprocess.Popen(
        [sys.executable, "-m", "builder", "sign", f"{unique_repo}@{digest}", "--key", "k/builder.key", "--json"],
        cwd=tmp_path,
        env={**env, "COLUMNS": "400"},  # one line per notice, whatever the path's length
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert sign.stderr is not None
        first = sign.stderr.readline()  # the sign process blocks on the lock until the holder lets go
        assert holder.stdin is not None
        holder.stdin.write("go\n")
        holder.stdin.close()
        out, rest = sign.communicate(timeout=120)
    finally:
        holder.kill()
        sign.kill()
    assert first.strip() == (
        f"waiting for the lock of the signature tag {registry_address}/{unique_repo}:{tag} ({lock}), "
        "held by another builder process; up to 60 s"
    )
    assert sign.returncode == 0, first + rest
    assert "waiting for the lock" not in rest  # said once
    assert f'"digest": "{digest}"' in out
    assert client.try_get_manifest(unique_repo, tag) is not None
