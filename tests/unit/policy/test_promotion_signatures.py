"""A signature a promotion wrote (its signed payload names the promotion role) never satisfies a
``signature`` rule, even when the promoter key is a build key too; ``policy validate`` warns when
one key serves both roles (other verifiers cannot tell the signatures apart)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.labels import PROMOTION_ROLE
from builder.policy import Policy, SignatureEvidence, evaluate
from builder.policy.validation import validate_policies
from tests.unit.policy.support import NOW, POLICY, Keys, ev, reasons, write

if TYPE_CHECKING:
    from pathlib import Path


def test_a_promotion_signature_by_the_build_key_is_not_a_build_signature(policy: Policy, keys: Keys) -> None:
    build = keys["build"][1]
    promoted = SignatureEvidence(build, True, role=PROMOTION_ROLE)
    d = evaluate(policy, "staging", ev(sigs=(promoted,), stage="staging"), NOW)
    why = reasons(d)["signature"]
    assert "has 0" in why and "is a promotion signature" in why and "not counted" in why, why
    # the same key's image signature (no role) still counts
    d = evaluate(policy, "staging", ev(sigs=(promoted, SignatureEvidence(build, True)), stage="staging"), NOW)
    assert "signature" not in reasons(d)


def test_policy_validate_warns_when_one_key_signs_builds_and_promotions(tmp_path: Path, keys: Keys) -> None:
    text = POLICY.format(**{k: v[0] for k, v in keys.items()}, slsa="https://slsa.dev/provenance/v1")
    shared = validate_policies([write(tmp_path, text)], {}).files[0]
    warnings = [p for p in shared.problems if "promotions" in p.message]
    assert shared.valid and len(warnings) == 1 and warnings[0].severity == "warning", shared.problems
    w = warnings[0]
    assert str(keys["build"][0]) in w.message and "cosign" in w.message and w.line > 0
    assert w.path == "stages.staging.require"
    separate = text.replace("promoters: [build]", "promoters: [runners]")
    checked = validate_policies([write(tmp_path, separate, "q.yaml")], {}).files[0]
    assert not [p for p in checked.problems if "promotions" in p.message]
