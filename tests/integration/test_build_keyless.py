"""`builder build --keyless` on real parts: BuildKit, the registry, and the offline Sigstore test instance
(tests/sigstore_instance: real Fulcio v2 / Rekor v1 protocols on loopback). Two ways to the OIDC token:
``--oidc-token`` and, as ``.github/workflows/images.yml`` runs it, none given (the ambient GitHub Actions
token, served by the instance's runner token endpoint). ``builder verify --identity/--issuer`` judges.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pytest

from builder.predicates import SLSA_PROVENANCE_V1
from tests.sigstore_instance import SigstoreTestInstance, TrustFiles, write_trust_files
from tests.sigstore_instance.server import GITHUB_ISSUER

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.conftest import Cli, CliResult

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW_REF = "builder-org/builder/.github/workflows/images.yml@refs/heads/main"
IDENTITY = f"https://github.com/{WORKFLOW_REF}"


@pytest.fixture(scope="module")
def sigstore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SigstoreTestInstance, TrustFiles]]:
    with SigstoreTestInstance() as inst:
        yield inst, write_trust_files(inst, tmp_path_factory.mktemp("sigstore-trust"))


@pytest.fixture
def tiny_matrix(tmp_path: Path, unique_repo: str) -> Path:
    text = (ROOT / "tests" / "data" / "matrices" / "tiny.yaml").read_text()
    path = tmp_path / "tiny.yaml"
    path.write_text(text.replace("repository: test/tiny", f"repository: {unique_repo}"))
    return path


@pytest.fixture
def env(tmp_path: Path, registry_address: str, mirror_base: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The variables of a build outside CI (no ambient OIDC token in the environment): a fresh
    state directory (with the mirror record) and the local registry."""
    state = tmp_path / "state"
    state.mkdir()
    shutil.copy(ROOT / ".builder" / "mirror.json", state / "mirror.json")
    for name in list(os.environ):
        if name.startswith(("ACTIONS_ID_TOKEN", "GITHUB_", "BUILDER_OIDC")):
            monkeypatch.delenv(name)
    return {"BUILDER_STATE_DIR": str(state), "BUILDER_REGISTRY": registry_address}


class Builder(Protocol):
    def __call__(self, env: dict[str, str], *args: str) -> CliResult: ...


@pytest.fixture
def builder(cli: Cli) -> Builder:
    """``builder ARGS`` in-process (the ``cli`` fixture) in the repository, ``env`` set, any exit code."""

    def run(env: dict[str, str], *args: str) -> CliResult:
        return cli(*args, code=None, env=env, cwd=ROOT)

    return run


def _verify(
    builder: Builder, env: dict[str, str], trust: TrustFiles, issuer: str, ref: str, identity: str = IDENTITY
) -> CliResult:
    return builder(
        env,
        "--json",
        "verify",
        "--identity",
        identity,
        "--issuer",
        issuer,
        "--trust-config",
        str(trust.trusted_root),
        "--attestation",
        SLSA_PROVENANCE_V1,
        ref,
    )


def test_build_keyless_signs_and_verify_accepts(
    builder: Builder,
    docker_engine: str,
    tiny_matrix: Path,
    env: dict[str, str],
    sigstore: tuple[SigstoreTestInstance, TrustFiles],
) -> None:
    inst, trust = sigstore
    tc = str(trust.trust_config)

    # 1. explicit token (--oidc-token)
    token = inst.token(job_workflow_ref=WORKFLOW_REF)
    proc = builder(
        env,
        "--json",
        "build",
        "--matrix",
        str(tiny_matrix),
        "--select",
        "tiny-cu128*",
        "--keyless",
        "--oidc-token",
        token,
        "--trust-config",
        tc,
    )
    assert proc.code == 0, proc.stderr[-3000:]
    (img,) = json.loads(proc.stdout)["images"]
    assert img["status"] == "built"
    ref = f"{img['reference']}@{img['digest']}"
    ok = _verify(builder, env, trust, inst.issuer_url, ref)
    assert ok.code == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    report = json.loads(ok.stdout)
    assert report["ok"] is True
    # the SBOM too (issue 15 item 4), signed by the same identity, which cosign's type name finds
    sbom = builder(
        env,
        "--json",
        "verify",
        "--identity",
        IDENTITY,
        "--issuer",
        inst.issuer_url,
        "--trust-config",
        str(trust.trusted_root),
        "--attestation",
        "https://cyclonedx.org/bom",
        ref,
    )
    assert sbom.code == 0, sbom.stdout[-2000:] + sbom.stderr[-2000:]
    boms = [
        i
        for i in json.loads(sbom.stdout)["items"]
        if i["predicate_type"] == "https://cyclonedx.org/bom" and i["ok"] and i["statement"]
    ]
    assert len(boms) == 2, boms  # the legacy .att layer and the Sigstore bundle referrer, as the provenance
    predicate = boms[0]["statement"]["predicate"]
    assert predicate["bomFormat"] == "CycloneDX" and predicate["specVersion"] == "1.6"
    assert predicate["metadata"]["component"]["type"] == "container"
    # another identity is refused (exit 18): the check can fail
    bad = _verify(
        builder, env, trust, inst.issuer_url, ref, identity="https://github.com/someone/else/.github/x.yml@refs/x"
    )
    assert bad.code == 18, bad.stdout[-2000:] + bad.stderr[-2000:]

    # 2. no token given: the ambient GitHub Actions OIDC token (what images.yml runs; GitHub's issuer)
    gha = {**env, **inst.github_actions_env(WORKFLOW_REF)}
    proc2 = builder(
        gha, "--json", "build", "--matrix", str(tiny_matrix), "--select", "tiny-cpu*", "--keyless", "--trust-config", tc
    )
    assert proc2.code == 0, proc2.stderr[-3000:]
    (img2,) = json.loads(proc2.stdout)["images"]
    assert img2["status"] == "built"
    ok2 = _verify(builder, env, trust, GITHUB_ISSUER, f"{img2['reference']}@{img2['digest']}")
    assert ok2.code == 0, ok2.stdout[-2000:] + ok2.stderr[-2000:]


