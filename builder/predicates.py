"""Predicate types of the attestations this project writes and reads (documented in docs/evidence.md).

Build provenance is SLSA provenance v1; the project's own predicates live under one URI prefix
the project owns: ``PREFIX``.
"""

from __future__ import annotations

from typing import Literal, get_args

PREFIX = "https://builder-project.github.io/attestations/"

SLSA_PROVENANCE_V1 = "https://slsa.dev/provenance/v1"
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
