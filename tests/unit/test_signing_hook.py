"""builder.build.signing_hook: the on_built hook takes exactly one of a key signer and a keyless setup."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from builder.build.plan import BuildOptions
from builder.errors import ConfigError
from builder.publish import KeylessSetup, signing_hook
from builder.registry import RegistryClient
from builder.signing.keys import generate_key_pair, load_signer

if TYPE_CHECKING:
    from pathlib import Path


def test_signing_hook_needs_exactly_one_way_to_sign(tmp_path: Path) -> None:
    key, _, _ = generate_key_pair(tmp_path / "k", None)
    signer = load_signer(key, None)
    client = RegistryClient("127.0.0.1:1", insecure=True)
    options = BuildOptions(registry="127.0.0.1:1", state_dir=tmp_path)
    with pytest.raises(ConfigError, match="exactly one"):
        signing_hook(client=client, options=options, lock_dir=tmp_path, git_commit=None)
    both = KeylessSetup(identity_token=object(), trust_config=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="exactly one"):
        signing_hook(client=client, options=options, lock_dir=tmp_path, git_commit=None, signer=signer, keyless=both)
    hook = signing_hook(client=client, options=options, lock_dir=tmp_path, git_commit="abc", signer=signer)
    assert callable(hook)
