"""``builder fleet audit`` end to end: a CUDA 12.8 image promoted dev -> prod under a policy whose stages
name a fleet file; downgrading a cluster's driver in that file makes the audit name the prod digest and
the cluster and exit 11 (real registry, real promotion records, the fleet checker the policy uses)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from builder.registry import RegistryClient
from tests.conftest import unset_builder_settings
from tests.integration.test_promote_support import make_keys, push_image
from tests.projects import build_key_policy, jax_matrix

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli, CliResult

pytestmark = pytest.mark.integration

VARIANT = "jax0.7-cpu-py3.11-debian12"  # the tiny matrix's one variant (the image pushed under it needs CUDA 12.8)
NEEDS_CUDA_128 = {
    "labels": {"io.builder.accelerator": "cuda", "io.builder.cuda.version": "12.8"},
    "env": ["PATH=/usr/bin", "CUDA_VERSION=12.8.1", "NVIDIA_REQUIRE_CUDA=cuda>=12.8"],
}
FLEET = """\
name: site
clusters:
  - name: h100-train
    vendor: nvidia
    gpus: ["NVIDIA H100 80GB HBM3"]
    drivers: ["570.172.08"]
  - name: ws-4090
    vendor: nvidia
    gpus: ["NVIDIA GeForce RTX 4090"]
    drivers: ["570.172.08"]
    brand: GeForce
  - name: mi300x
    vendor: amd
    gpus: ["AMD Instinct MI300X"]
    rocm: ["6.3"]
