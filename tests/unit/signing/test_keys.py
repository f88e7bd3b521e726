"""Keys: generate, load, import cosign keys (real cosign-written key in tests/data/signing)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from builder.errors import SigningKeyError
from builder.signing.cosign_key import cosign_key_pem, decrypt_cosign_key, pem_body, secretbox_open, secretbox_seal
from builder.signing.keys import generate_key_pair, import_key_pair, load_public_keys, load_signer, public_pem
from builder.signing.pkcs8 import PBKDF2_ITERATIONS, der_oid

DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "signing"
COSIGN_PASSWORD = "test-password"  # tests/data/signing/README.md


def test_generate_writes_encrypted_pkcs8_and_pem_public_key(tmp_path: Path) -> None:
    key_path, pub_path, fp = generate_key_pair(tmp_path / "k", "pw")
    text = key_path.read_text()
    assert text.startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----")
    assert pub_path.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    assert stat.S_IMODE(os.stat(key_path).st_mode) == 0o600
    signer = load_signer(key_path, "pw")
    assert signer.fingerprint == fp == load_public_keys([pub_path])[0].fingerprint
    assert fp.startswith("sha256:") and len(fp) == 71
    assert isinstance(signer.private_key.curve, ec.SECP256R1)


def test_generate_never_overwrites(tmp_path: Path) -> None:
    generate_key_pair(tmp_path, "pw")
    before = (tmp_path / "builder.key").read_bytes()
    with pytest.raises(SigningKeyError, match="already exists"):
        generate_key_pair(tmp_path, "pw")
    assert (tmp_path / "builder.key").read_bytes() == before


def test_generate_refuses_to_overwrite_a_lone_public_key(tmp_path: Path) -> None:
    (tmp_path / "builder.pub").write_text("mine")
    with pytest.raises(SigningKeyError, match=r"builder\.pub already exists"):
        generate_key_pair(tmp_path, "pw")
    assert not (tmp_path / "builder.key").exists()


def test_unencrypted_key_and_empty_password(tmp_path: Path) -> None:
    key_path, _, _ = generate_key_pair(tmp_path / "a", None)
    assert key_path.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    load_signer(key_path, None)
    with pytest.raises(SigningKeyError, match="empty key password"):
        generate_key_pair(tmp_path / "b", "")


def test_wrong_or_missing_password(tmp_path: Path) -> None:
    key_path, _, _ = generate_key_pair(tmp_path, "right")
    with pytest.raises(SigningKeyError, match="wrong password"):
        load_signer(key_path, "wrong")
    with pytest.raises(SigningKeyError, match="encrypted and no password"):
        load_signer(key_path, None)
    with pytest.raises(SigningKeyError, match="does not exist"):
        load_signer(tmp_path / "nope.key", "x")


def test_the_wrong_half_of_a_key_pair_is_named(tmp_path: Path) -> None:
    """A public key where a private one is needed (sign) and the other way round (verify), a
    wrong password and a file that is no key: each error says which, and what to pass instead."""
    key_path, pub_path, _ = generate_key_pair(tmp_path, "right")
    with pytest.raises(SigningKeyError, match="is a public key; signing needs the private key") as err:
        load_signer(pub_path, "right")
    assert "builder.key" in err.value.hint
    with pytest.raises(SigningKeyError, match="is a private key, not a public key") as err:
        load_public_keys([key_path])
    assert ".pub" in err.value.hint
    junk = tmp_path / "junk.pub"
    junk.write_text("hello\n")
    with pytest.raises(SigningKeyError, match="is not a PEM public key") as err:
        load_public_keys([junk])
    assert "BEGIN PUBLIC KEY" in err.value.hint
    with pytest.raises(SigningKeyError, match="wrong password") as err:
        load_signer(key_path, "wrong")
    assert "the one the key was generated with" in err.value.hint
    # only what sets the password: builder.toml refuses `key_password` (a secret in the checkout)
    assert "BUILDER_KEY_PASSWORD" in err.value.hint and "builder.toml" not in err.value.hint


def test_non_p256_key_is_refused(tmp_path: Path) -> None:
    k = ec.generate_private_key(ec.SECP384R1())
    p = tmp_path / "p384.key"
    p.write_bytes(
        k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    with pytest.raises(SigningKeyError, match="not an ECDSA P-256"):
        load_signer(p, None)
    pub = tmp_path / "p384.pub"
    pub.write_text(public_pem(k.public_key()))  # type: ignore[arg-type]
    with pytest.raises(SigningKeyError, match="not an ECDSA P-256"):
        load_public_keys([pub])
    with pytest.raises(SigningKeyError, match="is a private key, not a public key"):
        load_public_keys([p])


def test_loads_real_cosign_key_and_matches_cosign_pub() -> None:
    signer = load_signer(DATA / "cosign.key", COSIGN_PASSWORD)
    pub = load_public_keys([DATA / "cosign.pub"])[0]
    assert signer.fingerprint == pub.fingerprint
    sig = signer.sign(b"payload")
    assert pub.verify(b"payload", sig)
    assert not pub.verify(b"payload!", sig)


def test_real_cosign_key_wrong_password() -> None:
    with pytest.raises(SigningKeyError, match="wrong password"):
        load_signer(DATA / "cosign.key", "not-it")
    with pytest.raises(SigningKeyError, match="always encrypted"):
        load_signer(DATA / "cosign.key", None)


def test_import_cosign_key_pair(tmp_path: Path) -> None:
    key_path, pub_path, fp = import_key_pair(DATA / "cosign.key", tmp_path, COSIGN_PASSWORD, "new-pw")
    assert fp == load_public_keys([DATA / "cosign.pub"])[0].fingerprint
    assert load_signer(key_path, "new-pw").fingerprint == fp
    assert load_public_keys([pub_path])[0].fingerprint == fp


def test_cosign_envelope_round_trip_and_tamper() -> None:
    k = ec.generate_private_key(ec.SECP256R1())
    pem = cosign_key_pem(k, "pw")
    assert pem.startswith(b"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n")
    body = pem_body(pem.decode(), "ENCRYPTED SIGSTORE PRIVATE KEY")
    der = decrypt_cosign_key(body, "pw")
    assert serialization.load_der_private_key(der, None).public_key() == k.public_key()  # type: ignore[comparison-overlap]


def test_secretbox_detects_tampering() -> None:
    key, nonce = bytes(range(32)), bytes(range(24))
    boxed = secretbox_seal(b"hello world" * 20, nonce, key)
    assert secretbox_open(boxed, nonce, key) == b"hello world" * 20
    flipped = boxed[:20] + bytes([boxed[20] ^ 1]) + boxed[21:]
    assert secretbox_open(flipped, nonce, key) is None
    assert secretbox_open(boxed, nonce, bytes(32)) is None
    # wrong sizes are refused, not raised (a corrupt envelope reads as "wrong password")
    assert secretbox_open(boxed, nonce[:16], key) is None
    assert secretbox_open(boxed[:15], nonce, key) is None
    assert secretbox_open(boxed, nonce, key[:16]) is None


def test_secretbox_known_answer() -> None:
    # NaCl tests/secretbox.c / libsodium test/default/secretbox.{c,exp}: firstkey, nonce, 131-byte message.
    # Pins the layout cosign stores: tag(16) || ciphertext, nonce kept apart (not PyNaCl's nonce-prefixed form).
    key = bytes.fromhex("1b27556473e985d462cd51197a9a46c76009549eac6474f206c4ee0844f68389")
    nonce = bytes.fromhex("69696ee955b62b73cd62bda875fc73d68219e0036b7a0b37")
    message = bytes.fromhex(
        "be075fc53c81f2d5cf141316ebeb0c7b5228c52a4c62cbd44b66849b64244ffce5ecbaaf33bd751a1ac728d45e6c61296cdc3c01"
        "233561f41db66cce314adb310e3be8250c46f06dceea3a7fa1348057e2f6556ad6b1318a024a838f21af1fde048977eb48f59f"
        "fd4924ca1c60902e52f0a089bc76897040e082f937763848645e0705"
    )
    expected = (
        "f3ffc7703f9400e52a7dfb4b3d3305d98e993b9f48681273c29650ba32fc76ce48332ea7164d96a4476fb8c531a1186ac0dfc17c"
        "98dce87b4da7f011ec48c97271d2c20f9b928fe2270d6fb863d51738b48eeee314a7cc8ab932164548e526ae90224368517acfea"
        "bd6bb3732bc0e9da99832b61ca01b6de56244a9e88d5f9b37973f622a43d14a6599b1f654cb45a74e355a5"
    )
    assert secretbox_seal(message, nonce, key).hex() == expected
    assert secretbox_open(bytes.fromhex(expected), nonce, key) == message


def test_builder_key_uses_strong_pbkdf2(tmp_path: Path) -> None:
    import base64

    key_path, _, _ = generate_key_pair(tmp_path, "pw")
    body = key_path.read_text().split("-----")[2]
    der = base64.b64decode("".join(body.split()))
    # PBES2 / PBKDF2 OIDs, 600,000 iterations (0x0927c0), hmacWithSHA256, AES-256-CBC
    for part in (
        der_oid("1.2.840.113549.1.5.13"),
        der_oid("1.2.840.113549.1.5.12"),
        bytes.fromhex("02030927c0"),
        der_oid("1.2.840.113549.2.9"),
        der_oid("2.16.840.1.101.3.4.1.42"),
    ):
        assert part in der
    assert PBKDF2_ITERATIONS == 600_000


def test_export_writes_cosign_format_with_the_same_key(tmp_path: Path) -> None:
    from builder.signing.keys import export_cosign_key_pair

    key, _, fp = generate_key_pair(tmp_path / "k", "builder-pw")
    out = tmp_path / "out"
    cosign_key, cosign_pub, exported_fp = export_cosign_key_pair(key, out, "builder-pw", "cosign-pw")
    assert exported_fp == fp and stat.S_IMODE(cosign_key.stat().st_mode) == 0o600
    assert cosign_key.read_text().startswith("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----")
    assert load_signer(cosign_key, "cosign-pw").fingerprint == fp  # decrypts as cosign does (scrypt + secretbox)
    assert load_public_keys([cosign_pub])[0].fingerprint == fp
    with pytest.raises(SigningKeyError, match=r"wrong password|cannot"):
        load_signer(cosign_key, "builder-pw")


def test_export_refuses_without_password_and_never_overwrites(tmp_path: Path) -> None:
    from builder.signing.keys import export_cosign_key_pair

    key, _, _ = generate_key_pair(tmp_path / "k", None)
    with pytest.raises(SigningKeyError, match="COSIGN_PASSWORD"):
        export_cosign_key_pair(key, tmp_path / "out", None, None)
    out = tmp_path / "half"
    out.mkdir()
    (out / "cosign.pub").write_text("someone else's")
    with pytest.raises(SigningKeyError, match="already exists"):
        export_cosign_key_pair(key, out, None, "pw")
    assert not (out / "cosign.key").exists() and (out / "cosign.pub").read_text() == "someone else's"
