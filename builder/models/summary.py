"""One line of a command's result summary (:class:`SummaryRow`): what ``builder.cli.github``
writes into a GitHub Actions step summary and each command's result lists. A frozen value, no
I/O; imported on first use through :mod:`builder.models`."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class SummaryRow:
    """One line of a command's result summary (a CI step summary table): the ``variant`` id (or
    the reference checked), its ``digest`` (``sha256:<hex>``; empty when none is known), the
    ``status`` word the command uses (``built``, ``up-to-date``, ``failed``, ``promoted``,
    ``denied``, ``passed``, ...) and the ``stage`` (empty when the command works on no stage)."""

    variant: str
    digest: str
    status: str
    stage: str = ""
