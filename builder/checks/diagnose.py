"""Compatibility re-exports; import from builder.checks.diagnosis."""

from __future__ import annotations

from builder.checks.diagnosis import (
    CUDA_ERRORS,
    LAYERS,
    RULES,
    Context,
    Diagnosis,
    FailureRule,
    diagnose,
    diagnose_many,
    min_driver,
    read_input,
)

__all__ = [
    "CUDA_ERRORS",
    "LAYERS",
    "RULES",
    "Context",
    "Diagnosis",
    "FailureRule",
    "diagnose",
    "diagnose_many",
    "min_driver",
    "read_input",
]
