"""The DSSE envelope an attestation layer carries in its descriptor (``ENVELOPE_ANNOTATION``):
written by ``prepare_attestation`` up to ``ENVELOPE_ANNOTATION_MAX`` bytes, and taken for the blob
by ``embedded_envelope`` only when its bytes have the layer's sha256 and size."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from builder.signing.attest import prepare_attestation
from builder.signing.keys import load_public_keys, load_signer
from builder.signing.layer import (
    DSSE_MEDIA_TYPE,
    ENVELOPE_ANNOTATION,
    ENVELOPE_ANNOTATION_MAX,
    SIMPLESIGNING_MEDIA_TYPE,
    embedded_envelope,
    without_envelope,
)
from builder.signing.layer_check import check_attestation_layer
from builder.signing.verifiers import verifiers_for

DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "signing"
DIGEST = "sha256:" + "cd" * 32
PTYPE = "https://builder.example/promotion/v1"


@pytest.fixture(scope="module")
def descriptor() -> dict[str, Any]:
    signer = load_signer(DATA / "cosign.key", "test-password")
    prepared = prepare_attestation("r.example", "team/app", DIGEST, PTYPE, {"stage": "dev"}, signer)
    return prepared.layer.descriptor()


def test_a_small_envelope_is_carried_exactly_and_verifies(descriptor: dict[str, Any]) -> None:
    carried = embedded_envelope(descriptor)
    assert carried is not None and json.loads(carried)["payloadType"] == "application/vnd.in-toto+json"
    assert len(carried) == descriptor["size"] and descriptor["annotations"][ENVELOPE_ANNOTATION] == carried.decode()
    vs = verifiers_for(load_public_keys([DATA / "cosign.pub"]))
    item = check_attestation_layer(descriptor, carried, DIGEST, vs)
    assert item.ok and item.predicate_type == PTYPE, item.reason


def test_an_envelope_over_the_cap_is_not_carried() -> None:
    signer = load_signer(DATA / "cosign.key", "test-password")
    big = {"notes": "x" * ENVELOPE_ANNOTATION_MAX}
    layer = prepare_attestation("r.example", "team/app", DIGEST, PTYPE, big, signer).layer
    assert len(layer.blob) > ENVELOPE_ANNOTATION_MAX and ENVELOPE_ANNOTATION not in layer.annotations
    assert embedded_envelope(layer.descriptor()) is None


def _edited(text: str) -> str:
    """The same length, another sha256: one character of the signature changed."""
    i = text.index('"sig":"') + len('"sig":"') + 4
    return text[:i] + ("A" if text[i] != "A" else "B") + text[i + 1 :]


def _set(descriptor: dict[str, Any], text: str) -> None:
    descriptor["annotations"][ENVELOPE_ANNOTATION] = text


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda d: _set(d, _edited(d["annotations"][ENVELOPE_ANNOTATION])), id="edited"),
        pytest.param(lambda d: _set(d, d["annotations"][ENVELOPE_ANNOTATION] + " "), id="longer"),
        pytest.param(lambda d: d.update({"size": d["size"] + 1}), id="size"),
        pytest.param(lambda d: d.update({"digest": "sha256:" + "00" * 32}), id="digest"),
        pytest.param(lambda d: d.update({"mediaType": SIMPLESIGNING_MEDIA_TYPE}), id="media-type"),
        pytest.param(lambda d: d["annotations"].update({ENVELOPE_ANNOTATION: 7}), id="not-a-string"),
        pytest.param(lambda d: d["annotations"].pop(ENVELOPE_ANNOTATION), id="absent"),
        pytest.param(lambda d: d.pop("annotations"), id="no-annotations"),
    ],
)
def test_an_annotation_that_is_not_the_blob_is_not_used(descriptor: dict[str, Any], change: Any) -> None:
    d = json.loads(json.dumps(descriptor))
    change(d)
    assert embedded_envelope(d) is None


def test_without_envelope_keeps_the_other_annotations(descriptor: dict[str, Any]) -> None:
    d = without_envelope(descriptor)
    assert ENVELOPE_ANNOTATION not in d["annotations"] and d["mediaType"] == DSSE_MEDIA_TYPE
    assert set(d["annotations"]) == set(descriptor["annotations"]) - {ENVELOPE_ANNOTATION}
    assert ENVELOPE_ANNOTATION in descriptor["annotations"]  # a copy: the original is unchanged
