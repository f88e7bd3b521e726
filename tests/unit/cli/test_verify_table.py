"""`builder verify`'s table at 80 columns: signers written out (a key file's path with its fingerprint) did
not fit beside the other columns, moved under the narrow `#` column and collapsed the whole table into
it. Now each distinct signer is a letter in the table, written out once under it."""

from __future__ import annotations

import io

from rich.console import Console

from builder.cli.sign import _render_items
from builder.predicates import DEVICE_CHECK_V1
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
    for name in ("status", "kind", "predicate", "signer", "when"):
        assert name in header, "\n".join(lines)
    assert max(len(line) for line in lines if "│" in line or "┃" in line) <= 80
    assert f"  signer A: {NAMES[BUILD]} (SHA256:" in "\n".join(lines)
    assert f"  signer B: {NAMES[RUNNER]} (SHA256:" in "\n".join(lines)
    assert any("2026-12-02T01:09:01Z" in line for line in lines)  # to the second in the table


def test_wide_terminal_writes_signers_in_the_table() -> None:
    lines = _render(200)
    assert any(NAMES[RUNNER] in line and "│" in line for line in lines)
    assert not any(line.startswith("  signer A:") for line in lines)