def test_build_keyless_without_any_token_is_a_signing_error(
    builder: Builder,
    docker_engine: str,
    tiny_matrix: Path,
    env: dict[str, str],
    sigstore: tuple[SigstoreTestInstance, TrustFiles],
) -> None:
    """Outside CI with no --oidc-token: a clear error before anything is built."""
    _, trust = sigstore
    proc = builder(env, "build", "--matrix", str(tiny_matrix), "--keyless", "--trust-config", str(trust.trust_config))
    assert proc.code != 0
    assert "OIDC" in proc.stderr and "--oidc-token" in proc.stderr, proc.stderr[-2000:]
    assert "building" not in proc.stdout


def test_signing_hook_with_a_key_writes_verifiable_provenance(
    registry_address: str, unique_repo: str, tmp_path: Path
) -> None:
    """The core hook (what `builder build --sign` and `builder run` use) on a real pushed image: the
    signature and the SLSA provenance it attaches verify with the public key; the predicate carries the
    commit, the secret ids and the source date epoch passed in."""
    import datetime as dt

    from builder.build.plan import BuildOptions
    from builder.models import Accelerator, BaseImage, BuiltImage, Framework, RenderedImage, Variant
    from builder.publish import signing_hook
    from builder.registry import RegistryClient
    from builder.signing.keys import generate_key_pair, load_public_keys, load_signer
    from builder.signing.verify import read_attestations, verify_image
    from tests.integration.test_sign import push_tiny_image

    client = RegistryClient(registry_address, insecure=True)
    digest = push_tiny_image(client, unique_repo, "v1", os.urandom(16))
    key, pub, _ = generate_key_pair(tmp_path / "keys", None)
    variant = Variant(
        id="t-cpu",
        matrix="t",
        family="t",
        repository=unique_repo,
        accelerator=Accelerator("cpu"),
        framework=Framework("none", "0"),
        python="3.11",
        os="debian12",
        platform="linux/amd64",
        base=BaseImage("mirror:debian:bookworm", "sha256:" + "0" * 64, "x@sha256:" + "0" * 64),
    )
    rendered = RenderedImage(variant, "FROM x\n", (), "a" * 64, ())
    built = BuiltImage("t-cpu", f"{registry_address}/{unique_repo}", digest, "t-cpu-aaaaaaaaaaaa", "built")
    options = BuildOptions(
        registry=registry_address,
        state_dir=tmp_path,
        secrets=(("ca_bundle", Path("/x")),),
        source_date_epoch=1700000000,
    )
    hook = signing_hook(
        client=client,
        options=options,
        lock_dir=tmp_path / "locks",
        git_commit="0123abcd",
        signer=load_signer(key, None),
        now=lambda: dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    )
    hook(built, rendered)
    report = verify_image(
        client, unique_repo, digest, keys=load_public_keys([pub]), predicate_types=[SLSA_PROVENANCE_V1]
    )
    assert report.ok, report.problems
    atts = read_attestations(client, unique_repo, digest, keys=load_public_keys([pub]))
    assert [a.predicate_type for a in atts] == [SLSA_PROVENANCE_V1, "https://cyclonedx.org/bom"]  # + the SBOM
    att = atts[0]
    assert att.verified and atts[1].verified
    text = json.dumps(att.predicate)
    assert "0123abcd" in text and "ca_bundle" in text and "2026-01-01" in text
