"""What signs: the ``Signer`` protocol, the layer annotations a signer adds, and its public key.

Signers: anything with ``kind``, ``public_key_pem``, ``fingerprint`` and ``sign(data) -> DER``;
``builder.signing.keys.KeyPairSigner`` is the key-pair one. A signer may also provide
``layer_annotations(data, signature) -> dict`` (keyless: certificate, chain, Rekor bundle).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from builder.errors import SigningKeyError
from builder.signing.keys import PublicKey
from builder.signing.layer import SIGNER_HINT_ANNOTATION


@runtime_checkable
class Signer(Protocol):
    """What signs: key pairs (``builder.signing.keys.KeyPairSigner``) and keyless signers.

    ``kind``: ``"key"`` or ``"keyless"``; ``fingerprint``: ``sha256:<hex of DER SPKI>`` (key) or
    an identity string (keyless); ``sign(data)``: DER ECDSA signature over ``data``.
    """

    @property
    def kind(self) -> str: ...

    @property
    def public_key_pem(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...

    def sign(self, data: bytes) -> bytes: ...


def layer_annotations(signer: Signer, data: bytes, signature: bytes) -> dict[str, str]:
    """The annotations ``signer`` adds to a layer besides the signature: its own
    ``layer_annotations(data, signature)`` when it has one (keyless), else for a key pair the
    unsigned ``dev.builder-project/signer`` hint naming its fingerprint."""
    extra = getattr(signer, "layer_annotations", None)
    out: dict[str, str] = {}
    if callable(extra):
        out.update(extra(data, signature))
    elif signer.kind == "key":
        out[SIGNER_HINT_ANNOTATION] = signer.fingerprint
    return out


def signer_public_key(signer: Signer) -> PublicKey:
    """The public key of a key-pair ``signer`` (from ``public_key_pem``).
    Raises SigningKeyError when it is not an ECDSA public key."""
    pub = serialization.load_pem_public_key(signer.public_key_pem.encode())
    if not isinstance(pub, ec.EllipticCurvePublicKey):
        raise SigningKeyError(f"signer {signer.fingerprint} has no ECDSA public key")
    return PublicKey(pub)
