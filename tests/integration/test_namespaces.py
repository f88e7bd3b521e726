"""Two checkouts (own keys, own state) run the demo flow (``builder run`` of one CPU variant) on one
registry with the same matrix repository: with different ``repository_prefix`` settings neither sees
an untrusted stage pointer; without prefixes the second sees the first's pointers as untrusted (the
collision the prefix prevents). The same registry reached as ``localhost:PORT`` is the same registry:
its pointers stay trusted."""

from __future__ import annotations

import json
import shutil
import textwrap
from typing import TYPE_CHECKING, Any

from builder.registry import RegistryClient
from tests.conftest import ROOT, Cli
from tests.integration.test_promote_support import make_keys, write_policy
from tests.projects import cpu_matrix

if TYPE_CHECKING:
    from pathlib import Path

VARIANT = "tiny-cpu-py3.11-debian12"


def checkout(root: Path, registry: str, repo: str, prefix: str | None, mirror_base: str) -> Path:
    """A project like the repository's: the tiny CPU matrix in ``repo``, its own keys and policy,
    the machine's mirrored Debian base."""
    (root / "matrices").mkdir(parents=True)
    (root / "policies").mkdir()
    (root / "images").mkdir()
    shutil.copytree(ROOT / "images" / "_common", root / "images" / "_common")
    shutil.copytree(ROOT / "images" / "tiny", root / "images" / "tiny")
    (root / "matrices" / "tiny.yaml").write_text(cpu_matrix("tiny", repo))
    keys = make_keys(root / "state")
    write_policy(root / "policies" / "default.yaml", keys)
    toml = f"""\
        registry = "{registry}"
        state_dir = "state"
        key = "{keys.key("build")}"
        check_key = "{keys.key("check-runner")}"
        """
    if prefix is not None:
        toml += f'repository_prefix = "{prefix}"\n'
    (root / "builder.toml").write_text(textwrap.dedent(toml))
    reference, _, digest = mirror_base.partition("@")  # registry/mirror/debian:bookworm@sha256:...
    (root / "state" / "mirror.json").write_text(
        json.dumps({"debian:bookworm": {"reference": reference, "digest": digest}})
    )
    return root


def status_rows(cli: Cli, root: Path, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = cli("status", "--json", cwd=root, env=env or {}, code=None).json()["rows"]
    return rows


def test_two_checkouts_with_prefixes_share_a_registry(
    cli: Cli, registry_address: str, mirror_base: str, unique_repo: str, tmp_path: Path, docker_engine: str
) -> None:
    del docker_engine  # the tiny image is built FROM the mirrored base with the engine
    a = checkout(tmp_path / "a", registry_address, "demo/tiny", f"{unique_repo}-a", mirror_base)
    b = checkout(tmp_path / "b", registry_address, "demo/tiny", f"{unique_repo}-b", mirror_base)
    for root in (a, b):
        cli("run", "--to", "staging", "--json", cwd=root)
    client = RegistryClient(registry_address, insecure=True)
    for root, prefix in ((a, f"{unique_repo}-a"), (b, f"{unique_repo}-b")):
        rows = status_rows(cli, root)
        assert {r["stage"] for r in rows} >= {"dev", "staging", "prod"}
        assert all(not r["note"] and r["error"] is None for r in rows), rows
        assert all(r["pointer"].startswith(f"{registry_address}/{prefix}/") for r in rows)
        dev = next(r for r in rows if r["stage"] == "dev")
        assert dev["digest"] and client.try_resolve(f"{prefix}/demo/tiny", f"{VARIANT}-dev") == dev["digest"]
        prod = next(r for r in rows if r["stage"] == "prod")
        assert prod["pointer"] == f"{registry_address}/{prefix}/prod/demo/tiny:{VARIANT}-prod"  # stages too
        resolved = cli("resolve", VARIANT, "--stage", "dev", "--json", cwd=root).json()
        assert dev["digest"] in json.dumps(resolved)

    # the same registry under its other loopback name (localhost:PORT / 127.0.0.1:PORT): the records
    # name the spelling that wrote them, and it is still one pointer
    host, _, port = registry_address.rpartition(":")
    other = f"{'127.0.0.1' if host == 'localhost' else 'localhost'}:{port}"
    aliased = status_rows(cli, a, {"BUILDER_REGISTRY": other})
    assert all(r["pointer"].startswith(other) for r in aliased)
    assert all(not r["note"] and r["error"] is None for r in aliased), aliased
    assert next(r for r in aliased if r["stage"] == "dev")["promoter"]

    # without prefixes, a second checkout on the first's repository sees its pointers as untrusted
    plain_a = checkout(tmp_path / "plain-a", registry_address, f"{unique_repo}/shared", None, mirror_base)
    plain_b = checkout(tmp_path / "plain-b", registry_address, f"{unique_repo}/shared", None, mirror_base)
    cli("run", "--to", "dev", "--json", cwd=plain_a)
    rows = status_rows(cli, plain_b)
    (dev,) = [r for r in rows if r["stage"] == "dev"]
    assert dev["note"].startswith("untrusted") and dev["promoter"] is None, dev
