"""Fixtures of the policy tests: key pairs made once per package, the shared policy loaded."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from builder.policy import Policy, load_policy
from builder.predicates import SLSA_PROVENANCE_V1
from builder.signing.keys import generate_key_pair
from tests.unit.policy.support import POLICY, Keys, write

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(scope="package")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    root = tmp_path_factory.mktemp("keys")
    out = {}
    for name in ("build", "runner", "alice", "bob", "carol", "mallory"):
        _, pub, fp = generate_key_pair(root / name, None)
        out[name] = (pub, fp)
    return out


@pytest.fixture
def policy(tmp_path: Path, keys: Keys) -> Policy:
    text = POLICY.format(**{k: v[0] for k, v in keys.items()}, slsa=SLSA_PROVENANCE_V1)
    return load_policy(write(tmp_path, text))