"""


@pytest.fixture
def project(tmp_path: Path, registry_address: str, unique_repo: str) -> Path:
    root = tmp_path / "project"
    for d in ("matrices", "policies", "fleets"):
        (root / d).mkdir(parents=True)
    keys = make_keys(root / "state")
    (root / "builder.toml").write_text(
        f'registry = "{registry_address}"\nstate_dir = "state"\nkey = "{keys.key("build")}"\nfleets_dir = "fleets"\n'
    )
    (root / "fleets" / "site.yaml").write_text(FLEET)
    (root / "policies" / "default.yaml").write_text(
        build_key_policy(
            keys.pub("build"),
            """\
            dev:
              from: build
              require:
                signature: {signers: [build]}
            prod:
              from: dev
              require:
                fleet: {file: ../fleets/site.yaml}
            """,
        )
    )
    (root / "matrices" / "tiny.yaml").write_text(jax_matrix(unique_repo))
    return root


def _run(cli: Cli, monkeypatch: pytest.MonkeyPatch, project: Path, *args: str, code: int = 0) -> CliResult:
    unset_builder_settings(monkeypatch)
    return cli(*args, code=code, env={"HOME": str(project)}, cwd=project)


def test_downgraded_driver_makes_the_audit_name_the_prod_digest_and_cluster(
    project: Path, registry_address: str, unique_repo: str, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    from builder.signing.keys import load_signer
    from builder.signing.sign import sign_image

    client = RegistryClient(registry_address, insecure=True)
    digest = push_image(client, unique_repo, VARIANT, **NEEDS_CUDA_128)  # type: ignore[arg-type]
    sign_image(
        client,
        unique_repo,
        digest,
        load_signer(project / "state/keys/build/builder.key", None),
        lock_dir=project / "state" / "locks",
    )
    _run(cli, monkeypatch, project, "promote", VARIANT, "--to", "dev", "--confirm")
    _run(cli, monkeypatch, project, "promote", VARIANT, "--to", "prod", "--confirm")  # the fleet rule passes

    ok: Any = _run(cli, monkeypatch, project, "fleet", "audit", "--json").json()
    assert ok["gated_stages"] == ["prod"] and ok["blocked"] == [] and ok["errors"] == []
    judged = {(r["stage"], r["cluster"]) for r in ok["rows"]}
    assert judged == {("dev", "h100-train"), ("dev", "ws-4090"), ("prod", "h100-train"), ("prod", "ws-4090")}

    # the workstations go back to the R550 branch: CUDA 12.8 no longer starts there (GeForce: no forward compat)
    fleet = project / "fleets" / "site.yaml"
    fleet.write_text(
        FLEET.replace('drivers: ["570.172.08"]\n    brand: GeForce', 'drivers: ["550.144.03"]\n    brand: GeForce')
    )
    err = _run(cli, monkeypatch, project, "fleet", "audit", "--json", code=11).json()["error"]
    prod_ref = f"{registry_address}/{unique_repo}@{digest}"
    assert err["kind"] == "incompatible"
    assert f"prod {prod_ref} on ws-4090" in err["message"]
    blocked = err["details"]["blocked"]
    assert [(b["stage"], b["cluster"], b["reference"]) for b in blocked] == [("prod", "ws-4090", prod_ref)]
    assert "570.26" in blocked[0]["reason"]  # the minimum driver for CUDA 12.8, from the compat tables
    human = _run(cli, monkeypatch, project, "fleet", "audit", code=11)
    assert "BLOCKED prod" in human.stderr and "ws-4090" in human.stderr and "blocked dev" in human.stderr
    # dev is not gated unless asked
    _run(cli, monkeypatch, project, "fleet", "audit", "--gate", "dev", code=11)
    # resolve --cluster agrees: nothing in prod runs on the downgraded cluster any more
    _run(cli, monkeypatch, project, "resolve", VARIANT, "--stage", "prod", "--cluster", "ws-4090", code=11)
    _run(cli, monkeypatch, project, "resolve", VARIANT, "--stage", "prod", "--cluster", "h100-train")


def test_audit_with_nothing_promoted_says_so(project: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    res = _run(cli, monkeypatch, project, "fleet", "audit")
    assert "nothing to audit" in res.stderr
    _run(cli, monkeypatch, project, "fleet", "audit", "--gate", "qa", code=8)


def test_resolve_a_glob_for_a_cluster_picks_the_newest_digest_that_runs_there(
    project: Path, registry_address: str, unique_repo: str, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two variants of one framework in prod: the newer one needs CUDA 12.8, the older CUDA 12.4. A cluster
    whose driver is too old for 12.8 gets the 12.4 build; a cluster that runs both gets the newer."""
    from builder.signing.keys import load_signer
    from builder.signing.sign import sign_image

    matrix = project / "matrices" / "tiny.yaml"
    matrix.write_text(matrix.read_text().replace('versions: ["0.7"]', 'versions: ["0.6", "0.7"]'))
    client = RegistryClient(registry_address, insecure=True)
    signer = load_signer(project / "state/keys/build/builder.key", None)
    older = "jax0.6-cpu-py3.11-debian12"
    needs_124 = {
        "labels": {"io.builder.accelerator": "cuda", "io.builder.cuda.version": "12.4"},
        "env": ["PATH=/usr/bin", "CUDA_VERSION=12.4.1", "NVIDIA_REQUIRE_CUDA=cuda>=12.4"],
    }
    digests = {}
    for variant, needs in ((older, needs_124), (VARIANT, NEEDS_CUDA_128)):  # the 12.8 one is promoted last
        digests[variant] = push_image(client, unique_repo, variant, **needs)  # type: ignore[arg-type]
        sign_image(client, unique_repo, digests[variant], signer, lock_dir=project / "state" / "locks")
        _run(cli, monkeypatch, project, "promote", variant, "--to", "dev", "--confirm")
        _run(cli, monkeypatch, project, "promote", variant, "--to", "prod", "--confirm")
    # the workstations go back to R550 after both were promoted
    (project / "fleets" / "site.yaml").write_text(FLEET.replace('"570.172.08"]\n    brand', '"550.144.03"]\n    brand'))
    ref = f"{registry_address}/{unique_repo}@"
    args = ("resolve", "jax0.*", "--stage", "prod", "--json")
    old_driver = _run(cli, monkeypatch, project, *args, "--cluster", "ws-4090").json()
    expected = {"variant": older, "stage": "prod", "cluster": "ws-4090", "reference": ref + digests[older]}
    assert old_driver == {**expected, "verified": True}
    both = _run(cli, monkeypatch, project, *args, "--cluster", "h100-train").json()
    assert both["variant"] == VARIANT and both["reference"] == ref + digests[VARIANT]
    # a pattern needs a cluster; an unknown cluster is named
    _run(cli, monkeypatch, project, "resolve", "jax0.*", "--stage", "prod", code=2)
    _run(cli, monkeypatch, project, *args, "--cluster", "nope", code=8)
