"""Signing keys: generate, import and load ECDSA P-256 key pairs (cosign-compatible).

Files written by ``generate_key_pair``: ``builder.key`` (PKCS#8 PEM, encrypted with the given
password: PBES2, PBKDF2-HMAC-SHA256 with 600,000 iterations, AES-256-CBC, ``builder.signing.pkcs8``;
unencrypted when the password is ``None``) and ``builder.pub`` (PEM SubjectPublicKeyInfo, the form
``cosign verify --key`` reads). cosign's own encrypted key files are read through
``builder.signing.cosign_key``.

Key identity (``fingerprint``): ``sha256:<hex>`` of the DER SubjectPublicKeyInfo, stable across
PEM formatting and across cosign/builder files holding the same key.

Errors: ``SigningKeyError`` (exit 16) for a missing, unreadable, wrongly encrypted or non-P-256
key, and when a file would be overwritten.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import os
from typing import TYPE_CHECKING

# the key type builder uses, and nothing else at import: serialization (which loads every key
# type's module, SSH and bcrypt included), the PKCS#8 and cosign key formats are imported by
# the functions that read or write private keys or an unusual public key file
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from builder.errors import SigningKeyError
from builder.signing.fingerprints import short_fingerprint, spki_fingerprint

if TYPE_CHECKING:
    from pathlib import Path

PRIVATE_KEY_FILE = "builder.key"
PUBLIC_KEY_FILE = "builder.pub"
COSIGN_KEY_FILE = "cosign.key"
COSIGN_PUB_FILE = "cosign.pub"


def fingerprint_of(public_key: ec.EllipticCurvePublicKey) -> str:
    """``sha256:<hex>`` of the DER SubjectPublicKeyInfo of ``public_key`` (``spki_fingerprint``)."""
    from cryptography.hazmat.primitives import serialization

    return spki_fingerprint(
        public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def public_pem(public_key: ec.EllipticCurvePublicKey) -> str:
    """PEM SubjectPublicKeyInfo text (``-----BEGIN PUBLIC KEY-----``)."""
    from cryptography.hazmat.primitives import serialization

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

    # derived once per signer (a batch asks for the fingerprint several times per promotion:
    # each was a public-key derivation, a DER encoding and a SHA-256)
    @functools.cached_property
    def public_key(self) -> ec.EllipticCurvePublicKey:
        return self.private_key.public_key()

    @functools.cached_property
    def public_key_pem(self) -> str:
        return public_pem(self.public_key)

    @functools.cached_property
    def fingerprint(self) -> str:
        return fingerprint_of(self.public_key)

    def sign(self, data: bytes) -> bytes:
        """DER-encoded ECDSA P-256 SHA-256 signature over ``data``."""
        return self.private_key.sign(data, ec.ECDSA(hashes.SHA256()))


@dataclasses.dataclass(frozen=True)
class PublicKey:
    """A verification key: ECDSA P-256 public key with its fingerprint and the file it came from;
    ``der``: its DER SubjectPublicKeyInfo when read from one (the fingerprint is its hash; empty:
    encoded from ``key`` when asked)."""

    key: ec.EllipticCurvePublicKey = dataclasses.field(repr=False)
    source: str = ""
    der: bytes = dataclasses.field(default=b"", repr=False, compare=False)

    @property
    def fingerprint(self) -> str:
        return spki_fingerprint(self.der) if self.der else fingerprint_of(self.key)

    def verify(self, data: bytes, signature: bytes) -> bool:
        """True when ``signature`` (DER ECDSA-SHA256) is valid for ``data``."""
        try:
            self.key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
        except (InvalidSignature, ValueError):
            return False
        return True


# ---------------------------------------------------------------------------------------------
# generate / import / load


def new_key_password(password: str | None, *, unencrypted: bool) -> str | None:
    """The password to encrypt a new ``builder.key`` with: None when ``unencrypted`` (``--no-password``),
    else ``password`` (``BUILDER_KEY_PASSWORD``). Raises SigningKeyError when that is not set."""
    if unencrypted:
        return None
    if password is None:
        raise SigningKeyError(
            "no key password: BUILDER_KEY_PASSWORD is not set",
            hint="export BUILDER_KEY_PASSWORD=... (the key is written encrypted), or pass --no-password "
            "for an unencrypted key (only for throwaway keys)",
        )
    return password


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
    from cryptography.hazmat.primitives import serialization

    from builder.signing.pkcs8 import encrypted_pkcs8_pem

    if password is not None:
        pem = encrypted_pkcs8_pem(private_key, password)
    else:
        pem = private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    key_directory(output_dir)
    # created exclusively with 0600 so a concurrent writer or an existing file is never clobbered
    _write_new(key_path, pem, 0o600)
    _write_new(pub_path, public_pem(private_key.public_key()).encode(), 0o644)
    return key_path, pub_path, fingerprint_of(private_key.public_key())


def export_cosign_key_pair(
    source: Path, output_dir: Path, source_password: str | None, password: str | None
) -> tuple[Path, Path, str]:
    """Write the key pair of ``source`` (a builder or cosign private key, decrypted with
    ``source_password``) as ``output_dir/cosign.key`` (cosign's ``ENCRYPTED SIGSTORE PRIVATE KEY``,
    scrypt + NaCl secretbox, ``builder.signing.cosign_key``; encrypted with ``password``, what cosign
    reads from ``COSIGN_PASSWORD``) and ``cosign.pub``, so ``cosign sign --key cosign.key`` signs with
    the same key (same fingerprint). Returns (key path, pub path, fingerprint). Raises
    SigningKeyError: no or empty password (cosign's key format is always encrypted), a file that
    exists (never overwritten), and as ``load_private_key``."""
    if not password:
        raise SigningKeyError(
            "no password for the exported cosign key: COSIGN_PASSWORD is not set",
            hint="export COSIGN_PASSWORD=... (cosign reads the same variable when it signs with the key)",
        )
    from builder.signing.cosign_key import cosign_key_pem

    private_key = load_private_key(source, source_password)
    key_path, pub_path = output_dir / COSIGN_KEY_FILE, output_dir / COSIGN_PUB_FILE
    for p in (key_path, pub_path):  # both checked first: never leave half a pair behind
        if p.exists():
            raise _exists(p)
    try:
        key_directory(output_dir)
        _write_new(key_path, cosign_key_pem(private_key, password), 0o600)
        _write_new(pub_path, public_pem(private_key.public_key()).encode(), 0o644)
    except OSError as exc:  # not FileExistsError: _write_new turns that into SigningKeyError
        raise SigningKeyError(
            f"cannot write the exported key into {output_dir}: {exc.strerror or exc}",
            hint="choose a writable --output-dir",
            path=str(output_dir),
        ) from exc
    return key_path, pub_path, fingerprint_of(private_key.public_key())


def key_directory(path: Path) -> None:
    """Create ``path`` (and its missing parents) 0700 whatever the umask (``Path.mkdir`` makes
    parents 0777 minus the umask: world-writable under ``umask 000``); an existing directory that
    others may write (without the sticky bit) is refused: anyone could swap the key written
    there. Raises SigningKeyError; NotFoundError (exit 8, :mod:`builder.outputs`) when a folder
    cannot be created."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except OSError as exc:  # a file on the way, no permission: exit 8 naming the path
            from builder.outputs import cannot_write

            raise cannot_write(path, exc, "--output-dir") from exc
        os.chmod(d, 0o700)  # the umask may have removed bits, never added: exact mode either way
    insecure_permissions(path, directory=True)


def insecure_permissions(path: Path, *, directory: bool = False) -> None:
    """SigningKeyError when ``path`` (a key file, or with ``directory`` the directory holding one)
    may be written by other users: a file writable by group or others, a directory writable by
    others without the sticky bit (as OpenSSH refuses an unprotected private key file:
    https://man.openbsd.org/ssh#FILES). A missing path is not an error here."""
    try:
        st = os.stat(path)
    except OSError:
        return
    mode = st.st_mode & 0o7777
    bad = (mode & 0o002 and not mode & 0o1000) if directory else mode & 0o022
    if bad:
        what = "directory" if directory else "key file"
        raise SigningKeyError(
            f"insecure permissions on {what} {path} (mode {mode:04o}): other users could replace the key",
            hint=f"chmod {'700' if directory else '600'} {path}",
            path=str(path),
        )


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Create ``path`` exclusively with ``mode`` and write ``data``; SigningKeyError when it exists."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError as exc:
        raise _exists(path) from exc
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _exists(path: Path) -> SigningKeyError:
    return SigningKeyError(
        f"{path} already exists; keys are never overwritten",
        hint="choose another --output-dir, or move the existing file away first",
        path=str(path),
    )


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

    The key's public half must be the key of its ``.pub`` file when there is one
    (``path.with_suffix(".pub")``: ``builder.pub`` next to ``builder.key``, what the checkout's
    policies name and verifiers are given): :func:`check_public_half`.

    Raises SigningKeyError (missing file, wrong/missing password, not ECDSA P-256, a ``.pub`` of
    another key).
    """
    signer = KeyPairSigner(load_private_key(path, password), source=str(path))
    check_public_half(signer, path.with_suffix(".pub"))
    return signer


def check_public_half(signer: KeyPairSigner, public_file: Path) -> None:
    """Refuse ``signer`` when ``public_file`` exists and holds another key: one of the two files
    was replaced without the other, and every signature made would be ``untrusted`` for whoever
    verifies with ``public_file`` (policies name it: ``keys.build`` in policies/default.yaml). A
    missing ``public_file`` is no answer either way (a key imported without its ``.pub``).

    Raises SigningKeyError (exit 16) naming both files and both fingerprints, or for an
    unreadable / non-P-256 ``public_file`` (:func:`load_public_keys`)."""
    if not public_file.is_file() or str(public_file) == signer.source:
        return
    (published,) = load_public_keys([public_file])
    if published.fingerprint == signer.fingerprint:
        return
    raise SigningKeyError(
        f"signing key {signer.source} ({short_fingerprint(signer.fingerprint)}) is not the key of"
        f" {public_file} ({short_fingerprint(published.fingerprint)}): nothing it signs verifies with"
        f" {public_file.name}, so no policy naming that file counts it",
        hint=f"one of the pair was replaced: put back the private key of {public_file.name} (or pass it"
        f" with --key); for a new key on purpose, replace {public_file.name} with its public half"
        " (`builder keys export --key KEY --output-dir DIR` writes it as DIR/cosign.pub)",
        path=str(public_file),
        signing_key=signer.fingerprint,
        public_key=published.fingerprint,
    )


def load_private_key(path: Path, password: str | None) -> ec.EllipticCurvePrivateKey:
    """The ECDSA P-256 private key in ``path``; see ``load_signer`` for formats and errors. A key
    file others may write, or one in a directory others may write, is refused
    (``insecure_permissions``): a swapped key would sign silently."""
    insecure_permissions(path)
    insecure_permissions(path.parent, directory=True)
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
    from cryptography.hazmat.primitives import serialization

    from builder.signing.cosign_key import COSIGN_PEM_TYPES, decrypt_cosign_key, pem_body

    text = data.decode("ascii", errors="replace")
    for pem_type in COSIGN_PEM_TYPES:
        if f"-----BEGIN {pem_type}-----" in text:
            der = decrypt_cosign_key(pem_body(text, pem_type), password, source=str(path))
            key = serialization.load_der_private_key(der, password=None)
            return _require_p256(key, path)
    if "-----BEGIN PUBLIC KEY-----" in text:
        raise SigningKeyError(
            f"{path} is a public key; signing needs the private key",
            hint="pass the builder.key (or cosign.key) file that this .pub belongs to",
            path=str(path),
        )
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
        hint = (
            "the password given (BUILDER_KEY_PASSWORD, else COSIGN_PASSWORD) "
            "does not open it: set the one the key was generated with"
            if encrypted
            else "pass a key written by `builder keys generate` or `cosign generate-key-pair`"
        )
        raise SigningKeyError(f"cannot load signing key {path}: {reason}", hint=hint, path=str(path)) from exc
    return _require_p256(key, path)


def load_public_keys(paths: list[Path] | tuple[Path, ...]) -> list[PublicKey]:
    """Load PEM public keys (``-----BEGIN PUBLIC KEY-----``, e.g. ``builder.pub`` or ``cosign.pub``).

    Raises SigningKeyError naming the file: unreadable, a private key (its ``.pub`` is wanted:
    verifying never needs a secret), not PEM, not ECDSA P-256.
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
        keys.append(parse_public_key(data, path))
    return keys


def parse_public_key(data: bytes, path: Path) -> PublicKey:
    """The PEM public key in ``data`` (the bytes of ``path``, named in errors). Raises
    SigningKeyError: a private key, not PEM, not ECDSA P-256.

    A file holding just one P-256 key with an uncompressed point (what ``builder keys generate``
    and ``cosign generate-key-pair`` write) is read with the elliptic-curve module alone
    (:func:`_p256_spki`); any other file goes through cryptography's general PEM reader."""
    der = _p256_spki(data)
    point = _p256_point(der) if der is not None else None
    if der is not None and point is not None:
        return PublicKey(point, source=str(path), der=der)
    from cryptography.hazmat.primitives import serialization

    try:
        pub = serialization.load_pem_public_key(data)
    except ValueError as exc:
        private = b"PRIVATE KEY-----" in data
        raise SigningKeyError(
            f"{path} is a private key, not a public key" if private else f"{path} is not a PEM public key",
            hint="pass its .pub file (verifying needs no secret)"
            if private
            else "pass the .pub file written by `builder keys generate` or `cosign generate-key-pair` "
            "(-----BEGIN PUBLIC KEY-----)",
            path=str(path),
        ) from exc
    if not isinstance(pub, ec.EllipticCurvePublicKey) or not isinstance(pub.curve, ec.SECP256R1):
        raise SigningKeyError(f"{path} is not an ECDSA P-256 public key", path=str(path))
    return PublicKey(pub, source=str(path))


_P256_SPKI_PREFIX = bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d030107034200")
"""The DER SubjectPublicKeyInfo of every P-256 key with an uncompressed point, up to the point:
SEQUENCE (89 bytes) { SEQUENCE { OID id-ecPublicKey 1.2.840.10045.2.1, OID secp256r1
1.2.840.10045.3.1.7 }, BIT STRING (66 bytes, no unused bits) } (RFC 5480 section 2:
https://www.rfc-editor.org/rfc/rfc5480#section-2); the point follows: ``04`` + X + Y, 65 bytes
(SEC 1 section 2.3.3: https://www.secg.org/sec1-v2.pdf)."""
_PEM_BEGIN, _PEM_END = b"-----BEGIN PUBLIC KEY-----", b"-----END PUBLIC KEY-----"


def _p256_spki(data: bytes) -> bytes | None:
    """The DER of ``data`` when it is exactly one ``PUBLIC KEY`` PEM block (RFC 7468 section 13:
    https://www.rfc-editor.org/rfc/rfc7468#section-13) holding a P-256 key with an uncompressed
    point (:data:`_P256_SPKI_PREFIX` + 65 bytes starting ``04``); None for anything else."""
    text = data.strip()
    if not (text.startswith(_PEM_BEGIN) and text.endswith(_PEM_END)) or text.count(b"-----") != 4:
        return None
    body = b"".join(text[len(_PEM_BEGIN) : -len(_PEM_END)].split())
    try:
        der = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(der) != len(_P256_SPKI_PREFIX) + 65 or not der.startswith(_P256_SPKI_PREFIX + b"\x04"):
        return None
    return der


def _p256_point(der: bytes) -> ec.EllipticCurvePublicKey | None:
    """The key whose :func:`_p256_spki` DER is ``der``; None when its point is not on the curve
    (the general reader then says why)."""
    try:
        return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), der[len(_P256_SPKI_PREFIX) :])
    except ValueError:
        return None


def _require_p256(key: object, path: Path) -> ec.EllipticCurvePrivateKey:
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
        raise SigningKeyError(
            f"{path} is not an ECDSA P-256 private key",
            hint="cosign-compatible signing needs ECDSA P-256; generate one with `builder keys generate`",
            path=str(path),
        )
    return key
