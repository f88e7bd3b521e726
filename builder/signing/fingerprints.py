"""Key fingerprints, without the cryptography library: ``sha256:<hex>`` of a public key's DER
SubjectPublicKeyInfo (RFC 5280 section 4.1.2.7: https://www.rfc-editor.org/rfc/rfc5280#section-4.1.2.7),
and the short form people read. Policies, reports and messages name keys by fingerprint; only
what parses or uses a key imports ``builder.signing.keys`` (and cryptography).
"""

from __future__ import annotations

import hashlib


def spki_fingerprint(der: bytes) -> str:
    """``sha256:<hex>`` of ``der``, a DER SubjectPublicKeyInfo: the key identity, stable across
    PEM formatting and across cosign/builder files holding the same key."""
    return "sha256:" + hashlib.sha256(der).hexdigest()


def short_fingerprint(fingerprint: str) -> str:
    """A key fingerprint for people: ``SHA256:`` + its first 12 hex digits + ``…`` (upper case,
    as OpenSSH writes key fingerprints, so that it never reads like an image digest
    ``sha256:...``); anything else (a keyless identity) unchanged."""
    return f"SHA256:{fingerprint[7:19]}…" if fingerprint.startswith("sha256:") else fingerprint
