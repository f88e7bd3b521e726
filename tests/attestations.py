"""Attestations read back with the real cosign CLI, as a user of the images would
(https://docs.sigstore.dev/cosign/verifying/attestation/): one verify command and its statements."""

from __future__ import annotations

import base64
import json
import subprocess
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path


def verify_attestation(cosign: str, pub: Path, ref: str, ptype: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """``cosign verify-attestation --key PUB --insecure-ignore-tlog --allow-insecure-registry --type PTYPE
    [EXTRA...] REF`` (a test registry over plain HTTP, no transparency log), its output captured."""
    argv = [cosign, "verify-attestation", "--key", str(pub), "--insecure-ignore-tlog", "--allow-insecure-registry"]
    return subprocess.run(
        [*argv, "--type", ptype, *extra, ref], capture_output=True, text=True, timeout=120, check=False
    )


def statements(stdout: str) -> list[dict[str, Any]]:
    """The in-toto statements of ``verify-attestation``'s output: one DSSE envelope a line, the statement
    base64 in its ``payload``."""
    return [json.loads(base64.b64decode(json.loads(line)["payload"])) for line in stdout.splitlines() if line.strip()]
