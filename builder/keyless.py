"""Compatibility re-exports; import from builder.signing.keyless.identity, builder.signing.keyless.trust,
builder.signing.keyless.write and builder.signing.keyless.verify."""

from builder.signing.keyless.identity import ANY_IDENTITY, IdentityPolicy, parse_signer
from builder.signing.keyless.trust import (
    ambient_identity_token,
    identity_token,
    load_trust_config,
    load_trusted_root,
)
from builder.signing.keyless.verify import KeylessLayerVerifier, verify_keyless
from builder.signing.keyless.write import keyless_attest_image, keyless_sign_and_attest_build, keyless_sign_image

__all__ = [
    "ANY_IDENTITY",
    "IdentityPolicy",
    "KeylessLayerVerifier",
    "ambient_identity_token",
    "identity_token",
    "keyless_attest_image",
    "keyless_sign_and_attest_build",
    "keyless_sign_image",
    "load_trust_config",
    "load_trusted_root",
    "parse_signer",
    "verify_keyless",
]
