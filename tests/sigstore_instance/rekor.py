"""Test Rekor v1 log: hashedrekord and dsse entries (what sigstore-python and cosign 2.5 submit), SETs,
RFC 6962 proofs, signed checkpoints.

Facts (sources):
- ``POST /api/v1/log/entries`` takes a proposed entry ``{"apiVersion","kind","spec"}`` and answers 201
  with ``{<uuid>: {"body": b64(canonical entry), "integratedTime", "logID": hex, "logIndex",
  "verification": {"signedEntryTimestamp": b64, "inclusionProof": {"logIndex", "rootHash": hex,
  "treeSize", "hashes": [hex...], "checkpoint": "<signed note>"}}}}``
  (sigstore/rekor openapi.yaml; sigstore-python ``TransparencyLogEntry._from_v1_response``).
- The stored body is the canonicalized (RFC 8785) entry the server derives from the proposal:
  hashedrekord keeps ``spec`` as sent; dsse stores ``envelopeHash`` (SHA-256 of the envelope string as
  submitted), ``payloadHash`` (SHA-256 of the decoded payload) and ``signatures`` (``signature`` + the
  verifier, base64 PEM) (sigstore/rekor pkg/types/dsse). Other kinds (intoto, rekord) answer 400.
- SET = ECDSA signature over canonical JSON ``{"body","integratedTime","logID","logIndex"}``.
- Leaf hash = SHA-256(0x00 || body), node hash = SHA-256(0x01 || l || r) (RFC 6962 section 2.1).
- Checkpoint = signed note: ``"<origin>\\n<size>\\n<b64 root>\\n\\n\\u2014 <name> <b64(keyhash[:4] + sig)>\\n"``
  (transparency-dev/formats log/README.md; rekor pkg/util/signed_note.go). The entry UUID is
  ``<16 hex tree id><64 hex leaf hash>``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import rfc8785
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from tests.sigstore_instance.ca import key_id

TREE_ID = 1234567890123456789


def leaf_hash(body: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + body).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def merkle_root(leaves: list[bytes]) -> bytes:
    """MTH over leaf hashes (RFC 6962 section 2.1)."""
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return leaves[0]
    k = 1 << ((n - 1).bit_length() - 1)
    return node_hash(merkle_root(leaves[:k]), merkle_root(leaves[k:]))


def inclusion_path(index: int, leaves: list[bytes]) -> list[bytes]:
    """PATH(m, D[n]) (RFC 6962 section 2.1.1), ordered from the leaf upwards."""
    n = len(leaves)
    if n <= 1:
        return []
    k = 1 << ((n - 1).bit_length() - 1)
    if index < k:
        return [*inclusion_path(index, leaves[:k]), merkle_root(leaves[k:])]
    return [*inclusion_path(index - k, leaves[k:]), merkle_root(leaves[:k])]


class RekorError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class TestRekor:
    """An append-only in-memory log; thread-safe."""

    __test__ = False

    hostname: str = "rekor.builder.test"
    key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    entries: list[dict[str, Any]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        # Index 0 holds a genesis leaf: sigstore-go (cosign) treats a log index of 0 as a missing value
        # ("validation error: nil value in transaction log entry"), as real logs never hand it out.
        genesis = b'{"genesis":"builder test log"}'
        self.bodies.append(genesis)
        self.entries.append({"uuid": f"{TREE_ID:016x}{leaf_hash(genesis).hex()}", "genesis": True})

    @property
    def log_id(self) -> bytes:
        return key_id(self.key.public_key())

    @property
    def origin(self) -> str:
        return f"{self.hostname} - {TREE_ID}"

    def _sign(self, data: bytes) -> bytes:
        return self.key.sign(data, ec.ECDSA(hashes.SHA256()))

    # --- entry types -----------------------------------------------------------------------------------
    def canonical_body(self, proposed: dict[str, Any]) -> dict[str, Any]:
        kind = proposed.get("kind")
        version = proposed.get("apiVersion")
        spec = proposed.get("spec")
        if not isinstance(spec, dict):
            raise RekorError(400, "spec is missing")
        if kind == "hashedrekord" and version == "0.0.1":
            return self._hashedrekord(spec)
        if kind == "dsse" and version == "0.0.1":
            return self._dsse(spec)
        raise RekorError(400, f"unsupported entry kind/version: {kind} {version}")

    def _hashedrekord(self, spec: dict[str, Any]) -> dict[str, Any]:
        try:
            sig = base64.b64decode(spec["signature"]["content"])
            pem = base64.b64decode(spec["signature"]["publicKey"]["content"])
            algorithm = spec["data"]["hash"]["algorithm"]
            digest = bytes.fromhex(spec["data"]["hash"]["value"])
        except (KeyError, TypeError, ValueError) as exc:
            raise RekorError(400, f"invalid hashedrekord: {exc}") from exc
        if algorithm != "sha256":
            raise RekorError(400, f"unsupported hash algorithm {algorithm}")
        _verify_prehashed(pem, sig, digest)
        return {"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": spec}

    def _dsse(self, spec: dict[str, Any]) -> dict[str, Any]:
        try:
            raw_env: str = spec["proposedContent"]["envelope"]
            verifiers = [base64.b64decode(v) for v in spec["proposedContent"]["verifiers"]]
            env = json.loads(raw_env)
            payload = base64.b64decode(env["payload"])
            pae = _pae(env["payloadType"], payload)
        except (KeyError, TypeError, ValueError) as exc:
            raise RekorError(400, f"invalid dsse proposal: {exc}") from exc
        signatures = []
        for s in env.get("signatures", []):
            sig = base64.b64decode(s["sig"])
            matched = next((v for v in verifiers if _verifies(v, sig, pae)), None)
            if matched is None:
                raise RekorError(400, "dsse signature does not verify with any verifier")
            signatures.append({"signature": s["sig"], "verifier": base64.b64encode(matched).decode()})
        if not signatures:
            raise RekorError(400, "dsse envelope has no signatures")
        signatures.sort(key=lambda s: s["signature"])
        return {
            "apiVersion": "0.0.1",
            "kind": "dsse",
            "spec": {
                "envelopeHash": {"algorithm": "sha256", "value": hashlib.sha256(raw_env.encode()).hexdigest()},
                "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()},
                "signatures": signatures,
            },
        }

    # --- log -------------------------------------------------------------------------------------------
    def add(self, proposed: dict[str, Any]) -> dict[str, Any]:
        body = rfc8785.dumps(self.canonical_body(proposed))
        with self._lock:
            lh = leaf_hash(body)
            for i, existing in enumerate(self.bodies):
                if existing == body:
                    raise RekorError(409, f"an equivalent entry already exists in the transparency log at {i}")
            index = len(self.bodies)
            self.bodies.append(body)
            integrated = int(time.time())
            entry = {
                "body": base64.b64encode(body).decode(),
                "integratedTime": integrated,
                "logID": self.log_id.hex(),
                "logIndex": index,
            }
            entry["set"] = base64.b64encode(self._sign(rfc8785.dumps(entry))).decode()
            entry["uuid"] = f"{TREE_ID:016x}{lh.hex()}"
            self.entries.append(entry)
        return self.render(index)

    def checkpoint(self, size: int, root: bytes) -> str:
        note = f"{self.origin}\n{size}\n{base64.b64encode(root).decode()}\n"
        sig = self._sign(note.encode())
        return note + "\n" + f"\u2014 {self.hostname} {base64.b64encode(self.log_id[:4] + sig).decode()}\n"

    def render(self, index: int) -> dict[str, Any]:
        """The v1 API's ``{uuid: LogEntry}`` for entry ``index`` with a proof against the current tree."""
        with self._lock:
            entry = self.entries[index]
            leaves = [leaf_hash(b) for b in self.bodies]
        root = merkle_root(leaves)
        proof = {
            "logIndex": index,
            "rootHash": root.hex(),
            "treeSize": len(leaves),
            "hashes": [h.hex() for h in inclusion_path(index, leaves)],
            "checkpoint": self.checkpoint(len(leaves), root),
        }
        value = {
            "body": entry["body"],
            "integratedTime": entry["integratedTime"],
            "logID": entry["logID"],
            "logIndex": entry["logIndex"],
            "verification": {"signedEntryTimestamp": entry["set"], "inclusionProof": proof},
        }
        return {entry["uuid"]: value}

    def find_uuid(self, uuid: str) -> int | None:
        with self._lock:
            for i, e in enumerate(self.entries):
                if i and (e["uuid"] == uuid or e["uuid"].endswith(uuid)):
                    return i
        return None

    def log_info(self) -> dict[str, Any]:
        with self._lock:
            leaves = [leaf_hash(b) for b in self.bodies]
        root = merkle_root(leaves)
        return {
            "rootHash": root.hex(),
            "treeSize": len(leaves),
            "signedTreeHead": self.checkpoint(len(leaves), root),
            "treeID": str(TREE_ID),
        }


def _pae(payload_type: str, payload: bytes) -> bytes:
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def _public_key_from_pem(pem: bytes) -> ec.EllipticCurvePublicKey:
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    key = x509.load_pem_x509_certificate(pem).public_key() if b"CERTIFICATE" in pem else load_pem_public_key(pem)
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise RekorError(400, "only ECDSA verifiers are supported by the test log")
    return key


def _verifies(pem: bytes, sig: bytes, data: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature

    try:
        _public_key_from_pem(pem).verify(sig, data, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


def _verify_prehashed(pem: bytes, sig: bytes, digest: bytes) -> None:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

    try:
        _public_key_from_pem(pem).verify(sig, digest, ec.ECDSA(Prehashed(hashes.SHA256())))
    except InvalidSignature as exc:
        raise RekorError(400, "hashedrekord signature does not verify over the given digest") from exc
