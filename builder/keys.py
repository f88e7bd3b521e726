"""Compatibility re-exports; import from builder.signing.keys and builder.signing.cosign_key."""

from builder.signing.cosign_key import cosign_key_pem
from builder.signing.keys import (
    PublicKey,
    generate_key_pair,
    load_public_keys,
    load_signer,
    write_key_pair,
)

__all__ = ["PublicKey", "cosign_key_pem", "generate_key_pair", "load_public_keys", "load_signer", "write_key_pair"]
