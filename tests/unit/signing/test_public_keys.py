"""Public key files read with the elliptic-curve module alone when they hold one P-256 key with an
uncompressed point (what ``builder keys generate`` and ``cosign generate-key-pair`` write), and
through cryptography's general PEM reader otherwise: the same key, the same fingerprint, the same
errors either way; verifying a signature imports no serialization, SSH or bcrypt module."""

from __future__ import annotations

import base64
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from builder.errors import SigningKeyError
from builder.signing.keys import fingerprint_of, generate_key_pair, load_public_keys, parse_public_key
from tests.conftest import ROOT

if TYPE_CHECKING:
    from pathlib import Path


def _pem(key: ec.EllipticCurvePublicKey, fmt: serialization.PublicFormat) -> bytes:
    return key.public_bytes(serialization.Encoding.PEM, fmt)


def test_a_generated_key_reads_the_same_as_cryptography_reads_it(tmp_path: Path) -> None:
    _, pub, fp = generate_key_pair(tmp_path / "k", None)
    key = parse_public_key(pub.read_bytes(), pub)
    general = serialization.load_pem_public_key(pub.read_bytes())
    assert key.der  # the elliptic-curve path
    assert key.key.public_numbers() == general.public_numbers()  # type: ignore[union-attr]
    assert key.fingerprint == fp == fingerprint_of(key.key)


def test_the_real_cosign_public_key_reads_on_the_short_path() -> None:
    (key,) = load_public_keys([ROOT / "tests" / "data" / "signing" / "cosign.pub"])
    assert key.der and key.fingerprint == fingerprint_of(key.key)


def test_a_compressed_point_goes_through_the_general_reader(tmp_path: Path) -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    point = private.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint)
    # the same key as a SubjectPublicKeyInfo with a compressed point (RFC 5480 allows both forms)
    spki = bytes.fromhex("3039301306072a8648ce3d020106082a8648ce3d030107032200") + point
    compressed = b"-----BEGIN PUBLIC KEY-----\n" + base64.encodebytes(spki) + b"-----END PUBLIC KEY-----\n"
    key = parse_public_key(compressed, tmp_path / "c.pub")
    assert not key.der
    assert key.fingerprint == fingerprint_of(private.public_key())  # as before: of the uncompressed encoding


def test_surrounding_text_goes_through_the_general_reader(tmp_path: Path) -> None:
    _, pub, fp = generate_key_pair(tmp_path / "k", None)
    key = parse_public_key(b"# the build key\n" + pub.read_bytes(), pub)
    assert not key.der and key.fingerprint == fp


def test_a_point_off_the_curve_is_refused_as_before(tmp_path: Path) -> None:
    _, pub, _ = generate_key_pair(tmp_path / "k", None)
    der = bytearray(parse_public_key(pub.read_bytes(), pub).der)
    der[-1] ^= 1  # Y no longer matches X
    bad = b"-----BEGIN PUBLIC KEY-----\n" + base64.encodebytes(bytes(der)) + b"-----END PUBLIC KEY-----\n"
    with pytest.raises(SigningKeyError, match="not a PEM public key"):
        parse_public_key(bad, tmp_path / "bad.pub")


def test_another_curve_or_a_private_key_is_refused(tmp_path: Path) -> None:
    p384 = ec.generate_private_key(ec.SECP384R1())
    with pytest.raises(SigningKeyError, match="not an ECDSA P-256 public key"):
        parse_public_key(_pem(p384.public_key(), serialization.PublicFormat.SubjectPublicKeyInfo), tmp_path / "a.pub")
    private_pem = p384.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(SigningKeyError, match="is a private key"):
        parse_public_key(private_pem, tmp_path / "b.pub")


def test_verifying_imports_only_the_elliptic_curve_module(tmp_path: Path) -> None:
    _, pub, _ = generate_key_pair(tmp_path / "k", None)
    code = textwrap.dedent(f"""\
        import sys
        from pathlib import Path
        from builder.signing.keys import load_public_keys
        (key,) = load_public_keys([Path({str(pub)!r})])
        assert not key.verify(b"data", b"not a signature")
        print(key.fingerprint)
        print(" ".join(sorted(sys.modules)))
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    fingerprint, modules = out.splitlines()
    assert fingerprint.startswith("sha256:")
    for heavy in ("cryptography.hazmat.primitives.serialization", "bcrypt", "builder.signing.pkcs8"):
        assert heavy not in modules.split(), heavy
