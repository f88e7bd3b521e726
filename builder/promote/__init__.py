"""Promotion of digests through stages: plan (dry run), apply, rollback, status, history, resolve.

A promotion is data: a source digest (the variant tag written by the build for a stage that
takes builds, else the previous stage's pointer) -> a stage pointer tag ``<variant-id>-<stage>``
in the stage's repository (docs/promotion.md). It moves the digest and never rebuilds: same
repository - one tag PUT; another repository of the same registry - cross-repo blob mounts then
manifest PUTs; another registry - only missing blobs are copied. ``.sig``/``.att`` manifests and
referrers travel byte for byte, and the destination digest is verified equal.

Modules, by concern:

- ``model``: the frozen values (PromotionRecord, Plan, Applied, Outcome, ...)
- ``location``: where a stage keeps a variant and what is promoted (Location, Target), the clock
- ``context``: ``PromotionContext`` (policy, injected registry clients, locks, ledger, signer)
- ``pool``: the shared worker pool for parallel registry calls
- ``evidence``: signatures, attestations and fleet verdicts read for a decision
- ``records``: ``promotion/v1`` records, trust of stage pointers, the history chain
- ``referrers``, ``transfer``: copying manifests, blobs, evidence and referrers
- ``listing``: a repository's tags listed once for a batch or a ``status`` query
- ``plan``, ``apply``: plan_promotion; apply_promotion, promote_many
- ``rollback``: plan_rollback (the dry run), apply_rollback, rollback (``--to DIGEST``)
- ``queries``: status, stage histories (and the commands' ``status_report``, ``variant_history``)
- ``resolution``: resolve (and the command's ``resolve_variant``)
- ``batch``: ``builder promote`` / ``builder rollback`` from names (``promote_names``, ``rollback_variant``)
- ``approve``: ``builder approve`` (judged against the policy, then written)
- ``fleets``: fleet verdicts through ``builder.compat``
- ``gc``: ``builder gc`` (retention: old pending and content tags no stage or history needs)
- ``targets``: variant ids / globs / image references -> targets (``builder.selection``'s concepts)

The SQLite ledger (``builder.ledger``) is the local audit trail; the registry is the record.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING

from builder.lazy import lazy_exports

if TYPE_CHECKING:  # the names below are imported on first use (``__getattr__``)
    from builder.promote.apply import (
        EARLY_RECORD_MAX_AGE_S,
        apply_promotion,
        batch_error,
        promote_many,
    )
    from builder.promote.batch import Batch, RollbackResult, promote_names, rollback_variant
    from builder.promote.context import ClientFactory, PromotionContext, open_context
    from builder.promote.evidence import gather_evidence, keyless_identity
    from builder.promote.fleets import ImageNeeds, cluster_reason, compat_fleet_checker, image_requirements
    from builder.promote.location import Location, Target, utcnow
    from builder.promote.model import (
        UNSET,
        Applied,
        CopyCounts,
        FleetChecker,
        Outcome,
        Plan,
        PointerTrust,
        PromotionRecord,
        StageHistory,
        StatusRow,
        fmt_time,
    )
    from builder.promote.plan import plan_promotion
    from builder.promote.queries import (
        StatusReport,
        VariantHistory,
        stage_histories,
        status,
        status_report,
        variant_history,
    )
    from builder.promote.records import (
        Chain,
        RecordsOn,
        chain,
        current_record,
        history,
        pointer_trust,
        read_records,
        records_on,
    )
    from builder.promote.resolution import Resolved, resolve, resolve_variant
    from builder.promote.rollback import apply_rollback, plan_rollback, rollback
    from builder.promote.targets import TargetScope, UnknownVariantError, resolve_targets, scope_of

#: Public name -> the module of this package that defines it. ``builder.promote.X`` imports only
#: that module (and what it needs), so a command such as ``resolve`` does not import the
#: promotion, rollback and signing modules (PEP 562 module ``__getattr__``:
#: https://peps.python.org/pep-0562/). ``tests/unit/promote/test_exports.py`` keeps it equal to
#: ``__all__`` and the imports above.
_EXPORTS: dict[str, str] = {
    "Applied": "model",
    "Batch": "batch",
    "Chain": "records",
    "ClientFactory": "context",
    "CopyCounts": "model",
    "EARLY_RECORD_MAX_AGE_S": "apply",
    "FleetChecker": "model",
    "ImageNeeds": "fleets",
    "Location": "location",
    "Outcome": "model",
    "Plan": "model",
    "PointerTrust": "model",
    "PromotionContext": "context",
    "PromotionRecord": "model",
    "RecordsOn": "records",
    "Resolved": "resolution",
    "RollbackResult": "batch",
    "StageHistory": "model",
    "StatusReport": "queries",
    "StatusRow": "model",
    "Target": "location",
    "TargetScope": "targets",
    "UNSET": "model",
    "UnknownVariantError": "targets",
    "VariantHistory": "queries",
    "apply_promotion": "apply",
    "apply_rollback": "rollback",
    "batch_error": "apply",
    "chain": "records",
    "cluster_reason": "fleets",
    "compat_fleet_checker": "fleets",
    "current_record": "records",
    "fmt_time": "model",
    "gather_evidence": "evidence",
    "history": "records",
    "image_requirements": "fleets",
    "keyless_identity": "evidence",
    "open_context": "context",
    "plan_promotion": "plan",
    "plan_rollback": "rollback",
    "pointer_trust": "records",
    "promote_many": "apply",
    "promote_names": "batch",
    "read_records": "records",
    "records_on": "records",
    "resolve": "resolution",
    "resolve_targets": "targets",
    "resolve_variant": "resolution",
    "rollback": "rollback",
    "rollback_variant": "batch",
    "scope_of": "targets",
    "stage_histories": "queries",
    "status": "queries",
    "status_report": "queries",
    "utcnow": "location",
    "variant_history": "queries",
}


class _Package(types.ModuleType):
    """This package's module type: the import system binds every imported submodule as an
    attribute of its package; where a public name is also its module's name (``rollback``, the
    function of ``builder.promote.rollback``), the public name is bound instead, as the eager
    ``from builder.promote.rollback import rollback`` did (customizing module attribute access:
    https://docs.python.org/3/reference/datamodel.html#customizing-module-attribute-access)."""

    def __setattr__(self, name: str, value: object) -> None:
        if (
            isinstance(value, types.ModuleType)
            and value.__name__ == f"{__name__}.{_EXPORTS.get(name)}" == f"{__name__}.{name}"
        ):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


#: Import the module that defines a name on first use; AttributeError for other names.
__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "EARLY_RECORD_MAX_AGE_S",
    "UNSET",
    "Applied",
    "Batch",
    "Chain",
    "ClientFactory",
    "CopyCounts",
    "FleetChecker",
    "ImageNeeds",
    "Location",
    "Outcome",
    "Plan",
    "PointerTrust",
    "PromotionContext",
    "PromotionRecord",
    "RecordsOn",
    "Resolved",
    "RollbackResult",
    "StageHistory",
    "StatusReport",
    "StatusRow",
    "Target",
    "TargetScope",
    "UnknownVariantError",
    "VariantHistory",
    "apply_promotion",
    "apply_rollback",
    "batch_error",
    "chain",
    "cluster_reason",
    "compat_fleet_checker",
    "current_record",
    "fmt_time",
    "gather_evidence",
    "history",
    "image_requirements",
    "keyless_identity",
    "open_context",
    "plan_promotion",
    "plan_rollback",
    "pointer_trust",
    "promote_many",
    "promote_names",
    "read_records",
    "records_on",
    "resolve",
    "resolve_targets",
    "resolve_variant",
    "rollback",
    "rollback_variant",
    "scope_of",
    "stage_histories",
    "status",
    "status_report",
    "utcnow",
    "variant_history",
]
