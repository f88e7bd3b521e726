"""cosign's encrypted private-key file: a PEM-wrapped JSON envelope, scrypt KDF + NaCl secretbox.

``-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----`` (or the older ``ENCRYPTED COSIGN PRIVATE KEY``)
holds base64 JSON: scrypt parameters (N, r, p, salt) and an XSalsa20-Poly1305 ``secretbox``
around the PKCS#8 DER key. Sources: cosign ``pkg/cosign/keys.go``
(https://github.com/sigstore/cosign/blob/main/pkg/cosign/keys.go) and go-securesystemslib
``encrypted`` (https://github.com/secure-systems-lab/go-securesystemslib/blob/main/encrypted/encrypted.go).
scrypt comes from ``cryptography``; the secretbox from PyNaCl (``nacl.secret.SecretBox``,
libsodium), imported lazily. Verified against keys written by real cosign 2.5
(tests/integration/test_cosign_interop.py).

Errors: ``SigningKeyError`` (exit 16) for a malformed envelope, an unknown KDF/cipher or a wrong password.
"""

from __future__ import annotations

import base64
import json
import os
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from builder.errors import SigningKeyError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec

COSIGN_PEM_TYPES = ("ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY")

#: scrypt parameters cosign uses when it writes a key (go-securesystemslib defaults).
COSIGN_SCRYPT = {"N": 32768 * 2, "r": 8, "p": 1}


def pem_body(text: str, pem_type: str) -> bytes:
    """The base64-decoded body of the first ``-----BEGIN <pem_type>-----`` block in ``text``.
    Raises IndexError when there is no such block, binascii.Error when the body is not base64."""
    begin, end = f"-----BEGIN {pem_type}-----", f"-----END {pem_type}-----"
    body = text.split(begin, 1)[1].split(end, 1)[0]
    return base64.b64decode("".join(body.split()))


def decrypt_cosign_key(envelope: bytes, password: str | None, *, source: str = "cosign key") -> bytes:
    """Decrypt cosign's JSON envelope (scrypt + nacl/secretbox) -> PKCS#8 DER bytes.

    Raises SigningKeyError for a malformed envelope, an unknown KDF/cipher or a wrong password.
    """
    if password is None:
        raise SigningKeyError(
            f"{source} is a cosign key and is always encrypted; no password was given",
            hint="set COSIGN_PASSWORD (or BUILDER_KEY_PASSWORD) to the password used with cosign generate-key-pair",
        )
    try:
        doc = json.loads(envelope)
        kdf, cipher = doc["kdf"], doc["cipher"]
        if kdf["name"] != "scrypt" or cipher["name"] != "nacl/secretbox":
            raise SigningKeyError(f"{source}: unsupported cosign key envelope ({kdf['name']}, {cipher['name']})")
        params = kdf["params"]
        salt = base64.b64decode(kdf["salt"])
        nonce = base64.b64decode(cipher["nonce"])
        boxed = base64.b64decode(doc["ciphertext"])
        n, r, p = int(params["N"]), int(params["r"]), int(params["p"])
    except (ValueError, KeyError, TypeError) as exc:
        raise SigningKeyError(f"{source}: malformed cosign key envelope ({exc})") from exc
    secret = Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(password.encode())
    plain = secretbox_open(boxed, nonce, secret)
    if plain is None:
        raise SigningKeyError(
            f"cannot decrypt {source}: wrong password", hint="check COSIGN_PASSWORD / BUILDER_KEY_PASSWORD"
        )
    return plain


def encrypt_cosign_key(der: bytes, password: str, *, n: int = 65536, r: int = 8, p: int = 1) -> bytes:
    """The inverse of ``decrypt_cosign_key``: PKCS#8 DER -> cosign JSON envelope bytes."""
    salt, nonce = os.urandom(32), os.urandom(24)
    secret = Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(password.encode())
    doc = {
        "kdf": {"name": "scrypt", "params": {"N": n, "r": r, "p": p}, "salt": base64.b64encode(salt).decode()},
        "cipher": {"name": "nacl/secretbox", "nonce": base64.b64encode(nonce).decode()},
        "ciphertext": base64.b64encode(secretbox_seal(der, nonce, secret)).decode(),
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def cosign_key_pem(private_key: ec.EllipticCurvePrivateKey, password: str) -> bytes:
    """``private_key`` in cosign's ``ENCRYPTED SIGSTORE PRIVATE KEY`` PEM form (readable by cosign)."""
    der = private_key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    body = base64.b64encode(encrypt_cosign_key(der, password)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return (
        "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n"
        + "\n".join(lines)
        + "\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n"
    ).encode()


def secretbox_seal(message: bytes, nonce: bytes, key: bytes) -> bytes:
    """NaCl ``crypto_secretbox`` (XSalsa20-Poly1305) via PyNaCl: returns tag(16) || ciphertext.

    ``nonce`` is 24 bytes and ``key`` 32 bytes; the nonce is not included in the result (cosign
    stores it separately in the envelope). Raises ``nacl.exceptions.ValueError`` (a ValueError)
    for a wrong nonce or key length.
    """
    from nacl.secret import SecretBox

    return SecretBox(key).encrypt(message, nonce).ciphertext


def secretbox_open(boxed: bytes, nonce: bytes, key: bytes) -> bytes | None:
    """Inverse of ``secretbox_seal``; None when the tag does not verify (wrong key or tampered) or
    when the box, nonce or key has the wrong length."""
    from nacl.exceptions import CryptoError
    from nacl.secret import SecretBox

    if len(boxed) < SecretBox.MACBYTES or len(nonce) != SecretBox.NONCE_SIZE or len(key) != SecretBox.KEY_SIZE:
        return None
    try:
        return SecretBox(key).decrypt(boxed, nonce)
    except CryptoError:
        return None
