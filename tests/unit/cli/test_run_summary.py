"""`builder run`'s human summary at 80 columns: the table keeps ids whole and short cells; each blocked
stage's reasons and each declared check's line (smoke tests, benchmark) are printed under it at full
width (the policy text was squeezed into the variant column, and nothing said the tests had run)."""

from __future__ import annotations

import dataclasses
import io
from typing import TYPE_CHECKING

from rich.console import Console

from builder.cli import run as run_cli
from builder.config import Config
from builder.models import BuiltImage
from builder.pipeline import CheckOutcome, RunReport, StageOutcome, VariantRun

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

# the reasons `builder run --to prod` printed for the demo's CPU variant (docs/promotion.md's rules)
PROD_REASONS = (
    "approvals: 0 of 2 approvals from alice, bob, carol (none found on the digest)",
    "device_check: no passing device-check/v1 signed by check-runners on vendors nvidia",
    "change_ticket: no change ticket given (--change)",
    "soak_time: staging has held it for 0 s of the required 24h",
    # longer than a table cell: its cause (the digest) is at the end and must not be cut off
    "source_stage: 127.0.0.1:5000/demo/jax:jax0.7-cpu-py3.11-debian12-staging names sha256:"
    + "f39d2a0c395ea102f" * 3
    + "f39d2a0c395ea, which no trusted promotion record explains",
)


def _report() -> RunReport:
    variant = "jax0.7-cpu-py3.11-debian12"
    built = BuiltImage(variant, "127.0.0.1:5000/demo/jax", "sha256:" + "a" * 64, f"{variant}-0123456789ab", "built")
    check = CheckOutcome(
        "passed",
        static_verdict="ok",
        evidence=(
            "tests passed: 5 tests, 0 failed (3.2 s)",
            "benchmark passed: matmul_f32_throughput 86.01 GFLOP/s, matmul_f32_latency 3.121 ms (6.0 s)",
        ),
    )
    stages = (
        StageOutcome("dev", "promoted"),
        StageOutcome("staging", "promoted"),
        StageOutcome("prod", "denied", PROD_REASONS),
    )
    reused = VariantRun("jax0.7-cpu-py3.12-debian12", built, CheckOutcome("reused"), stages[:2])
    return RunReport((VariantRun(variant, built, check, stages), reused), 12.5)


