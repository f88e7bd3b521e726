"""Compatibility re-exports; import from builder.signing.provenance."""

from builder.signing.provenance import BUILD_TYPE, provenance_predicate, redact_build_args

__all__ = ["BUILD_TYPE", "provenance_predicate", "redact_build_args"]
