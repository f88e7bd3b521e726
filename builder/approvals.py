"""Compatibility re-exports; import from builder.signing.approvals and builder.signing.approval_check."""

from builder.signing.approval_check import check_approver
from builder.signing.approvals import approval_predicate, approve

__all__ = ["approval_predicate", "approve", "check_approver"]
