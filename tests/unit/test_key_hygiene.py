"""Key hygiene (#20 item 7), each as the attack with the refusal it must get: keys generated under
``umask 000`` still get 0700 directories and a 0600 key; a key file (or its directory) others may
write is refused before it signs (exit 16); the key password never reaches a child process's
environment (a real child records what it was given)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.errors import SigningKeyError
from builder.signing.keys import generate_key_pair, load_signer

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.conftest import Cli

ROOT = Path(__file__).resolve().parents[2]


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.fixture
def umask_000() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_keys_generated_under_umask_000_are_private(cli: Cli, tmp_path: Path, umask_000: None) -> None:
    out = tmp_path / "a" / "b" / "keys"
    cli("keys", "generate", "--output-dir", str(out), "--no-password", cwd=ROOT)
    assert mode(out / "builder.key") == 0o600
    for d in (tmp_path / "a", tmp_path / "a" / "b", out):
        assert mode(d) == 0o700, (d, oct(mode(d)))
    assert mode(out / "builder.pub") == 0o644


def test_a_key_others_can_write_is_refused(cli: Cli, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    generate_key_pair(keys, None)
    key = keys / "builder.key"
    load_signer(key, None)  # fine as generated
    key.chmod(0o666)  # the attack: anyone may swap the key
    with pytest.raises(SigningKeyError, match="insecure permissions") as err:
        load_signer(key, None)
    assert err.value.exit_code == 16 and "chmod 600" in (err.value.hint or "")
    out = cli("sign", "127.0.0.1:5000/demo/jax:x", "--key", str(key), "--json", code=16, cwd=ROOT)
    assert "insecure permissions" in out.json()["error"]["message"]
    key.chmod(0o600)
    keys.chmod(0o777)  # a directory others may write: the key can be replaced by renaming
    with pytest.raises(SigningKeyError, match="insecure permissions on directory"):
        load_signer(key, None)
    keys.chmod(0o1777)  # sticky (as /tmp): others cannot rename our file
    load_signer(key, None)


def test_an_existing_world_writable_key_directory_is_refused_for_new_keys(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(SigningKeyError, match="insecure permissions"):
        generate_key_pair(shared, None)
    assert not (shared / "builder.key").exists()


def test_the_key_password_never_reaches_a_child_process(cli: Cli, tmp_path: Path) -> None:
    """`builder doctor` runs the container engine; the engine here is a real program that writes
    the environment it was started with, then fails like a missing daemon."""
    record = tmp_path / "child-env.txt"
    engine = tmp_path / "docker"
    engine.write_text(
        f"#!{sys.executable}\nimport os, sys\n"
        f"open({str(record)!r}, 'a').write(repr(sorted(os.environ.items())) + '\\n')\nsys.exit(1)\n"
    )
    engine.chmod(0o755)
    secret = "s3cret-key-password-4711"
    cli(
        "doctor",
        code=None,
        cwd=ROOT,
        env={"BUILDER_DOCKER": str(engine), "BUILDER_KEY_PASSWORD": secret, "COSIGN_PASSWORD": secret + "-c"},
    )
    seen = record.read_text()
    assert "BUILDER_DOCKER" in seen  # the child did run, with the invocation's environment
    assert secret not in seen and "BUILDER_KEY_PASSWORD" not in seen and "COSIGN_PASSWORD" not in seen
