"""Trust material for the test instance, in the shapes clients read.

- ``trusted_root.json``: ``application/vnd.dev.sigstore.trustedroot+json;version=0.1`` (sigstore
  protobuf-specs ``TrustedRoot``: tlogs / certificateAuthorities / ctlogs with DER keys, base64).
- ``signing_config.json``: ``application/vnd.dev.sigstore.signingconfig.v0.2+json`` (caUrls, oidcUrls,
  rekorTlogUrls with ``majorApiVersion`` 1, no TSA).
- ``trust_config.json``: ``application/vnd.dev.sigstore.clienttrustconfig.v0.1+json`` = both of the above,
  what sigstore-python's ``ClientTrustConfig.from_json`` reads.
- cosign's offline inputs: ``fulcio_root.pem`` (``SIGSTORE_ROOT_FILE``: root + intermediate; cosign sorts
  self-signed ones into roots), ``rekor.pub`` (``SIGSTORE_REKOR_PUBLIC_KEY``), ``ctlog.pub``
  (``SIGSTORE_CT_LOG_PUBLIC_KEY_FILE``) (cosign pkg/cosign/env/env.go).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives import serialization

from tests.sigstore_instance.ca import key_id, spki_der

if TYPE_CHECKING:
    from pathlib import Path

    from tests.sigstore_instance.server import SigstoreTestInstance

OPERATOR = "builder-test"


@dataclass(frozen=True)
class TrustFiles:
    directory: Path
    trusted_root: Path
    signing_config: Path
    trust_config: Path
    fulcio_root_pem: Path
    rekor_pub: Path
    ctlog_pub: Path

    def cosign_env(self) -> dict[str, str]:
        """Environment for ``cosign verify`` against the test instance, offline."""
        return {
            "SIGSTORE_ROOT_FILE": str(self.fulcio_root_pem),
            "SIGSTORE_REKOR_PUBLIC_KEY": str(self.rekor_pub),
            "SIGSTORE_CT_LOG_PUBLIC_KEY_FILE": str(self.ctlog_pub),
            "TUF_ROOT": str(self.directory / "tuf-unused"),
            "SIGSTORE_NO_CACHE": "true",
        }


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _ts(instance: SigstoreTestInstance) -> str:
    return instance.ca.not_before.strftime("%Y-%m-%dT%H:%M:%SZ")


def trusted_root(instance: SigstoreTestInstance) -> dict[str, Any]:
    start = _ts(instance)
    rekor_pub = instance.rekor.key.public_key()
    ct_pub = instance.ca.ct.key.public_key()
    der = serialization.Encoding.DER
    return {
        "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
        "tlogs": [
            {
                "baseUrl": instance.url,
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": _b64(spki_der(rekor_pub)),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": {"start": start},
                },
                "logId": {"keyId": _b64(key_id(rekor_pub))},
            }
        ],
        "certificateAuthorities": [
            {
                "subject": {"organization": "builder-test", "commonName": "builder-test-fulcio-root"},
                "uri": instance.url,
                "certChain": {
                    "certificates": [
                        {"rawBytes": _b64(instance.ca.intermediate.public_bytes(der))},
                        {"rawBytes": _b64(instance.ca.root.public_bytes(der))},
                    ]
                },
                "validFor": {"start": start},
            }
        ],
        "ctlogs": [
            {
                "baseUrl": f"{instance.url}/ct",
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": _b64(spki_der(ct_pub)),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": {"start": start},
                },
                "logId": {"keyId": _b64(key_id(ct_pub))},
            }
        ],
        "timestampAuthorities": [],
    }


def signing_config(instance: SigstoreTestInstance) -> dict[str, Any]:
    start = _ts(instance)

    def service(url: str) -> dict[str, Any]:
        return {"url": url, "majorApiVersion": 1, "validFor": {"start": start}, "operator": OPERATOR}

    return {
        "mediaType": "application/vnd.dev.sigstore.signingconfig.v0.2+json",
        "caUrls": [service(instance.url)],
        "oidcUrls": [service(instance.issuer_url)],
        "rekorTlogUrls": [service(instance.url)],
        "tsaUrls": [],
        "rekorTlogConfig": {"selector": "ANY"},
        "tsaConfig": {"selector": "ANY"},
    }


def write_trust_files(instance: SigstoreTestInstance, directory: Path) -> TrustFiles:
    directory.mkdir(parents=True, exist_ok=True)
    root = trusted_root(instance)
    config = signing_config(instance)
    files = TrustFiles(
        directory=directory,
        trusted_root=directory / "trusted_root.json",
        signing_config=directory / "signing_config.json",
        trust_config=directory / "trust_config.json",
        fulcio_root_pem=directory / "fulcio_root.pem",
        rekor_pub=directory / "rekor.pub",
        ctlog_pub=directory / "ctlog.pub",
    )
    files.trusted_root.write_text(json.dumps(root, indent=2))
    files.signing_config.write_text(json.dumps(config, indent=2))
    files.trust_config.write_text(
        json.dumps(
            {
                "mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
                "trustedRoot": root,
                "signingConfig": config,
            },
            indent=2,
        )
    )
    pem = serialization.Encoding.PEM
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    files.fulcio_root_pem.write_text("".join(instance.ca.chain_pem()))
    files.rekor_pub.write_bytes(instance.rekor.key.public_key().public_bytes(pem, spki))
    files.ctlog_pub.write_bytes(instance.ca.ct.key.public_key().public_bytes(pem, spki))
    return files
