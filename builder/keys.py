"""Compatibility re-exports; import from builder.signing.keys."""

from builder.signing.keys import (
    PublicKey,
    generate_key_pair,
    load_public_keys,
    load_signer,
    write_key_pair,
)

__all__ = ["PublicKey", "generate_key_pair", "load_public_keys", "load_signer", "write_key_pair"]
