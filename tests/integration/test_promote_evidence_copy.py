"""The evidence copy of a promotion into another repository (``transfer.copy_evidence``) on the real
registry, where the source's ``.sig`` is unusual.

When the destination has no ``.sig`` yet, the copy and the promoter's signature of the copy are one
write: the source's manifest stands in for the destination's read. A source whose ``.sig`` already
carries the promoter's signature for the destination's identity (the repository mirrors the
destination: ``cosign copy`` back, evidence copied by hand) made the signer find "already signed"
in that read, write nothing, and then read the destination's tag, which did not exist: the
promotion failed with "not found" (exit 8) and the copy carried no ``.sig``. Now the read that is
not yet stored is written as it is."""

from __future__ import annotations

import base64
import textwrap
from typing import TYPE_CHECKING

import pytest

from builder import labels
from builder.promote import Target, apply_promotion, plan_promotion
from builder.registry import RegistryClient
from builder.signing.layer import (
    SIG_SUFFIX,
    SIGNATURE_ANNOTATION,
    SIMPLESIGNING_MEDIA_TYPE,
    SignatureLayer,
    append_layer,
    signature_tag,
    simple_signing_payload,
)
from tests.integration.test_promote import VARIANT, World
from tests.integration.test_promote_support import make_keys

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration


def _world(registry: str, repo: str, tmp_path: Path) -> World:
    state = tmp_path / "state"
    state.mkdir()
    keys = make_keys(state)
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            keys:
              build:
                - file: {keys.pub("build")}
              promoters:
                - file: {keys.pub("build")}
            promoters: [promoters]
            stages:
              dev:
                from: build
                repository: "copies/{{repository}}"
                require:
                  unconditional: dev takes every build
            """
        )
    )
    client = RegistryClient(registry, insecure=True)
    return World(registry, repo, client, keys, policy, state, Target(VARIANT, repo, registry))


def test_source_sig_already_signed_for_the_destination(registry_address: str, unique_repo: str, tmp_path: Path) -> None:
    world = _world(registry_address, unique_repo, tmp_path)
    digest = world.build(b"mirrored evidence")
    copies = f"copies/{unique_repo}"
    # the promoter's signature of the copy, for the destination's identity, already in the source's .sig
    signer = world.keys.signer("build")
    payload = simple_signing_payload(
        f"{registry_address}/{copies}", digest, {labels.SIGNATURE_ROLE: labels.PROMOTION_ROLE}
    )
    sig = base64.b64encode(signer.sign(payload)).decode()
    layer = SignatureLayer(SIMPLESIGNING_MEDIA_TYPE, payload, {SIGNATURE_ANNOTATION: sig})
    append_layer(world.client, unique_repo, digest, SIG_SUFFIX, layer, lock_dir=world.state / "locks")
    source_sig = world.client.get_manifest(unique_repo, signature_tag(digest, SIG_SUFFIX))
    assert len(source_sig.layers) == 2  # the build's signature and the one for the destination

    env = world.env()
    applied = apply_promotion(env, plan_promotion(env, world.target, "dev"))
    assert applied.record.digest == digest
    copied = world.client.get_manifest(copies, signature_tag(digest, SIG_SUFFIX))
    assert {d.digest for d in copied.layers} == {d.digest for d in source_sig.layers}  # every layer, none twice
    assert any(d.digest == layer.descriptor()["digest"] for d in copied.layers)  # signed for its identity
