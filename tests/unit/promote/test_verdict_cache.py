"""The verdict cache's key (``builder.promote.verdict_cache``): every input a layer's verdict depends
on changes it, and trust it cannot name turns caching off. (Reuse and non-reuse against a real
registry: tests/integration/test_status_verdicts.py.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.promote.context import KeylessOnFirstUse
from builder.promote.verdict_cache import trust_identity, verdict_key
from builder.signing.keys import generate_key_pair, load_public_keys
from builder.signing.verifiers import KeyVerifier, LayerCheck

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

DESCRIPTOR = {
    "mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
    "digest": "sha256:" + "a" * 64,
    "size": 242,
    "annotations": {"dev.cosignproject.cosign/signature": "MEUCIQ=="},
}
SUBJECT = "sha256:" + "b" * 64
TAG = "sha256-" + "b" * 64 + ".sig"
CODE = "builder=0.1.0\nsigning/verify.py 3000 1\n"


class OtherVerifier:
    """A LayerVerifier this module cannot name the trust of."""

    def check(self, data: bytes, signature: bytes, annotations: Mapping[str, str]) -> LayerCheck | None:
        return LayerCheck(bool(data and signature and annotations), signer="anyone")


def _keys(tmp: Path, *names: str) -> list[KeyVerifier]:
    out = []
    for name in names:
        _, pub, _ = generate_key_pair(tmp / name, None)
        out.append(KeyVerifier(tuple(load_public_keys([pub]))))
    return out


def test_trust_names_every_key_and_ignores_their_order(tmp_path: Path) -> None:
    a, b = _keys(tmp_path, "a", "b")
    both = KeyVerifier(a.keys + b.keys)
    assert trust_identity([both]) == trust_identity([KeyVerifier(b.keys + a.keys)])
    assert len({trust_identity([a]), trust_identity([b]), trust_identity([both])}) == 3
    assert trust_identity([a, KeylessOnFirstUse(None)]) not in (None, trust_identity([a]))


def test_a_verifier_whose_trust_cannot_be_named_turns_caching_off(tmp_path: Path) -> None:
    [a] = _keys(tmp_path, "a")
    assert trust_identity([a, OtherVerifier()]) is None


def test_every_input_changes_the_key() -> None:
    base = ("127.0.0.1:5000", "demo/jax", SUBJECT, DESCRIPTOR, "t" * 64)
    key = verdict_key(*base, tag=TAG, code=CODE)
    edited = {**DESCRIPTOR, "annotations": {"dev.cosignproject.cosign/signature": "MEUCIA=="}}
    others = [
        verdict_key("localhost:5000", *base[1:], tag=TAG, code=CODE),
        verdict_key(base[0], "demo/other", *base[2:], tag=TAG, code=CODE),
        verdict_key(*base[:2], "sha256:" + "c" * 64, *base[3:], tag=TAG, code=CODE),
        verdict_key(*base[:3], edited, base[4], tag=TAG, code=CODE),
        verdict_key(*base[:3], {**DESCRIPTOR, "digest": "sha256:" + "d" * 64}, base[4], tag=TAG, code=CODE),
        verdict_key(*base[:4], "u" * 64, tag=TAG, code=CODE),
        verdict_key(*base, tag=TAG.replace(".sig", ".att"), code=CODE),
    ]
    others.append(verdict_key(*base, tag=TAG, code=CODE.replace(" 1\n", " 2\n")))  # an edited verifier
    assert key not in others and len(set(others)) == len(others)
    assert verdict_key(*base, tag=TAG, code=CODE) == key  # deterministic: the same layer finds its verdict
