"""Sigstore keyless signing and verification (sigstore-python; imported only where keyless is used).

Modules: ``identity`` (who may sign: SAN + OIDC issuer policies), ``trust`` (trusted root, signing
config, OIDC tokens), ``bundle`` (Sigstore bundles: legacy cosign annotations, OCI referrers),
``write`` (keyless sign/attest), ``set_layer`` (cosign-written layers: SET, chain, SCT, Rekor body),
``verify`` (``verify_keyless``, ``KeylessLayerVerifier``). Formats: see ``builder.signing.keyless.write``.
"""