def test_summary_at_80_columns(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = io.StringIO()
    con = Console(file=out, width=80, no_color=True, force_terminal=False)
    monkeypatch.setattr(run_cli, "console", lambda: con)
    run_cli._summary(_report(), Config(root=tmp_path))
    lines = out.getvalue().splitlines()
    table = [line for line in lines if any(c in line for c in "│┃─━")]
    assert table and max(len(line) for line in table) <= 80, "\n".join(table)
    assert any("prod denied" in line for line in table)  # the verdict stays in the table
    body = "\n".join(lines)
    below = " ".join(body.split("builder run (12.5 s)", 1)[1].split("Pull and verify")[0].split())
    for reason in PROD_REASONS:  # each reason whole under the table (folded at spaces), not in a cell
        assert f"- {reason}" in below, body
        assert not any(reason[:30] in line for line in table)
    assert "  tests passed: 5 tests, 0 failed (3.2 s)" in lines
    assert any(line.startswith("  benchmark passed: matmul_f32_throughput 86.01 GFLOP/s") for line in lines)
    assert "  checks passed earlier: their signed results were reused (nothing re-ran)" in lines
    prose = [line for line in lines if not line.lstrip().startswith(("docker", "cosign", "prod needs approvals"))]
    assert max(len(line) for line in prose) <= 80, body


def test_a_stage_that_ended_in_an_error_fails_the_run_with_its_own_exit_code() -> None:
    """`builder run` exited 0 when a stage's promotion failed (the variant's tag moved meanwhile:
    "dev error: the build tag names …"): denials are reported, errors end the command."""
    import pytest

    from builder.errors import PromotionConflictError

    report = _report()
    assert report.ok and report.to_json()["ok"]
    report.raise_for_failures()  # prod denied: reported, not an error
    moved = PromotionConflictError("the build tag names sha256:b…, not sha256:a…")
    variant = dataclasses.replace(report.variants[0], stages=(StageOutcome("dev", "error", ("moved",), error=moved),))
    failed = dataclasses.replace(report, variants=(variant, *report.variants[1:]))
    assert not failed.ok and failed.to_json()["ok"] is False
    with pytest.raises(PromotionConflictError) as err:
        failed.raise_for_failures()
    assert err.value.exit_code == 32 and err.value.details["summary"]["ok"] is False


def test_a_variant_refused_before_any_build_names_its_error_not_a_log() -> None:
    """A variant that failed without a build (signing refused: no log file) was named "(log None)"."""
    import pytest

    from builder.errors import BuildFailedError

    report = _report()
    why = "tag-conflict: … which this checkout did not push"
    refused = dataclasses.replace(report.variants[0].built, status="failed", log_path=None, error=why)
    failed = dataclasses.replace(report, variants=(dataclasses.replace(report.variants[0], built=refused),))
    with pytest.raises(BuildFailedError) as err:
        failed.raise_for_failures()
    assert f"({why})" in err.value.message and "None" not in err.value.message


FOREIGN = "sha256:" + "f2" * 32
CONFLICT = (
    "tag-conflict: 127.0.0.1:5000/demo/jax:jax0.7-cpu-py3.11-debian12-0f4c3e4beb0d names "
    + FOREIGN
    + ", which carries no signature by the key and which this checkout did not push"
)


def _conflict_report() -> RunReport:
    """`builder run` after a foreign push under the content tag (the integration test
    test_a_refused_foreign_digest_does_not_move_the_variant_tag[run] mounts it on a real registry):
    the variant's build failed with tag-conflict, no log, no check, no stage tried; its
    `built.digest` is the foreign digest the content tag names."""
    report = _report()
    refused = dataclasses.replace(
        report.variants[0].built, digest=FOREIGN, status="failed", log_path=None, error=CONFLICT
    )
    failed = VariantRun(report.variants[0].variant_id, refused, None, ())
    return dataclasses.replace(report, variants=(failed, report.variants[1]))


def test_a_failed_build_gets_no_pull_verify_lines_and_no_policy_verdict(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Before: the summary said "policy: allowed" for the refused variant and told the user to
    `docker pull` and `cosign verify` the attacker's digest."""
    out = io.StringIO()
    con = Console(file=out, width=80, no_color=True, force_terminal=False)
    monkeypatch.setattr(run_cli, "console", lambda: con)
    run_cli._summary(_conflict_report(), Config(root=tmp_path))
    text = out.getvalue()
    assert FOREIGN not in text and FOREIGN[:19] not in text, text  # neither pulled, verified nor shown as its digest
    assert "allowed" not in text.split("jax0.7-cpu-py3.12-debian12")[0], text  # no verdict: no stage was judged
    assert "docker pull 127.0.0.1:5000/demo/jax@sha256:" + "a" * 64 in text  # the good variant keeps its lines
    assert "--select 'jax*'" not in text or "jax0.7-cpu-py3.12-debian12" in text.split("builder status")[1]


def test_a_build_failure_without_a_log_gets_a_hint_that_fits() -> None:
    """Before: "hint: read the build log named for each failed variant" while no build had run."""
    import pytest

    from builder.errors import BuildFailedError, TagConflictError

    with pytest.raises(BuildFailedError) as err:
        _conflict_report().raise_for_failures()
    assert "build log" not in err.value.hint and err.value.hint == TagConflictError.default_hint
    assert err.value.exit_code == 14 and FOREIGN in err.value.message


def test_the_live_failed_line_fits_the_terminal_and_the_reason_is_told_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The progress line printed the whole reason (5 terminal lines), then the error repeated it."""
    out = io.StringIO()
    con = Console(file=out, width=80, no_color=True, force_terminal=False)
    run_cli.print_event(con, "jax0.7-cpu-py3.11-debian12", "failed", CONFLICT.split(": ", 1)[1])
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and len(lines[0]) <= 80 and "below" in lines[0], lines
