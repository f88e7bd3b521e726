"""An offline Sigstore test instance speaking the real Fulcio v2 / Rekor v1 protocols on loopback.

Use :class:`SigstoreTestInstance` (start/stop) and :func:`write_trust_files` for the trusted root,
signing config, client trust config and cosign's offline trust inputs. See ``docs/keyless.md``.
"""

from tests.sigstore_instance.server import SigstoreTestInstance
from tests.sigstore_instance.trust import TrustFiles, write_trust_files

__all__ = ["SigstoreTestInstance", "TrustFiles", "write_trust_files"]
