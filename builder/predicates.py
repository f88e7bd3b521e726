"""Predicate types of the attestations this project writes and reads (documented in docs/evidence.md),
and the one name people read for each (:func:`display_name`).

Build provenance is SLSA provenance v1; the project's own predicates live under one URI prefix
the project owns: ``PREFIX``. Types of others: SLSA provenance v1 and v0.2 (https://slsa.dev/provenance/v1,
https://slsa.dev/spec/v0.2/provenance), CycloneDX BOM and VEX
(https://github.com/in-toto/attestation/blob/main/spec/predicates/cyclonedx.md; ``cosign attest --type
cyclonedx``), OpenVEX (https://github.com/openvex/spec/blob/main/OPENVEX-SPEC.md), cosign's vulnerability
scan record (https://github.com/sigstore/cosign/blob/main/specs/COSIGN_VULN_ATTESTATION_SPEC.md, also
without its scheme in older records) and SARIF 2.1.0 (https://docs.oasis-open.org/sarif/sarif/v2.1.0/).
"""

from __future__ import annotations

from typing import Literal, get_args

PREFIX = "https://builder-project.github.io/attestations/"

SLSA_PROVENANCE_V1 = "https://slsa.dev/provenance/v1"
SLSA_PROVENANCE_V02 = "https://slsa.dev/provenance/v0.2"
CYCLONEDX_BOM = "https://cyclonedx.org/bom"
CYCLONEDX_VEX = "https://cyclonedx.org/vex"
OPENVEX = "https://openvex.dev/ns"
COSIGN_VULN = "https://cosign.sigstore.dev/attestation/vuln/v1"
COSIGN_VULN_LEGACY = "cosign.sigstore.dev/attestation/vuln/v1"
SARIF_PREDICATE = "https://docs.oasis-open.org/sarif/sarif/v2.1.0"
DEVICE_CHECK_V1 = PREFIX + "device-check/v1"
APPROVAL_V1 = PREFIX + "approval/v1"
PROMOTION_V1 = PREFIX + "promotion/v1"
TEST_RESULT_V1 = PREFIX + "test-result/v1"
BENCHMARK_V1 = PREFIX + "benchmark/v1"

#: in-toto Statement types: v1 is written; v0.1 (what cosign 2.x writes) is accepted.
STATEMENT_V1 = "https://in-toto.io/Statement/v1"
STATEMENT_V01 = "https://in-toto.io/Statement/v0.1"

#: Predicate type cosign uses for a bundle-format signature.
COSIGN_SIGN_V1 = "https://sigstore.dev/cosign/sign/v1"

OWN_PREDICATES = (DEVICE_CHECK_V1, APPROVAL_V1, PROMOTION_V1, TEST_RESULT_V1, BENCHMARK_V1)

#: the keys of a ``benchmark/v1`` predicate's ``hardware`` (the hardware class a regression is judged on,
#: docs/evidence.md): written by ``builder.checks.evidence.hardware_class``, named by a policy's
#: ``benchmark.same`` and compared by its ``benchmark`` rule
HardwareKey = Literal["vendor", "gpu_model", "gpu_count", "driver_branch", "cpu_model"]
HARDWARE_KEYS: tuple[HardwareKey, ...] = get_args(HardwareKey)

#: the names people read for the types of others (builder's own: :func:`display_name`)
_NAMES = {
    SLSA_PROVENANCE_V1: "slsa-provenance",
    SLSA_PROVENANCE_V02: "slsa-provenance-v0.2",
    CYCLONEDX_BOM: "cyclonedx-sbom",
    CYCLONEDX_VEX: "cyclonedx-vex",
    OPENVEX: "openvex",
    COSIGN_VULN: "cosign-vuln",
    COSIGN_VULN_LEGACY: "cosign-vuln",
    SARIF_PREDICATE: "sarif",
}


def display_name(predicate_type: str | None) -> str:
    """The one name of a predicate type wherever people read it (``verify``'s table and summary,
    ``status``'s attestations): ``slsa-provenance``, ``cyclonedx-sbom``, ... for the types above;
    builder's own without prefix and version (``.../device-check/v1`` -> ``device-check``); any
    other type as its URI, whole (a name is never guessed); ``-`` for none."""
    if not predicate_type:
        return "-"
    if predicate_type in _NAMES:
        return _NAMES[predicate_type]
    if predicate_type.startswith(PREFIX):
        return predicate_type[len(PREFIX) :].removesuffix("/v1")
    return predicate_type
