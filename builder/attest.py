"""Compatibility re-exports; import from builder.signing.attest and builder.signing.verify."""

from builder.signing.attest import attest_image, prepare_attestation
from builder.signing.verify import read_attestations

__all__ = ["attest_image", "prepare_attestation", "read_attestations"]
