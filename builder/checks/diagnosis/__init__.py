"""Diagnosis of GPU/container failures by layer: which layer *noticed* and which one is *wrong*.

Modules: ``model`` (layers, :class:`Context`, :class:`Diagnosis`, :class:`FailureRule`), ``facts`` (what
a message says, with ``builder.compat``'s GPU and driver knowledge), ``rules`` (the failure kinds, most
specific first), ``matching`` (``diagnose``). Documentation: docs/diagnosis.md.
"""

from typing import TYPE_CHECKING

from builder.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (``__getattr__``)
    from builder.checks.diagnosis.facts import evaluate_requirement, min_driver
    from builder.checks.diagnosis.matching import diagnose, diagnose_many, read_input
    from builder.checks.diagnosis.model import (
        CUDA_ERRORS,
        ENGINES,
        LAYERS,
        Context,
        Diagnosis,
        DiagnosisDocument,
        FailureRule,
        Layer,
        LayerOrUnknown,
    )
    from builder.checks.diagnosis.rules import RULES, RULES_BY_KEY

#: Public name -> the module that defines it. A check that passes needs only ``model`` (the
#: result's types): the rules' hundreds of regular expressions and the compat knowledge ``facts``
#: reads are compiled and loaded only when a failure is diagnosed (PEP 562 module ``__getattr__``:
#: https://peps.python.org/pep-0562/).
_EXPORTS = {
    "CUDA_ERRORS": "model",
    "ENGINES": "model",
    "LAYERS": "model",
    "Context": "model",
    "Diagnosis": "model",
    "DiagnosisDocument": "model",
    "FailureRule": "model",
    "Layer": "model",
    "LayerOrUnknown": "model",
    "RULES": "rules",
    "RULES_BY_KEY": "rules",
    "diagnose": "matching",
    "diagnose_many": "matching",
    "evaluate_requirement": "facts",
    "min_driver": "facts",
    "read_input": "matching",
}


#: Import the module that defines a name on first use; AttributeError for other names.
__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "CUDA_ERRORS",
    "ENGINES",
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
