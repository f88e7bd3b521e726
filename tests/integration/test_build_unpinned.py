"""``builder build --dry-run`` of the shipped matrices always shows the plan: the variants whose
base (bases.lock.json) or dependency lock is not pinned are listed with what to run, never a
refusal of the whole plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.conftest import Cli

ROOT = Path(__file__).resolve().parents[2]


def test_dry_run_of_the_shipped_matrices_lists_unpinned_variants(cli: Cli, registry_address: str) -> None:
    doc = cli("-C", str(ROOT), "build", "--dry-run", "--json").json()
    plan = {p["variant"]: p for p in doc["plan"]}
    lock = (ROOT / "bases.lock.json").read_text()
    unpinned = [v for v, p in plan.items() if p["action"] == "unpinned"]
    assert doc["unpinned"] == unpinned and unpinned  # the shipped lock pins no Docker Hub base yet
    for vid in unpinned:
        reasons = plan[vid]["unpinned"]
        assert reasons and all("run `builder" in r for r in reasons)
        assert plan[vid]["reference"].startswith(f"{registry_address}/")
    pinned = [v for v, p in plan.items() if p["action"] != "unpinned"]
    assert all(plan[v]["unpinned"] == [] for v in pinned)
    # a variant is unpinned because of its base only when the lock has no digest for that base
    pins = json.loads(lock)["bases"]
    for vid in unpinned:
        for reason in plan[vid]["unpinned"]:
            if reason.startswith("base "):
                assert pins[reason.split()[1]]["digest"] is None

    human = cli("-C", str(ROOT), "build", "--dry-run", env={"COLUMNS": "80"})
    assert "build plan" in human.stderr
    assert f"{len(unpinned)} of {len(plan)} variant(s) not pinned" in human.stderr
    assert all(f"  {vid}\n" in human.stderr for vid in unpinned)
