"""A newcomer's report, end to end against the real registry and real cosign: in a fresh project
whose shipped policy (policies/default.yaml) names one key file for ``build`` and ``promoters``,
promoting an unsigned third-party image into another repository signs the copy with the promoter
key (docs/promotion.md). That signature must never pass a ``signature by build`` rule: its signed
payload names the promotion role (docs/signing.md), ``builder verify`` calls it a promotion
signature, cosign 2 still verifies it (and can check the role with ``-a``), and messages show the
reference the user gave (not the variant tag it is read as).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from builder.labels import PROMOTION_ROLE, SIGNATURE_ROLE
from builder.registry import RegistryClient
from builder.signing.keys import generate_key_pair
from tests.conftest import unset_builder_settings
from tests.integration.test_promote_support import push_image

if TYPE_CHECKING:
    from tests.conftest import Cli, CliResult

pytestmark = pytest.mark.integration

VARIANT = "jax0.7-cpu-py3.11-debian12"
ROOT = Path(__file__).resolve().parents[2]


def fresh_project(root: Path, registry: str) -> Path:
    """The shipped policy with its dev stage in ``dev/{repository}`` (another repository: the copy is
    signed for its new identity, as prod's ``prod/{repository}`` is), its fleets, one key pair at
    ``{state_dir}/keys/builder.{key,pub}`` (what the shipped policy names for build and promoters)."""
    (root / "policies").mkdir(parents=True)
    (root / "matrices").mkdir()
    shipped = (ROOT / "policies" / "default.yaml").read_text()
    dev = "  dev:\n    from: build\n"
    assert dev in shipped
    (root / "policies" / "default.yaml").write_text(shipped.replace(dev, dev + '    repository: "dev/{repository}"\n'))
    shutil.copytree(ROOT / "fleets", root / "fleets")  # the shipped policy's prod rule names fleets/demo.yaml
    generate_key_pair(root / "state" / "keys", None)
    (root / "builder.toml").write_text(f'registry = "{registry}"\nstate_dir = "state"\n')
    return root


def user(cli: Cli, monkeypatch: pytest.MonkeyPatch, root: Path, *args: str, code: int = 0) -> CliResult:
    unset_builder_settings(monkeypatch)
    return cli(*args, code=code, env={"HOME": str(root)}, cwd=root)


@pytest.fixture
def mirrored(registry_address: str, unique_repo: str) -> tuple[str, str]:
    """An unsigned third-party image ``<unique>/mirror/debian:bookworm`` (its reference, digest)."""
    client = RegistryClient(registry_address, insecure=True)
    repo = f"{unique_repo}/mirror/debian"
    digest = push_image(client, repo, "bookworm", content=b"debian bookworm, mirrored")
    return f"{registry_address}/{repo}:bookworm", digest


def _signature_rule(doc: Any) -> dict[str, Any]:
    results = doc["error"]["details"]["results"] if "error" in doc else doc["results"]
    found = [r for r in _leaves(results[0]["decision"]["reasons"]) if r["rule"] == "signature by build"]
    assert len(found) == 1, results[0]["decision"]
    rule: dict[str, Any] = found[0]
    return rule


def _leaves(reasons: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in reasons:
        out.extend(_leaves(r.get("children") or []) if r.get("children") else [r])
    return out


def test_a_promotion_signature_never_passes_the_build_signature_rule(
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    registry_address: str,
    unique_repo: str,
    mirrored: tuple[str, str],
    cosign_bin: str,
) -> None:
    root = fresh_project(tmp_path / "p", registry_address)
    ref, digest = mirrored
    promoted = user(
        cli, monkeypatch, root, "promote", ref, "--to", "dev", "--variant-id", VARIANT, "--confirm", "--json"
    )
    out = promoted.json()["results"][0]
    assert out["applied"] and out["digest"] == digest, out
    dev_repo = f"dev/{unique_repo}/mirror/debian"
    copy = f"{registry_address}/{dev_repo}@{digest}"
    assert out["destination"] == f"{registry_address}/{dev_repo}:{VARIANT}-dev"

    # the copy carries the promotion's signature, and only that one: its signed payload names the role
    pub = root / "state" / "keys" / "builder.pub"
    verified = user(cli, monkeypatch, root, "verify", copy, "--key", str(pub), "--json").json()
    sigs = [i for i in verified["items"] if i["kind"] == "signature"]
    assert [(s["ok"], s["role"]) for s in sigs] == [(True, PROMOTION_ROLE)], sigs
    human = " ".join(user(cli, monkeypatch, root, "verify", copy, "--key", str(pub)).stderr.split())
    assert "promotion signature by" in human and "(no image signature)" in human, human

    # staging asks for a build signature: the promotion's signature by the same key does not count
    staging = ("promote", ref, "--to", "staging", "--variant-id", VARIANT)
    rule = _signature_rule(user(cli, monkeypatch, root, *staging, "--json", code=31).json())
    assert rule["passed"] is False and "is a promotion signature" in rule["reason"], rule
    human = " ".join(user(cli, monkeypatch, root, *staging, code=31).stderr.split())
    assert "[pass] signature by build" not in human and "promotion signature" in human, human

    # policy validate says why one key for both roles is a risk for other verifiers
    problems = user(cli, monkeypatch, root, "policy", "validate", "--json").json()["files"][0]["problems"]
    assert any("promotions" in p["message"] and p["severity"] == "warning" for p in problems), problems

    # cosign 2 still verifies the promotion signature, and checks its signed role
    def cosign(*extra: str) -> subprocess.CompletedProcess[str]:
        cmd = [cosign_bin, "verify", "--key", str(pub), "--insecure-ignore-tlog", "--allow-http-registry", *extra, copy]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)

    plain = cosign()
    assert plain.returncode == 0, plain.stderr
    payloads = json.loads(plain.stdout)
    assert [p["optional"][SIGNATURE_ROLE] for p in payloads] == [PROMOTION_ROLE], payloads
    assert cosign("-a", f"{SIGNATURE_ROLE}={PROMOTION_ROLE}").returncode == 0
    assert cosign("-a", f"{SIGNATURE_ROLE}=build").returncode != 0

    # an image signature by the build key (no role) still counts
    key = root / "state" / "keys" / "builder.key"
    user(cli, monkeypatch, root, "sign", copy, "--key", str(key))
    rule = _signature_rule(user(cli, monkeypatch, root, *staging, "--json", code=31).json())
    assert rule["passed"] is True, rule
