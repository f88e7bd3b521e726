"""One name per predicate type wherever people read it (`builder.predicates.display_name`):
`verify`'s table and summary and `status`'s attestations column name every type builder writes or
reads the same way; before, status printed `https://cyclonedx.org/bom` as `cyclonedx.org` and SLSA
as `provenance`, verify printed `slsa provenance` and the CycloneDX URI whole."""

from __future__ import annotations

import pytest

from builder.predicates import (
    APPROVAL_V1,
    BENCHMARK_V1,
    COSIGN_VULN,
    CYCLONEDX_BOM,
    CYCLONEDX_VEX,
    DEVICE_CHECK_V1,
    OPENVEX,
    PROMOTION_V1,
    SARIF_PREDICATE,
    SLSA_PROVENANCE_V02,
    SLSA_PROVENANCE_V1,
    TEST_RESULT_V1,
    display_name,
)
from builder.promote.model import StatusRow

NAMES = {
    SLSA_PROVENANCE_V1: "slsa-provenance",
    SLSA_PROVENANCE_V02: "slsa-provenance-v0.2",
    CYCLONEDX_BOM: "cyclonedx-sbom",
    CYCLONEDX_VEX: "cyclonedx-vex",
    OPENVEX: "openvex",
    COSIGN_VULN: "cosign-vuln",
    SARIF_PREDICATE: "sarif",
    DEVICE_CHECK_V1: "device-check",
    APPROVAL_V1: "approval",
    PROMOTION_V1: "promotion",
    TEST_RESULT_V1: "test-result",
    BENCHMARK_V1: "benchmark",
}


@pytest.mark.parametrize(("uri", "name"), list(NAMES.items()))
def test_every_known_type_has_one_short_name(uri: str, name: str) -> None:
    assert display_name(uri) == name


def test_an_unknown_type_is_shown_whole_and_none_is_a_dash() -> None:
    assert display_name("https://example.com/note/v1") == "https://example.com/note/v1"
    assert display_name(None) == display_name("") == "-"


def test_status_names_types_as_verify_does() -> None:
    row = StatusRow("v", "dev", "r:v-dev", "sha256:" + "a" * 64, None, None, None, None, attestations=tuple(NAMES))
    assert row.attestation_names == tuple(NAMES.values())
    assert len(set(row.attestation_names)) == len(NAMES)  # no two types share a name
