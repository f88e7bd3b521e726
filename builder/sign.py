"""Compatibility re-exports; import from builder.signing.sign, builder.signing.layer, builder.signing.verify,
builder.signing.verifiers, builder.signing.report, builder.signing.signer and builder.signing.keys."""

from builder.signing.keys import KeyPairSigner, load_public_keys, load_signer
from builder.signing.layer import (
    ATT_SUFFIX,
    PREDICATE_TYPE_ANNOTATION,
    SIG_SUFFIX,
    SignatureLayer,
    WriteResult,
    append_layer,
    signature_config,
    signature_lock_path,
    signature_tag,
)
from builder.signing.report import VerificationReport, VerifiedItem
from builder.signing.sign import sign_and_attest_build, sign_image
from builder.signing.signer import Signer
from builder.signing.verifiers import KeyVerifier, LayerVerifier, verifiers_for
from builder.signing.verify import verify_image, verify_layer

__all__ = [
    "ATT_SUFFIX",
    "PREDICATE_TYPE_ANNOTATION",
    "SIG_SUFFIX",
    "KeyPairSigner",
    "KeyVerifier",
    "LayerVerifier",
    "SignatureLayer",
    "Signer",
    "VerificationReport",
    "VerifiedItem",
    "WriteResult",
    "append_layer",
    "load_public_keys",
    "load_signer",
    "sign_and_attest_build",
    "sign_image",
    "signature_config",
    "signature_lock_path",
    "signature_tag",
    "verifiers_for",
    "verify_image",
    "verify_layer",
]
