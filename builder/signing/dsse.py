"""in-toto statements, the DSSE pre-authentication encoding (PAE) and the DSSE envelope.

Sources: in-toto Statement v1 (https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md),
DSSE protocol and envelope (https://github.com/secure-systems-lab/dsse/blob/master/protocol.md,
https://github.com/secure-systems-lab/dsse/blob/master/envelope.md), as cosign stores them
(https://github.com/sigstore/cosign/blob/main/specs/ATTESTATION_SPEC.md):

- Statement (written, compact JSON): ``{"_type":"https://in-toto.io/Statement/v1","subject":
  [{"name":"<registry>/<repo>","digest":{"sha256":"<hex>"}}],"predicateType":"<uri>",
  "predicate":{...}}``. Read: v1 and v0.1 (what cosign 2.x ``attest`` writes).
- Envelope: ``{"payloadType":"application/vnd.in-toto+json","payload":"<b64 statement>",
  "signatures":[{"keyid":"","sig":"<b64 DER ECDSA>"}]}``; the signature is over
  PAE = ``"DSSEv1" SP len(type) SP type SP len(body) SP body`` (decimal ASCII byte lengths).

Pure functions, no I/O. ``make_statement`` raises ValueError for a digest that is not sha256.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import TYPE_CHECKING, Any

from builder.predicates import STATEMENT_V01, STATEMENT_V1
from builder.registry.manifest import load_json

if TYPE_CHECKING:
    from collections.abc import Mapping

IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPES = (STATEMENT_V1, STATEMENT_V01)


def make_statement(subject_name: str, digest: str, predicate_type: str, predicate: Mapping[str, Any]) -> bytes:
    """in-toto Statement v1 for one subject (``subject_name`` = ``registry/repo``), compact JSON bytes."""
    algo, _, hexpart = digest.partition(":")
    if algo != "sha256":
        raise ValueError(f"not a sha256 digest: {digest!r}")
    doc = {
        "_type": STATEMENT_V1,
        "subject": [{"name": subject_name, "digest": {"sha256": hexpart}}],
        "predicateType": predicate_type,
        "predicate": dict(predicate),
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE pre-authentication encoding: ``DSSEv1 <len type> <type> <len body> <body>``."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


def dsse_envelope(
    statement: bytes, signature: bytes, keyid: str = "", payload_type: str = IN_TOTO_PAYLOAD_TYPE
) -> bytes:
    """DSSE envelope JSON bytes (the layer blob) holding ``statement`` and one signature."""
    doc = {
        "payloadType": payload_type,
        "payload": base64.b64encode(statement).decode(),
        "signatures": [{"keyid": keyid, "sig": base64.b64encode(signature).decode()}],
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def payload_of_pae(pae_bytes: bytes) -> bytes | None:
    """The body of DSSE PAE bytes ``DSSEv1 <len> <type> <len> <body>``; None when not PAE."""
    m = re.match(rb"DSSEv1 (\d+) ", pae_bytes)
    if not m:
        return None
    tlen = int(m.group(1))
    rest = pae_bytes[m.end() + tlen :]
    m2 = re.match(rb" (\d+) ", rest)
    if not m2:
        return None
    body = rest[m2.end() :]
    return body if len(body) == int(m2.group(1)) else None


def envelope_holds(data: bytes, payload_type: str, payload: bytes) -> bool:
    """True when ``data`` is a DSSE envelope JSON of ``payload_type`` carrying ``payload`` (never raises)."""
    try:
        env = load_json(data)
        return bool(env.get("payloadType") == payload_type and base64.b64decode(env.get("payload", "")) == payload)
    except (ValueError, TypeError, AttributeError):
        return False


def statement_digest(statement: bytes) -> str:
    """``sha256:<hex>`` of statement bytes (for logs and ledger records)."""
    return "sha256:" + hashlib.sha256(statement).hexdigest()
