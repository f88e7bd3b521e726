"""A batch of promotions into another repository of a token-authenticated registry (issue 19's
request cuts where credentials matter): blobs and the shared ``.sig``/``.att`` config are mounted
across repositories with the token scopes a mount needs (pull on the source, push on the
destination), the copied manifest is stored by the stage tag's ``PUT`` alone, and each promoted
digest carries the build's signature, the signature of the copy and the record, all readable."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from builder.ledger import open_ledger
from builder.policy import load_policy
from builder.promote import PromotionContext, Target, plan_promotion, promote_many
from builder.registry import DockerCredentials, RegistryClient, client_for
from builder.signing.layer import SIGNATURE_CONFIG_DIGEST, signature_tag
from builder.signing.sign import sign_image
from tests.integration.test_promote_support import make_keys, push_image
from tests.projects import build_key_policy
from tests.registries import auth_registry

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration

STAGE_POLICY = """\
edge:
  from: build
  repository: "edge/{repository}"
  require:
    signature: {signers: [build]}
  rollback: {allowed: [build]}
"""


def test_a_batch_into_another_repository_of_a_token_registry(tmp_path: Path) -> None:
    (tmp_path / "registry").mkdir()
    with auth_registry(tmp_path / "registry", "token") as registry:
        docker_config = registry.docker_config(tmp_path / "docker")
        credentials = DockerCredentials.from_file(docker_config)
        client = RegistryClient(registry.address, insecure=True, auth=credentials)
        state = tmp_path / "state"
        keys = make_keys(state)
        policy = tmp_path / "policy.yaml"
        policy.write_text(build_key_policy(keys.pub("build"), STAGE_POLICY))
        repo = "team/app"
        targets, digests = [], []
        for i in range(3):
            digest = push_image(client, repo, f"v{i}", content=f"variant {i}".encode())
            sign_image(client, repo, digest, keys.signer("build"), lock_dir=state / "locks")
            targets.append(Target(f"v{i}", repo, registry.address))
            digests.append(digest)
        cache: dict[str, RegistryClient] = {}
        ctx = PromotionContext(
            policy=load_policy(policy, {"state_dir": str(state)}),
            registry=registry.address,
            clients=lambda r: client_for(r, insecure=lambda _r: True, auth=credentials, cache=cache),
            lock_dir=state / "locks",
            ledger=open_ledger(state / "ledger.sqlite"),
            signer=keys.signer("build"),
        )
        outcomes = promote_many(ctx, targets, "edge", confirm=True)
        assert all(o.ok for o in outcomes), [o.to_json() for o in outcomes]
        dst = f"edge/{repo}"
        for outcome, target, digest in zip(outcomes, targets, digests, strict=True):
            copy = outcome.applied.copy if outcome.applied is not None else None
            assert copy is not None and copy.copied == 0 and copy.mounted >= 3, copy  # mounted, never copied
            assert client.resolve(dst, f"{target.variant}-edge") == digest
            sig = client.get_manifest(dst, signature_tag(digest, ".sig")).json
            att = client.get_manifest(dst, signature_tag(digest, ".att")).json
            assert (len(sig["layers"]), len(att["layers"])) == (2, 1)  # the build's and the copy's; the record
            assert sig["config"]["digest"] == att["config"]["digest"] == SIGNATURE_CONFIG_DIGEST
        assert client.blob_exists(dst, SIGNATURE_CONFIG_DIGEST)
        assert registry.issuer is not None
        scopes = [s for r in registry.issuer.requests for s in r["query"].get("scope", [])]
        assert f"repository:{repo}:pull" in scopes  # the mounts' read of the source, asked for by name
        # what was written reads back and verifies: promoting again plans the stage as holding it
        again = PromotionContext(
            policy=load_policy(policy, {"state_dir": str(state)}),
            registry=registry.address,
            clients=lambda r: client_for(r, insecure=lambda _r: True, auth=credentials, cache={}),
            lock_dir=state / "locks",
        )
        plan = plan_promotion(again, targets[0], "edge")
        assert plan.previous == digests[0] and plan.decision.allowed, plan.decision.failed()
