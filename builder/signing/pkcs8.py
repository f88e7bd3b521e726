"""Password-encrypted PKCS#8 private keys with a strong KDF (the ``builder.key`` format).

PBES2 (RFC 8018, https://www.rfc-editor.org/rfc/rfc8018) with PBKDF2-HMAC-SHA256 and AES-256-CBC,
encoded as an ``EncryptedPrivateKeyInfo`` (RFC 5958, https://www.rfc-editor.org/rfc/rfc5958).
``cryptography`` only writes 2,048 PBKDF2 rounds for PKCS#8, too few for a key at rest, so the
DER is encoded here; any PKCS#8 reader (``cryptography``, OpenSSL) loads it. Pure: no I/O.
"""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import hashes, padding, serialization
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec

#: PBKDF2-HMAC-SHA256 iterations for builder.key (OWASP Password Storage Cheat Sheet, 2023: 600,000).
PBKDF2_ITERATIONS = 600_000

_OID_PBES2 = "1.2.840.113549.1.5.13"
_OID_PBKDF2 = "1.2.840.113549.1.5.12"
_OID_HMAC_SHA256 = "1.2.840.113549.2.9"
_OID_AES256_CBC = "2.16.840.1.101.3.4.1.42"


def _der(tag: int, body: bytes) -> bytes:
    n = len(body)
    if n < 0x80:
        return bytes([tag, n]) + body
    length = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(length)]) + length + body


def der_oid(dotted: str) -> bytes:
    """DER encoding of the dotted object identifier ``dotted`` (ITU-T X.690 8.19)."""
    parts = [int(p) for p in dotted.split(".")]
    body = bytearray([40 * parts[0] + parts[1]])
    for part in parts[2:]:
        chunk = [part & 0x7F]
        rest = part >> 7
        while rest:
            chunk.append(0x80 | (rest & 0x7F))
            rest >>= 7
        body += bytes(reversed(chunk))
    return _der(0x06, bytes(body))


def _der_int(v: int) -> bytes:
    return _der(0x02, v.to_bytes(v.bit_length() // 8 + 1, "big"))


def encrypted_pkcs8_pem(
    private_key: ec.EllipticCurvePrivateKey, password: str, *, iterations: int = PBKDF2_ITERATIONS
) -> bytes:
    """PKCS#8 ``ENCRYPTED PRIVATE KEY`` PEM: PBES2 with PBKDF2-HMAC-SHA256 (``iterations``) and
    AES-256-CBC (RFC 8018). ``cryptography`` only writes 2,048 PBKDF2 rounds for PKCS#8, too few
    for a key at rest, so the EncryptedPrivateKeyInfo is encoded here; any PKCS#8 reader
    (``cryptography``, OpenSSL) loads it."""
    plain = private_key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    salt, iv = os.urandom(16), os.urandom(16)
    key = PBKDF2HMAC(hashes.SHA256(), 32, salt, iterations).derive(password.encode())
    padder = padding.PKCS7(128).padder()
    padded = padder.update(plain) + padder.finalize()
    enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    ciphertext = enc.update(padded) + enc.finalize()
    seq = 0x30
    prf = _der(seq, der_oid(_OID_HMAC_SHA256) + b"\x05\x00")
    kdf = _der(seq, der_oid(_OID_PBKDF2) + _der(seq, _der(0x04, salt) + _der_int(iterations) + prf))
    scheme = _der(seq, der_oid(_OID_AES256_CBC) + _der(0x04, iv))
    algorithm = _der(seq, der_oid(_OID_PBES2) + _der(seq, kdf + scheme))
    der = _der(seq, algorithm + _der(0x04, ciphertext))
    body = base64.b64encode(der).decode()
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN ENCRYPTED PRIVATE KEY-----\n{lines}\n-----END ENCRYPTED PRIVATE KEY-----\n".encode()
