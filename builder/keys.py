"""Signing keys: generate, import and load ECDSA P-256 key pairs (cosign-compatible).

Files written by ``generate_key_pair``: ``builder.key`` (PKCS#8 PEM, encrypted with the given
password: PBES2, PBKDF2-HMAC-SHA256 with 600,000 iterations, AES-256-CBC; unencrypted when the
password is ``None``) and ``builder.pub`` (PEM SubjectPublicKeyInfo, the form ``cosign verify
--key`` reads).

Cosign's own private-key file (``-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----``, or the older
``ENCRYPTED COSIGN PRIVATE KEY``) is a base64 JSON envelope: scrypt KDF (N, r, p, salt) and NaCl
``secretbox`` (XSalsa20-Poly1305) around the PKCS#8 DER key. Source: sigstore/cosign
``pkg/cosign/keys.go`` and sigstore/sigstore ``pkg/cryptoutils`` (``encrypted.go`` uses
``github.com/secure-systems-lab/go-securesystemslib/encrypted``). scrypt comes from
``cryptography``; the secretbox from PyNaCl (``nacl.secret.SecretBox``, libsodium), imported
lazily. Verified against keys written by real cosign 2.5 (tests/integration/test_cosign_interop.py).

Key identity (``fingerprint``): ``sha256:<hex>`` of the DER SubjectPublicKeyInfo, stable across
PEM formatting and across cosign/builder files holding the same key.

Errors: ``SigningKeyError`` (exit 16) for a missing, unreadable, wrongly encrypted or non-P-256
key, and when a file would be overwritten.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from builder.errors import SigningKeyError

PRIVATE_KEY_FILE = "builder.key"
PUBLIC_KEY_FILE = "builder.pub"

COSIGN_PEM_TYPES = ("ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY")

#: scrypt parameters cosign uses when it writes a key (go-securesystemslib defaults).
COSIGN_SCRYPT = {"N": 32768 * 2, "r": 8, "p": 1}


def fingerprint_of(public_key: ec.EllipticCurvePublicKey) -> str:
    """``sha256:<hex>`` of the DER SubjectPublicKeyInfo of ``public_key``."""
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(der).hexdigest()


def public_pem(public_key: ec.EllipticCurvePublicKey) -> str:
    """PEM SubjectPublicKeyInfo text (``-----BEGIN PUBLIC KEY-----``)."""
    return public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


@dataclasses.dataclass(frozen=True)
class KeyPairSigner:
    """A signer holding an ECDSA P-256 private key. ``sign`` returns a DER ECDSA-SHA256 signature.

    ``kind`` is ``"key"`` (keyless signers use ``"keyless"``); ``public_key_pem`` is the PEM
    SubjectPublicKeyInfo; ``fingerprint`` is ``sha256:<hex of DER SPKI>``.
    """

    private_key: ec.EllipticCurvePrivateKey = dataclasses.field(repr=False)
    source: str = ""
    kind: str = "key"

    @property
    def public_key(self) -> ec.EllipticCurvePublicKey:
        return self.private_key.public_key()

    @property
    def public_key_pem(self) -> str:
        return public_pem(self.public_key)

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(self.public_key)

    def sign(self, data: bytes) -> bytes:
        """DER-encoded ECDSA P-256 SHA-256 signature over ``data``."""
        return self.private_key.sign(data, ec.ECDSA(hashes.SHA256()))


@dataclasses.dataclass(frozen=True)
class PublicKey:
    """A verification key: ECDSA P-256 public key with its fingerprint and the file it came from."""

    key: ec.EllipticCurvePublicKey = dataclasses.field(repr=False)
    source: str = ""

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(self.key)

    def verify(self, data: bytes, signature: bytes) -> bool:
        """True when ``signature`` (DER ECDSA-SHA256) is valid for ``data``."""
        try:
            self.key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
        except (InvalidSignature, ValueError):
            return False
        return True


# ---------------------------------------------------------------------------------------------
# generate / import / load


def generate_key_pair(output_dir: Path, password: str | None) -> tuple[Path, Path, str]:
    """Write ``output_dir/builder.key`` and ``builder.pub``; returns (key path, pub path, fingerprint).

    ``password=None`` writes an unencrypted key (the CLI allows this only with ``--no-password``).
    Raises SigningKeyError when either file exists (keys are never overwritten) or the password
    is empty.
    """
    private_key = ec.generate_private_key(ec.SECP256R1())
    return write_key_pair(output_dir, private_key, password)


def write_key_pair(
    output_dir: Path, private_key: ec.EllipticCurvePrivateKey, password: str | None
) -> tuple[Path, Path, str]:
    """Write ``private_key`` as ``builder.key`` (PKCS#8 PEM) and ``builder.pub``; never overwrites."""
    if password == "":
        raise SigningKeyError(
            "empty key password", hint="set BUILDER_KEY_PASSWORD, or pass --no-password for an unencrypted key"
        )
    key_path = output_dir / PRIVATE_KEY_FILE
    pub_path = output_dir / PUBLIC_KEY_FILE
    for p in (key_path, pub_path):
        if p.exists():
            raise SigningKeyError(
                f"{p} already exists; keys are never overwritten",
                hint="choose another --output-dir, or move the existing key pair away first",
                path=str(p),
            )
    if password is not None:
        pem = encrypted_pkcs8_pem(private_key, password)
    else:
        pem = private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    output_dir.mkdir(parents=True, exist_ok=True)
    # create exclusively with 0600 so a concurrent writer or an existing file is never clobbered
    try:
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as exc:
        raise SigningKeyError(f"{key_path} already exists; keys are never overwritten") from exc
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    try:
        fd = os.open(pub_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError as exc:
        raise SigningKeyError(f"{pub_path} already exists; keys are never overwritten") from exc
    with os.fdopen(fd, "w") as f:
        f.write(public_pem(private_key.public_key()))
    return key_path, pub_path, fingerprint_of(private_key.public_key())


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


def _der_oid(dotted: str) -> bytes:
    parts = [int(p) for p in dotted.split(".")]
    body = bytearray([40 * parts[0] + parts[1]])
    for p in parts[2:]:
        chunk = [p & 0x7F]
        p >>= 7
        while p:
            chunk.append(0x80 | (p & 0x7F))
            p >>= 7
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
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

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
    prf = _der(seq, _der_oid(_OID_HMAC_SHA256) + b"\x05\x00")
    kdf = _der(seq, _der_oid(_OID_PBKDF2) + _der(seq, _der(0x04, salt) + _der_int(iterations) + prf))
    scheme = _der(seq, _der_oid(_OID_AES256_CBC) + _der(0x04, iv))
    algorithm = _der(seq, _der_oid(_OID_PBES2) + _der(seq, kdf + scheme))
    der = _der(seq, algorithm + _der(0x04, ciphertext))
    body = base64.b64encode(der).decode()
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN ENCRYPTED PRIVATE KEY-----\n{lines}\n-----END ENCRYPTED PRIVATE KEY-----\n".encode()


def import_key_pair(
    source: Path, output_dir: Path, source_password: str | None, password: str | None
) -> tuple[Path, Path, str]:
    """Import a private key (cosign ``cosign.key`` or PKCS#8/SEC1 PEM) into ``output_dir``.

    ``source_password`` decrypts the source (cosign: ``COSIGN_PASSWORD``); ``password`` encrypts
    the written ``builder.key`` (None: unencrypted). Raises SigningKeyError.
    """
    private_key = load_private_key(source, source_password)
    return write_key_pair(output_dir, private_key, password)


def load_signer(path: Path, password: str | None) -> KeyPairSigner:
    """Load a private key file (builder PKCS#8 PEM, SEC1 PEM, or cosign's encrypted key) as a signer.

    Raises SigningKeyError (missing file, wrong/missing password, not ECDSA P-256).
    """
    return KeyPairSigner(load_private_key(path, password), source=str(path))


def load_private_key(path: Path, password: str | None) -> ec.EllipticCurvePrivateKey:
    """The ECDSA P-256 private key in ``path``; see ``load_signer`` for formats and errors."""
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise SigningKeyError(
            f"signing key {path} does not exist",
            hint="generate one with `builder keys generate --output-dir DIR` or pass --key FILE",
            path=str(path),
        ) from exc
    except OSError as exc:
        raise SigningKeyError(f"signing key {path} cannot be read: {exc.strerror}", path=str(path)) from exc
    text = data.decode("ascii", errors="replace")
    for pem_type in COSIGN_PEM_TYPES:
        if f"-----BEGIN {pem_type}-----" in text:
            der = decrypt_cosign_key(_pem_body(text, pem_type), password, source=str(path))
            key = serialization.load_der_private_key(der, password=None)
            return _require_p256(key, path)
    if "-----BEGIN" not in text:
        raise SigningKeyError(f"{path} is not a PEM private key", path=str(path))
    encrypted = "ENCRYPTED" in text.split("-----BEGIN", 1)[1].split("-----", 1)[0] or "Proc-Type: 4,ENCRYPTED" in text
    if encrypted and not password:
        raise SigningKeyError(
            f"signing key {path} is encrypted and no password was given",
            hint="set BUILDER_KEY_PASSWORD (or COSIGN_PASSWORD for a cosign key)",
            path=str(path),
        )
    try:
        key = serialization.load_pem_private_key(data, password=password.encode() if encrypted and password else None)
    except (ValueError, TypeError) as exc:
        reason = "wrong password or corrupt key" if encrypted else str(exc)
        raise SigningKeyError(f"cannot load signing key {path}: {reason}", path=str(path)) from exc
    return _require_p256(key, path)


def load_public_keys(paths: list[Path] | tuple[Path, ...]) -> list[PublicKey]:
    """Load PEM public keys (``-----BEGIN PUBLIC KEY-----``, e.g. ``builder.pub`` or ``cosign.pub``).

    A private key file is accepted too (its public half is used; unencrypted or builder-encrypted
    keys only need no password if unencrypted). Raises SigningKeyError naming the file.
    """
    keys: list[PublicKey] = []
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise SigningKeyError(
                f"public key {path} cannot be read: {exc.strerror}",
                hint="pass the .pub file written by `builder keys generate` or `cosign generate-key-pair`",
                path=str(path),
            ) from exc
        try:
            pub = serialization.load_pem_public_key(data)
        except ValueError as exc:
            raise SigningKeyError(
                f"{path} is not a PEM public key", hint="pass the .pub file, not the private key", path=str(path)
            ) from exc
        if not isinstance(pub, ec.EllipticCurvePublicKey) or not isinstance(pub.curve, ec.SECP256R1):
            raise SigningKeyError(f"{path} is not an ECDSA P-256 public key", path=str(path))
        keys.append(PublicKey(pub, source=str(path)))
    return keys


def _require_p256(key: object, path: Path) -> ec.EllipticCurvePrivateKey:
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
        raise SigningKeyError(
            f"{path} is not an ECDSA P-256 private key",
            hint="cosign-compatible signing needs ECDSA P-256; generate one with `builder keys generate`",
            path=str(path),
        )
    return key


def _pem_body(text: str, pem_type: str) -> bytes:
    begin, end = f"-----BEGIN {pem_type}-----", f"-----END {pem_type}-----"
    body = text.split(begin, 1)[1].split(end, 1)[0]
    return base64.b64decode("".join(body.split()))


# ---------------------------------------------------------------------------------------------
# cosign's encrypted key envelope: scrypt + NaCl secretbox


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
