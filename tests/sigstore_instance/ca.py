"""Test Fulcio CA: root + intermediate, leaf certificates with an embedded SCT from a test CT log.

Facts (sources):
- Fulcio issues a short-lived leaf (10 minutes) for the CSR's public key; the identity from the
  OIDC token goes into the SAN (email or URI); the issuer goes into OID 1.3.6.1.4.1.57264.1.1
  (raw string, deprecated) and 1.3.6.1.4.1.57264.1.8 (DER UTF8String). EKU codeSigning, KU
  digitalSignature. (sigstore/fulcio docs/oid-info.md, docs/certificate-specification.md)
- Precertificate flow (RFC 6962 section 3.1): the CT log signs the TBSCertificate of the
  precertificate without the poison extension (1.3.6.1.4.1.11129.2.4.3); the final certificate carries
  the SCT list (1.3.6.1.4.1.11129.2.4.2) in the same position. A verifier removes the SCT list
  extension from the final certificate (``tbs_precertificate_bytes``) and checks the CT signature over
  ``version | signature_type=0 | timestamp | entry_type=1 (precert) | issuer_key_hash | tbs | exts``.
- The CT log ID is SHA-256 of the log's DER SubjectPublicKeyInfo (RFC 6962 section 3.2).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import struct
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

OID_ISSUER_V1 = ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
OID_ISSUER_V2 = ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
OID_BUILD_SIGNER_URI = ObjectIdentifier("1.3.6.1.4.1.57264.1.9")
OID_SOURCE_REPO_REF = ObjectIdentifier("1.3.6.1.4.1.57264.1.14")
OID_SCT_LIST = ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")

LEAF_LIFETIME = dt.timedelta(minutes=10)


def spki_der(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def key_id(key: ec.EllipticCurvePublicKey) -> bytes:
    """SHA-256 of the DER SubjectPublicKeyInfo: the log ID of CT logs and Rekor."""
    return hashlib.sha256(spki_der(key)).digest()


def _der_len(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def der_utf8(s: str) -> bytes:
    raw = s.encode()
    return b"\x0c" + _der_len(len(raw)) + raw


def der_octet_string(raw: bytes) -> bytes:
    return b"\x04" + _der_len(len(raw)) + raw


@dataclass
class CTLog:
    """A test CT log: only what Fulcio needs, signing SCTs for precertificates."""

    key: ec.EllipticCurvePrivateKey

    @property
    def log_id(self) -> bytes:
        return key_id(self.key.public_key())

    def sign_precert(self, tbs: bytes, issuer_key_hash: bytes, timestamp_ms: int) -> bytes:
        """Returns one serialized SignedCertificateTimestamp (RFC 6962 section 3.2)."""
        extensions = b""
        signed = (
            struct.pack("!BBQH", 0, 0, timestamp_ms, 1)
            + issuer_key_hash
            + len(tbs).to_bytes(3, "big")
            + tbs
            + struct.pack("!H", len(extensions))
            + extensions
        )
        sig = self.key.sign(signed, ec.ECDSA(hashes.SHA256()))
        # version(1) log_id(32) timestamp(8) extensions<0..2^16-1> digitally-signed(hash=4 sha256, sig=3 ecdsa)
        return (
            struct.pack("!B", 0)
            + self.log_id
            + struct.pack("!Q", timestamp_ms)
            + struct.pack("!H", len(extensions))
            + extensions
            + struct.pack("!BBH", 4, 3, len(sig))
            + sig
        )


def sct_list_extension(scts: list[bytes]) -> x509.UnrecognizedExtension:
    body = b"".join(struct.pack("!H", len(s)) + s for s in scts)
    tls_list = struct.pack("!H", len(body)) + body
    return x509.UnrecognizedExtension(OID_SCT_LIST, der_octet_string(tls_list))


@dataclass(frozen=True)
class Identity:
    """What Fulcio puts in the certificate for one token."""

    san_email: str | None
    san_uri: str | None
    issuer: str
    extra: tuple[tuple[str, str], ...] = ()  # (oid, DER-UTF8 string value)


class TestCA:
    """Root + intermediate (both ECDSA P-384, like Fulcio's public-good chain) and a test CT log."""

    __test__ = False  # not a pytest class

    def __init__(self, *, now: dt.datetime | None = None) -> None:
        now = now or dt.datetime.now(dt.UTC)
        self.not_before = now - dt.timedelta(days=1)
        self.not_after = now + dt.timedelta(days=365)
        self.root_key = ec.generate_private_key(ec.SECP384R1())
        self.intermediate_key = ec.generate_private_key(ec.SECP384R1())
        self.ct = CTLog(ec.generate_private_key(ec.SECP256R1()))
        root_name = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "builder-test"),
                x509.NameAttribute(NameOID.COMMON_NAME, "builder-test-fulcio-root"),
            ]
        )
        inter_name = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "builder-test"),
                x509.NameAttribute(NameOID.COMMON_NAME, "builder-test-fulcio-intermediate"),
            ]
        )
        root_pub = self.root_key.public_key()
        self.root = (
            x509.CertificateBuilder()
            .subject_name(root_name)
            .issuer_name(root_name)
            .public_key(root_pub)
            .serial_number(x509.random_serial_number())
            .not_valid_before(self.not_before)
            .not_valid_after(self.not_after)
            .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
            .add_extension(_ca_key_usage(), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(root_pub), critical=False)
            .sign(self.root_key, hashes.SHA384())
        )
        inter_pub = self.intermediate_key.public_key()
        self.intermediate = (
            x509.CertificateBuilder()
            .subject_name(inter_name)
            .issuer_name(root_name)
            .public_key(inter_pub)
            .serial_number(x509.random_serial_number())
            .not_valid_before(self.not_before)
            .not_valid_after(self.not_after)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_ca_key_usage(), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(inter_pub), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(root_pub), critical=False)
            .sign(self.root_key, hashes.SHA384())
        )

    def issue(self, public_key: ec.EllipticCurvePublicKey, identity: Identity) -> x509.Certificate:
        """A leaf for ``public_key`` with ``identity``, an embedded SCT, signed by the intermediate."""
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        serial = x509.random_serial_number()
        sans: list[x509.GeneralName] = []
        if identity.san_email:
            sans.append(x509.RFC822Name(identity.san_email))
        if identity.san_uri:
            sans.append(x509.UniformResourceIdentifier(identity.san_uri))
        inter_pub = self.intermediate_key.public_key()

        def builder() -> x509.CertificateBuilder:
            b = (
                x509.CertificateBuilder()
                .subject_name(x509.Name([]))
                .issuer_name(self.intermediate.subject)
                .public_key(public_key)
                .serial_number(serial)
                .not_valid_before(now)
                .not_valid_after(now + LEAF_LIFETIME)
                .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(inter_pub), critical=False)
                .add_extension(x509.SubjectAlternativeName(sans), critical=True)
                .add_extension(x509.UnrecognizedExtension(OID_ISSUER_V1, identity.issuer.encode()), critical=False)
                .add_extension(x509.UnrecognizedExtension(OID_ISSUER_V2, der_utf8(identity.issuer)), critical=False)
            )
            for oid, value in identity.extra:
                b = b.add_extension(x509.UnrecognizedExtension(ObjectIdentifier(oid), der_utf8(value)), False)
            return b

        # 1. The TBS the CT log signs: the certificate without the SCT list (equal, by construction, to
        #    the precertificate's TBS without its poison extension: same fields, same extension order).
        placeholder = builder().add_extension(sct_list_extension([b"\x00"]), critical=False)
        draft = placeholder.sign(self.intermediate_key, hashes.SHA384())
        tbs = draft.tbs_precertificate_bytes
        issuer_key_hash = key_id(inter_pub)
        sct = self.ct.sign_precert(tbs, issuer_key_hash, int(now.timestamp() * 1000))
        # 2. The final certificate: same TBS plus the SCT list extension.
        final = builder().add_extension(sct_list_extension([sct]), critical=False)
        return final.sign(self.intermediate_key, hashes.SHA384())

    def chain_pem(self) -> list[str]:
        """Intermediate then root, PEM (what Fulcio returns after the leaf)."""
        return [c.public_bytes(serialization.Encoding.PEM).decode() for c in (self.intermediate, self.root)]


def _ca_key_usage() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=False,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
