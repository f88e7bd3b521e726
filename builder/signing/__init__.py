"""Cosign-compatible signatures and in-toto attestations of image digests, with key pairs or
keylessly (Sigstore).

Modules by concern: :mod:`~builder.signing.layer` (cosign's ``sha256-<hex>.sig``/``.att`` layer
format), :mod:`~builder.signing.dsse` (in-toto statements, DSSE envelopes, PAE),
:mod:`~builder.signing.keys` / :mod:`~builder.signing.cosign_key` / :mod:`~builder.signing.pkcs8`
(key files), :mod:`~builder.signing.signer`, :mod:`~builder.signing.sign`,
:mod:`~builder.signing.attest`, :mod:`~builder.signing.verify` (+ ``verifiers``, ``report``,
``layer_check``), :mod:`~builder.signing.provenance` (SLSA provenance v1),
:mod:`~builder.signing.approvals` (``approval/v1``), :mod:`~builder.signing.operations` (one call
per command) and :mod:`builder.signing.keyless` (Sigstore; imported only when used).
Formats: https://github.com/sigstore/cosign/blob/main/specs/SIGNATURE_SPEC.md and
https://github.com/in-toto/attestation/tree/main/spec.
"""
