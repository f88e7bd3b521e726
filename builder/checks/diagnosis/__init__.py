"""Diagnosis of GPU/container failures by layer: which layer *noticed* and which one is *wrong*.

Modules: ``model`` (layers, :class:`Context`, :class:`Diagnosis`, :class:`FailureRule`), ``facts`` (what
a message says, with ``builder.compat``'s GPU and driver knowledge), ``rules`` (the failure kinds, most
specific first), ``matching`` (``diagnose``). Documentation: docs/diagnosis.md.
"""

from __future__ import annotations

from builder.checks.diagnosis.facts import evaluate_requirement, min_driver
from builder.checks.diagnosis.matching import diagnose, diagnose_many, read_input
from builder.checks.diagnosis.model import (
    CUDA_ERRORS,
    LAYERS,
    Context,
    Diagnosis,
    DiagnosisDocument,
    FailureRule,
    Layer,
    LayerOrUnknown,
)
from builder.checks.diagnosis.rules import RULES, RULES_BY_KEY

__all__ = [
    "CUDA_ERRORS",
    "LAYERS",
    "RULES",
    "RULES_BY_KEY",
    "Context",
    "Diagnosis",
    "DiagnosisDocument",
    "FailureRule",
    "Layer",
    "LayerOrUnknown",
    "diagnose",
    "diagnose_many",
    "evaluate_requirement",
    "min_driver",
    "read_input",
]
