"""`builder verify`'s table at 80 columns: signers written out (a key file's path with its fingerprint) did
not fit beside the other columns, moved under the narrow `#` column and collapsed the whole table into
it. Now each distinct signer is a letter in the table, written out once under it."""

from __future__ import annotations

import io

from rich.console import Console

from builder.cli.sign import _render_items
from builder.predicates import (
    APPROVAL_V1,
    BENCHMARK_V1,
    CYCLONEDX_BOM,
    DEVICE_CHECK_V1,
    SLSA_PROVENANCE_V1,
    TEST_RESULT_V1,
)
from builder.signing.layer_check import predicate_time
from builder.signing.report import VerifiedItem

BUILD = "sha256:" + "9e" * 32
RUNNER = "sha256:" + "5a" * 32
NAMES = {
    BUILD: "/home/release-engineer/checkouts/builder/.builder/keys/builder.pub",
    RUNNER: "/home/release-engineer/checkouts/builder/.builder/keys/check-runner/builder.pub",
}


def _items() -> list[VerifiedItem]:
    sig = VerifiedItem("signature", True, "", "sha256-ab.sig", "sha256:" + "1" * 64, signer=BUILD)
    prov = VerifiedItem(
        "attestation",
        True,
        "",
        "sha256-ab.att",
        "sha256:" + "2" * 64,
        signer=BUILD,
        predicate_type="https://slsa.dev/provenance/v1",
        time="2026-12-02T01:09:01.123456Z",
    )
    check = VerifiedItem(
        "attestation",
        True,
        "",
        "sha256-ab.att",
        "sha256:" + "3" * 64,
        signer=RUNNER,
        predicate_type=DEVICE_CHECK_V1,
        statement={"predicate": {"result": "passed"}},
    )
    return [sig, prov, check]


def _render(width: int) -> list[str]:
    out = io.StringIO()
    _render_items(Console(file=out, width=width, no_color=True), _items(), NAMES)
    return out.getvalue().splitlines()


def test_table_keeps_its_columns_at_80_and_names_each_signer_once() -> None:
    lines = _render(80)
    header = next(line for line in lines if "#" in line)
    for name in ("status", "kind", "predicate", "by", "when"):  # "by": the signer's letter
        assert name in header, "\n".join(lines)
    assert max(len(line) for line in lines if "│" in line or "┃" in line) <= 80
    assert f"  signer A: {NAMES[BUILD]} (SHA256:" in "\n".join(lines)
    assert f"  signer B: {NAMES[RUNNER]} (SHA256:" in "\n".join(lines)
    assert any("2026-12-02T01:09:01Z" in line for line in lines)  # to the second in the table


def test_wide_terminal_writes_signers_in_the_table() -> None:
    lines = _render(200)
    assert any(NAMES[RUNNER] in line and "│" in line for line in lines)
    assert not any(line.startswith("  signer A:") for line in lines)


# Round 7 (F5): with a promotion's signature in the table ("signature (promotion)" in the kind
# column) the predicate names broke mid-word at 80 columns ("slsa-provenan|ce",
# "device-check|: passed"); device checks did not say where they ran; and the "when" column was
# "-" for device-check, test-result, benchmark, CycloneDX and approval records that state a time.
# Predicates in the shapes builder writes (docs/evidence.md; builder.checks.device, approvals)
# and CycloneDX 1.6's metadata.timestamp (https://cyclonedx.org/docs/1.6/json/#metadata_timestamp).
CHECK = {
    "result": "passed",
    "run": {"mode": "docker", "started_at": "2026-12-02T00:19:15Z", "finished_at": "2026-12-02T00:19:23Z"},
    "placement": {"cluster": "gpu-a100", "runner": "kubernetes", "node": "node-7", "job_id": "check-1"},
}
PREDICATES = [
    (SLSA_PROVENANCE_V1, {"runDetails": {"metadata": {"finishedOn": "2026-12-02T00:19:14Z"}}}),
    (DEVICE_CHECK_V1, CHECK),
    (TEST_RESULT_V1, {"result": "passed", "run": {"finished_at": "2026-12-02T00:19:31.5Z"}}),
    (BENCHMARK_V1, {"result": "passed", "run": {"finished_at": "2026-12-02T00:19:32Z"}}),
    (CYCLONEDX_BOM, {"bomFormat": "CycloneDX", "metadata": {"timestamp": "2026-12-02T00:19:40Z"}}),
    (APPROVAL_V1, {"stage": "prod", "time": "2026-12-02T00:20:00.000001Z"}),
]


def _evidence_items() -> list[VerifiedItem]:
    promo = VerifiedItem("signature", True, "", "sha256-ab.sig", "sha256:" + "4" * 64, signer=BUILD, role="promotion")
    items = [promo]
    for n, (ptype, predicate) in enumerate(PREDICATES):
        items.append(
            VerifiedItem(
                "attestation",
                True,
                "",
                "sha256-ab.att",
                f"sha256:{n:064x}",
                signer=RUNNER,
                predicate_type=ptype,
                time=predicate_time(predicate),
                statement={"predicate": predicate},
            )
        )
    return items


def test_names_whole_device_checks_placed_and_every_record_timed_at_80() -> None:
    out = io.StringIO()
    _render_items(Console(file=out, width=80, no_color=True), _evidence_items(), NAMES)
    lines = out.getvalue().splitlines()
    text = "\n".join(lines)
    cells = [w for line in lines for w in line.replace("│", " ").split()]
    for word in ("slsa-provenance", "device-check:", "passed", "test-result", "benchmark", "cyclonedx-sbom"):
        assert word in cells, text  # each name whole on one line
    assert "approval" in cells and "(promotion)" in cells, text
    assert "gpu-a100/node-7" in text, text  # where the check ran
    for when in ("00:19:14Z", "00:19:23Z", "00:19:31Z", "00:19:32Z", "00:19:40Z", "00:20:00Z"):
        assert f"2026-12-02T{when}" in text, text
    table = [line for line in lines if line[:1] in "┏┃┡│└"]
    assert len({len(line) for line in table}) == 1 and len(table[0]) <= 80, text  # whole borders


def test_predicate_time_reads_builder_and_cyclonedx_shapes() -> None:
    times = [predicate_time(p) for _, p in PREDICATES]
    assert times == [
        "2026-12-02T00:19:14Z",
        "2026-12-02T00:19:23Z",  # a device check: when it finished
        "2026-12-02T00:19:31.5Z",
        "2026-12-02T00:19:32Z",
        "2026-12-02T00:19:40Z",
        "2026-12-02T00:20:00.000001Z",
    ]
    assert predicate_time({"run": {"started_at": "2026-12-02T00:00:01Z"}}) == "2026-12-02T00:00:01Z"
    assert predicate_time({"run": "x", "metadata": ["y"]}) is None
